/**
 * A real gateway for a test file: the HTTP server on a free port, the services, a fresh database, and
 * every fake upstream, wired together. Plus small helpers to call it and to set up orgs and keys.
 */
import { HttpServer } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { Clock, Context, Effect, Layer, Logger, LogLevel, Option, Redacted } from "effect"
import { devKey, mintDevToken } from "../../src/services/Identity.js"
import { Members } from "../../src/services/Members.js"
import type { KeyId, OrgId } from "../../src/domain/ids.js"
import * as Http from "node:http"
import { HttpServerLive } from "../../src/http/server.js"
import { TracingLive } from "../../src/services/Observability.js"
import { ServicesLive } from "../../src/layers.js"
import { type ConfigOverrides, configLayer, type GatewayConfigs } from "../../src/config.js"
import { KeyStore } from "../../src/services/KeyStore.js"
import { Orgs } from "../../src/services/Orgs.js"
import { exa, EXA_KEY } from "../upstreams/exa.js"
import { firecrawl, FIRECRAWL_BLOCKLISTED_HOST, FIRECRAWL_KEY } from "../upstreams/firecrawl.js"
import type { Upstream } from "../../src/testing/harness.js"
import { itunes } from "../../src/testing/itunes.js"
import { jina, JINA_KEY } from "../upstreams/jina.js"
import { openMeteo } from "../../src/testing/openMeteo.js"
import { PAGES_HOST, pages } from "../upstreams/pages.js"
import { tmdb, TMDB_TOKEN } from "../upstreams/tmdb.js"
import { TestDatabaseLive } from "./database.js"
import { capturedLogs, recordResponse, registerSecret, registerSecretsIn, TEST_ENCRYPTION_KEY } from "./secrets.js"
import * as A from "../upstreams/accounts.js"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"

import { type JwksServer, type SigningKey, signingKey, startJwks } from "../upstreams/jwks.js"

export const FIREBASE_PROJECT = "demo-project"

export { capturedLogs, TEST_ENCRYPTION_KEY }

export interface Upstreams {
  readonly openMeteo: Upstream
  readonly itunes: Upstream
  readonly exa: Upstream
  readonly jina: Upstream
  readonly firecrawl: Upstream
  readonly pages: Upstream
  readonly bluesky: Upstream
  readonly rest: Upstream
  readonly graph: Upstream
  readonly monkeytype: Upstream
  readonly trakt: Upstream
  readonly render: Upstream
  readonly polar: Upstream
  readonly resend: Upstream
  readonly notion: Upstream
  readonly github: Upstream
  readonly tmdb: Upstream
  /** A scratch data directory (encryption and dev identity keys), removed afterwards. */
  readonly dataDir: string
  /** Google's securetoken JWKS, as far as the gateway knows, and the key it publishes. */
  readonly jwks: JwksServer
  readonly firebaseKey: SigningKey
  /** Clear recorded requests and faults everywhere. */
  readonly resetAll: () => void
}

export class TestUpstreams extends Context.Tag("test/TestUpstreams")<TestUpstreams, Upstreams>() {}

export const TestUpstreamsLive = Layer.scoped(
  TestUpstreams,
  Effect.gen(function* () {
    const all = {
      openMeteo: yield* openMeteo,
      itunes: yield* itunes,
      exa: yield* exa,
      jina: yield* jina,
      firecrawl: yield* firecrawl,
      pages: yield* pages,
      bluesky: yield* A.bluesky,
      rest: yield* A.rest,
      graph: yield* A.graph,
      monkeytype: yield* A.monkeytype,
      trakt: yield* A.trakt,
      render: yield* A.render,
      polar: yield* A.polar,
      resend: yield* A.resend,
      notion: yield* A.notion,
      github: yield* A.github,
      tmdb: yield* tmdb
    }
    const firebaseKey = yield* Effect.promise(() => signingKey("firebase-key-1"))
    const jwks = yield* Effect.acquireRelease(
      Effect.promise(() => startJwks([firebaseKey])),
      (server) => Effect.promise(() => server.close())
    )
    const dataDir = yield* Effect.acquireRelease(
      Effect.promise(() => Fs.mkdtemp(Path.join(Os.tmpdir(), "tool-gateway-data-"))),
      (dir) => Effect.promise(() => Fs.rm(dir, { recursive: true, force: true }))
    )
    return {
      ...all,
      dataDir,
      jwks,
      firebaseKey,
      resetAll: () => {
        for (const u of Object.values(all)) u.reset()
      }
    }
  })
)

/** Public names the tests send to the readers (never fetched: the readers are fakes). */
const PUBLIC_TEST_HOSTS: ReadonlyArray<string> = ["example.com", FIRECRAWL_BLOCKLISTED_HOST]

