/**
 * Idempotency-Key: replays, reuse with other input, concurrent same-key requests, a request whose process
 * died, retries after non-billable failures, per-org scope, and expiry (TestClock).
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Metric, Option, Redacted, Schema, TestClock } from "effect"
import * as Net from "node:net"
import { IdempotencyKeyReused } from "../src/domain/errors.js"
import { Authentication } from "../src/services/Authentication.js"
import { Betas } from "../src/services/Betas.js"
import { Connections } from "../src/services/Connections.js"
import { Gateway } from "../src/services/Gateway.js"
import { KeyStore } from "../src/services/KeyStore.js"
import { fingerprint, Idempotency } from "../src/services/Idempotency.js"
import { Leases } from "../src/services/Leases.js"
import { Ledger } from "../src/services/Ledger.js"
import { leaseRenewals, ledgerBatchSize } from "../src/services/Telemetry.js"
import { toDate } from "../src/services/time.js"
import { expectEnvelope, expectOk } from "./support/assert.js"
import { books, callTool, gatewayLayer, givenOrg, hangUp, servicesLayer, TestUpstreams } from "./support/gateway.js"
import { CREDENTIALS, EPSILON_TOKEN } from "./upstreams/accounts.js"

/**
 * `effect` while another connection holds the lock on one Idempotency-Key record, raced against 3 s of real
 * time (under TestClock an Effect timeout would never fire): what it answered, or "blocked".
 */
const whileRecordLocked = <A, E, R>(orgId: string, key: string, effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const locked = yield* Deferred.make<void>()
    const release = yield* Deferred.make<void>()
    const holder = yield* sql.withTransaction(Effect.gen(function* () {
      yield* sql`SELECT 1 FROM idempotency WHERE org_id = ${orgId} AND key = ${key} FOR UPDATE`
      yield* Deferred.succeed(locked, undefined)
      yield* Deferred.await(release)
    })).pipe(Effect.orDie, Effect.fork)
    yield* Deferred.await(locked)
    const blocked = Effect.promise(() => new Promise<"blocked">((resolve) => setTimeout(() => resolve("blocked"), 3000)))
    const answer = yield* Effect.raceFirst(effect, blocked)
    yield* Deferred.succeed(release, undefined)
    yield* Fiber.join(holder)
    return answer
  })

