/**
 * What the gateway says about itself: `/healthz`, `/readyz` (and its 503 while the database is away),
 * `/metrics` in Prometheus text with counters that move, one JSON log line per request from the built
 * server, spans exported in a tree (in memory, and over OTLP/HTTP to a collector), the per-process key
 * cache that never outlives a revocation, and `serve --workers`.
 */
import * as NodeSdk from "@effect/opentelemetry/NodeSdk"
import { SqlClient } from "@effect/sql"
import { afterAll, expect, it, layer } from "@effect/vitest"
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Deferred, Effect, Fiber, FiberRef, Layer, Option, Redacted, Schema } from "effect"
import { configLayer } from "../src/config.js"
import { TracingLive } from "../src/services/Observability.js"
import * as Child from "node:child_process"
import * as Http from "node:http"
import * as Net from "node:net"
import { expectEnvelope, expectOk } from "./support/assert.js"
import { blockDatabase, relay, TestDatabaseUrl } from "./support/database.js"
import { eventually, post, serve } from "./support/processes.js"
import {
  baseUrl,
  books,
  callTool,
  capturedLogs,
  gatewayLayer,
  gatewayLayerTracedBy,
  givenOrg,
  hangUp,
  request,
  TEST_ENCRYPTION_KEY,
  TestUpstreams
} from "./support/gateway.js"


// ---------------------------------------------------------------------------------------------------------
// Prometheus text exposition format, parsed strictly: every line is a comment, a HELP/TYPE line or a sample.

interface Sample {
  readonly name: string
  readonly labels: Readonly<Record<string, string>>
  readonly value: number
}

const parsePrometheus = (text: string) => {
  const types = new Map<string, string>()
  const samples: Array<Sample> = []
  const name = "[a-zA-Z_:][a-zA-Z0-9_:]*"
  const sampleLine = new RegExp(`^(${name})(?:\\{(.*)\\})? (\\S+)(?: -?\\d+)?$`)
  const labelPair = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(?:,|$)/g
  for (const line of text.split("\n")) {
    if (line === "") continue
    const type = line.match(new RegExp(`^# TYPE (${name}) (counter|gauge|histogram|summary|untyped)$`))
    if (type !== null) {
      types.set(type[1] ?? "", type[2] ?? "")
      continue
    }
    if (line.startsWith("#")) {
      expect(line, "a comment line").toMatch(new RegExp(`^# (HELP|UNIT) ${name} .*$`))
      continue
    }
    const sample = line.match(sampleLine)
    expect(sample, `not a Prometheus sample: ${line}`).not.toBeNull()
    if (sample === null) continue
    const labels: Record<string, string> = {}
    const rawLabels = sample[2] ?? ""
    let consumed = 0
    for (const pair of rawLabels.matchAll(labelPair)) {
      labels[pair[1] ?? ""] = pair[2] ?? ""
      consumed += pair[0].length
    }
    expect(consumed, `malformed labels: ${line}`).toBe(rawLabels.length)
    const raw = sample[3] ?? ""
    const value = raw === "+Inf" ? Infinity : raw === "-Inf" ? -Infinity : Number(raw)
    expect(Number.isNaN(value) && raw !== "NaN", `not a number: ${line}`).toBe(false)
    const family = (sample[1] ?? "").replace(/_(bucket|count|sum)$/, "")
    expect(types.has(sample[1] ?? "") || types.has(family), `no # TYPE for ${sample[1]}`).toBe(true)
    samples.push({ name: sample[1] ?? "", labels, value })
  }
  return { types, samples }
}

const valueOf = (samples: ReadonlyArray<Sample>, name: string, labels: Record<string, string> = {}) =>
  samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0)

const scrape = Effect.gen(function* () {
  const result = yield* request("/metrics", { method: "GET" })
  expect(result.status).toBe(200)
  expect(result.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/)
  return parsePrometheus(result.text)
})

