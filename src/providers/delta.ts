/**
 * delta speaks the Bluesky AT Protocol: `com.atproto.server.createSession` with the handle and an app
 * password, then `com.atproto.repo.createRecord` in the account's repo (posts and likes are records).
 */
import { Effect, Schema } from "effect"
import type { Credentials } from "../domain/connections.js"
import type { ToolInput, ToolOutput } from "../domain/tools.js"
import { GatewayConfig } from "../services/GatewayConfig.js"
import { nowMillis, toDate } from "../services/time.js"
import { decodeUpstream, type ProviderTool, type Raw, requestJson } from "./common.js"

export const PROVIDER = "delta"

export const Session = Schema.Struct({ accessJwt: Schema.String, did: Schema.String })
export const CreatedRecord = Schema.Struct({ uri: Schema.String, cid: Schema.String })

const serviceOf = (credentials: Credentials["delta"]) =>
  Effect.map(GatewayConfig, (config) => ({
    service: (credentials.service ?? config.providers.delta).replace(/\/+$/, ""),
    // A PDS named in the connection came from the user: it goes through the SSRF guard.
    guarded: credentials.service !== undefined
  }))

const createRecord = (
  credentials: Credentials["delta"],
  collection: string,
  record: Readonly<Record<string, unknown>>,
  tool: string
) =>
  Effect.gen(function* () {
    const { guarded, service } = yield* serviceOf(credentials)
    const session = yield* requestJson({
      provider: PROVIDER,
      method: "POST",
      url: `${service}/xrpc/com.atproto.server.createSession`,
      json: { identifier: credentials.identifier, password: credentials.app_password },
      idempotent: true,
      guarded
    })
    const { accessJwt, did } = yield* decodeUpstream(PROVIDER, Session, tool)(session.body)
    return yield* requestJson({
      provider: PROVIDER,
      method: "POST",
      url: `${service}/xrpc/com.atproto.repo.createRecord`,
      headers: { authorization: `Bearer ${accessJwt}` },
      json: { repo: did, collection, record },
      idempotent: false,
      guarded
    })
  })

const isoNow = Effect.map(nowMillis, (ms) => toDate(ms).toISOString())

const toRecord = (tool: string) => (_input: unknown, raw: Raw) =>
  Effect.map(decodeUpstream(PROVIDER, CreatedRecord, tool)(raw.body), (r) => ({ provider: PROVIDER, uri: r.uri, cid: r.cid }))

export const post: ProviderTool<ToolInput<"delta_post">, Credentials["delta"], ToolOutput<"delta_post">> = {
  fetch: (input, credentials) =>
    Effect.gen(function* () {
      const record = {
        $type: "app.bsky.feed.post",
        text: input.text,
        createdAt: input.created_at ?? (yield* isoNow),
        ...(input.langs !== undefined ? { langs: input.langs } : {}),
        ...(input.facets !== undefined ? { facets: input.facets } : {}),
        ...(input.embed !== undefined ? { embed: input.embed } : {}),
        ...input.record
      }
      return yield* createRecord(credentials, "app.bsky.feed.post", record, "delta_post")
    }),
  normalize: toRecord("delta_post")
}

export const like: ProviderTool<ToolInput<"delta_like">, Credentials["delta"], ToolOutput<"delta_like">> = {
  fetch: (input, credentials) =>
    Effect.gen(function* () {
      const record = { $type: "app.bsky.feed.like", subject: { uri: input.uri, cid: input.cid }, createdAt: yield* isoNow }
      return yield* createRecord(credentials, "app.bsky.feed.like", record, "delta_like")
    }),
  normalize: toRecord("delta_like")
}