layer(gatewayLayer(), { excludeTestServices: true })("Idempotency-Key over HTTP", (it) => {
  it.effect("a replay returns the same answer, marked, without a second provider call or charge", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const { key, orgId } = yield* givenOrg({ credits: 10 })
      const first = yield* callTool("weather", { q: "Berlin" }, { key, idempotencyKey: "replay-1" })
      expectOk(first, 1)
      expect(first.headers.get("idempotent-replayed")).toBeNull()
      const again = yield* callTool("weather", { q: "Berlin" }, { key, idempotencyKey: "replay-1" })
      expectOk(again, 0)
      expect(again.headers.get("idempotent-replayed")).toBe("true")
      expect(again.text).toBe(first.text)
      expect(again.headers.get("x-request-id")).not.toBe(first.headers.get("x-request-id"))
      expect(u.openMeteo.hits("/v1/forecast")).toBe(1)
      expect(yield* books(orgId)).toMatchObject({ balance: 9, held: 0 })
    }))

  it.effect("key order in the input does not matter", () =>
    Effect.gen(function* () {
      const { key } = yield* givenOrg()
      yield* callTool("mobile_app_search", { query: "notes", limit: 2, country: "us" }, { key, idempotencyKey: "order-1" })
      const again = yield* callTool("mobile_app_search", { country: "us", limit: 2, query: "notes" }, { key, idempotencyKey: "order-1" })
      expect(again.headers.get("idempotent-replayed")).toBe("true")
    }))

  it.effect("the same key with another input or another tool is idempotency_key_reused", () =>
    Effect.gen(function* () {
      const { key } = yield* givenOrg()
      expectOk(yield* callTool("weather", { q: "Berlin" }, { key, idempotencyKey: "reuse-2" }))
      const reused = { status: 400, type: "validation", code: "idempotency_key_reused", retryable: false, billable: false } as const
      expectEnvelope(yield* callTool("weather", { q: "Paris" }, { key, idempotencyKey: "reuse-2" }), reused)
      expectEnvelope(yield* callTool("mobile_app_search", { query: "Berlin" }, { key, idempotencyKey: "reuse-2" }), reused)
    }))

  it.effect("20 parallel requests with one key: one provider call; the others wait or replay", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      u.itunes.fault({ delayMs: 300, times: 1, status: 200, body: { resultCount: 0, results: [] } })
      const { key, orgId } = yield* givenOrg({ credits: 10 })
      const results = yield* Effect.forEach(
        Array.from({ length: 20 }, (_, i) => i),
        () => callTool("mobile_app_search", { query: "parallel" }, { key, idempotencyKey: "parallel-1" }),
        { concurrency: 20 }
      )
      expect(u.itunes.hits()).toBe(1)
      const fresh = results.filter((r) => r.status === 200 && r.headers.get("idempotent-replayed") === null)
      const replayed = results.filter((r) => r.status === 200 && r.headers.get("idempotent-replayed") === "true")
      const waiting = results.filter((r) => r.status === 429)
      expect(fresh).toHaveLength(1)
      expect(replayed.length + waiting.length).toBe(19)
      for (const r of waiting) {
        expectEnvelope(r, { status: 429, type: "rate_limited", code: "request_in_progress", retryable: true, billable: false })
      }
      expect(yield* books(orgId)).toMatchObject({ balance: 9, held: 0 })
      u.resetAll()
    }))

  it.effect("a request whose process died: idempotency_replay_unavailable, and its hold is voided", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const ledger = yield* Ledger
      const { key, keyId, orgId } = yield* givenOrg({ credits: 10 })
      const past = Date.parse("2020-01-01T00:00:00Z")
      // What a crash leaves behind: a claimed key and a pending hold, both past their lease.
      yield* ledger.reserve({ orgId, keyId, tool: "weather", requestId: "req_crashed", amount: 1, leaseMs: 1 })
      yield* sql`UPDATE holds SET lease_until = ${toDate(past)} WHERE request_id = 'req_crashed'`
      yield* sql`
        INSERT INTO idempotency (org_id, key, fingerprint, status, request_id, lease_until, expires_at, created_at)
        VALUES (${orgId}, 'crash-2', ${fingerprint("weather", { q: "Berlin" })}, 'running', 'req_crashed',
                ${toDate(past)}, ${toDate(Date.parse("2999-01-01"))}, ${toDate(past)})`
      expect(yield* books(orgId)).toMatchObject({ held: 1, pendingHolds: 1 })
      const result = yield* callTool("weather", { q: "Berlin" }, { key, idempotencyKey: "crash-2" })
      expectEnvelope(result, { status: 400, type: "validation", code: "idempotency_replay_unavailable", retryable: false, billable: false })
      expect(yield* books(orgId)).toMatchObject({ balance: 10, held: 0, pendingHolds: 0, holdsByStatus: { voided: 1 } })
      // A new key works.
      expectOk(yield* callTool("weather", { q: "Berlin" }, { key, idempotencyKey: "crash-2-new" }))
    }))

  it.effect("after a non-billable provider failure the same key runs again", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      u.itunes.fault({ status: 503 })
      const { key, orgId } = yield* givenOrg({ credits: 10 })
      const failed = yield* callTool("mobile_app_search", { query: "retry" }, { key, idempotencyKey: "retry-1" })
      expectEnvelope(failed, { status: 502, type: "provider", code: "provider_unavailable", retryable: true, billable: false })
      u.itunes.fault()
      const hitsBefore = u.itunes.hits()
      const retried = yield* callTool("mobile_app_search", { query: "retry" }, { key, idempotencyKey: "retry-1" })
      expectOk(retried, 1)
      expect(retried.headers.get("idempotent-replayed")).toBeNull()
      expect(u.itunes.hits()).toBe(hitsBefore + 1)
      expect(yield* books(orgId)).toMatchObject({ balance: 9, held: 0 })
    }))

  it.effect("a normalization failure is billable, so it is kept and replayed", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      u.itunes.fault({ wrongShape: true, times: 1 })
      const { key, orgId } = yield* givenOrg({ credits: 10 })
      const first = yield* callTool("mobile_app_search", { query: "shape" }, { key, idempotencyKey: "norm-1" })
      expectEnvelope(first, { status: 502, type: "normalization", code: "normalization_failed", retryable: false, billable: true })
      // billed like a success, and says so like one; its replay charges nothing
      expect(first.headers.get("x-credits-charged")).toBe("1")
      const again = yield* callTool("mobile_app_search", { query: "shape" }, { key, idempotencyKey: "norm-1" })
      expect(again.status).toBe(502)
      expect(again.text).toBe(first.text)
      expect(again.headers.get("idempotent-replayed")).toBe("true")
      expect(again.headers.get("x-credits-charged")).toBe("0")
      expect(u.itunes.hits()).toBe(1)
      expect(yield* books(orgId)).toMatchObject({ balance: 9, held: 0, holdsByStatus: { settled: 1 } })
    }))

  it.effect("a client that hangs up does not abandon its call: it is charged once and kept for replay", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      u.itunes.fault({ delayMs: 400, times: 1, status: 200, body: { resultCount: 0, results: [] } })
      const { key, orgId } = yield* givenOrg({ credits: 10 })
      yield* hangUp("mobile_app_search", { query: "hang up" }, { "x-api-key": key, "idempotency-key": "hangup-1" }, 100)
      yield* Effect.sleep("800 millis")
      expect(yield* books(orgId)).toMatchObject({ balance: 9, held: 0, holdsByStatus: { settled: 1 } })
      const replay = yield* callTool("mobile_app_search", { query: "hang up" }, { key, idempotencyKey: "hangup-1" })
      expectOk(replay, 0)
      expect(replay.headers.get("idempotent-replayed")).toBe("true")
      expect(replay.body).toEqual({ provider: "itunes", query: "hang up", country: "us", results: [] })
      expect(u.itunes.hits()).toBe(1)
    }))

  it.effect("keys are scoped to the org", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const a = yield* givenOrg()
      const b = yield* givenOrg()
      expectOk(yield* callTool("weather", { q: "Berlin" }, { key: a.key, idempotencyKey: "shared" }))
      const other = yield* callTool("weather", { q: "Paris" }, { key: b.key, idempotencyKey: "shared" })
      expectOk(other, 1)
      expect(other.headers.get("idempotent-replayed")).toBeNull()
    }))
})

layer(gatewayLayer({ providers: { ssrfAllow: ["127.0.0.1"] } }), { excludeTestServices: true })("a replay passes every check a fresh call passes", (it) => {
  it.effect("a key limited to other tools, or an org whose beta was turned off, gets no stored answer", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const { key, orgId } = yield* givenOrg({ credits: 10 })
      const connections = yield* Connections
      yield* Effect.orDie(connections.connect(orgId, "epsilon", { base_url: u.rest.url, token: EPSILON_TOKEN }, null))
      const call = { method: "POST", path: "/items", body: { secret: "payroll" } }
      const first = yield* callTool("epsilon_request", call, { key, idempotencyKey: "shared-write" })
      expectOk(first, 1)

      // another key of the same org, limited to xi_movie, sends the same request and Idempotency-Key
      const keys = yield* KeyStore
      const limited = yield* Effect.orDie(keys.create(orgId, { name: "movies only", allowedTools: ["xi_movie"] }))
      const refused = yield* callTool("epsilon_request", call, { key: Redacted.value(limited.key), idempotencyKey: "shared-write" })
      expectEnvelope(refused, { status: 401, type: "auth", code: "tool_not_allowed", retryable: false, billable: false })
      expect(refused.text).not.toContain("payroll")

      // a beta tool's stored answer, after the org turned the beta off
      const betas = yield* Betas
      yield* Effect.orDie(connections.connect(orgId, "iota", CREDENTIALS.iota, null))
      yield* Effect.orDie(betas.enable(orgId, "iota_delete_service"))
      expectOk(yield* callTool("iota_delete_service", { service_id: "srv-1" }, { key, idempotencyKey: "beta-write" }), 1)
      yield* betas.disable(orgId, "iota_delete_service")
      const off = yield* callTool("iota_delete_service", { service_id: "srv-1" }, { key, idempotencyKey: "beta-write" })
      expectEnvelope(off, { status: 401, type: "auth", code: "beta_unavailable", retryable: false, billable: false })

      // a revoked key gets invalid_key, not the answer
      yield* Effect.orDie(keys.revoke(limited.id))
      const revoked = yield* callTool("epsilon_request", call, { key: Redacted.value(limited.key), idempotencyKey: "shared-write" })
      expectEnvelope(revoked, { status: 401, type: "auth", code: "invalid_key", retryable: false, billable: false })
      // the key with the right to it still gets its replay, and nothing was called twice
      const replay = yield* callTool("epsilon_request", call, { key, idempotencyKey: "shared-write" })
      expectOk(replay, 0)
      expect(replay.text).toBe(first.text)
      expect(u.rest.hits("/items")).toBe(1)
      expect(yield* books(orgId)).toMatchObject({ balance: 8, held: 0 })
    }))
})

