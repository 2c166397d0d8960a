/**
 * delta speaks the Bluesky AT Protocol: `com.atproto.server.createSession` with the handle and an app
 * password, then `com.atproto.repo.createRecord` in the account's repo (posts and likes are records), on the
 * PDS the session's DID document names (`#atproto_pds`), as @atproto/api's AtpAgent does. The session is
 * kept (DeltaSessions, per org, shared by every process) and renewed with `com.atproto.server.refreshSession` when
 * its access token expires; a new `createSession` only when the refresh token is refused.
 * Lexicons: https://docs.bsky.app/docs/api/com-atproto-server-create-session,
 * https://docs.bsky.app/docs/api/com-atproto-server-refresh-session; limits (createSession: 30 per 5 minutes,
 * 300 a day per account): bluesky-social/atproto packages/pds/src/api/com/atproto/server/createSession.ts.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { ProviderCredentialRejected, ProviderRateLimited, ProviderUnavailable } from "../domain/errors.js"
import type { Credentials } from "../domain/connections.js"
import type { ToolInput, ToolName, ToolOutput } from "../domain/tools.js"
import { ProvidersConfig } from "../config.js"
import { CallOrg, resetSeconds, type UpstreamResponse } from "../services/ProviderClient.js"
import { type DeltaAccount, type DeltaSession, DeltaSessions } from "../services/DeltaSessions.js"
import { nowMillis, toDate } from "../services/time.js"
import { decodeUpstream, type ProviderTool, type Raw, requestJson } from "./common.js"

export const PROVIDER = "delta"

/** A DID document's service entry; the PDS is `#atproto_pds` of type AtprotoPersonalDataServer. */
const DidService = Schema.Struct({ id: Schema.String, type: Schema.String, serviceEndpoint: Schema.Unknown })
export const Session = Schema.Struct({
  accessJwt: Schema.String,
  refreshJwt: Schema.String,
  did: Schema.String,
  didDoc: Schema.optional(Schema.Struct({ service: Schema.optional(Schema.Array(DidService)) }))
})
export const CreatedRecord = Schema.Struct({ uri: Schema.String, cid: Schema.String })

const serviceOf = (credentials: Credentials["delta"]) =>
  Effect.map(ProvidersConfig, (config) => ({
    service: (credentials.service ?? config.endpoints.delta.baseUrl).replace(/\/+$/, ""),
    // A PDS named in the connection came from the user: it goes through the SSRF guard.
    guarded: credentials.service !== undefined
  }))

const MARGIN_MS = 60_000
const DEFAULT_ACCESS_MS = 10 * 60_000
const DEFAULT_REFRESH_MS = 24 * 60 * 60_000

/** When a token expires, from its `exp` claim (a JWT's payload is readable without its key). */
const JwtExp = Schema.parseJson(Schema.Struct({ exp: Schema.Number }))
const expiresAt = (jwt: string, otherwise: number): number =>
  Option.match(Schema.decodeUnknownOption(JwtExp)(Buffer.from(jwt.split(".")[1] ?? "", "base64url").toString("utf8")), {
    onNone: () => otherwise,
    onSome: ({ exp }) => exp * 1000
  })

/** The PDS a DID document names (as @atproto/common-web's getPdsEndpoint reads it), if it is an http(s) URL. */
const pdsOf = (session: typeof Session.Type): string | null => {
  const entry = session.didDoc?.service?.find((s) =>
    (s.id === "#atproto_pds" || s.id === `${session.did}#atproto_pds`) && s.type === "AtprotoPersonalDataServer")
  const endpoint = entry?.serviceEndpoint
  return typeof endpoint === "string" && /^https?:\/\/[^/]/.test(endpoint) ? endpoint.replace(/\/+$/, "") : null
}

/** XRPC errors: an expired or invalid access token (a 400 or 401) means a new session, not a bad password. */
const XrpcError = Schema.parseJson(Schema.Struct({ error: Schema.String, message: Schema.optional(Schema.String) }))
const xrpcStatus = (response: UpstreamResponse, now: number) => {
  const error = Schema.decodeUnknownOption(XrpcError)(new TextDecoder().decode(response.body))
  if (Option.isSome(error) && (error.value.error === "ExpiredToken" || error.value.error === "InvalidToken")) {
    return new ProviderCredentialRejected({ message: `delta: ${error.value.message ?? error.value.error}. Reconnect the account if this persists.` })
  }
  // Bluesky's rate limit says when it resets (epoch seconds), not Retry-After
  const retryAfter = resetSeconds(response.headers["ratelimit-reset"], now)
  if (response.status === 429 && retryAfter !== undefined) {
    return new ProviderRateLimited({ message: "delta is rate limiting this account (HTTP 429). Retry later.", retryAfter })
  }
  return undefined
}

interface Place {
  readonly service: string
  readonly guarded: boolean
  /** Whose session it is: the calling org's, on this service with these credentials. */
  readonly account: DeltaAccount
}