layer(gatewayLayer(), { excludeTestServices: true })("health and metrics", (it) => {
  it.effect("/healthz answers while the process runs; /readyz checks the database and the migrations", () =>
    Effect.gen(function* () {
      const health = yield* request("/healthz", { method: "GET" })
      expect(health.status).toBe(200)
      expect(health.body).toEqual({ status: "ok" })
      const ready = yield* request("/readyz", { method: "GET" })
      expect(ready.status).toBe(200)
      expect(ready.body).toEqual({ status: "ready", checks: { database: "ok", migrations: expect.stringMatching(/^\d+ applied$/) } })
      expect(ready.headers.get("x-request-id")).toMatch(/^req_/)
    }))

  it.effect("/metrics is Prometheus text, and its counters move with calls", () =>
    Effect.gen(function* () {
      const { key } = yield* givenOrg({ credits: 100 })
      const broke = yield* givenOrg({ credits: 0 })
      const before = (yield* scrape).samples

      expectOk(yield* callTool("weather", { q: "Berlin" }, { key }))
      expectOk(yield* callTool("weather", { q: "Paris" }, { key, idempotencyKey: "metrics-1" }))
      expectOk(yield* callTool("weather", { q: "Paris" }, { key, idempotencyKey: "metrics-1" }))
      expect((yield* callTool("weather", { q: "Berlin" }, { key: broke.key })).status).toBe(402)
      expect((yield* callTool("weather", { q: 5 }, { key })).status).toBe(400)

      const { types, samples } = yield* scrape
      const delta = (name: string, labels: Record<string, string> = {}) =>
        valueOf(samples, name, labels) - valueOf(before, name, labels)

      expect(types.get("tool_gateway_tool_calls_total")).toBe("counter")
      expect(types.get("tool_gateway_tool_call_duration_seconds")).toBe("histogram")
      expect(types.get("tool_gateway_provider_duration_seconds")).toBe("histogram")
      expect(delta("tool_gateway_tool_calls_total", { tool: "weather", code: "ok" })).toBe(2)
      expect(delta("tool_gateway_tool_calls_total", { tool: "weather", code: "replayed" })).toBe(1)
      expect(delta("tool_gateway_tool_calls_total", { tool: "weather", code: "insufficient_credits" })).toBe(1)
      expect(delta("tool_gateway_idempotency_replays_total")).toBe(1)
      expect(delta("tool_gateway_credits_charged_total", { tool: "weather" })).toBe(2)
      expect(delta("tool_gateway_tool_call_duration_seconds_count", { tool: "weather" })).toBe(4)
      expect(delta("tool_gateway_provider_duration_seconds_count", { tool: "weather" })).toBe(2)
      expect(delta("tool_gateway_provider_duration_seconds_sum", { tool: "weather" })).toBeGreaterThan(0)
      expect(delta("tool_gateway_http_requests_total", { status: "2xx" })).toBeGreaterThanOrEqual(3)
      expect(delta("tool_gateway_http_requests_total", { status: "4xx" })).toBe(2)
      // buckets are cumulative and end at +Inf = count
      const buckets = samples.filter((s) => s.name === "tool_gateway_tool_call_duration_seconds_bucket" && s.labels["tool"] === "weather")
      expect(buckets.length).toBeGreaterThan(5)
      for (let i = 1; i < buckets.length; i++) expect(buckets[i]?.value ?? 0).toBeGreaterThanOrEqual(buckets[i - 1]?.value ?? 0)
      expect(buckets.at(-1)?.labels["le"]).toBe("+Inf")
      expect(buckets.at(-1)?.value).toBe(valueOf(samples, "tool_gateway_tool_call_duration_seconds_count", { tool: "weather" }))
      // shared state: no call in flight now, and this process's pool
      expect(valueOf(samples, "tool_gateway_holds_outstanding")).toBe(0)
      expect(valueOf(samples, "tool_gateway_db_pool_connections", { state: "total" })).toBeGreaterThan(0)
      // this process's memory, as the OS and V8 see it
      const memory = (kind: string) => valueOf(samples, "tool_gateway_process_memory_bytes", { kind })
      expect(memory("rss")).toBeGreaterThan(10 * 2 ** 20)
      expect(memory("heap_used")).toBeGreaterThan(2 ** 20)
      expect(memory("heap_used")).toBeLessThanOrEqual(memory("heap_total"))
      expect(memory("external")).toBeGreaterThan(0)
    }))

  it.effect("/metrics counts rate-limit rejections", () =>
    Effect.gen(function* () {
      const before = (yield* scrape).samples
      const { key } = yield* givenOrg()
      const results = yield* Effect.forEach(Array.from({ length: 30 }), () => callTool("weather", { q: 5 }, { key }), { concurrency: 30 })
      const limited = results.filter((r) => r.status === 429).length
      const after = (yield* scrape).samples
      expect(valueOf(after, "tool_gateway_rate_limit_rejections_total") - valueOf(before, "tool_gateway_rate_limit_rejections_total")).toBe(limited)
    }))

  it.effect("/readyz is 503 while the database is unreachable, /healthz stays 200, and both recover", () =>
    Effect.gen(function* () {
      yield* blockDatabase(false)
      // (a reading of the database answers every probe for a second: the last one, from before, has run out)
      yield* Effect.sleep("1100 millis")
      const down = yield* request("/readyz", { method: "GET" }).pipe(Effect.ensuring(Effect.void))
      const health = yield* request("/healthz", { method: "GET" })
      yield* blockDatabase(true)
      expect(down.status).toBe(503)
      expect(down.body).toEqual({
        error: { type: "internal", code: "not_ready", message: expect.stringContaining("database unreachable"), retryable: true, billable: false }
      })
      expect(down.text).not.toMatch(/password|postgres:\/\//)
      expect(health.status).toBe(200)
      // readiness is one reading a second, shared: the next one after the database is back says so
      yield* eventually(Effect.map(request("/readyz", { method: "GET" }), (r) => r.status), (status) => status === 200, 3_000)
    }))

  it.effect("probes while a migration holds its table's lock share one reading: they take one pooled connection, and calls go on", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const { key } = yield* givenOrg({ credits: 100 })
      // what a newer build's migrator holds for its whole transaction
      const locked = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const holder = yield* Effect.fork(sql.withTransaction(Effect.gen(function* () {
        yield* sql`LOCK TABLE gateway_migrations IN ACCESS EXCLUSIVE MODE`
        yield* Deferred.succeed(locked, undefined)
        yield* Deferred.await(release)
      })).pipe(Effect.orDie))
      yield* Deferred.await(locked)
      yield* Effect.sleep("1100 millis")
      // thirty probes at once, no key needed: each ran its own statement, which waited on the lock with a pooled
      // connection — the pool's twenty taken, every call failed after its 5 s wait
      const probes = yield* Effect.fork(Effect.all(Array.from({ length: 30 }, () => request("/readyz", { method: "GET" })), { concurrency: "unbounded" }))
      yield* Effect.sleep("300 millis")
      const waiting = yield* sql<{ readonly n: number }>`
        SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%gateway_migrations%'`
      const started = performance.now()
      expectOk(yield* callTool("weather", { q: "Berlin" }, { key }))
      expect(performance.now() - started).toBeLessThan(2_000)
      // probes whose clients give up (a kubelet waits 1 s), a second and more apart: each interrupted its own reading,
      // whose statement went on waiting with its connection, and the next probe started another
      const base = yield* baseUrl
      for (let i = 0; i < 3; i++) {
        yield* Effect.sleep("1100 millis")
        yield* Effect.promise(() => fetch(`${base}/readyz`, { signal: AbortSignal.timeout(200) }).then(() => undefined, () => undefined))
      }
      const [{ n: late } = { n: 0 }] = yield* sql<{ readonly n: number }>`
        SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%gateway_migrations%'`
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holder)
      const answers = yield* Fiber.join(probes)
      // one statement waited on the lock, and every probe got its answer (ready, once the lock was let go)
      expect(waiting[0]?.n).toBe(1)
      expect(late).toBe(1)
      expect(new Set(answers.map((a) => a.text)).size).toBe(1)
    }))

  it.effect("the operations endpoints answer at their own path only (a proxy's rule for /metrics does not see /METRICS)", () =>
    Effect.gen(function* () {
      for (const path of ["/METRICS", "/Metrics", "/metrics/", "//metrics", "/metrics;x", "/READYZ", "/healthz/"]) {
        expectEnvelope(yield* request(path, { method: "GET" }), { status: 404, type: "not_found", code: "not_found", retryable: false, billable: false })
      }
      expect((yield* request("/metrics", { method: "GET" })).status).toBe(200)
      expect((yield* request("/healthz?probe=1", { method: "GET" })).status).toBe(200)
    }))

  it.effect("no request log line carries an API key", () =>
    Effect.gen(function* () {
      const { key } = yield* givenOrg()
      expectOk(yield* callTool("weather", { q: "Berlin" }, { key }))
      const lines = capturedLogs.filter((l) => l.includes(`"message":"request"`))
      expect(lines.length).toBeGreaterThan(0)
      expect(capturedLogs.some((l) => l.includes(key))).toBe(false)
    }))
})