layer(gatewayLayer({ providers: { ssrfAllow: ["127.0.0.1"] } }), { excludeTestServices: true })("answers nothing after can read", (it) => {
  it.effect("a write whose provider answers JSON nested 5,000 deep is answered with that text, charged once, and replayed: never sent twice", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const { key, orgId } = yield* givenOrg({ credits: 10 })
      yield* Effect.orDie(Effect.flatMap(Connections, (c) => c.connect(orgId, "epsilon", { base_url: u.rest.url, token: EPSILON_TOKEN }, null)))
      const deep = "[".repeat(5_000) + "]".repeat(5_000)
      u.rest.fault({ text: deep, path: "/payments" })
      const payment = { method: "POST", path: "/payments", body: { amount: 100 } }
      const first = yield* callTool("epsilon_request", payment, { key, idempotencyKey: "deep-1" })
      expectOk(first, 1)
      expect(JSON.parse(first.text)).toMatchObject({ provider: "epsilon", status: 200, body: deep })
      const again = yield* callTool("epsilon_request", payment, { key, idempotencyKey: "deep-1" })
      expectOk(again, 0)
      expect(again.text).toBe(first.text)
      expect(u.rest.hits("/payments")).toBe(1)
      expect(yield* books(orgId)).toMatchObject({ balance: 9, held: 0, journalSum: 9 })
    }))
})

/** An org whose epsilon connection points at the REST fake (or elsewhere), and whose lambda is connected. */
const writer = (baseUrl?: string) =>
  Effect.gen(function* () {
    const u = yield* TestUpstreams
    const org = yield* givenOrg({ credits: 10 })
    const connections = yield* Connections
    yield* Effect.orDie(connections.connect(org.orgId, "epsilon", { base_url: baseUrl ?? u.rest.url, token: EPSILON_TOKEN }, null))
    yield* Effect.orDie(connections.connect(org.orgId, "lambda", CREDENTIALS.lambda, null))
    yield* Effect.orDie(Effect.flatMap(Betas, (b) => b.enable(org.orgId, "lambda_batch_emails")))
    return org
  })

