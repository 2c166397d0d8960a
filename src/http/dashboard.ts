/**
 * Dashboard handlers: thin adapters over the services, scoped to the signed-in user's org.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import { FIRST_INSTANT_MS, instantMillis, SUMMARY_MAX_DAYS, USAGE_CSV_COLUMNS, USAGE_CSV_MAX } from "../domain/dashboard.js"
import { InvalidRequest, NotFound } from "../domain/errors.js"
import { KeyId } from "../domain/ids.js"
import { isToolName } from "../domain/tools.js"
import { Betas } from "../services/Betas.js"
import { Connections } from "../services/Connections.js"
import { Identity } from "../services/Identity.js"
import { type KeyRateLimit, KeyStore } from "../services/KeyStore.js"
import { keyRateCap } from "../services/RateLimit.js"
import { ServerConfig } from "../config.js"
import { Orgs } from "../services/Orgs.js"
import { Usage, type UsageRecord } from "../services/Usage.js"
import { nowMillis, toDate } from "../services/time.js"
import { connectionView, keyView, orgView } from "../views.js"
import { Api, CurrentUser } from "./Api.js"
import { cutOffOnFailure } from "./envelope.js"

const iso = (d: Date) => d.toISOString()

const DAY_MS = 86_400_000

/** An answer that holds a secret (a new key, a dev token) is kept by no cache, the browser's own included. */
const noStore = HttpApp.appendPreResponseHandler((_, answer) => Effect.succeed(HttpServerResponse.setHeader(answer, "cache-control", "no-store")))

const recordView = (r: UsageRecord) => ({
  id: r.id,
  time: iso(r.time),
  key_id: r.keyId,
  tool: r.tool,
  status: r.status,
  code: r.code,
  credits: r.credits,
  latency_ms: r.latencyMs,
  provider: r.provider,
  request_id: r.requestId
})

/** One CSV field (RFC 4180): quoted when it holds a comma, a quote or a line break. */
const csvField = (value: string | number | null) => {
  const text = value === null ? "" : String(value)
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text
}

const csvLine = (r: UsageRecord) => {
  const view = recordView(r)
  return USAGE_CSV_COLUMNS.map((column) => csvField(view[column])).join(",") + "\r\n"
}

const utf8 = new TextEncoder()

/** The CSV of an export's records, as its chunks are read: the header line, then a piece of text a chunk. */
const csvOf = (records: Stream.Stream<UsageRecord>): Stream.Stream<Uint8Array> =>
  Stream.concat(
    Stream.succeed(utf8.encode(USAGE_CSV_COLUMNS.join(",") + "\r\n")),
    Stream.mapChunks(records, (chunk) => Chunk.of(utf8.encode(Chunk.join(Chunk.map(chunk, csvLine), ""))))
  )

/** A range's `from` must come before its `to` (on every route that takes both). */
const checkRange = (from: number, to: number) =>
  from < to ? Effect.void : Effect.fail(new InvalidRequest({ message: "Invalid request: from must be before to." }))

/** An optional expiry as given (`null` removes it), as a date. */
const expiryOf = (value: string | null | undefined) =>
  value === undefined ? undefined : value === null ? null : toDate(instantMillis(value))

const rateLimitOf = (value: { readonly per_second: number; readonly burst: number } | null | undefined) =>
  value === undefined ? undefined : value === null ? null : { perSecond: value.per_second, burst: value.burst }

/** A key's rate limit as a member sets it: within the operator's maximum (`keyRateCap`), else the caller's mistake. */
const withinCap = (cap: KeyRateLimit, value: { readonly per_second: number; readonly burst: number } | null | undefined) =>
  value === undefined || value === null || (value.per_second <= cap.perSecond && value.burst <= cap.burst)
    ? Effect.void
    : Effect.fail(new InvalidRequest({
      message: `rate_limit: this gateway allows a key at most ${cap.perSecond} requests per second with a burst of ${cap.burst} ` +
        `(RATE_LIMIT_MAX_PER_SECOND, RATE_LIMIT_MAX_BURST); asked: ${value.per_second} with a burst of ${value.burst}.`
    }))