layer(gatewayLayer({ server: { metricsToken: Option.some(Redacted.make("scrape-secret")) } }), { excludeTestServices: true })(
  "a metrics token",
  (it) => {
    it.effect("/metrics needs the bearer token when METRICS_TOKEN is set", () =>
      Effect.gen(function* () {
        expectEnvelope(yield* request("/metrics", { method: "GET" }), {
          status: 401,
          type: "auth",
          code: "invalid_token",
          retryable: false,
          billable: false
        })
        const wrong = yield* request("/metrics", { method: "GET", headers: { authorization: "Bearer nope" } })
        expect(wrong.status).toBe(401)
        // a 401 says how to authenticate (RFC 9110 §15.5.2)
        expect(wrong.headers.get("www-authenticate")).toBe(`Bearer realm="tool-gateway"`)
        // the token and something after it is not the header (it was taken)
        expect((yield* request("/metrics", { method: "GET", headers: { authorization: "Bearer scrape-secret junk" } })).status).toBe(401)
        expect((yield* request("/metrics", { method: "GET", headers: { authorization: "Bearer scrape-secrets" } })).status).toBe(401)
        const right = yield* request("/metrics", { method: "GET", headers: { authorization: "Bearer scrape-secret" } })
        expect(right.status).toBe(200)
        expect(right.text).toContain("tool_gateway_")
      }))
  }
)

// ---------------------------------------------------------------------------------------------------------
// The key cache: a key read from the cache is confirmed by the reservation (or, for any other answer, before
// it is sent), so a revocation made by another process is seen on the very next request.

const revokeElsewhere = (keyId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql`UPDATE api_keys SET revoked_at = now() WHERE id = ${keyId}`).pipe(Effect.orDie)

const invalidKey = { status: 401, type: "auth", code: "invalid_key", retryable: false, billable: false } as const

layer(gatewayLayer(), { excludeTestServices: true })("the key cache", (it) => {
  it.effect("a key revoked by another process is refused on the next call, whatever the call", () =>
    Effect.gen(function* () {
      const a = yield* givenOrg()
      expectOk(yield* callTool("weather", { q: "Berlin" }, { key: a.key }))
      yield* revokeElsewhere(a.keyId)
      expectEnvelope(yield* callTool("weather", { q: "Berlin" }, { key: a.key }), invalidKey)

      // an invalid body, a replay, an unknown tool: never a sign that the key still works
      const b = yield* givenOrg()
      expectOk(yield* callTool("weather", { q: "Berlin" }, { key: b.key, idempotencyKey: "cache-1" }))
      yield* revokeElsewhere(b.keyId)
      expectEnvelope(yield* callTool("weather", { q: 5 }, { key: b.key }), invalidKey)
      expectEnvelope(yield* callTool("weather", { q: "Berlin" }, { key: b.key, idempotencyKey: "cache-1" }), invalidKey)
      expectEnvelope(yield* callTool("nonexistent_tool", {}, { key: b.key }), invalidKey)

      // a broke org's revoked key: invalid_key, not insufficient_credits
      const c = yield* givenOrg({ credits: 0 })
      expect((yield* callTool("weather", { q: "Berlin" }, { key: c.key })).status).toBe(402)
      yield* revokeElsewhere(c.keyId)
      expectEnvelope(yield* callTool("weather", { q: "Berlin" }, { key: c.key }), invalidKey)
    }))

  it.effect("a key whose expiry another process moves earlier is refused on the next call, and not charged", () =>
    Effect.gen(function* () {
      const a = yield* givenOrg({ credits: 10 })
      expectOk(yield* callTool("weather", { q: "Berlin" }, { key: a.key }), 1)
      // another process's PATCH set an expiry a moment ahead, and the moment has passed: this one has the key
      // cached without one
      yield* Effect.orDie(Effect.flatMap(SqlClient.SqlClient, (sql) =>
        sql`UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE id = ${a.keyId}`))
      expectEnvelope(yield* callTool("weather", { q: "Berlin" }, { key: a.key }), invalidKey)
      expectEnvelope(yield* callTool("weather", { q: 5 }, { key: a.key }), invalidKey)
      expect(yield* books(a.orgId)).toMatchObject({ balance: 9, held: 0 })
    }))
})

// ---------------------------------------------------------------------------------------------------------
// Traces: the span tree of one tool call.

interface SpanRecord {
  readonly name: string
  readonly id: string
  readonly parent: string | undefined
  readonly traceId: string
  readonly attributes?: Readonly<Record<string, unknown>>
}

const childrenOf = (spans: ReadonlyArray<SpanRecord>, parent: SpanRecord) =>
  spans.filter((s) => s.parent === parent.id).map((s) => s.name)

const expectToolCallTree = (spans: ReadonlyArray<SpanRecord>) => {
  const root = spans.find((s) => s.name.startsWith("http.server POST") && s.parent === undefined)
  expect(root, `spans: ${spans.map((s) => s.name).join(", ")}`).toBeDefined()
  if (root === undefined) return
  const inTrace = spans.filter((s) => s.traceId === root.traceId)
  const named = (name: string) => {
    const span = inTrace.find((s) => s.name === name)
    expect(span, `no ${name} span in ${inTrace.map((s) => s.name).join(", ")}`).toBeDefined()
    return span ?? root
  }
  expect(childrenOf(inTrace, root)).toEqual(expect.arrayContaining(["Authentication.authenticate", "Gateway.run"]))
  expect(childrenOf(inTrace, named("Authentication.authenticate"))).toContain("KeyStore.verify")
  expect(childrenOf(inTrace, named("Gateway.run"))).toEqual(
    expect.arrayContaining(["Ledger.reserve", "Gateway.provider", "Ledger.settle"])
  )
  expect(childrenOf(inTrace, named("Gateway.provider"))).toContain("ProviderClient.request")
}

const memory = new InMemorySpanExporter()
const InMemoryTracing = NodeSdk.layer(() => ({
  resource: { serviceName: "tool-gateway-test" },
  spanProcessor: new SimpleSpanProcessor(memory)
}))

layer(gatewayLayerTracedBy(InMemoryTracing), { excludeTestServices: true })("traces in memory", (it) => {
  it.effect("one span per request, with auth, reservation, provider call and settlement below it", () =>
    Effect.gen(function* () {
      const { key } = yield* givenOrg()
      memory.reset()
      expectOk(yield* callTool("weather", { q: "Berlin" }, { key }))
      const spans = memory.getFinishedSpans().map((s) => ({
        name: s.name,
        id: s.spanContext().spanId,
        parent: s.parentSpanContext?.spanId,
        traceId: s.spanContext().traceId
      }))
      expectToolCallTree(spans)
    }))

  it.effect("a failed provider call's span reads as its error: the exception's type is the error's tag, its message the error's", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      const { key } = yield* givenOrg()
      memory.reset()
      u.openMeteo.fault({ status: 500 })
      const failed = yield* callTool("weather", { q: "Berlin" }, { key })
      u.resetAll()
      expect(failed.status).toBe(502)
      const provider = memory.getFinishedSpans().find((s) => s.name === "Gateway.provider")
      const exception = provider?.events.find((e) => e.name === "exception")
      expect(exception?.attributes?.["exception.type"]).toBe("ProviderUnavailable")
      expect(String(exception?.attributes?.["exception.message"])).toContain("HTTP 500")
      expect(provider?.status.message).toContain("HTTP 500")
    }))
})