layer(gatewayLayer({ providers: { ssrfAllow: ["127.0.0.1"], timeoutMs: 400 } }), { excludeTestServices: true })("writes whose outcome is unknown", (it) => {
  const unknown = { status: 502, type: "provider", code: "write_outcome_unknown", retryable: false, billable: false } as const

  it.effect("a write that timed out at the provider is never sent again: the retry replays the unknown outcome", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const { key, orgId } = yield* writer()
      const payment = { method: "POST", path: "/payments", body: { amount: 500 } }
      u.rest.fault({ delayMs: 1_500, times: 1 })
      const first = yield* callTool("epsilon_request", payment, { key, idempotencyKey: "pay-1" })
      expectEnvelope(first, { ...unknown, message: "may have been carried out" })
      // the retry an agent makes: same request, same key — nothing reaches the provider
      const retry = yield* callTool("epsilon_request", payment, { key, idempotencyKey: "pay-1" })
      expect(retry.status).toBe(502)
      expect(retry.headers.get("idempotent-replayed")).toBe("true")
      expect(retry.text).toBe(first.text)
      yield* Effect.sleep("1500 millis")
      expect(u.rest.hits("/payments")).toBe(1)
      expect(yield* books(orgId)).toMatchObject({ balance: 10, held: 0 })
    }))

  it.effect("a write whose connection broke after it was sent is stored too", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const { key } = yield* writer()
      u.resend.fault({ reset: true, times: 1 })
      const emails = { emails: [{ from: "a@example.com", to: "b@example.com", subject: "hi", text: "hello" }] }
      const first = yield* callTool("lambda_batch_emails", emails, { key, idempotencyKey: "mail-1" })
      expectEnvelope(first, { ...unknown, message: "broke" })
      expectEnvelope(first, { ...unknown, message: "(the same Idempotency-Key replays this answer instead of sending it)" })
      const retry = yield* callTool("lambda_batch_emails", emails, { key, idempotencyKey: "mail-1" })
      expect(retry.headers.get("idempotent-replayed")).toBe("true")
      expect(u.resend.hits("/emails/batch")).toBe(1)
    }))

  it.effect("a write that never left (connection refused) frees its key: the retry runs, once", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      // a port nothing listens on
      const closed = yield* Effect.promise(() => closedPort())
      const { key, orgId } = yield* writer(`http://127.0.0.1:${closed}`)
      const refused = yield* callTool("epsilon_request", { method: "POST", path: "/items", body: { n: 1 } }, { key, idempotencyKey: "refused-1" })
      expectEnvelope(refused, { status: 502, type: "provider", code: "provider_unavailable", retryable: true, billable: false, message: "ECONNREFUSED" })
      // the org points the connection at the right place and retries with the same key
      const connections = yield* Connections
      yield* Effect.orDie(connections.connect(orgId, "epsilon", { base_url: u.rest.url, token: EPSILON_TOKEN }, null))
      expectOk(yield* callTool("epsilon_request", { method: "POST", path: "/items", body: { n: 1 } }, { key, idempotencyKey: "refused-1" }), 1)
      expect(u.rest.hits("/items")).toBe(1)
    }))

  it.effect("a write whose TLS handshake never ended was never sent: the deadline frees its key as a provider_timeout", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      // takes the TCP connection and never answers the client's hello: the request cannot have been sent
      const silent = yield* Effect.promise(() => silentServer())
      yield* Effect.gen(function* () {
        const { key, orgId } = yield* writer(`https://127.0.0.1:${silent.port}`)
        const item = { method: "POST", path: "/items", body: { n: 1 } }
        const stalled = yield* callTool("epsilon_request", item, { key, idempotencyKey: "tls-1" })
        expectEnvelope(stalled, { status: 504, type: "timeout", code: "provider_timeout", retryable: true, billable: false })
        expect(silent.accepted()).toBe(1)
        const connections = yield* Connections
        yield* Effect.orDie(connections.connect(orgId, "epsilon", { base_url: u.rest.url, token: EPSILON_TOKEN }, null))
        expectOk(yield* callTool("epsilon_request", item, { key, idempotencyKey: "tls-1" }), 1)
        expect(u.rest.hits("/items")).toBe(1)
      }).pipe(Effect.ensuring(Effect.promise(() => silent.close())))
    }))

  it.effect("a write whose TLS handshake was cut was never sent: provider_unavailable, and its key is free", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const cut = yield* Effect.promise(() => silentServer(true))
      yield* Effect.gen(function* () {
        const { key } = yield* writer(`https://127.0.0.1:${cut.port}`)
        const item = { method: "POST", path: "/items", body: { n: 2 } }
        const failed = yield* callTool("epsilon_request", item, { key, idempotencyKey: "tls-2" })
        expectEnvelope(failed, { status: 502, type: "provider", code: "provider_unavailable", retryable: true, billable: false })
        expect(cut.accepted()).toBe(1)
        // not kept: the retry with the same key runs again (and fails again the same way)
        const again = yield* callTool("epsilon_request", item, { key, idempotencyKey: "tls-2" })
        expect(again.headers.get("idempotent-replayed")).toBeNull()
        expect(cut.accepted()).toBe(2)
      }).pipe(Effect.ensuring(Effect.promise(() => cut.close())))
    }))

  it.effect("Resend receives an Idempotency-Key of the gateway's, derived from the org and the caller's key", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const a = yield* writer()
      const b = yield* writer()
      const emails = { emails: [{ from: "a@example.com", to: "b@example.com", subject: "hi", text: "hello" }] }
      expectOk(yield* callTool("lambda_batch_emails", emails, { key: a.key, idempotencyKey: "mail-2" }), 1)
      expectOk(yield* callTool("lambda_batch_emails", emails, { key: b.key, idempotencyKey: "mail-2" }), 1)
      expectOk(yield* callTool("lambda_batch_emails", emails, { key: a.key }), 1)
      const sent = u.resend.requests.map((r) => r.headers["idempotency-key"])
      expect(sent[0]).toMatch(/^tg-[0-9a-f]{64}$/)
      expect(sent[0]).not.toContain("mail-2")
      // another org's same key is another key; a call without a key sends none
      expect(sent[1]).toMatch(/^tg-[0-9a-f]{64}$/)
      expect(sent[1]).not.toBe(sent[0])
      expect(sent[2]).toBeUndefined()
    }))

  it.effect("Polar events get external_ids derived from the call's key, so a batch sent twice is counted once", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const { key, orgId } = yield* writer()
      yield* Effect.orDie(Effect.flatMap(Connections, (c) => c.connect(orgId, "kappa", CREDENTIALS.kappa, null)))
      yield* Effect.orDie(Effect.flatMap(Betas, (b) => b.enable(orgId, "kappa_ingest_events")))
      const events = { events: [{ name: "signup", external_customer_id: "c1" }, { name: "login", external_customer_id: "c1", external_id: "mine" }] }
      expectOk(yield* callTool("kappa_ingest_events", events, { key, idempotencyKey: "events-1" }), 1)
      const sent = Schema.decodeUnknownSync(Schema.Struct({ events: Schema.Array(Schema.Struct({ external_id: Schema.String })) }))(u.polar.requests[0]?.json)
      expect(sent.events[0]?.external_id).toMatch(/^tg-[0-9a-f]{64}-0$/)
      expect(sent.events[1]?.external_id).toBe("mine")
    }))

  it.effect("reads keep their behaviour: a timed-out read frees its key", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const { key } = yield* writer()
      u.rest.fault({ delayMs: 1_500, times: 1 })
      const first = yield* callTool("epsilon_request", { method: "GET", path: "/items" }, { key, idempotencyKey: "get-1" })
      expectEnvelope(first, { status: 504, type: "timeout", code: "provider_timeout", retryable: true, billable: false })
      expectOk(yield* callTool("epsilon_request", { method: "GET", path: "/items" }, { key, idempotencyKey: "get-1" }), 1)
    }))
})

/** A port on 127.0.0.1 that nothing listens on. */
const closedPort = () =>
  new Promise<number>((resolve) => {
    const server = Net.createServer()
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })

/**
 * A TCP server that takes connections and never writes a byte; with `reset`, it closes a connection at its first
 * byte (a TLS client's hello) instead of waiting.
 */
const silentServer = (reset = false) =>
  new Promise<{ readonly port: number; readonly accepted: () => number; readonly close: () => Promise<void> }>((resolve) => {
    const sockets: Array<Net.Socket> = []
    const server = Net.createServer((socket) => {
      sockets.push(socket)
      if (reset) socket.once("data", () => socket.resetAndDestroy())
    })
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      resolve({
        port: typeof address === "object" && address !== null ? address.port : 0,
        accepted: () => sockets.length,
        close: () =>
          new Promise<void>((done) => {
            for (const socket of sockets) socket.destroy()
            server.close(() => done())
          })
      })
    })
  })

