/**
 * delta speaks the Bluesky AT Protocol: `com.atproto.server.createSession` with the handle and an app
 * password (the session is kept and reused), then `com.atproto.repo.createRecord` in the account's repo
 * (posts and likes are records).
 */
import { Effect, Option, Schema } from "effect"
import * as Crypto from "node:crypto"
import { ProviderCredentialRejected, ProviderRateLimited } from "../domain/errors.js"
import type { Credentials } from "../domain/connections.js"
import type { ToolInput, ToolOutput } from "../domain/tools.js"
import { ProvidersConfig } from "../config.js"
import type { UpstreamResponse } from "../services/ProviderClient.js"
import { type DeltaSession, DeltaSessions } from "../services/DeltaSessions.js"
import { nowMillis, toDate } from "../services/time.js"
import { decodeUpstream, type ProviderTool, type Raw, requestJson } from "./common.js"

export const PROVIDER = "delta"

export const Session = Schema.Struct({ accessJwt: Schema.String, did: Schema.String })
export const CreatedRecord = Schema.Struct({ uri: Schema.String, cid: Schema.String })

const serviceOf = (credentials: Credentials["delta"]) =>
  Effect.map(ProvidersConfig, (config) => ({
    service: (credentials.service ?? config.endpoints.delta.baseUrl).replace(/\/+$/, ""),
    // A PDS named in the connection came from the user: it goes through the SSRF guard.
    guarded: credentials.service !== undefined
  }))

const MARGIN_MS = 60_000
const DEFAULT_LIFETIME_MS = 10 * 60_000

const sessionKey = (service: string, credentials: Credentials["delta"]) =>
  Crypto.createHash("sha256").update(`${service}\0${credentials.identifier}\0${credentials.app_password}`).digest("hex")

/** When an access token expires, from its `exp` claim (a JWT's payload is readable without its key). */
const JwtExp = Schema.parseJson(Schema.Struct({ exp: Schema.Number }))
const expiresAt = (jwt: string, now: number): number =>
  Option.match(Schema.decodeUnknownOption(JwtExp)(Buffer.from(jwt.split(".")[1] ?? "", "base64url").toString("utf8")), {
    onNone: () => now + DEFAULT_LIFETIME_MS,
    onSome: ({ exp }) => exp * 1000
  })

/** XRPC errors: an expired or invalid access token (a 400 or 401) means a new session, not a bad password. */
const XrpcError = Schema.parseJson(Schema.Struct({ error: Schema.String, message: Schema.optional(Schema.String) }))
const xrpcStatus = (response: UpstreamResponse, now: number) => {
  const error = Schema.decodeUnknownOption(XrpcError)(new TextDecoder().decode(response.body))
  if (Option.isSome(error) && (error.value.error === "ExpiredToken" || error.value.error === "InvalidToken")) {
    return new ProviderCredentialRejected({ message: `delta: ${error.value.message ?? error.value.error}. Reconnect the account if this persists.` })
  }
  // Bluesky's rate limit says when it resets (epoch seconds), not Retry-After
  const reset = Number(response.headers["ratelimit-reset"] ?? "NaN")
  if (response.status === 429 && Number.isFinite(reset)) {
    return new ProviderRateLimited({
      message: "delta is rate limiting this account (HTTP 429). Retry later.",
      retryAfter: Math.max(0, Math.ceil(reset - now / 1000))
    })
  }
  return undefined
}

const openSession = (service: string, guarded: boolean, credentials: Credentials["delta"], tool: string) =>
  Effect.gen(function* () {
    const answer = yield* requestJson({
      provider: PROVIDER,
      method: "POST",
      url: `${service}/xrpc/com.atproto.server.createSession`,
      json: { identifier: credentials.identifier, password: credentials.app_password },
      idempotent: true,
      guarded,
      credentialed: true,
      classify: xrpcStatus
    })
    const { accessJwt, did } = yield* decodeUpstream(PROVIDER, Session, tool, "createSession")(answer.body)
    const now = yield* nowMillis
    const session = { accessJwt, did, until: expiresAt(accessJwt, now) - MARGIN_MS }
    yield* Effect.flatMap(DeltaSessions, (sessions) => sessions.set(sessionKey(service, credentials), session))
    return session
  })

const createRecord = (
  credentials: Credentials["delta"],
  collection: string,
  record: Readonly<Record<string, unknown>>,
  tool: string
) =>
  Effect.gen(function* () {
    const { guarded, service } = yield* serviceOf(credentials)
    const key = sessionKey(service, credentials)
    const now = yield* nowMillis
    const sessions = yield* DeltaSessions
    const kept = yield* sessions.get(key)
    const cached = kept !== undefined && kept.until > now ? kept : undefined
    const write = (session: DeltaSession) =>
      requestJson({
        provider: PROVIDER,
        method: "POST",
        url: `${service}/xrpc/com.atproto.repo.createRecord`,
        headers: { authorization: `Bearer ${session.accessJwt}` },
        json: { repo: session.did, collection, record },
        idempotent: false,
        guarded,
        credentialed: true,
        classify: xrpcStatus
      })
    if (cached === undefined) return yield* write(yield* openSession(service, guarded, credentials, tool))
    // A kept session the PDS no longer takes refused the write (nothing was written): once more, on a new one.
    return yield* write(cached).pipe(
      Effect.catchTag("ProviderCredentialRejected", () =>
        sessions.drop(key).pipe(
          Effect.zipRight(openSession(service, guarded, credentials, tool)),
          Effect.flatMap(write)
        ))
    )
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