// A collector that keeps what it receives over OTLP/HTTP (JSON).
const collected: Array<SpanRecord> = []
const collector = Http.createServer((req, res) => {
  const parts: Array<Buffer> = []
  req.on("data", (c: Buffer) => parts.push(c))
  req.on("end", () => {
    if (req.url === "/v1/traces") {
      const body = Schema.decodeUnknownSync(OtlpTraces)(JSON.parse(Buffer.concat(parts).toString("utf8")))
      for (const rs of body.resourceSpans) {
        for (const ss of rs.scopeSpans) {
          for (const s of ss.spans) {
            collected.push({
              name: s.name,
              id: s.spanId,
              parent: s.parentSpanId === "" ? undefined : s.parentSpanId,
              traceId: s.traceId,
              attributes: Object.fromEntries(s.attributes.map((a) => [a.key, a.value.stringValue]))
            })
          }
        }
      }
    }
    res.writeHead(200, { "content-type": "application/json" }).end("{}")
  })
})
const OtlpTraces = Schema.Struct({
  resourceSpans: Schema.Array(Schema.Struct({
    scopeSpans: Schema.Array(Schema.Struct({
      spans: Schema.Array(Schema.Struct({
        traceId: Schema.String,
        spanId: Schema.String,
        parentSpanId: Schema.optionalWith(Schema.String, { default: () => "" }),
        name: Schema.String,
        attributes: Schema.optionalWith(
          Schema.Array(Schema.Struct({ key: Schema.String, value: Schema.Struct({ stringValue: Schema.optional(Schema.String) }) })),
          { default: () => [] }
        )
      }))
    }))
  }))
})
await new Promise<void>((done) => collector.listen(0, "127.0.0.1", done))
const collectorAddress = collector.address()
const collectorUrl = `http://127.0.0.1:${typeof collectorAddress === "object" && collectorAddress !== null ? collectorAddress.port : 0}`
afterAll(() => new Promise<void>((done) => collector.close(() => done())))

