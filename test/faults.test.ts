/**
 * Upstream faults for each curated tool: the right code and flags, and the hold voided — or settled at the
 * tool's minimum price for a normalization failure, where the provider did answer; and the usage record naming
 * the provider whose failure decided the answer (null for a call refused before any provider was tried).
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Schedule } from "effect"
import { type ExpectedError, expectEnvelope, expectOk } from "./support/assert.js"
import { books, callTool, gatewayLayer, givenOrg, type HttpResult, TestUpstreams, type Upstreams } from "./support/gateway.js"
import type { Fault, Upstream } from "../src/testing/harness.js"

interface FaultCase {
  readonly name: string
  readonly fault: Fault
  readonly expected: ExpectedError
  /** Whether the hold is settled (the provider answered) rather than voided. */
  readonly settled: boolean
}

const TIMEOUT_MS = 800

const faults: ReadonlyArray<FaultCase> = [
  { name: "a timeout", fault: { delayMs: TIMEOUT_MS * 3 }, expected: { status: 504, type: "timeout", code: "provider_timeout", retryable: true, billable: false }, settled: false },
  { name: "a 5xx", fault: { status: 500 }, expected: { status: 502, type: "provider", code: "provider_unavailable", retryable: true, billable: false }, settled: false },
  { name: "a 429", fault: { status: 429, headers: { "retry-after": "30" } }, expected: { status: 502, type: "provider", code: "provider_rate_limited", retryable: true, billable: false }, settled: false },
  { name: "malformed JSON", fault: { malformed: true }, expected: { status: 502, type: "provider", code: "provider_unavailable", retryable: true, billable: false, message: "invalid JSON" }, settled: false },
  { name: "a wrong shape", fault: { wrongShape: true }, expected: { status: 502, type: "normalization", code: "normalization_failed", retryable: false, billable: true, message: /POST \/v1\/run|geocoding answer, which weather needs before its call/ }, settled: true },
  { name: "a connection reset", fault: { reset: true }, expected: { status: 502, type: "provider", code: "provider_unavailable", retryable: true, billable: false }, settled: false },
  { name: "an oversized body", fault: { oversizedBytes: 8 * 1024 * 1024 }, expected: { status: 502, type: "provider", code: "provider_response_too_large", retryable: false, billable: false }, settled: false },
  { name: "a body that never ends", fault: { oversizedBytes: Number.POSITIVE_INFINITY }, expected: { status: 502, type: "provider", code: "provider_response_too_large", retryable: false, billable: false }, settled: false },
  { name: "headers, then nothing", fault: { hangAfterHeaders: true }, expected: { status: 504, type: "timeout", code: "provider_timeout", retryable: true, billable: false }, settled: false }
]

interface ToolCase {
  readonly tool: string
  readonly input: (u: Upstreams) => unknown
  readonly upstream: (u: Upstreams) => Upstream
  /** The provider the upstream is, as the answer and the usage record name it. */
  readonly provider: string
  /** Fault names that do not apply to this upstream's protocol. */
  readonly skip?: ReadonlyArray<string>
}

/** The provider of a call's usage record, once it is written (records are written in batches). */
const usageProviderOf = (requestId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ readonly provider: string | null }>`SELECT provider FROM usage WHERE request_id = ${requestId}`).pipe(
    Effect.flatMap((rows) => rows[0] === undefined ? Effect.fail("not written yet") : Effect.succeed(rows[0].provider)),
    Effect.retry({ schedule: Schedule.spaced("50 millis"), times: 100 }),
    Effect.orDie
  )

const requestIdOf = (result: HttpResult) => result.headers.get("x-request-id") ?? ""

const check = (t: ToolCase, f: FaultCase) =>
  Effect.gen(function* () {
    const u = yield* TestUpstreams
    u.resetAll()
    t.upstream(u).fault(f.fault)
    const { key, orgId } = yield* givenOrg({ credits: 100 })
    const result = yield* callTool(t.tool, t.input(u), { key })
    expectEnvelope(result, f.expected)
    if (f.expected.code === "provider_rate_limited") expect(result.headers.get("retry-after")).toBe("30")
    const b = yield* books(orgId)
    expect(b).toMatchObject({ held: 0, pendingHolds: 0, journalSum: b.balance })
    // a failure says whose it was, as a success does: charged (the provider answered) or not
    expect(yield* usageProviderOf(requestIdOf(result)), `${t.tool}: the usage record's provider`).toBe(t.provider)
    if (f.settled) {
      expect(b.holdsByStatus).toEqual({ settled: 1 })
      expect(b.balance).toBe(99)
    } else {
      expect(b.holdsByStatus).toEqual({ voided: 1 })
      expect(b.balance).toBe(100)
    }
    u.resetAll()
  })