layer(servicesLayer())("Idempotency-Key in process, on TestClock", (it) => {
  it.effect("a completed key is remembered for 24 hours, then it is new again", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(Date.parse("2026-06-01T00:00:00Z"))
      const u = yield* TestUpstreams
      u.resetAll()
      const gateway = yield* Gateway
      const { key } = yield* givenOrg({ credits: 10 })
      const { caller } = yield* Effect.flatMap(Authentication, (a) => a.authenticate(key))
      const first = yield* gateway.run(caller, "weather", { q: "Berlin" }, { idempotencyKey: "expiring" })
      expect(first._tag).toBe("Fresh")
      yield* TestClock.adjust("23 hours")
      expect((yield* gateway.run(caller, "weather", { q: "Berlin" }, { idempotencyKey: "expiring" }))._tag).toBe("Replayed")
      expect(yield* Effect.flip(gateway.run(caller, "weather", { q: "Paris" }, { idempotencyKey: "expiring" }))).toBeInstanceOf(IdempotencyKeyReused)
      yield* TestClock.adjust("2 hours")
      const renewed = yield* gateway.run(caller, "weather", { q: "Paris" }, { idempotencyKey: "expiring" })
      expect(renewed._tag).toBe("Fresh")
      expect(u.openMeteo.hits("/v1/forecast")).toBe(2)
      // Housekeeping deletes records past their retention.
      yield* TestClock.adjust("25 hours")
      expect(yield* (yield* Idempotency).purgeExpired).toBeGreaterThanOrEqual(1)
    }))

  it.effect("request_in_progress's Retry-After: 1 s while the claim is renewed on time, then when its lease ends", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(Date.parse("2026-06-09T00:00:00Z"))
      const idempotency = yield* Idempotency
      const { orgId } = yield* givenOrg({ credits: 10 })
      const claimOf = (key: string, requestId: string, leaseMs: number) =>
        ({ orgId, key, fingerprint: fingerprint("weather", { q: "Berlin" }), requestId, leaseMs, write: false })
      // what a retry of a claimed key is answered: its Retry-After, or the error that is not request_in_progress
      const retry = (key: string) =>
        Effect.map(Effect.flip(idempotency.claim(claimOf(key, "req_retry", 30_000))), (e) =>
          e._tag === "RequestInProgress" ? e.retryAfter : e._tag)
      // the claim's process died at once: nothing renews its lease. While more than half of it is left, it may well be
      // a live call (renewed every third of the lease): retry in a second
      yield* idempotency.claim(claimOf("crashed", "req_crashed", 30_000))
      expect(yield* retry("crashed")).toBe(1)
      yield* TestClock.adjust("14900 millis")
      expect(yield* retry("crashed")).toBe(1)
      // its renewal overdue: the seconds until its lease ends, rounded up
      yield* TestClock.adjust("2600 millis")
      expect(yield* retry("crashed")).toBe(13)
      yield* TestClock.adjust("12400 millis")
      expect(yield* retry("crashed")).toBe(1)
      // the lease is over when Retry-After said: the retry gets the key's final answer
      yield* TestClock.adjust("100 millis")
      expect(yield* retry("crashed")).toBe("IdempotencyReplayUnavailable")
      // a lease ending further off than one lease (a process with a longer one): a live call's, retried in a second;
      // once less than half of this process's lease is left, that time
      yield* idempotency.claim(claimOf("long", "req_long", 600_000))
      expect(yield* retry("long")).toBe(1)
      yield* TestClock.adjust("588 seconds")
      expect(yield* retry("long")).toBe(12)
    }))

  it.effect("idempotency_replay_unavailable for a write says it may have been done: check before sending it again with a new key", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(Date.parse("2026-06-10T00:00:00Z"))
      const idempotency = yield* Idempotency
      const { orgId } = yield* givenOrg({ credits: 10 })
      const claimOf = (key: string, write: boolean) => ({ orgId, key, fingerprint: "f", requestId: `req_${key}`, leaseMs: 1_000, write })
      yield* idempotency.claim(claimOf("a-write", true))
      yield* idempotency.claim(claimOf("a-read", false))
      yield* TestClock.adjust("2 seconds")
      const messageOf = (key: string, write: boolean) =>
        Effect.map(Effect.flip(idempotency.claim({ ...claimOf(key, write), requestId: "req_retry" })), (e) => `${e._tag}: ${e.message}`)
      // a write's process may have sent it before it stopped: "Use a new key." alone sent it a second time, unchecked
      expect(yield* messageOf("a-write", true)).toMatch(/^IdempotencyReplayUnavailable: .*may have reached the provider: check whether it was done before sending it again with a new key\.$/)
      expect(yield* messageOf("a-read", false)).toBe(
        "IdempotencyReplayUnavailable: This Idempotency-Key was used for a request that never completed, so there is nothing to replay. Use a new key."
      )
    }))

  it.effect("group commit: claims and stored answers that arrive together share statements, each with its own answer", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(Date.parse("2026-06-05T00:00:00Z"))
      const idempotency = yield* Idempotency
      const claimBatches = Metric.tagged(ledgerBatchSize, "kind", "claim")
      const completeBatches = Metric.tagged(ledgerBatchSize, "kind", "complete")
      const stateOf = Effect.all({ claim: Metric.value(claimBatches), complete: Metric.value(completeBatches) })
      const { orgId } = yield* givenOrg({ credits: 10 })
      const request = (key: string, input: string) =>
        ({ orgId, key, fingerprint: fingerprint("weather", { q: input }), requestId: `req_${key}_${input}`, leaseMs: 60_000, write: false })
      yield* idempotency.claim(request("done", "Berlin"))
      yield* idempotency.complete(orgId, "done", "req_done_Berlin", { status: 200, body: "{\"stored\":true}", charged: 2 })
      const before = yield* stateOf
      // 40 new keys, one key 20 times (so some batch holds it more than once), a completed key 10 times
      const requests = [
        ...Array.from({ length: 40 }, (_, i) => request(`k${i}`, "Berlin")),
        ...Array.from({ length: 20 }, () => request("twice", "Berlin")),
        ...Array.from({ length: 10 }, () => request("done", "Berlin"))
      ]
      const exits = yield* Effect.forEach(requests, (r) => Effect.exit(idempotency.claim(r)), { concurrency: "unbounded" })
      const outcome = (i: number) => {
        const exit = exits[i]
        if (exit === undefined) return "missing"
        if (Exit.isSuccess(exit)) return exit.value._tag
        return exit.cause._tag === "Fail" ? exit.cause.error._tag : "defect"
      }
      expect(requests.slice(0, 40).map((_, i) => outcome(i))).toEqual(Array.from({ length: 40 }, () => "Claimed"))
      const twice = requests.slice(40, 60).map((_, i) => outcome(40 + i))
      expect(twice.filter((o) => o === "Claimed")).toHaveLength(1)
      expect(twice.filter((o) => o === "RequestInProgress")).toHaveLength(19)
      expect(requests.slice(60).map((_, i) => outcome(60 + i))).toEqual(Array.from({ length: 10 }, () => "Replay"))
      // the 41 claimed answers stored at once, then each replayed with its own body
      const claimed = [...Array.from({ length: 40 }, (_, i) => `k${i}`), "twice"]
      yield* Effect.forEach(claimed, (key) => idempotency.complete(orgId, key, `req_${key}_Berlin`, { status: 200, body: `{"key":"${key}"}`, charged: 1 }), {
        concurrency: "unbounded"
      })
      for (const key of claimed) {
        const again = yield* idempotency.claim(request(key, "Berlin"))
        expect(again).toEqual({ _tag: "Replay", response: { status: 200, body: `{"key":"${key}"}`, charged: 1 }, requestId: `req_${key}_Berlin` })
      }
      const after = yield* stateOf
      // every claim and answer went through a batch, and there were fewer statements than of them
      expect(after.claim.sum - before.claim.sum).toBe(70 + 41)
      expect(after.complete.sum - before.complete.sum).toBe(41)
      expect(after.claim.count - before.claim.count).toBeLessThan(70 + 41)
      expect(after.complete.count - before.complete.count).toBeLessThan(41)
    }))

  it.effect("a keyed call claims its key in its reservation's statement; one that fails a check first claims it alone", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(Date.parse("2026-06-07T00:00:00Z"))
      const u = yield* TestUpstreams
      u.resetAll()
      const gateway = yield* Gateway
      const sql = yield* SqlClient.SqlClient
      const statements = Effect.all({
        claim: Metric.value(Metric.tagged(ledgerBatchSize, "kind", "claim")),
        reserve: Metric.value(Metric.tagged(ledgerBatchSize, "kind", "reserve"))
      })
      const { key, orgId } = yield* givenOrg({ credits: 10 })
      const { caller } = yield* Effect.flatMap(Authentication, (a) => a.authenticate(key))
      const before = yield* statements
      expect((yield* gateway.run(caller, "weather", { q: "Berlin" }, { idempotencyKey: "fused" }))._tag).toBe("Fresh")
      const fresh = yield* statements
      expect(fresh.reserve.sum - before.reserve.sum).toBe(1)
      expect(fresh.claim.sum - before.claim.sum).toBe(0)
      // replayed: the statement found the key taken, and reserved nothing
      expect((yield* gateway.run(caller, "weather", { q: "Berlin" }, { idempotencyKey: "fused" }))._tag).toBe("Replayed")
      expect((yield* books(orgId)).pendingHolds).toBe(0)
      expect(u.openMeteo.hits("/v1/forecast")).toBe(1)
      // a key limited to other tools: the claim alone, answered before the limit's error, and the key freed
      const limited = yield* Effect.flatMap(KeyStore, (keys) => keys.create(orgId, { name: "limited", allowedTools: ["mobile_app_search"] }))
      const limitedCaller = (yield* Effect.flatMap(Authentication, (a) => a.authenticate(Redacted.value(limited.key)))).caller
      const beforeLimited = yield* statements
      const refused = yield* Effect.flip(gateway.run(limitedCaller, "weather", { q: "Paris" }, { idempotencyKey: "limited" }))
      expect(refused._tag).toBe("ToolNotAllowed")
      const after = yield* statements
      expect(after.claim.sum - beforeLimited.claim.sum).toBe(1)
      expect(after.reserve.sum - beforeLimited.reserve.sum).toBe(0)
      expect(yield* sql`SELECT key FROM idempotency WHERE org_id = ${orgId} AND key = 'limited'`).toEqual([])
      // ... and a key in progress still wins over the limit
      const ledger = yield* Ledger
      yield* ledger.claimAndReserve(
        { orgId, keyId: caller.keyId, tool: "weather", requestId: "req_running", amount: 1, leaseMs: 60_000 },
        { key: "running", fingerprint: fingerprint("weather", { q: "Paris" }) }
      )
      const inProgress = yield* Effect.flip(gateway.run(limitedCaller, "weather", { q: "Paris" }, { idempotencyKey: "running" }))
      expect(inProgress._tag).toBe("RequestInProgress")
    }))

  it.effect("a reservation claiming a key: made only for a new key, once for a key twice in one batch, refused with the key claimed", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(Date.parse("2026-06-08T00:00:00Z"))
      const ledger = yield* Ledger
      const idempotency = yield* Idempotency
      const sql = yield* SqlClient.SqlClient
      const { orgId, keyId } = yield* givenOrg({ credits: 1_000 })
      const poor = yield* givenOrg({ credits: 0 })
      const reservation = (requestId: string) => ({ orgId, keyId, tool: "weather", requestId, amount: 2, leaseMs: 60_000 })
      const claimOf = (key: string) => ({ key, fingerprint: fingerprint("weather", { q: key }) })
      yield* idempotency.claim({ orgId, ...claimOf("done"), requestId: "req_done", leaseMs: 60_000, write: false })
      yield* idempotency.complete(orgId, "done", "req_done", { status: 200, body: "{}", charged: 2 })
      const calls = [
        ...Array.from({ length: 30 }, (_, i) => ledger.claimAndReserve(reservation(`req_new_${i}`), claimOf(`new-${i}`))),
        ...Array.from({ length: 20 }, (_, i) => ledger.claimAndReserve(reservation(`req_twice_${i}`), claimOf("twice"))),
        ...Array.from({ length: 10 }, (_, i) => ledger.claimAndReserve(reservation(`req_done_${i}`), claimOf("done"))),
        ...Array.from({ length: 10 }, (_, i) => Effect.asSome(ledger.reserve(reservation(`req_plain_${i}`))))
      ]
      const reservations = Metric.tagged(ledgerBatchSize, "kind", "reserve")
      const before = yield* Metric.value(reservations)
      const held = yield* Effect.all(calls, { concurrency: "unbounded" })
      const after = yield* Metric.value(reservations)
      expect(after.count - before.count).toBeLessThan(calls.length)
      const made = (from: number, to: number) => held.slice(from, to).filter(Option.isSome).length
      expect([made(0, 30), made(30, 50), made(50, 60), made(60, 70)]).toEqual([30, 1, 0, 10])
      expect(yield* books(orgId)).toMatchObject({ pendingHolds: 41, pendingAmount: 82 })
      // each new key is claimed as a claim alone claims it: running, under the call's request, the hold's lease
      const rows = yield* sql<{ readonly key: string; readonly status: string; readonly request_id: string; readonly lease_until: Date }>`
        SELECT key, status, request_id, lease_until FROM idempotency WHERE org_id = ${orgId} AND key LIKE 'new-%' ORDER BY key`
      expect(rows).toHaveLength(30)
      for (const row of rows) {
        expect(row.status).toBe("running")
        expect(row.request_id).toBe(`req_${row.key.replace("-", "_")}`)
        expect(row.lease_until.getTime()).toBe(Date.parse("2026-06-08T00:01:00Z"))
      }
      const twice = yield* idempotency.claimTaken({ orgId, ...claimOf("twice"), requestId: "req_later", leaseMs: 60_000, write: false }).pipe(
        Effect.flip
      )
      expect(twice._tag).toBe("RequestInProgress")
      // refused: the key is claimed (the caller frees it), nothing is held
      const refused = yield* Effect.flip(ledger.claimAndReserve({ ...reservation("req_poor"), orgId: poor.orgId, keyId: poor.keyId }, claimOf("poor")))
      expect(refused._tag).toBe("InsufficientCredits")
      expect(yield* sql`SELECT status FROM idempotency WHERE org_id = ${poor.orgId} AND key = 'poor'`).toEqual([{ status: "running" }])
      expect((yield* books(poor.orgId)).pendingHolds).toBe(0)
    }))

  it.effect("a statement that claimed a key commits durably, as a claim alone does; one that claimed none does not wait", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const { orgId, keyId } = yield* givenOrg({ credits: 10 })
      const [server] = yield* sql<{ readonly synchronous_commit: string }>`SHOW synchronous_commit`
      expect(server?.synchronous_commit).toBe("on")
      // the setting the transaction commits with, after a statement of calls with these keys (null: no key)
      const atCommit = (keys: ReadonlyArray<string | null>) =>
        sql.withTransaction(Effect.gen(function* () {
          const now = new Date("2026-06-09T00:00:00Z")
          const later = new Date("2026-06-09T00:01:00Z")
          const each = <A>(value: A) => keys.map(() => value)
          yield* sql`SELECT * FROM gateway_claim_reserve_batch(
            ${each(orgId)}::text[], ${each(keyId)}::text[], ${each("weather")}::text[],
            ${keys.map((key, i) => `req_${key ?? "none"}_${i}`)}::text[], ${each(1)}::bigint[],
            ${each(now)}::timestamptz[], ${each(202606)}::integer[], ${each(later)}::timestamptz[],
            ${keys}::text[], ${each("f")}::text[], ${each(later)}::timestamptz[])`
          const [setting] = yield* sql<{ readonly value: string }>`SELECT current_setting('synchronous_commit') AS value`
          return setting?.value
        }))
      expect(yield* atCommit(["durable", null])).toBe("on")
      // the key taken already: nothing claimed, so the statement commits as reservations do
      expect(yield* atCommit(["durable", null])).toBe("off")
      expect(yield* atCommit([null])).toBe("off")
    }))

  it.effect("the claiming statement itself: a key twice in it is the first call's, and only the first call reserves", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const { orgId, keyId } = yield* givenOrg({ credits: 10 })
      const keys = ["dup", null, "dup", "other"]
      const each = <A>(value: A) => keys.map(() => value)
      const now = new Date("2026-06-10T00:00:00Z")
      const later = new Date("2026-06-10T00:01:00Z")
      const rows = yield* sql<{ readonly ord: number; readonly hold_id: number | null }>`
        SELECT ord, hold_id FROM gateway_claim_reserve_batch(
          ${each(orgId)}::text[], ${each(keyId)}::text[], ${each("weather")}::text[],
          ${keys.map((_, i) => `req_${i + 1}`)}::text[], ${each(1)}::bigint[],
          ${each(now)}::timestamptz[], ${each(202606)}::integer[], ${each(later)}::timestamptz[],
          ${keys}::text[], ${each("f")}::text[], ${each(later)}::timestamptz[]) ORDER BY ord`
      expect(rows.map((row) => row.ord)).toEqual([1, 2, 4])
      expect(rows.every((row) => row.hold_id !== null)).toBe(true)
      const records = yield* sql<{ readonly key: string; readonly request_id: string }>`
        SELECT key, request_id FROM idempotency WHERE org_id = ${orgId} ORDER BY key`
      expect(records).toEqual([{ key: "dup", request_id: "req_1" }, { key: "other", request_id: "req_4" }])
    }))

  it.effect("a claim never waits for a record another statement holds (a settlement keeping its answer): it answers at once", () =>
    Effect.gen(function* () {
      const idempotency = yield* Idempotency
      const { orgId } = yield* givenOrg({ credits: 10 })
      const first = { orgId, key: "held", fingerprint: "f", requestId: "req_first", leaseMs: 60_000, write: false }
      expect((yield* idempotency.claim(first))._tag).toBe("Claimed")
      // the row locked as the statement that settles the first call and keeps its answer locks it
      const retry = yield* whileRecordLocked(orgId, "held",
        Effect.flip(idempotency.claim({ ...first, requestId: "req_retry" })).pipe(Effect.map((error) => error._tag)))
      expect(retry).toBe("RequestInProgress")
    }))

  it.effect("the retention purge never waits: a record another statement holds is left for the next purge", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(Date.parse("2026-07-01T00:00:00Z"))
      const idempotency = yield* Idempotency
      const sql = yield* SqlClient.SqlClient
      const { orgId } = yield* givenOrg({ credits: 10 })
      for (const key of ["old-a", "old-b"]) {
        yield* idempotency.claim({ orgId, key, fingerprint: "f", requestId: `req_${key}`, leaseMs: 60_000, write: false })
        yield* idempotency.complete(orgId, key, `req_${key}`, { status: 200, body: "{}", charged: 1 })
      }
      yield* TestClock.adjust("25 hours")
      // old-a locked, as a claim taking over an expired record locks it
      const purged = yield* whileRecordLocked(orgId, "old-a", idempotency.purgeExpired)
      expect(purged).toBeGreaterThanOrEqual(1)
      const left = yield* sql<{ readonly key: string }>`SELECT key FROM idempotency WHERE org_id = ${orgId} ORDER BY key`
      expect(left.map((r) => r.key)).toEqual(["old-a"])
      expect(yield* idempotency.purgeExpired).toBeGreaterThanOrEqual(1)
      expect(yield* sql`SELECT key FROM idempotency WHERE org_id = ${orgId}`).toEqual([])
    }))

  it.effect("the lease renewal never waits for a record another statement holds (it is being completed)", () =>
    Effect.gen(function* () {
      const idempotency = yield* Idempotency
      const leases = yield* Leases
      const { orgId } = yield* givenOrg({ credits: 10 })
      const lease = { orgId, key: "renewed", requestId: "req_renewed" }
      yield* idempotency.claim({ ...lease, fingerprint: "f", leaseMs: 60_000, write: false })
      yield* leases.claimHeld(lease, Number.POSITIVE_INFINITY)
      const before = (yield* Metric.value(leaseRenewals)).count
      const renewed = yield* whileRecordLocked(orgId, "renewed", Effect.as(leases.renew, "renewed" as const))
      yield* leases.releaseClaim(lease)
      expect(renewed).toBe("renewed")
      // and its statement ran to its end (a renewal that fails is only logged, and not counted)
      expect((yield* Metric.value(leaseRenewals)).count).toBeGreaterThan(before)
    }))
})