export const DashboardLive = HttpApiBuilder.group(Api, "dashboard", (handlers) =>
  Effect.gen(function* () {
    const connections = yield* Connections
    const keys = yield* KeyStore
    const orgs = yield* Orgs
    const cap = keyRateCap(yield* ServerConfig)
    const betas = yield* Betas
    const usage = yield* Usage

    const currentOrg = Effect.gen(function* () {
      const { orgId } = yield* CurrentUser
      const org = yield* orgs.get(orgId).pipe(Effect.orDie)
      return orgView(org, yield* betas.list(orgId))
    })

    return handlers
      .handle("connect", ({ payload }) =>
        Effect.gen(function* () {
          const { orgId } = yield* CurrentUser
          const connection = yield* connections.connect(orgId, payload.provider, payload.credentials, payload.label ?? null)
          return connectionView(connection)
        }))
      .handle("listConnections", () =>
        Effect.gen(function* () {
          const { orgId } = yield* CurrentUser
          return { data: (yield* connections.list(orgId)).map(connectionView) }
        }))
      .handle("disconnect", ({ path }) =>
        Effect.gen(function* () {
          const { orgId } = yield* CurrentUser
          return connectionView(yield* connections.disconnect(orgId, path.provider))
        }))
      .handle("createKey", ({ payload }) =>
        Effect.gen(function* () {
          const { orgId } = yield* CurrentUser
          yield* withinCap(cap, payload.rate_limit)
          const created = yield* keys.create(orgId, {
            name: payload.name,
            spendLimit: payload.monthly_spend_limit ?? null,
            allowedTools: payload.allowed_tools ?? null,
            rateLimit: rateLimitOf(payload.rate_limit) ?? null,
            expiresAt: expiryOf(payload.expires_at) ?? null
          }).pipe(Effect.catchTag("NotFound", Effect.die))
          yield* noStore
          return { ...keyView(created), key: Redacted.value(created.key) }
        }))
      .handle("listKeys", () =>
        Effect.gen(function* () {
          const { orgId } = yield* CurrentUser
          return { data: (yield* keys.list(orgId)).map(keyView) }
        }))
      .handle("updateKey", ({ path, payload }) =>
        Effect.gen(function* () {
          const { orgId } = yield* CurrentUser
          yield* withinCap(cap, payload.rate_limit)
          // another org's key is "not found", as for revoke
          return keyView(yield* keys.update(KeyId.make(path.id), orgId, {
            name: payload.name,
            spendLimit: payload.monthly_spend_limit,
            allowedTools: payload.allowed_tools,
            rateLimit: rateLimitOf(payload.rate_limit),
            expiresAt: expiryOf(payload.expires_at)
          }))
        }))
      .handle("revokeKey", ({ path }) =>
        Effect.gen(function* () {
          const { orgId } = yield* CurrentUser
          // Another org's key is "not found": its existence is not disclosed.
          return keyView(yield* keys.revoke(KeyId.make(path.id), orgId))
        }))
      .handle("getOrg", () => currentOrg)
      .handle("setSpendCap", ({ payload }) =>
        Effect.gen(function* () {
          const { orgId } = yield* CurrentUser
          yield* orgs.setSpendCap(orgId, payload.spend_cap).pipe(Effect.catchTag("NotFound", Effect.die))
          return yield* currentOrg
        }))
      .handle("setBeta", ({ path, payload }) =>
        Effect.gen(function* () {
          const { orgId } = yield* CurrentUser
          if (!isToolName(path.tool)) return yield* new NotFound({ message: `There is no tool named ${path.tool}.` })
          if (payload.enabled) yield* betas.enable(orgId, path.tool).pipe(Effect.orDie)
          else yield* betas.disable(orgId, path.tool)
          return yield* currentOrg
        }))
      .handle("usage", ({ urlParams }) =>
        Effect.gen(function* () {
          const { orgId } = yield* CurrentUser
          const csv = urlParams.format === "csv"
          const from = urlParams.from === undefined ? undefined : instantMillis(urlParams.from)
          const to = urlParams.to === undefined ? undefined : instantMillis(urlParams.to)
          if (from !== undefined && to !== undefined) yield* checkRange(from, to)
          const filter = {
            cursor: urlParams.cursor,
            keyId: urlParams.key_id,
            tool: urlParams.tool,
            status: urlParams.status,
            from: from === undefined ? undefined : toDate(from),
            to: to === undefined ? undefined : toDate(to)
          }
          if (csv) {
            const exported = yield* usage.export(orgId, { ...filter, max: USAGE_CSV_MAX })
            const body = cutOffOnFailure(yield* HttpServerRequest.HttpServerRequest, csvOf(exported.records))
            return HttpServerResponse.stream(body, {
              contentType: "text/csv; charset=utf-8",
              headers: {
                "content-disposition": "attachment; filename=\"usage.csv\"",
                // more matched than one export holds: where the rest starts
                ...(exported.nextCursor === null ? {} : { "x-next-cursor": exported.nextCursor })
              }
            })
          }
          const page = yield* usage.page(orgId, { ...filter, limit: urlParams.limit ?? 50 })
          return { data: page.records.map(recordView), next_cursor: page.nextCursor }
        }))
      .handle("usageSummary", ({ urlParams }) =>
        Effect.gen(function* () {
          const { orgId } = yield* CurrentUser
          const to = urlParams.to === undefined ? yield* nowMillis : instantMillis(urlParams.to)
          // by default the 30 UTC days that end with the day of `to` (the day before it, when `to` is a midnight:
          // `to` is exclusive), from the year 1 at the earliest
          const from = urlParams.from === undefined
            ? Math.max(Math.ceil(to / DAY_MS) * DAY_MS - 30 * DAY_MS, FIRST_INSTANT_MS)
            : instantMillis(urlParams.from)
          yield* checkRange(from, to)
          // the UTC days the range touches, each a line of the answer
          if (Math.ceil(to / DAY_MS) - Math.floor(from / DAY_MS) > SUMMARY_MAX_DAYS) {
            return yield* new InvalidRequest({ message: `Invalid request: a summary covers at most ${SUMMARY_MAX_DAYS} days.` })
          }
          const groupBy = urlParams.group_by ?? "day"
          const data = yield* usage.summary(orgId, { from: toDate(from), to: toDate(to), groupBy })
          const total = data.reduce(
            (sum, g) => ({ calls: sum.calls + g.calls, errors: sum.errors + g.errors, credits: sum.credits + g.credits }),
            { calls: 0, errors: 0, credits: 0 }
          )
          return { from: iso(toDate(from)), to: iso(toDate(to)), group_by: groupBy, data, total }
        }))
  }))