const some = (key: string) => Option.some(Redacted.make(key))
const at = (url: string) => ({ baseUrl: url, apiKey: Option.none() })

/** The configuration of a test gateway: every provider pointed at its fake upstream, and `overrides`. */
export const testConfig = (u: Upstreams, overrides: ConfigOverrides = {}): ConfigOverrides => ({
  server: { port: 0, host: "127.0.0.1", rateLimitPerSecond: 0, dataDir: u.dataDir, bootstrap: false, ...overrides.server },
  ledger: { sweepIntervalMs: 0, ...overrides.ledger },
  providers: {
    timeoutMs: 1_500,
    ...overrides.providers,
    // the public names the tests give the readers (Jina, Firecrawl), which the guard resolves before a reader is
    // asked: a test machine may have no DNS at all
    ssrfAllow: [...(overrides.providers?.ssrfAllow ?? [PAGES_HOST]), ...PUBLIC_TEST_HOSTS],
    endpoints: {
      alpha: { baseUrl: u.exa.url, apiKey: some(EXA_KEY) },
      betaRead: { baseUrl: u.jina.url, apiKey: some(JINA_KEY) },
      betaSearch: { baseUrl: u.jina.url, apiKey: some(JINA_KEY) },
      gamma: { baseUrl: u.firecrawl.url, apiKey: some(FIRECRAWL_KEY) },
      xi: { baseUrl: u.tmdb.url, apiKey: some(TMDB_TOKEN) },
      weather: at(u.openMeteo.url),
      geocoding: at(u.openMeteo.url),
      appstore: at(u.itunes.url),
      delta: at(u.bluesky.url),
      zeta: at(u.graph.url),
      eta: at(u.monkeytype.url),
      theta: at(u.trakt.url),
      iota: at(u.render.url),
      kappa: at(u.polar.url),
      lambda: at(u.resend.url),
      mu: at(u.notion.url),
      nu: at(u.github.url),
      ...overrides.providers?.endpoints
    }
  },
  identity: {
    firebaseProjectId: Option.some(FIREBASE_PROJECT),
    firebaseJwksUrl: u.jwks.url,
    devIssuer: true,
    jwksCooldownMs: 0,
    encryptionKey: some(TEST_ENCRYPTION_KEY),
    ...overrides.identity
  }
})

/** Every log line of the test run's gateways, JSON-formatted, kept in `capturedLogs`; only errors other than request lines are printed. */
export const CapturingLoggerLive = Logger.replace(
  Logger.defaultLogger,
  Logger.make((options) => {
    const line = Logger.jsonLogger.log(options)
    capturedLogs.push(line)
    // the request lines of 5xx answers are expected in fault tests; anything else at ERROR is worth seeing
    if (LogLevel.greaterThanEqual(options.logLevel, LogLevel.Error) && options.message !== "request" &&
      !(Array.isArray(options.message) && options.message[0] === "request")) console.error(line)
  })
)

/** Overrides of a test gateway's configuration; a function of the upstreams for one that names their URLs. */
export type TestOverrides = ConfigOverrides | ((u: Upstreams) => ConfigOverrides)

const servicesWith = <ROut>(overrides: TestOverrides, tracing: Layer.Layer<ROut, never, GatewayConfigs>) =>
  ServicesLive.pipe(
    Layer.provideMerge(TestDatabaseLive),
    Layer.provideMerge(tracing),
    Layer.provideMerge(CapturingLoggerLive),
    Layer.provideMerge(Layer.unwrapEffect(Effect.map(TestUpstreams, (u) => configLayer(testConfig(u, typeof overrides === "function" ? overrides(u) : overrides))))),
    Layer.provideMerge(TestUpstreamsLive)
  )

/** Services and database only (no HTTP), for in-process tests. */
export const servicesLayer = (overrides: TestOverrides = {}) => servicesWith(overrides, TracingLive)

/** The whole gateway over HTTP on a free port. */
export const gatewayLayer = (overrides: TestOverrides = {}) =>
  HttpServerLive.pipe(Layer.provideMerge(servicesLayer(overrides)))

/** The whole gateway with its own tracing layer (an in-memory exporter, say) in place of the configured one. */
export const gatewayLayerTracedBy = <ROut>(tracing: Layer.Layer<ROut, never, GatewayConfigs>, overrides: ConfigOverrides = {}) =>
  HttpServerLive.pipe(Layer.provideMerge(servicesWith(overrides, tracing)))

export const baseUrl = Effect.map(HttpServer.HttpServer, (server) => {
  const address = server.address
  return address._tag === "TcpAddress" ? `http://127.0.0.1:${address.port}` : "http://localhost"
})

export interface HttpResult {
  readonly status: number
  readonly headers: Headers
  readonly text: string
  readonly body: unknown
}