const config = { providers: { timeoutMs: TIMEOUT_MS, searchProviders: ["alpha"], readProviders: ["builtin"] } }

layer(gatewayLayer(config), { excludeTestServices: true })("upstream faults", (it) => {
  const tools: ReadonlyArray<ToolCase> = [
    { tool: "weather", input: () => ({ q: "Berlin" }), upstream: (u) => u.openMeteo, provider: "open-meteo" },
    { tool: "mobile_app_search", input: () => ({ query: "notes" }), upstream: (u) => u.itunes, provider: "itunes" },
    { tool: "search", input: () => ({ query: "faults" }), upstream: (u) => u.exa, provider: "alpha" },
    // The built-in reader reads pages, not JSON: the JSON faults are checked through a JSON provider below.
    {
      tool: "read",
      input: (u) => ({ url: `${u.pages.url}/article` }),
      upstream: (u) => u.pages,
      provider: "builtin",
      skip: ["malformed JSON", "a wrong shape"]
    }
  ]
  for (const t of tools) {
    describe(t.tool, () => {
      for (const f of faults) {
        if (t.skip?.includes(f.name)) continue
        it.effect(`${f.name} → ${f.expected.code}`, () => check(t, f))
      }
    })
  }

  it.effect("twenty calls at once to an upstream that streams without end: memory stays bounded, every hold voided", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      u.itunes.fault({ oversizedBytes: Number.POSITIVE_INFINITY })
      const { key, orgId } = yield* givenOrg({ credits: 100 })
      const before = process.memoryUsage().rss
      const results = yield* Effect.forEach(Array.from({ length: 20 }), () => callTool("mobile_app_search", { query: "endless" }, { key }), {
        concurrency: 20
      })
      const grown = (process.memoryUsage().rss - before) / 2 ** 20
      u.itunes.fault()
      // each is cut at the size cap (502 provider_response_too_large) or, on a machine too busy to read 5 MB
      // within the deadline, at the deadline (504 provider_timeout): never billed either way
      for (const r of results) {
        expect(r.status === 502 || r.status === 504, `status ${r.status}`).toBe(true)
        expect(r.body).toMatchObject({ error: { billable: false } })
      }
      expect(results.filter((r) => r.status === 502).length).toBeGreaterThan(0)
      // each answer is read up to the 5 MB cap and no further: at most 20 × 5 MB in flight
      expect(grown).toBeLessThan(150)
      expect(yield* books(orgId)).toMatchObject({ balance: 100, held: 0, holdsByStatus: { voided: 20 } })
    }))

  it.effect("a safe read is tried three times in all: after one or two 503s it answers, charged once; still unavailable, it is provider_unavailable", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      const { key, orgId } = yield* givenOrg({ credits: 5 })
      const readWith = (faults: number | undefined, query: string) => {
        u.resetAll()
        u.itunes.fault({ status: 503, ...(faults === undefined ? {} : { times: faults }) })
        return callTool("mobile_app_search", { query }, { key })
      }
      expectOk(yield* readWith(1, "again"), 1)
      expect(u.itunes.hits()).toBe(2)
      expect(yield* books(orgId)).toMatchObject({ balance: 4, held: 0 })
      expectOk(yield* readWith(2, "back"), 1)
      expect(u.itunes.hits()).toBe(3)
      expect(yield* books(orgId)).toMatchObject({ balance: 3, held: 0 })
      expectEnvelope(yield* readWith(undefined, "down"), { status: 502, type: "provider", code: "provider_unavailable", retryable: true, billable: false })
      expect(u.itunes.hits()).toBe(3)
      expect(yield* books(orgId)).toMatchObject({ balance: 3, held: 0 })
    }))

  it.effect("POST /v1/run: a provider's failure is put down to it in the usage record; an answer weather cannot read is served raw", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const { key } = yield* givenOrg({ credits: 100 })
      const run = { tool: "weather", input: { q: "Berlin" } }
      u.openMeteo.fault({ status: 500 })
      const failed = yield* callTool("run", run, { key })
      expectEnvelope(failed, { status: 502, type: "provider", code: "provider_unavailable", retryable: true, billable: false })
      expect(yield* usageProviderOf(requestIdOf(failed))).toBe("open-meteo")
      // a geocoding answer weather cannot read: the tool says normalization_failed and sends the caller to /v1/run
      // (the contract: "on normalization, the raw provider response can be obtained through POST /v1/run"), which
      // answers it as it came — no forecast could be asked for without coordinates — charged the minimum
      u.openMeteo.fault({ wrongShape: true })
      const unread = yield* callTool("weather", run.input, { key })
      expectEnvelope(unread, { status: 502, type: "normalization", code: "normalization_failed", retryable: false, billable: true, message: "POST /v1/run" })
      u.openMeteo.fault({ wrongShape: true })
      const raw = yield* callTool("run", run, { key })
      expect(raw.status).toBe(200)
      expect(raw.body).toEqual({ tool: "weather", provider: "open-meteo", status: 200, body: { geocoding: { unexpected: true, items: "none" }, forecast: null } })
      expect(raw.headers.get("x-credits-charged")).toBe("1")
      expect(yield* usageProviderOf(requestIdOf(raw))).toBe("open-meteo")
      u.resetAll()
    }))

  it.effect("a call refused before any provider was tried has no provider in its usage record", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const broke = yield* givenOrg({ credits: 0 })
      const unpaid = yield* callTool("mobile_app_search", { query: "notes" }, { key: broke.key })
      expectEnvelope(unpaid, { status: 402, type: "insufficient_credits", code: "insufficient_credits", retryable: false, billable: false })
      expect(yield* usageProviderOf(requestIdOf(unpaid))).toBeNull()
      const { key } = yield* givenOrg({ credits: 100 })
      const refused = yield* callTool("read", { url: "http://169.254.169.254/latest/meta-data" }, { key })
      expectEnvelope(refused, { status: 400, type: "validation", code: "url_not_allowed", retryable: false, billable: false })
      expect(yield* usageProviderOf(requestIdOf(refused))).toBeNull()
      expect(u.itunes.hits() + u.pages.hits()).toBe(0)
    }))
})

