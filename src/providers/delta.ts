/**
 * delta speaks the Bluesky AT Protocol: `com.atproto.server.createSession` with the handle and an app
 * password, then `com.atproto.repo.createRecord` in the account's repo (posts and likes are records).
 */
import { Effect, Schema } from "effect"
import type { Credentials } from "../domain/connections.js"
import type { ToolInput, ToolOutput } from "../domain/tools.js"
import { GatewayConfig } from "../services/GatewayConfig.js"
import { ProviderClient } from "../services/ProviderClient.js"
import { nowMillis, toDate } from "../services/time.js"
import { type Answered, decodeUpstream, type ProviderEffect } from "./common.js"

export const PROVIDER = "delta"

export const Session = Schema.Struct({ accessJwt: Schema.String, did: Schema.String })
export const CreatedRecord = Schema.Struct({ uri: Schema.String, cid: Schema.String })

const serviceOf = (credentials: Credentials["delta"]) =>
  Effect.map(GatewayConfig, (config) => ({
    service: (credentials.service ?? config.providers.delta).replace(/\/+$/, ""),
    // A PDS named in the connection came from the user: it goes through the SSRF guard.
    guarded: credentials.service !== undefined
  }))

const createRecord = (credentials: Credentials["delta"], collection: string, record: Readonly<Record<string, unknown>>, tool: string) =>
  Effect.gen(function* () {
    const client = yield* ProviderClient
    const { guarded, service } = yield* serviceOf(credentials)
    const sessionBody = yield* client.json({
      provider: PROVIDER,
      method: "POST",
      url: `${service}/xrpc/com.atproto.server.createSession`,
      json: { identifier: credentials.identifier, password: credentials.app_password },
      idempotent: true,
      guarded
    })
    const session = yield* decodeUpstream(PROVIDER, Session, tool)(sessionBody)
    const created = yield* client.json({
      provider: PROVIDER,
      method: "POST",
      url: `${service}/xrpc/com.atproto.repo.createRecord`,
      headers: { authorization: `Bearer ${session.accessJwt}` },
      json: { repo: session.did, collection, record },
      idempotent: false,
      guarded
    })
    return yield* decodeUpstream(PROVIDER, CreatedRecord, tool)(created)
  })

const isoNow = Effect.map(nowMillis, (ms) => toDate(ms).toISOString())

export const post = (
  input: ToolInput<"delta_post">,
  credentials: Credentials["delta"]
): ProviderEffect<Answered<ToolOutput<"delta_post">>> =>
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
    const created = yield* createRecord(credentials, "app.bsky.feed.post", record, "delta_post")
    return { provider: PROVIDER, output: { uri: created.uri, cid: created.cid } }
  })

export const like = (
  input: ToolInput<"delta_like">,
  credentials: Credentials["delta"]
): ProviderEffect<Answered<ToolOutput<"delta_like">>> =>
  Effect.gen(function* () {
    const record = {
      $type: "app.bsky.feed.like",
      subject: { uri: input.uri, cid: input.cid },
      createdAt: yield* isoNow
    }
    const created = yield* createRecord(credentials, "app.bsky.feed.like", record, "delta_like")
    return { provider: PROVIDER, output: { uri: created.uri, cid: created.cid } }
  })