/** A raw HTTP request to the gateway. */
export const request = (
  path: string,
  init: { readonly method?: string; readonly body?: string; readonly headers?: Record<string, string> } = {}
) =>
  Effect.gen(function* () {
    const base = yield* baseUrl
    return yield* Effect.promise(async (): Promise<HttpResult> => {
      const response = await fetch(`${base}${path}`, {
        method: init.method ?? "POST",
        ...(init.body !== undefined ? { body: init.body } : {}),
        headers: init.headers ?? {}
      })
      const text = await response.text()
      recordResponse(`${init.method ?? "POST"} ${path}`, text)
      let body: unknown
      try {
        body = JSON.parse(text)
      } catch {
        body = undefined
      }
      // a key is shown once, in the answer that creates it; never again
      if (typeof body === "object" && body !== null && "key" in body && typeof body.key === "string") registerSecret(body.key)
      return { status: response.status, headers: response.headers, text, body }
    })
  })

/** `POST /v1/<tool>` from a client that hangs up `afterMs` into the call, before the answer. */
export const hangUp = (tool: string, body: unknown, headers: Record<string, string>, afterMs: number) =>
  Effect.flatMap(baseUrl, (base) =>
    Effect.promise(async () => {
      const controller = new AbortController()
      setTimeout(() => controller.abort(), afterMs)
      await fetch(`${base}/v1/${tool}`, {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: JSON.stringify(body),
        signal: controller.signal
      }).catch(() => undefined)
    }))

/** An answer as it came over the wire: its bytes still in their content coding (`fetch` would decode them). */
export interface RawResult {
  readonly status: number
  readonly headers: Http.IncomingHttpHeaders
  readonly body: Buffer
}

/** `GET` or `HEAD` of `path` through Node's `http`, which sends no `Accept-Encoding` unless `headers` does. */
export const requestBytes = (path: string, headers: Record<string, string> = {}, method: "GET" | "HEAD" = "GET") =>
  Effect.gen(function* () {
    const base = new URL(yield* baseUrl)
    return yield* Effect.async<RawResult>((resume) => {
      const req = Http.request({ host: base.hostname, port: base.port, path, method, headers }, (res) => {
        const parts: Array<Buffer> = []
        res.on("data", (c: Buffer) => parts.push(c))
        res.on("end", () => resume(Effect.succeed({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(parts) })))
      })
      req.on("error", (error) => resume(Effect.die(error)))
      req.end()
    })
  })

/** A request whose body is sent in chunks, one write each: without Content-Length unless `headers` gives it. */
export const requestChunked = (
  path: string,
  chunks: ReadonlyArray<string | Uint8Array>,
  headers: Record<string, string>,
  /** a pause between two writes, so that each arrives in a read of its own */
  gapMs = 0
) =>
  Effect.gen(function* () {
    const base = new URL(yield* baseUrl)
    return yield* Effect.async<HttpResult>((resume) => {
      const req = Http.request({ host: base.hostname, port: base.port, path, method: "POST", headers }, (res) => {
        const parts: Array<Buffer> = []
        res.on("data", (c: Buffer) => parts.push(c))
        res.on("end", () => {
          const text = Buffer.concat(parts).toString("utf8")
          let body: unknown
          try {
            body = JSON.parse(text)
          } catch {
            body = undefined
          }
          const h = new Headers()
          for (const [k, v] of Object.entries(res.headers)) if (typeof v === "string") h.set(k, v)
          resume(Effect.succeed({ status: res.statusCode ?? 0, headers: h, text, body }))
        })
      })
      // The server may answer and close before the whole body is written.
      req.on("error", () => {})
      const write = (i: number): void => {
        if (i === chunks.length) {
          req.end()
          return
        }
        const chunk = chunks[i]
        if (chunk !== undefined) req.write(chunk)
        if (gapMs === 0) write(i + 1)
        else setTimeout(() => write(i + 1), gapMs)
      }
      write(0)
    })
  })

/** `POST /v1/<tool>` with a JSON body and a key. */
export const callTool = (
  tool: string,
  body: unknown,
  options: { readonly key?: string; readonly idempotencyKey?: string; readonly headers?: Record<string, string> } = {}
) =>
  request(`/v1/${tool}`, {
    body: JSON.stringify(body),
    headers: {
      "content-type": "application/json",
      ...(options.key !== undefined ? { "x-api-key": options.key } : {}),
      ...(options.idempotencyKey !== undefined ? { "idempotency-key": options.idempotencyKey } : {}),
      ...options.headers
    }
  })

export interface GivenOrg {
  readonly orgId: OrgId
  readonly key: string
  readonly keyId: KeyId
}

