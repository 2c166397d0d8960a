/**
 * A real gateway for a test file: the HTTP server on a free port, the services, a fresh database, and
 * every fake upstream, wired together. Plus small helpers to call it and to set up orgs and keys.
 */
import { HttpServer } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import type { KeyId, OrgId } from "../../src/domain/ids.js"
import * as Http from "node:http"
import { HttpServerLive } from "../../src/http/server.js"
import { ServicesLive } from "../../src/layers.js"
import { GatewayConfig, type GatewayConfigShape } from "../../src/services/GatewayConfig.js"
import { KeyStore } from "../../src/services/KeyStore.js"
import { Ledger } from "../../src/services/Ledger.js"
import { exa, EXA_KEY } from "../upstreams/exa.js"
import { firecrawl, FIRECRAWL_KEY } from "../upstreams/firecrawl.js"
import type { Upstream } from "../upstreams/harness.js"
import { itunes } from "../upstreams/itunes.js"
import { jina, JINA_KEY } from "../upstreams/jina.js"
import { openMeteo } from "../upstreams/openMeteo.js"
import { PAGES_HOST, pages } from "../upstreams/pages.js"
import { TestDatabaseLive } from "./database.js"

export interface Upstreams {
  readonly openMeteo: Upstream
  readonly itunes: Upstream
  readonly exa: Upstream
  readonly jina: Upstream
  readonly firecrawl: Upstream
  readonly pages: Upstream
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
      pages: yield* pages
    }
    return {
      ...all,
      resetAll: () => {
        for (const u of Object.values(all)) u.reset()
      }
    }
  })
)

/** The configuration of a test gateway: every provider pointed at its fake upstream. */
export const testConfig = (u: Upstreams, overrides: Partial<GatewayConfigShape> = {}): GatewayConfigShape =>
  GatewayConfig.make({
    port: 0,
    host: "127.0.0.1",
    providerTimeoutMs: 1_500,
    sweepIntervalMs: 0,
    rateLimitPerSecond: 0,
    ssrfAllow: [PAGES_HOST],
    providers: {
      alpha: { baseUrl: u.exa.url, apiKey: Option.some(Redacted.make(EXA_KEY)) },
      betaRead: { baseUrl: u.jina.url, apiKey: Option.some(Redacted.make(JINA_KEY)) },
      betaSearch: { baseUrl: u.jina.url, apiKey: Option.some(Redacted.make(JINA_KEY)) },
      gamma: { baseUrl: u.firecrawl.url, apiKey: Option.some(Redacted.make(FIRECRAWL_KEY)) },
      weather: u.openMeteo.url,
      geocoding: u.openMeteo.url,
      appstore: u.itunes.url
    },
    bootstrap: false,
    ...overrides
  })

/** Services and database only (no HTTP), for in-process tests. */
export const servicesLayer = (overrides: Partial<GatewayConfigShape> = {}) =>
  ServicesLive.pipe(
    Layer.provideMerge(TestDatabaseLive),
    Layer.provideMerge(Layer.effect(GatewayConfig, Effect.map(TestUpstreams, (u) => testConfig(u, overrides)))),
    Layer.provideMerge(TestUpstreamsLive)
  )

/** The whole gateway over HTTP on a free port. */
export const gatewayLayer = (overrides: Partial<GatewayConfigShape> = {}) =>
  HttpServerLive.pipe(Layer.provideMerge(servicesLayer(overrides)))

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
      let body: unknown = undefined
      try {
        body = JSON.parse(text)
      } catch {
        body = undefined
      }
      return { status: response.status, headers: response.headers, text, body }
    })
  })

/** A request whose body is sent in chunks, without Content-Length. */
export const requestChunked = (path: string, chunks: ReadonlyArray<string>, headers: Record<string, string>) =>
  Effect.gen(function* () {
    const base = new URL(yield* baseUrl)
    return yield* Effect.async<HttpResult>((resume) => {
      const req = Http.request({ host: base.hostname, port: base.port, path, method: "POST", headers }, (res) => {
        const parts: Array<Buffer> = []
        res.on("data", (c: Buffer) => parts.push(c))
        res.on("end", () => {
          const text = Buffer.concat(parts).toString("utf8")
          let body: unknown = undefined
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
      for (const chunk of chunks) req.write(chunk)
      req.end()
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
    const ledger = yield* Ledger
    const keys = yield* KeyStore
    const org = yield* ledger.createOrg({
      name: options.name ?? "test",
      credits: options.credits ?? 100,
      spendCap: options.cap ?? null
    })
    const key = yield* Effect.orDie(keys.create(org.id, "test"))
    return { orgId: org.id, key: Redacted.value(key.key), keyId: key.id } satisfies GivenOrg
  })

/** The org as the ledger sees it, plus the journal sum and the pending holds, for invariant checks. */
export const books = (orgId: OrgId) =>
  Effect.gen(function* () {
    const ledger = yield* Ledger
    const sql = yield* SqlClient.SqlClient
    const org = yield* ledger.getOrg(orgId).pipe(Effect.orDie)
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

