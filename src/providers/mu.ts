/**
 * mu: Notion — a database and its data sources, with a Bearer integration token and `Notion-Version`
 * (`MU_API_VERSION`, default 2025-09-03, the version notion-sdk-js sends: src/Client.ts `defaultNotionVersion`).
 *
 * From 2025-09-03 on a database is a container of one or more data sources, each with its own properties
 * (https://developers.notion.com/docs/upgrade-guide-2025-09-03, https://developers.notion.com/reference/database):
 * `GET /v1/databases/{id}` answers `data_sources: [{id, name}]` and no properties, and
 * `GET /v1/data_sources/{id}` answers one data source with its `properties`
 * (https://developers.notion.com/reference/retrieve-a-data-source; notion-sdk-js src/api-endpoints/databases.ts
 * `getDatabase`, src/api-endpoints/data-sources.ts `getDataSource`). Under 2022-06-28, a database with several
 * data sources cannot be read at all.
 *
 * The raw answer (`POST /v1/run`) is Notion's answers together: `{database, data_sources: [...]}`. A database
 * read under an earlier `Notion-Version` names no data sources and carries its properties itself.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { ProvidersConfig } from "../config.js"
import { type AccountTool, decodeUpstream, enc, NullableString, requestJson } from "./common.js"

const DataSourceRef = Schema.Struct({ id: Schema.String, name: Schema.String })
const DataSourceRefs = Schema.Struct({ data_sources: Schema.Array(DataSourceRef) })
const Properties = Schema.Record({ key: Schema.String, value: Schema.Struct({ type: Schema.String }) })

const NotionDatabase = Schema.Struct({
  object: Schema.Literal("database"),
  id: Schema.String,
  title: Schema.optional(Schema.Array(Schema.Struct({ plain_text: Schema.String }))),
  url: NullableString,
  created_time: NullableString,
  last_edited_time: NullableString,
  data_sources: Schema.optional(Schema.Array(DataSourceRef)),
  /** Before 2025-09-03 only. */
  properties: Schema.optional(Properties)
})
const NotionDataSource = Schema.Struct({
  object: Schema.Literal("data_source"),
  id: Schema.String,
  properties: Schema.optional(Properties)
})
const MuAnswer = Schema.Struct({ database: NotionDatabase, data_sources: Schema.Array(NotionDataSource) })

/** Notion's average rate limit is three requests a second per integration (developers.notion.com/reference/request-limits). */
const DATA_SOURCE_CONCURRENCY = 3

const listed = (properties: typeof Properties.Type | undefined) =>
  Object.entries(properties ?? {}).map(([name, p]) => ({ name, type: p.type }))

export const muDatabase: AccountTool<"mu_database", "mu"> = {
  fetch: (input, credentials) =>
    Effect.gen(function* () {
      const config = yield* ProvidersConfig
      const get = (path: string) =>
        requestJson({
          provider: "mu",
          method: "GET",
          url: `${config.endpoints.mu.baseUrl}${path}`,
          headers: { authorization: `Bearer ${credentials.token}`, "notion-version": config.muApiVersion },
          idempotent: true
        })
      const database = yield* get(`/v1/databases/${enc(input.database_id)}`)
      const refs = Option.match(Schema.decodeUnknownOption(DataSourceRefs)(database.body), {
        onNone: () => [],
        onSome: (d) => d.data_sources
      })
      const sources = yield* Effect.forEach(refs, (ref) => get(`/v1/data_sources/${enc(ref.id)}`), {
        concurrency: DATA_SOURCE_CONCURRENCY
      })
      return { ...database, body: { database: database.body, data_sources: sources.map((s) => s.body) } }
    }),
  normalize: (_input, raw) =>
    Effect.map(decodeUpstream("mu", MuAnswer, "mu_database")(raw.body), ({ data_sources, database: db }) => {
      // fetched in the order the database names them
      const sources = data_sources.map((s, i) => ({ id: s.id, name: db.data_sources?.[i]?.name ?? "", properties: listed(s.properties) }))
      const seen = new Set<string>()
      const properties = (sources.length > 0 ? sources.flatMap((s) => s.properties) : listed(db.properties)).filter((p) => {
        const key = JSON.stringify([p.name, p.type])
        if (seen.has(key)) return false
        seen.add(key)
        return true
      })
      return {
        provider: "mu",
        id: db.id,
        title: (db.title ?? []).map((t) => t.plain_text).join(""),
        url: db.url ?? null,
        created_time: db.created_time ?? null,
        last_edited_time: db.last_edited_time ?? null,
        properties,
        data_sources: sources
      }
    })
}