layer(gatewayLayer({ server: { otlpTracesUrl: Option.some(`${collectorUrl}/v1/traces`) } }), { excludeTestServices: true })("traces over OTLP", (it) => {
  it.effect("OTEL_EXPORTER_OTLP_ENDPOINT exports the same tree to a collector", () =>
    Effect.gen(function* () {
      const { key } = yield* givenOrg()
      const credentials = {
        "proxy-authorization": "Basic cHJveHktdXNlcjpwcm94eS1zZWNyZXQ=",
        "x-firebase-appcheck": "appcheck-token-secret",
        "x-auth-token": "auth-token-secret",
        // what an identity proxy in front adds: signed assertions of the user (they were exported as sent)
        "cf-access-jwt-assertion": "eyJcf-secret",
        "x-goog-iap-jwt-assertion": "eyJiap-secret",
        "x-amzn-oidc-data": "eyJalb-secret",
        "x-ms-client-principal": "principal-secret"
      }
      expectOk(yield* callTool("weather", { q: "Berlin" }, { key, headers: credentials }))
      // a query the caller should not have sent (a key in it): the span's URL is without it, as the log line's path is
      expect((yield* request(`/v1/tools?api_key=${key}&token=query-secret`, { method: "GET" })).status).toBe(200)
      // exported in batches, every second
      for (let i = 0; i < 50 && !collected.some((s) => s.name === "Gateway.run"); i++) yield* Effect.sleep("100 millis")
      yield* Effect.sleep("300 millis")
      expectToolCallTree(collected)
      // the server's span shows the request's headers, but none of its credentials
      const server = collected.find((s) => s.attributes?.["http.request.header.x-firebase-appcheck"] !== undefined)
      expect(server?.attributes).toMatchObject({
        "http.request.header.x-api-key": "<redacted>",
        "http.request.header.proxy-authorization": "<redacted>",
        "http.request.header.x-firebase-appcheck": "<redacted>",
        "http.request.header.x-auth-token": "<redacted>",
        "http.request.header.cf-access-jwt-assertion": "<redacted>",
        "http.request.header.x-goog-iap-jwt-assertion": "<redacted>",
        "http.request.header.x-amzn-oidc-data": "<redacted>",
        "http.request.header.x-ms-client-principal": "<redacted>"
      })
      for (let i = 0; i < 30 && !collected.some((s) => s.attributes?.["url.path"] === "/v1/tools"); i++) yield* Effect.sleep("100 millis")
      const listing = collected.find((s) => s.attributes?.["url.path"] === "/v1/tools")
      expect(listing?.attributes?.["url.full"]).toMatch(/^http:\/\/[^?]+\/v1\/tools$/)
      expect(listing?.attributes?.["url.query"]).toBeUndefined()
      expect(JSON.stringify(collected)).not.toMatch(/-secret|cHJveHkt/)
      expect(JSON.stringify(collected)).not.toContain(key)
    }), 15_000)

  it.effect("a valid W3C traceparent is continued, and one not sampled is not exported; an all-zero one, and B3 ids of any text, are not continued (a collector refuses ids it cannot read, and every span of their batch)", () =>
    Effect.gen(function* () {
      const { key } = yield* givenOrg()
      const probes = {
        valid: { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" },
        zeros: { traceparent: "00-00000000000000000000000000000000-0000000000000000-01" },
        b3: { b3: "not-a-trace-id-1" },
        xb3: { "x-b3-traceid": "abc", "x-b3-spanid": "def" }
      }
      // a caller that did not sample its trace (flags 00): the call is answered, and none of its spans exported (each was)
      const unsampled = "5bf92f3577b34da6a3ce929d0e0e4737"
      expectOk(yield* callTool("weather", { q: "Berlin" }, { key, headers: { traceparent: `00-${unsampled}-00f067aa0ba902b8-00` } }))
      for (const [probe, headers] of Object.entries(probes)) {
        expectOk(yield* callTool("weather", { q: "Berlin" }, { key, headers: { ...headers, "x-probe": probe } }))
      }
      const serverSpan = (probe: string) => collected.find((s) => s.attributes?.["http.request.header.x-probe"] === probe)
      for (let i = 0; i < 50 && Object.keys(probes).some((p) => serverSpan(p) === undefined); i++) yield* Effect.sleep("100 millis")
      // the spans of the first call were due in an export before the others'
      yield* Effect.sleep("1200 millis")
      expect(collected.filter((s) => s.traceId === unsampled)).toEqual([])
      expect(collected.filter((s) => s.traceId === "4bf92f3577b34da6a3ce929d0e0e4736").map((s) => s.name)).toContain("Gateway.run")
      expect(serverSpan("valid")).toMatchObject({ traceId: "4bf92f3577b34da6a3ce929d0e0e4736", parent: "00f067aa0ba902b7" })
      for (const probe of ["zeros", "b3", "xb3"]) {
        const span = serverSpan(probe)
        expect(span?.traceId).toMatch(/^[0-9a-f]{32}$/)
        expect(span?.traceId).not.toBe("00000000000000000000000000000000")
        expect(span?.parent).toBeUndefined()
      }
    }), 15_000)
})

// A collector that wants an API key and takes binary protobuf at a path of its own (OTLP/HTTP as specified:
// https://opentelemetry.io/docs/specs/otlp/#otlphttp — `Content-Type: application/x-protobuf`, the body an
// `ExportTraceServiceRequest`, whose span names are length-delimited UTF-8 strings in it).
const keyed: Array<{ readonly path: string | undefined; readonly apiKey: string | undefined; readonly type: string | undefined; readonly body: Buffer }> = []
const keyedCollector = Http.createServer((req, res) => {
  const parts: Array<Buffer> = []
  req.on("data", (c: Buffer) => parts.push(c))
  req.on("end", () => {
    const apiKey = req.headers["x-api-key"]
    keyed.push({ path: req.url, apiKey: typeof apiKey === "string" ? apiKey : undefined, type: req.headers["content-type"], body: Buffer.concat(parts) })
    // a key the test below uses: the collector is busy (a transient refusal, which the exporter tries again)
    if (apiKey === "busy collector key") res.writeHead(503).end()
    else if (apiKey !== "collector key") res.writeHead(401).end()
    else res.writeHead(200, { "content-type": "application/x-protobuf" }).end()
  })
})
await new Promise<void>((done) => keyedCollector.listen(0, "127.0.0.1", done))
const keyedAddress = keyedCollector.address()
const keyedUrl = `http://127.0.0.1:${typeof keyedAddress === "object" && keyedAddress !== null ? keyedAddress.port : 0}`
afterAll(() => new Promise<void>((done) => keyedCollector.close(() => done())))

/** A gateway exporting protobuf to the keyed collector at `path`, with `apiKey`. */
const keyedGateway = (path: string, apiKey: string) =>
  gatewayLayer({
    server: {
      otlpTracesUrl: Option.some(`${keyedUrl}${path}`),
      otlpHeaders: Redacted.make<Readonly<Record<string, string>>>({ "x-api-key": apiKey }),
      otlpProtocol: "http/protobuf"
    }
  })

layer(keyedGateway("/otlp/traces", "collector key"), { excludeTestServices: true })("traces over OTLP/HTTP protobuf, with headers", (it) => {
  it.effect("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, _HEADERS and _PROTOCOL: protobuf at that URL, with the key", () =>
    Effect.gen(function* () {
      const { key } = yield* givenOrg()
      expectOk(yield* callTool("weather", { q: "Berlin" }, { key }))
      const named = () => keyed.some((r) => r.body.includes("Gateway.run"))
      for (let i = 0; i < 50 && !named(); i++) yield* Effect.sleep("100 millis")
      expect(keyed.length).toBeGreaterThan(0)
      for (const r of keyed) {
        expect(r.path).toBe("/otlp/traces")
        expect(r.apiKey).toBe("collector key")
        expect(r.type).toBe("application/x-protobuf")
      }
      expect(named()).toBe(true)
    }), 15_000)
})

layer(keyedGateway("/otlp/traces?tenant=t1", "busy collector key"), { excludeTestServices: true })("a collector that refuses the exports", (it) => {
  it.effect("is said at WARN, once for the export and its retries, with where the spans went and not the key", () =>
    Effect.gen(function* () {
      const refused = () => keyed.filter((r) => r.apiKey === "busy collector key").length
      const { key } = yield* givenOrg()
      expectOk(yield* callTool("weather", { q: "Berlin" }, { key }))
      // the exporter tries an export 4 times (3 retries), then pauses 60 s
      for (let i = 0; i < 250 && refused() < 4; i++) yield* Effect.sleep("100 millis")
      expect(refused()).toBe(4)
      const warned = capturedLogs.filter((l) => l.includes(`could not export spans to ${keyedUrl}`))
      expect(warned).toHaveLength(1)
      expect(warned[0]).toContain(`could not export spans to ${keyedUrl}/otlp/traces (HTTP 503): they are dropped while the collector does not take them`)
      expect(warned[0]).toContain(`"logLevel":"WARN"`)
      expect(warned[0]).not.toContain("busy collector key")
      expect(warned[0]).not.toContain("tenant")
    }), 40_000)
})

// A port nothing listens on (taken, then let go).
const closedPort = await new Promise<number>((done) => {
  const probe = Net.createServer().listen(0, "127.0.0.1", () => {
    const address = probe.address()
    probe.close(() => done(typeof address === "object" && address !== null ? address.port : 0))
  })
})

layer(gatewayLayer({ server: { otlpTracesUrl: Option.some(`http://127.0.0.1:${closedPort}/v1/traces`) } }), { excludeTestServices: true })(
  "a collector that is down",
  (it) => {
    it.effect("is said at WARN with why: the connection refused", () =>
      Effect.gen(function* () {
        const { key } = yield* givenOrg()
        expectOk(yield* callTool("weather", { q: "Berlin" }, { key }))
        const warned = () => capturedLogs.filter((l) => l.includes(`could not export spans to http://127.0.0.1:${closedPort}/v1/traces`))
        for (let i = 0; i < 250 && warned().length === 0; i++) yield* Effect.sleep("100 millis")
        expect(warned()[0]).toContain("(ECONNREFUSED)")
      }), 40_000)
  }
)

// A collector that takes each export and never answers it; it notes when the exporter gives a request up.
const hanging = { received: 0, givenUp: 0 }
const hangingCollector = Http.createServer((req) => {
  hanging.received += 1
  req.resume()
  req.socket.on("close", () => { hanging.givenUp += 1 })
})
await new Promise<void>((done) => hangingCollector.listen(0, "127.0.0.1", done))
const hangingAddress = hangingCollector.address()
const hangingUrl = `http://127.0.0.1:${typeof hangingAddress === "object" && hangingAddress !== null ? hangingAddress.port : 0}`
afterAll(() => new Promise<void>((done) => { hangingCollector.closeAllConnections(); hangingCollector.close(() => done()) }))

layer(gatewayLayer({ server: { otlpTracesUrl: Option.some(`${hangingUrl}/v1/traces`), otlpTimeoutMs: 300 } }), { excludeTestServices: true })("a collector that does not answer", (it) => {
  it.effect("has each export given up after OTEL_EXPORTER_OTLP_TIMEOUT, not held with its spans and socket", () =>
    Effect.gen(function* () {
      const { key } = yield* givenOrg()
      expectOk(yield* callTool("weather", { q: "Berlin" }, { key }))
      for (let i = 0; i < 60 && hanging.givenUp === 0; i++) yield* Effect.sleep("100 millis")
      expect(hanging.received).toBeGreaterThan(0)
      // undici's own limit is an hour: without a timeout the export's socket stays open
      expect(hanging.givenUp).toBeGreaterThan(0)
    }), 15_000)
})

// What the server and the services are built on: without an endpoint the tracer is off, and so is the HTTP
// server's per-request span (which would otherwise parse, copy and provide per request for a no-op span).
it.effect("without an OTLP endpoint the tracer is off, the HTTP server's span included; with one, both are on", () =>
  Effect.gen(function* () {
    const request = HttpServerRequest.fromWeb(new Request("http://localhost/v1/weather", { method: "POST" }))
    const tracing = Effect.all({
      tracer: FiberRef.get(FiberRef.currentTracerEnabled),
      serverSpan: Effect.map(FiberRef.get(HttpMiddleware.currentTracerDisabledWhen), (disabled) => !disabled(request))
    })
    // each in a program of its own, as a process builds its server: a layer's FiberRefs stay with its fiber
    const builtOn = (config: ReturnType<typeof configLayer>) =>
      Effect.promise(() => Effect.runPromise(tracing.pipe(Effect.provide(TracingLive.pipe(Layer.provide(config))))))
    expect(yield* builtOn(configLayer())).toEqual({ tracer: false, serverSpan: false })
    expect(yield* builtOn(configLayer({ server: { otlpTracesUrl: Option.some(`${collectorUrl}/v1/traces`) } }))).toEqual({ tracer: true, serverSpan: true })
  }))

// ---------------------------------------------------------------------------------------------------------
// The built server: JSON log lines on stdout, and `serve --workers 2`.

const LogLine = Schema.Struct({
  message: Schema.String,
  logLevel: Schema.String,
  timestamp: Schema.String,
  annotations: Schema.Record({ key: Schema.String, value: Schema.Unknown })
})

layer(gatewayLayer(), { excludeTestServices: true })("the built server", (it) => {
  const envFor = Effect.gen(function* () {
    const { url } = yield* TestDatabaseUrl
    const u = yield* TestUpstreams
    return {
      DATABASE_URL: url,
      GATEWAY_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
      WEATHER_BASE_URL: u.openMeteo.url,
      GEOCODING_BASE_URL: u.openMeteo.url,
      GATEWAY_BOOTSTRAP: "false"
    }
  })

  it.effect("a new process's /metrics shows its unlabelled counters at 0, before anything has counted", () =>
    Effect.gen(function* () {
      const { base } = yield* serve([], { ...(yield* envFor), LOG_LEVEL: "warning" })
      const text = yield* Effect.promise(() => fetch(`${base}/metrics`).then((r) => r.text()))
      for (const name of ["idempotency_replays", "rate_limit_rejections", "rate_limit_store_failures", "settlements_lost"]) {
        expect(text).toMatch(new RegExp(`^tool_gateway_${name}_total(\\{[^}]*\\})? 0$`, "m"))
      }
      expect(text).toMatch(/^tool_gateway_lease_renewals_total(\{[^}]*\})? \d+$/m)
    }).pipe(Effect.scoped))

  it.effect("one JSON log line per request, with its facts, at a level that follows the outcome", () =>
    Effect.gen(function* () {
      const env = yield* envFor
      const { base, output } = yield* serve([], { ...env, LOG_FORMAT: "json", LOG_LEVEL: "debug" })
      const rich = yield* givenOrg({ credits: 10 })
      const broke = yield* givenOrg({ credits: 0 })
      const ok = yield* post(base, "/v1/weather", rich.key, { q: "Berlin" })
      const invalid = yield* post(base, "/v1/weather", rich.key, { q: 5 })
      const unknown = yield* post(base, "/v1/weather", "tg_doesnotexistdoesnotexistdoesnot", { q: "Berlin" })
      const refused = yield* post(base, "/v1/weather", broke.key, { q: "Berlin" })
      expect([ok.status, invalid.status, unknown.status, refused.status]).toEqual([200, 400, 401, 402])
      // what probes, scrapers and browsers ask all day; a browser's favicon request is answered, without an icon
      const routine = yield* Effect.forEach(["/healthz", "/readyz", "/metrics", "/favicon.ico"], (path) =>
        Effect.promise(() =>
          fetch(`${base}${path}`).then(async (r) => ({ path, status: r.status, requestId: r.headers.get("x-request-id"), text: await r.text() }))
        ))
      expect(routine.map((r) => [r.path, r.status])).toEqual([["/healthz", 200], ["/readyz", 200], ["/metrics", 200], ["/favicon.ico", 204]])
      expect(routine[3]?.text).toBe("")
      yield* Effect.sleep("200 millis")

      const lines = output().split("\n").filter((l) => l.trim() !== "")
      const parsed = lines.map((l) => Schema.decodeUnknownSync(Schema.parseJson(LogLine))(l))
      const byRequest = (id: string | null) => parsed.find((l) => l.message === "request" && l.annotations["request_id"] === id)

      const okLine = byRequest(ok.requestId)
      expect(okLine?.logLevel).toBe("INFO")
      expect(okLine?.annotations).toEqual({
        request_id: ok.requestId,
        method: "POST",
        path: "/v1/weather",
        status: 200,
        code: "ok",
        org_id: rich.orgId,
        key_id: rich.keyId,
        tool: "weather",
        credits: 1,
        provider: "open-meteo",
        latency_ms: expect.any(Number),
        provider_latency_ms: expect.any(Number),
        client_closed: false
      })
      expect(Number(okLine?.annotations["latency_ms"])).toBeGreaterThanOrEqual(Number(okLine?.annotations["provider_latency_ms"]))
      expect(byRequest(invalid.requestId)).toMatchObject({ logLevel: "WARN", annotations: { status: 400, code: "invalid_request", key_id: rich.keyId } })
      expect(byRequest(unknown.requestId)).toMatchObject({ logLevel: "WARN", annotations: { status: 401, code: "invalid_key", key_id: null } })
      expect(byRequest(refused.requestId)).toMatchObject({
        logLevel: "WARN",
        annotations: { status: 402, code: "insufficient_credits", org_id: broke.orgId, credits: 0, provider: null }
      })
      // logged at DEBUG: below the usual INFO, they do not drown the calls
      for (const r of routine) expect(byRequest(r.requestId), r.path).toMatchObject({ logLevel: "DEBUG", annotations: { path: r.path } })
      // never a secret
      for (const secret of [rich.key, broke.key, "tg_doesnotexistdoesnotexistdoesnot"]) expect(output()).not.toContain(secret)
    }).pipe(Effect.scoped), 60_000)

  // the bundle loads the exporter's HTTP client (undici) when an endpoint is set: bundle.mjs keeps it out of the
  // chunks a gateway loads at start, and this is the check that the chunk it is in still works
  it.effect("the built server exports its traces over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set", () =>
    Effect.gen(function* () {
      const env = yield* envFor
      const before = collected.length
      const served = yield* serve([], { ...env, LOG_LEVEL: "warning", OTEL_EXPORTER_OTLP_ENDPOINT: collectorUrl })
      const { key } = yield* givenOrg({ credits: 10 })
      expect((yield* post(served.base, "/v1/weather", key, { q: "Berlin" })).status).toBe(200)
      const exported = () => collected.slice(before).some((s) => s.name === "Gateway.run")
      for (let i = 0; i < 50 && !exported(); i++) yield* Effect.sleep("100 millis")
      expect(exported()).toBe(true)
    }).pipe(Effect.scoped), 60_000)

  it.effect("LOG_LEVEL=warning drops the INFO lines, LOG_FORMAT=pretty is for people", () =>
    Effect.gen(function* () {
      const env = yield* envFor
      const { key } = yield* givenOrg({ credits: 10 })
      const quiet = yield* serve([], { ...env, LOG_FORMAT: "json", LOG_LEVEL: "warning" })
      expect((yield* post(quiet.base, "/v1/weather", key, { q: "Berlin" })).status).toBe(200)
      expect((yield* post(quiet.base, "/v1/weather", key, { q: 5 })).status).toBe(400)
      yield* Effect.sleep("200 millis")
      const requests = quiet.output().split("\n").filter((l) => l.includes(`"message":"request"`))
      expect(requests.length).toBe(1)
      expect(requests[0]).toContain(`"logLevel":"WARN"`)

      const pretty = yield* serve([], { ...env, LOG_FORMAT: "pretty" })
      expect((yield* post(pretty.base, "/v1/weather", key, { q: "Berlin" })).status).toBe(200)
      yield* Effect.sleep("200 millis")
      expect(pretty.output()).toMatch(/request/)
      expect(pretty.output()).not.toContain(`"logLevel"`)
    }).pipe(Effect.scoped), 60_000)

  it.effect("serve --workers 2: a worker that dies while the database is away is started again until it starts; the others serve on", () =>
    Effect.gen(function* () {
      const env = yield* envFor
      const { key } = yield* givenOrg({ credits: 100 })
      const lossy = yield* relay(new URL(env.DATABASE_URL))
      const served = yield* serve(["--workers", "2"], { ...env, DATABASE_URL: lossy.url, LOG_LEVEL: "warning" })
      const workersOf = () =>
        Effect.promise(() =>
          new Promise<Array<string>>((done) =>
            Child.execFile("pgrep", ["-P", String(served.child.pid)], (_e, out) => done(out.split("\n").filter((l) => l !== "")))
          ))
      const [first] = yield* workersOf()
      // the database refuses connections, and a worker dies: its replacement cannot start (status 2)
      lossy.mode = "down"
      yield* Effect.sync(() => process.kill(Number(first), "SIGKILL"))
      // its replacement, a second later, fails to start (how long that takes depends on the machine's load); before
      // the fix the primary then stopped everything, exit 2
      const failedStart = () => served.output().includes("could not start")
      for (let i = 0; i < 200 && !failedStart() && served.child.exitCode === null; i++) yield* Effect.sleep("100 millis")
      yield* Effect.sleep("300 millis")
      expect(served.child.exitCode).toBeNull()
      expect(served.output()).toContain("could not start; starting another in")
      // the database is back: a worker starts, and calls are served
      lossy.mode = "up"
      let status = 0
      for (let i = 0; i < 60 && status !== 200; i++) {
        yield* Effect.sleep("250 millis")
        status = (yield* post(served.base, "/v1/weather", key, { q: "Berlin" })).status
      }
      expect(status).toBe(200)
      let workers = yield* workersOf()
      for (let i = 0; i < 60 && workers.length < 2; i++) {
        yield* Effect.sleep("250 millis")
        workers = yield* workersOf()
      }
      expect(workers).toHaveLength(2)
      expect(served.child.exitCode).toBeNull()
    }).pipe(Effect.scoped), 60_000)

  it.effect("serve --workers 2: /metrics answers for every worker, whichever takes the scrape, each sample labelled with it", () =>
    Effect.gen(function* () {
      const env = yield* envFor
      const { key } = yield* givenOrg({ credits: 100 })
      const served = yield* serve(["--workers", "2"], { ...env, LOG_LEVEL: "info" })
      /** A GET on a connection of its own: the primary hands new connections to the workers in turn. */
      const fresh = (path: string, body?: unknown) =>
        Effect.promise(() =>
          new Promise<{ readonly status: number; readonly text: string }>((done, fail) => {
            const request = Http.request(`${served.base}${path}`, {
              agent: false,
              method: body === undefined ? "GET" : "POST",
              headers: body === undefined ? {} : { "content-type": "application/json", "x-api-key": key }
            }, (response) => {
              let text = ""
              response.on("data", (d: Buffer) => (text += d.toString()))
              response.on("end", () => done({ status: response.statusCode ?? 0, text }))
            })
            request.on("error", fail)
            request.end(body === undefined ? undefined : JSON.stringify(body))
          }))
      for (let i = 0; i < 6; i++) expect((yield* fresh("/v1/weather", { q: "Berlin" })).status).toBe(200)
      // the first scrape loads each worker's exporter
      expect((yield* fresh("/metrics")).status).toBe(200)
      for (let scrape = 0; scrape < 4; scrape++) {
        const { status, text } = yield* fresh("/metrics")
        expect(status).toBe(200)
        const samples = text.split("\n").filter((l) => l.startsWith("tool_gateway_tool_calls_total{") && l.includes(`tool="weather"`))
        // both workers, whichever answered the scrape, and the calls of both
        const memory = text.split("\n").filter((l) => l.startsWith("tool_gateway_process_memory_bytes{") && l.includes(`kind="rss"`))
        expect(new Set(memory.map((l) => /worker="(\d+)"/.exec(l)?.[1]))).toHaveProperty("size", 2)
        expect(samples.reduce((sum, l) => sum + Number(l.split(" ").at(-1)), 0)).toBe(6)
        // each family once, its samples together
        expect(text.split("\n").filter((l) => l.startsWith("# TYPE tool_gateway_tool_calls_total ")).length).toBe(1)
        // read from the database: once, unlabelled
        const holds = text.split("\n").filter((l) => l.startsWith("tool_gateway_holds_outstanding"))
        expect(holds).toHaveLength(1)
        expect(holds[0]).not.toContain("worker=")
      }
      // scrapes at once: each answered whole, and the primary warns of no listener leak (one listener for them all)
      const many = yield* Effect.all(Array.from({ length: 12 }, () => fresh("/metrics")), { concurrency: "unbounded" })
      for (const scrape of many) expect(scrape.text).toContain(`tool_gateway_process_memory_bytes{worker=`)
      // the primary's lines are log lines as the workers' are: one JSON object each
      const lines = served.output().split("\n").filter((l) => l !== "")
      expect(lines.filter((l) => Option.isNone(Schema.decodeUnknownOption(Schema.parseJson())(l)))).toEqual([])
      expect(served.output()).toContain(`"message":"Started 2 workers on ${served.base}"`)
    }).pipe(Effect.scoped), 60_000)

  it.effect("serve --workers 2: two processes share the port and the database, and stop together", () =>
    Effect.gen(function* () {
      const env = yield* envFor
      const { key, orgId } = yield* givenOrg({ credits: 100 })
      const served = yield* serve(["--workers", "2"], { ...env, LOG_LEVEL: "warning" })
      const workers = yield* Effect.promise(() =>
        new Promise<Array<string>>((done) =>
          Child.execFile("pgrep", ["-P", String(served.child.pid)], (_e, out) => done(out.split("\n").filter((l) => l !== "")))
        )
      )
      expect(workers.length).toBe(2)
      const results = yield* Effect.forEach(Array.from({ length: 20 }), () => post(served.base, "/v1/weather", key, { q: "Berlin" }), {
        concurrency: 10
      })
      expect(results.map((r) => r.status)).toEqual(Array.from({ length: 20 }, () => 200))
      const balance = yield* Effect.flatMap(SqlClient.SqlClient, (sql) =>
        sql<{ readonly balance: number }>`SELECT balance::int AS balance FROM orgs WHERE id = ${orgId}`
      ).pipe(Effect.orDie)
      expect(balance[0]?.balance).toBe(80)
      const code = yield* Effect.promise(() =>
        new Promise<number | null>((done) => {
          served.child.once("exit", (c) => done(c))
          served.child.kill("SIGTERM")
        })
      )
      expect(code).toBe(0)
      for (const pid of workers) {
        const alive = yield* Effect.sync(() => {
          try {
            process.kill(Number(pid), 0)
            return true
          } catch {
            return false
          }
        })
        expect(alive).toBe(false)
      }
    }).pipe(Effect.scoped), 60_000)
})