/** A session from createSession's or refreshSession's answer, kept for every process. */
const keepSession = (place: Place, tool: ToolName, step: string, body: unknown) =>
  Effect.gen(function* () {
    const answer = yield* decodeUpstream(PROVIDER, Session, tool, step)(body)
    const now = yield* nowMillis
    const session: DeltaSession = {
      accessJwt: answer.accessJwt,
      refreshJwt: answer.refreshJwt,
      did: answer.did,
      pds: pdsOf(answer),
      accessUntil: expiresAt(answer.accessJwt, now + DEFAULT_ACCESS_MS) - MARGIN_MS,
      refreshUntil: expiresAt(answer.refreshJwt, now + DEFAULT_REFRESH_MS) - MARGIN_MS
    }
    yield* Effect.flatMap(DeltaSessions, (sessions) => sessions.set(place.account, session))
    return session
  })

/** Where a session's requests go: its PDS (from the DID document, so through the SSRF guard) or the service. */
const hostOf = (place: Place, session: DeltaSession) =>
  session.pds === null || session.pds === place.service
    ? { base: place.service, guarded: place.guarded }
    : { base: session.pds, guarded: true }

const createSession = (place: Place, credentials: Credentials["delta"], tool: ToolName) =>
  Effect.gen(function* () {
    const answer = yield* requestJson({
      provider: PROVIDER,
      method: "POST",
      url: `${place.service}/xrpc/com.atproto.server.createSession`,
      json: { identifier: credentials.identifier, password: credentials.app_password },
      secrets: [credentials.app_password],
      idempotent: true,
      guarded: place.guarded,
      credentialed: true,
      classify: xrpcStatus
    })
    return yield* keepSession(place, tool, "createSession", answer.body)
  })

/**
 * Renew with the refresh token (at the PDS, which passes it to the entryway); refused or expired: a new session.
 * Not the write: a renewal that failed (a 5xx, a timeout, a broken connection) posted nothing, so it is the
 * provider unavailable, not a write whose outcome is unknown (the next call starts a new session if the refresh
 * token was spent).
 */
const renew = (place: Place, session: DeltaSession, credentials: Credentials["delta"], tool: ToolName) =>
  Effect.gen(function* () {
    const now = yield* nowMillis
    if (session.refreshUntil <= now) return yield* createSession(place, credentials, tool)
    const host = hostOf(place, session)
    return yield* requestJson({
      provider: PROVIDER,
      method: "POST",
      url: `${host.base}/xrpc/com.atproto.server.refreshSession`,
      headers: { authorization: `Bearer ${session.refreshJwt}` },
      idempotent: false,
      guarded: host.guarded,
      credentialed: true,
      classify: xrpcStatus
    }).pipe(
      Effect.catchTag("WriteOutcomeUnknown", () =>
        Effect.fail(new ProviderUnavailable({
          message: "delta: renewing the session failed (an error answer, a timeout or a broken connection), so nothing was posted."
        }))),
      Effect.flatMap((answer) => keepSession(place, tool, "refreshSession", answer.body)),
      Effect.catchTag("ProviderCredentialRejected", () => createSession(place, credentials, tool))
    )
  })

const createRecord = (
  credentials: Credentials["delta"],
  collection: string,
  record: Readonly<Record<string, unknown>>,
  tool: ToolName
) =>
  Effect.gen(function* () {
    const { guarded, service } = yield* serviceOf(credentials)
    const account: DeltaAccount = {
      orgId: yield* CallOrg,
      service,
      identifier: credentials.identifier,
      appPassword: credentials.app_password
    }
    const place: Place = { service, guarded, account }
    const now = yield* nowMillis
    const kept = yield* Effect.flatMap(DeltaSessions, (sessions) => sessions.get(account))
    const write = (session: DeltaSession) => {
      const host = hostOf(place, session)
      return requestJson({
        provider: PROVIDER,
        method: "POST",
        url: `${host.base}/xrpc/com.atproto.repo.createRecord`,
        headers: { authorization: `Bearer ${session.accessJwt}` },
        json: { repo: session.did, collection, record },
        idempotent: false,
        guarded: host.guarded,
        credentialed: true,
        classify: xrpcStatus
      })
    }
    if (kept === undefined) return yield* write(yield* createSession(place, credentials, tool))
    if (kept.accessUntil <= now) return yield* write(yield* renew(place, kept, credentials, tool))
    // A kept session the PDS no longer takes refused the write (nothing was written): renew it, write once more.
    return yield* write(kept).pipe(
      Effect.catchTag("ProviderCredentialRejected", () => Effect.flatMap(renew(place, kept, credentials, tool), write))
    )
  })

const isoNow = Effect.map(nowMillis, (ms) => toDate(ms).toISOString())

const toRecord = (tool: ToolName) => (_input: unknown, raw: Raw) =>
  Effect.map(decodeUpstream(PROVIDER, CreatedRecord, tool)(raw.body), (r) => ({ provider: PROVIDER, uri: r.uri, cid: r.cid }))

export const post: ProviderTool<ToolInput<"delta_post">, Credentials["delta"], ToolOutput<"delta_post">> = {
  fetch: (input, credentials) =>
    Effect.gen(function* () {
      // the further fields first: the record's type, text and time are the call's own, never overwritten by them
      const record = {
        ...input.record,
        $type: "app.bsky.feed.post",
        text: input.text,
        createdAt: input.created_at ?? (yield* isoNow),
        ...(input.langs !== undefined ? { langs: input.langs } : {}),
        ...(input.facets !== undefined ? { facets: input.facets } : {}),
        ...(input.embed !== undefined ? { embed: input.embed } : {})
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