layer(gatewayLayer({ providers: { ...config.providers, readProviders: ["builtin", "beta"] } }), { excludeTestServices: true })(
  "a curated tool's fallbacks in the usage record",
  (it) => {
    /** A read by a new org after `faults` are set on the upstreams, which are reset after it. */
    const readAfter = (faults: (u: Upstreams) => void) =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const { key } = yield* givenOrg({ credits: 100 })
        faults(u)
        const result = yield* callTool("read", { url: `${u.pages.url}/article` }, { key })
        u.resetAll()
        return { u, result }
      })

    it.effect("the first provider fails, the second answers: the record names the second", () =>
      Effect.gen(function* () {
        const { result } = yield* readAfter((u) => {
          u.pages.fault({ status: 503 })
        })
        expectOk(result, 1)
        expect(result.body).toMatchObject({ provider: "beta" })
        expect(yield* usageProviderOf(requestIdOf(result))).toBe("beta")
      }))

    it.effect("every provider fails: the record names the last one tried, whose failure is the answer", () =>
      Effect.gen(function* () {
        const { result } = yield* readAfter((u) => {
          u.pages.fault({ status: 503 })
          u.jina.fault({ status: 500 })
        })
        expectEnvelope(result, { status: 502, type: "provider", code: "provider_unavailable", retryable: true, billable: false })
        expect(yield* usageProviderOf(requestIdOf(result))).toBe("beta")
      }))

    it.effect("a failure the next provider is not tried after (the page's 404): the record names the provider that met it", () =>
      Effect.gen(function* () {
        const { result, u } = yield* readAfter((u) => {
          u.pages.fault({ status: 404 })
        })
        expectEnvelope(result, { status: 502, type: "provider", code: "provider_rejected", retryable: false, billable: false })
        expect(u.jina.hits()).toBe(0)
        expect(yield* usageProviderOf(requestIdOf(result))).toBe("builtin")
      }))
  }
)

layer(gatewayLayer({ providers: { ...config.providers, readProviders: ["beta"] } }), { excludeTestServices: true })("read through a JSON provider", (it) => {
  const t: ToolCase = { tool: "read", input: () => ({ url: "https://example.com/page" }), upstream: (u) => u.jina, provider: "beta" }
  it.effect("answers through beta", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const { key } = yield* givenOrg()
      const result = yield* callTool("read", { url: "https://example.com/page" }, { key })
      expectOk(result, 1)
      expect(result.body).toMatchObject({ provider: "beta", title: "Jina read", content: expect.stringContaining("Content of https://example.com/page") })
      expect(u.jina.requests[0]).toMatchObject({ method: "POST", path: "/", json: { url: "https://example.com/page" } })
    }))
  for (const f of faults) {
    it.effect(`${f.name} → ${f.expected.code}`, () => check(t, f))
  }
})
