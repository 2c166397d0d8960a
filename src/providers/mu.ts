/**
 * mu: Notion — `GET /v1/databases/{id}` with a Bearer integration token and `Notion-Version`.
 */
import { Effect, Schema } from "effect"
import { ProvidersConfig } from "../config.js"
import { type AccountTool, decodeUpstream, enc, NullableString, requestJson } from "./common.js"

export const NOTION_VERSION = "2022-06-28"

const NotionDatabase = Schema.Struct({
  object: Schema.Literal("database"),
  id: Schema.String,
  title: Schema.optional(Schema.Array(Schema.Struct({ plain_text: Schema.String }))),
  url: NullableString,
  created_time: NullableString,
  last_edited_time: NullableString,
  properties: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Struct({ type: Schema.String }) }))
})

export const muDatabase: AccountTool<"mu_database", "mu"> = {
  fetch: (input, credentials) =>
    Effect.flatMap(ProvidersConfig, (config) =>
      requestJson({
        provider: "mu",
        method: "GET",
        url: `${config.endpoints.mu.baseUrl}/v1/databases/${enc(input.database_id)}`,
        headers: { authorization: `Bearer ${credentials.token}`, "notion-version": NOTION_VERSION },
        idempotent: true
      })),
  normalize: (_input, raw) =>
    Effect.map(decodeUpstream("mu", NotionDatabase, "mu_database")(raw.body), (db) => ({
      provider: "mu",
      id: db.id,
      title: (db.title ?? []).map((t) => t.plain_text).join(""),
      url: db.url ?? null,
      created_time: db.created_time ?? null,
      last_edited_time: db.last_edited_time ?? null,
      properties: Object.entries(db.properties ?? {}).map(([name, p]) => ({ name, type: p.type }))
    }))
}