/**
 * A retention shorter than a call (`IDEMPOTENCY_RETENTION_SECONDS` may be 1 s): the record is kept for the retention
 * after the call's last sign of life, never counted from its claim.
 */
layer(gatewayLayer({ providers: { ssrfAllow: ["127.0.0.1"], timeoutMs: 5_000 }, ledger: { idempotencyRetentionMs: 1_000, holdLeaseMs: 900 } }), {
  excludeTestServices: true
})("a retention shorter than the call", (it) => {
  it.effect("a write still running past the retention keeps its key: a retry is request_in_progress, then the replay, for a whole retention after it answered", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const { key, orgId } = yield* writer()
      const payment = { method: "POST", path: "/payments", body: { amount: 100 } }
      u.rest.fault({ delayMs: 3_000, times: 1 })
      const first = yield* Effect.fork(callTool("epsilon_request", payment, { key, idempotencyKey: "slow-pay" }))
      // past the retention counted from the claim (and past the first lease and a retention: the renewals keep it):
      // the key was taken over and the payment sent a second time
      yield* Effect.sleep("2200 millis")
      expectEnvelope(yield* callTool("epsilon_request", payment, { key, idempotencyKey: "slow-pay" }), {
        status: 429, type: "rate_limited", code: "request_in_progress", retryable: true, billable: false
      })
      const answered = yield* Fiber.join(first)
      expectOk(answered, 1)
      // the answer is replayed for the retention after it was given (its record had expired before it was kept)
      yield* Effect.sleep("600 millis")
      const replay = yield* callTool("epsilon_request", payment, { key, idempotencyKey: "slow-pay" })
      expect(replay.headers.get("idempotent-replayed")).toBe("true")
      expect(replay.text).toBe(answered.text)
      expect(u.rest.hits("/payments")).toBe(1)
      expect(yield* books(orgId)).toMatchObject({ balance: 9, held: 0 })
    }))

  it.effect("a key reused for another request once its record is past the retention gives the provider another key of its own", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const { key } = yield* writer()
      expectOk(yield* callTool("epsilon_request", { method: "POST", path: "/items", body: { n: 1 } }, { key, idempotencyKey: "reused" }), 1)
      yield* Effect.sleep("1200 millis")
      // the same key, another request: the gateway runs it as new, as documented
      expectOk(yield* callTool("epsilon_request", { method: "POST", path: "/items", body: { n: 2 } }, { key, idempotencyKey: "reused" }), 1)
      // the same key, the first request again: as the first was sent
      yield* Effect.sleep("1200 millis")
      expectOk(yield* callTool("epsilon_request", { method: "POST", path: "/items", body: { n: 1 } }, { key, idempotencyKey: "reused" }), 1)
      const sent = u.rest.requests.filter((r) => r.path === "/items").map((r) => r.headers["idempotency-key"])
      expect(sent).toHaveLength(3)
      // each was the key of the first: an API that honours the header took the second for the first again
      expect(sent[1]).not.toBe(sent[0])
      expect(sent[2]).toBe(sent[0])
    }))
})