/** An org with credits (and optionally a cap) and one key. */
export const givenOrg = (options: { readonly credits?: number; readonly cap?: number | null; readonly name?: string } = {}) =>
  Effect.gen(function* () {
    const orgs = yield* Orgs
    const keys = yield* KeyStore
    const org = yield* orgs.create({
      name: options.name ?? "test",
      credits: options.credits ?? 100,
      spendCap: options.cap ?? null
    })
    const key = yield* Effect.orDie(keys.create(org.id, { name: "test" }))
    registerSecret(Redacted.value(key.key))
    return { orgId: org.id, key: Redacted.value(key.key), keyId: key.id } satisfies GivenOrg
  })

/**
 * The org as the ledger sees it, plus the journal sum and the pending holds, for invariant checks: read in one
 * snapshot (a repeatable-read transaction). Read statement by statement, a sweep or a settlement committing
 * between two reads showed the org's `held` from before it beside its holds from after. Not for use inside another
 * transaction (`SET TRANSACTION` must be its transaction's first statement).
 */
export const books = (orgId: OrgId) =>
  Effect.gen(function* () {
    const orgs = yield* Orgs
    const sql = yield* SqlClient.SqlClient
    return yield* sql.withTransaction(readBooks(orgs, sql, orgId)).pipe(Effect.orDie)
  })

const readBooks = (orgs: Context.Tag.Service<typeof Orgs>, sql: SqlClient.SqlClient, orgId: OrgId) =>
  Effect.gen(function* () {
    yield* sql`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ`
    const org = yield* orgs.get(orgId).pipe(Effect.orDie)
    const journal = yield* sql<{ readonly total: number }>`
      SELECT coalesce(sum(amount), 0)::int8 AS total FROM journal WHERE org_id = ${orgId}`.pipe(Effect.orDie)
    const pending = yield* sql<{ readonly n: number; readonly total: number }>`
      SELECT count(*)::int8 AS n, coalesce(sum(amount), 0)::int8 AS total FROM holds
       WHERE org_id = ${orgId} AND status = 'pending'`.pipe(Effect.orDie)
    const holds = yield* sql<{ readonly status: string; readonly n: number }>`
      SELECT status, count(*)::int8 AS n FROM holds WHERE org_id = ${orgId} GROUP BY status`.pipe(Effect.orDie)
    return {
      ...org,
      journalSum: journal[0]?.total ?? 0,
      pendingHolds: pending[0]?.n ?? 0,
      pendingAmount: pending[0]?.total ?? 0,
      holdsByStatus: Object.fromEntries(holds.map((h) => [h.status, h.n]))
    }
  })


/** A dev ID token for `uid`, signed with the test gateway's dev key. */
export const devToken = (uid: string, ttlSeconds = 3600) =>
  Effect.gen(function* () {
    const u = yield* TestUpstreams
    const key = yield* Effect.orDie(devKey(u.dataDir))
    const token = yield* Effect.orDie(mintDevToken(key, uid, yield* Clock.currentTimeMillis, ttlSeconds))
    registerSecret(token)
    return token
  })

/** A signed-in member of a fresh org (and the org's API key). */
export const givenMember = (options: { readonly credits?: number; readonly cap?: number | null } = {}) =>
  Effect.gen(function* () {
    const org = yield* givenOrg(options)
    const uid = `user-${org.orgId}`
    yield* Effect.orDie(Effect.flatMap(Members, (m) => m.add(org.orgId, uid)))
    return { ...org, uid, token: yield* devToken(uid) }
  })

/** A dashboard API request with an ID token. */
export const dashboard = (
  method: string,
  path: string,
  token: string | undefined,
  body?: unknown,
  headers: Record<string, string> = {}
) => {
  if (typeof body === "object" && body !== null && "credentials" in body) registerSecretsIn(body.credentials)
  if (token !== undefined) registerSecret(token)
  return request(path, {
    method,
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    headers: {
      ...(body !== undefined ? { "content-type": "application/json" } : {}),
      ...(token !== undefined ? { authorization: `Bearer ${token}` } : {}),
      ...headers
    }
  })
}

/** `count` records of weather calls, a second apart from `start` (or all at `start`), straight into the usage table. */
export const givenManyUsage = (orgId: OrgId, keyId: string, count: number, start: string, options: { readonly apart: boolean } = { apart: true }) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql`
      INSERT INTO usage (org_id, key_id, tool, request_id, status, code, credits, latency_ms, provider, created_at)
      SELECT ${orgId}, ${keyId}, 'weather', 'req_many' || n, 200, 'ok', 1, 5, 'open-meteo',
             ${start}::timestamptz + n * ${options.apart ? "1 second" : "0 seconds"}::interval
        FROM generate_series(1, ${count}) AS n`).pipe(Effect.orDie)