/** The request log line of `requestId`, from the test gateway's captured logs. */
const RequestLine = Schema.parseJson(Schema.Struct({
  message: Schema.String,
  logLevel: Schema.String,
  annotations: Schema.Struct({
    request_id: Schema.String,
    status: Schema.Number,
    code: Schema.String,
    credits: Schema.Number,
    client_closed: Schema.Boolean
  })
}))
const requestLines = () =>
  capturedLogs.flatMap((line) => {
    const parsed = Schema.decodeUnknownOption(RequestLine)(line)
    return parsed._tag === "Some" && parsed.value.message === "request" ? [parsed.value] : []
  })

layer(gatewayLayer({ server: { headersTimeoutMs: 500, requestTimeoutMs: 1_000 } }), { excludeTestServices: true })("a request whose client is gone", (it) => {
  it.effect("a client that hangs up mid-call: charged, with its usage record, and logged as what it was (200 ok), not a 500", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      u.itunes.fault({ delayMs: 400, times: 1, status: 200, body: { resultCount: 0, results: [] } })
      const { key, orgId } = yield* givenOrg({ credits: 10 })
      yield* hangUp("mobile_app_search", { query: "gone" }, { "x-api-key": key }, 100)
      yield* Effect.sleep("800 millis")
      const sql = yield* SqlClient.SqlClient
      const usage = yield* sql<{ readonly code: string; readonly credits: number; readonly request_id: string }>`
        SELECT code, credits, request_id FROM usage WHERE org_id = ${orgId}`.pipe(Effect.orDie)
      expect(usage).toHaveLength(1)
      expect(usage[0]).toMatchObject({ code: "ok", credits: 1 })
      const line = requestLines().find((l) => l.annotations.request_id === usage[0]?.request_id)
      expect(line?.annotations).toMatchObject({ status: 200, code: "ok", credits: 1, client_closed: true })
      expect(line?.logLevel).toBe("INFO")
      // and the books agree
      const balance = yield* sql<{ readonly balance: number }>`SELECT balance FROM orgs WHERE id = ${orgId}`.pipe(Effect.orDie)
      expect(balance[0]?.balance).toBe(9)
    }))

  it.effect("a client that ends its side in the middle of its body: it reads the 400, and the log line says the client closed", () =>
    Effect.gen(function* () {
      const { key } = yield* givenOrg()
      const base = new URL(yield* baseUrl)
      const before = requestLines().length
      const answer = yield* Effect.async<string>((resume) => {
        const socket = Net.connect(Number(base.port), base.hostname, () => {
          socket.write(`POST /v1/weather HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-API-Key: ${key}\r\nContent-Length: 100\r\n\r\n{"q":`)
          setTimeout(() => socket.end(), 100)
        })
        let text = ""
        socket.on("data", (d: Buffer) => (text += d.toString()))
        socket.on("close", () => resume(Effect.succeed(text)))
      })
      expect(answer).toMatch(/^HTTP\/1\.1 400/)
      expect(answer).toContain(`"code":"invalid_request"`)
      let lines = requestLines().slice(before)
      for (let tries = 0; lines.length === 0 && tries < 200; tries++) {
        yield* Effect.sleep("50 millis")
        lines = requestLines().slice(before)
      }
      expect(lines.map((l) => [l.annotations.status, l.annotations.code, l.annotations.client_closed])).toEqual([
        [400, "invalid_request", true]
      ])
    }))

  it.effect("a body that never comes: the client gets 408 request_timeout, and the log line says so", () =>
    Effect.gen(function* () {
      const { key } = yield* givenOrg()
      const base = new URL(yield* baseUrl)
      const before = requestLines().length
      const answer = yield* Effect.async<string>((resume) => {
        const socket = Net.connect(Number(base.port), base.hostname, () => {
          socket.write(`POST /v1/weather HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-API-Key: ${key}\r\nContent-Length: 100\r\n\r\n{"q":`)
        })
        let text = ""
        socket.on("data", (d: Buffer) => (text += d.toString()))
        socket.on("close", () => resume(Effect.succeed(text)))
      })
      expect(answer).toMatch(/^HTTP\/1\.1 408/)
      expect(answer).toContain(`"code":"request_timeout"`)
      yield* Effect.sleep("100 millis")
      const lines = requestLines().slice(before)
      expect(lines.map((l) => [l.annotations.status, l.annotations.code])).toContainEqual([408, "request_timeout"])
      expect(lines.some((l) => l.annotations.status === 500)).toBe(false)
      // the answer's request id is the log line's
      const id = /x-request-id: (\S+)/i.exec(answer)?.[1]
      expect(lines.find((l) => l.annotations.status === 408)?.annotations.request_id).toBe(id)
    }))
})