/** How long a dev token from `POST /dev/token` is valid. */
const DEV_TOKEN_TTL_SECONDS = 8 * 60 * 60

/** The Host header names a loopback address (a page on another site that rebinds its name to 127.0.0.1 does not). */
const loopbackHost = (host: string | undefined) => {
  const name = (host ?? "").replace(/:\d+$/, "").replace(/^\[(.*)\]$/, "$1").toLowerCase()
  return name === "localhost" || name === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(name)
}

export const DevLive = HttpApiBuilder.group(Api, "dev", (handlers) =>
  Effect.gen(function* () {
    const identity = yield* Identity
    return handlers
      .handle("jwks", () =>
        Option.match(identity.devJwks, {
          onNone: () => Effect.fail(new NotFound({ message: "No route GET /dev/jwks.json." })),
          onSome: (jwks) => Effect.succeed(HttpServerResponse.unsafeJson(jwks))
        }))
      .handle("token", ({ payload }) =>
        Effect.gen(function* () {
          if (Option.isNone(identity.mintDevToken)) return yield* new NotFound({ message: "No route POST /dev/token." })
          const request = yield* HttpServerRequest.HttpServerRequest
          if (!loopbackHost(request.headers["host"])) {
            return yield* new InvalidRequest({ message: "Dev tokens are issued only to a loopback Host (localhost, 127.0.0.1)." })
          }
          const now = yield* nowMillis
          const token = yield* identity.mintDevToken.value(payload.uid, DEV_TOKEN_TTL_SECONDS).pipe(Effect.orDie)
          yield* noStore
          return { token, expires_at: iso(toDate(now + DEV_TOKEN_TTL_SECONDS * 1000)) }
        }))
  }))

export const DashboardHandlersLive = Layer.mergeAll(DashboardLive, DevLive)
