/**
 * Every code of the error table that the gateway can produce, as a caller sees it: status, the exact
 * envelope (type, code, retryable, billable), `X-Request-Id`, `Retry-After` on 429, no `X-Credits-Charged`.
 */
import { SqlClient } from "@effect/sql"
import { afterAll, describe, expect, layer } from "@effect/vitest"
import { Effect, Fiber, Layer, Redacted } from "effect"
import { envelopeOf } from "../src/domain/errors.js"
import { fingerprint } from "../src/services/Idempotency.js"
import { Connections } from "../src/services/Connections.js"
import { KeyStore } from "../src/services/KeyStore.js"
import { toDate } from "../src/services/time.js"
import { type ExpectedError, expectEnvelope } from "./support/assert.js"
import { blockDatabase } from "./support/database.js"
import {
  books,
  callTool,
  dashboard,
  devToken,
  gatewayLayer,
  givenOrg,
  type HttpResult,
  request,
  requestChunked,
  TestUpstreams
} from "./support/gateway.js"
import { CREDENTIALS } from "./upstreams/accounts.js"

const seen = new Set<string>()
const expectError = (result: HttpResult, expected: ExpectedError) => {
  expectEnvelope(result, expected)
  seen.add(expected.code)
}

// Artifact downloads and the artifact quota, tested with artifacts; what the server answers at the socket, tested
// with hostile input.
const elsewhere = new Set<string>(["range_not_satisfiable", "artifact_quota_exceeded", "request_timeout"])

afterAll(() => {
  const all = Object.values(envelopeOf).map((s) => s.code).filter((c) => !elsewhere.has(c))
  expect([...seen].sort()).toEqual([...new Set(all)].sort())
})

const json = { "content-type": "application/json" }

layer(gatewayLayer({ server: { maxBodyBytes: 64 * 1024, rateLimitPerSecond: 5, rateLimitBurst: 5 }, providers: { searchProviders: [] } }), {
  excludeTestServices: true
})(
  "the error table",
  (it) => {
    describe("validation", () => {
      it.effect("invalid_request names the field", () =>
        Effect.gen(function* () {
          const { key } = yield* givenOrg()
          const result = yield* callTool("read", { url: "https://example.com", max_chars: 10 }, { key })
          expectError(result, { status: 400, type: "validation", code: "invalid_request", retryable: false, billable: false, message: "max_chars: must be an integer from 500 to 500000" })
        }))

      it.effect("malformed_json", () =>
        Effect.gen(function* () {
          const { key } = yield* givenOrg()
          const result = yield* request("/v1/weather", { body: "{\"q\": ", headers: { ...json, "x-api-key": key } })
          expectError(result, { status: 400, type: "validation", code: "malformed_json", retryable: false, billable: false })
        }))

      it.effect("unsupported_media_type", () =>
        Effect.gen(function* () {
          const { key } = yield* givenOrg()
          const result = yield* request("/v1/weather", { body: "q=Berlin", headers: { "content-type": "application/x-www-form-urlencoded", "x-api-key": key } })
          expectError(result, { status: 415, type: "validation", code: "unsupported_media_type", retryable: false, billable: false })
        }))

      it.effect("payload_too_large, by Content-Length and while streaming", () =>
        Effect.gen(function* () {
          const { key } = yield* givenOrg()
          const big = JSON.stringify({ q: "x".repeat(70 * 1024) })
          const declared = yield* request("/v1/weather", { body: big, headers: { ...json, "x-api-key": key } })
          expectError(declared, { status: 413, type: "validation", code: "payload_too_large", retryable: false, billable: false })
          // chunked: no Content-Length, the limit applies while reading
          const streamed = yield* requestChunked("/v1/weather", Array.from({ length: 20 }, () => "x".repeat(8 * 1024)), {
            ...json,
            "x-api-key": key
          })
          expectError(streamed, { status: 413, type: "validation", code: "payload_too_large", retryable: false, billable: false })
        }))

      it.effect("invalid_idempotency_key", () =>
        Effect.gen(function* () {
          const { key } = yield* givenOrg()
          const result = yield* callTool("weather", { q: "Berlin" }, { key, idempotencyKey: "has space" })
          expectError(result, { status: 400, type: "validation", code: "invalid_idempotency_key", retryable: false, billable: false })
          const long = yield* callTool("weather", { q: "Berlin" }, { key, idempotencyKey: "k".repeat(256) })
          expectError(long, { status: 400, type: "validation", code: "invalid_idempotency_key", retryable: false, billable: false })
        }))

      it.effect("idempotency_key_reused", () =>
        Effect.gen(function* () {
          const { key } = yield* givenOrg()
          const first = yield* callTool("weather", { q: "Berlin" }, { key, idempotencyKey: "reuse-1" })
          expect(first.status).toBe(200)
          const other = yield* callTool("weather", { q: "Paris" }, { key, idempotencyKey: "reuse-1" })
          expectError(other, { status: 400, type: "validation", code: "idempotency_key_reused", retryable: false, billable: false })
        }))

      it.effect("idempotency_replay_unavailable", () =>
        Effect.gen(function* () {
          const { key, orgId } = yield* givenOrg()
          const sql = yield* SqlClient.SqlClient
          // A request that claimed the key and never finished: its lease is in the past.
          const fp = fingerprint("weather", { q: "Berlin" })
          yield* sql`
            INSERT INTO idempotency (org_id, key, fingerprint, status, request_id, lease_until, expires_at, created_at)
            VALUES (${orgId}, 'crashed-1', ${fp}, 'running', 'req_dead', ${toDate(Date.parse("2020-01-01"))},
                    ${toDate(Date.parse("2999-01-01"))}, ${toDate(Date.parse("2020-01-01"))})`
          const result = yield* callTool("weather", { q: "Berlin" }, { key, idempotencyKey: "crashed-1" })
          expectError(result, { status: 400, type: "validation", code: "idempotency_replay_unavailable", retryable: false, billable: false })
        }))

      it.effect("url_not_allowed", () =>
        Effect.gen(function* () {
          const { key } = yield* givenOrg()
          const result = yield* callTool("read", { url: "http://169.254.169.254/latest/meta-data/" }, { key })
          expectError(result, { status: 400, type: "validation", code: "url_not_allowed", retryable: false, billable: false })
        }))
    })

    describe("auth", () => {
      it.effect("invalid_key: missing, unknown, malformed, revoked", () =>
        Effect.gen(function* () {
          const { key, keyId } = yield* givenOrg()
          const expected = { status: 401, type: "auth", code: "invalid_key", retryable: false, billable: false } as const
          expectError(yield* callTool("weather", { q: "Berlin" }), expected)
          expectError(yield* callTool("weather", { q: "Berlin" }, { key: "tg_" + "A".repeat(32) }), expected)
          expectError(yield* callTool("weather", { q: "Berlin" }, { key: "nonsense" }), expected)
          expectError(yield* callTool("weather", { q: "Berlin" }, { key: "" }), expected)
          const keys = yield* KeyStore
          yield* Effect.orDie(keys.revoke(keyId))
          expectError(yield* callTool("weather", { q: "Berlin" }, { key }), expected)
        }))

      it.effect("invalid_token: the API key in Authorization, even with a valid X-API-Key", () =>
        Effect.gen(function* () {
          const { key } = yield* givenOrg()
          const expected = { status: 401, type: "auth", code: "invalid_token", retryable: false, billable: false } as const
          expectError(yield* callTool("weather", { q: "Berlin" }, { headers: { authorization: `Bearer ${key}` } }), expected)
          expectError(yield* callTool("weather", { q: "Berlin" }, { key, headers: { authorization: `Bearer ${key}` } }), expected)
          // in any scheme, or none: the key is never taken from Authorization, nor ignored there
          const basic = Buffer.from(`${key}:`).toString("base64")
          for (const authorization of [key, `Token ${key}`, `Basic ${basic}`, `Basic ${Buffer.from(`user:${key}`).toString("base64")}`]) {
            expectError(yield* callTool("weather", { q: "Berlin" }, { key, headers: { authorization } }), expected)
          }
          // and on the other routes an API key opens: MCP and kept files
          const mcp = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" })
          const mcpHeaders = { "content-type": "application/json", accept: "application/json, text/event-stream" }
          expectError(yield* request("/mcp", { body: mcp, headers: { ...mcpHeaders, authorization: `Bearer ${key}` } }), expected)
          expectError(yield* request("/mcp", { body: mcp, headers: { ...mcpHeaders, "x-api-key": key, authorization: `Bearer ${key}` } }), expected)
          const file = "/v1/artifacts/art_0123456789abcdef01234567"
          expectError(yield* request(file, { method: "GET", headers: { authorization: `Bearer ${key}` } }), expected)
          expectError(yield* request(file, { method: "GET", headers: { "x-api-key": key, authorization: `Bearer ${key}` } }), expected)
        }))

      // The contract's key record has a hash and no key: nothing the database holds is the key, or contains it
      it.effect("the database holds no API key, only its hash: no row of any table contains the key's text", () =>
        Effect.gen(function* () {
          const { key } = yield* givenOrg()
          expect((yield* callTool("weather", { q: "Berlin" }, { key })).status).toBe(200)
          const sql = yield* SqlClient.SqlClient
          const tables = yield* sql<{ readonly name: string }>`
            SELECT quote_ident(table_schema) || '.' || quote_ident(table_name) AS name FROM information_schema.tables
             WHERE table_schema NOT IN ('pg_catalog', 'information_schema') AND table_type = 'BASE TABLE'`.pipe(Effect.orDie)
          expect(tables.length).toBeGreaterThan(5)
          // the tables whose rows, as text, contain any of `texts`
          const holding = (texts: ReadonlyArray<string>) =>
            Effect.filter(tables, ({ name }) =>
              sql.unsafe<{ readonly n: number }>(
                `SELECT count(*)::int AS n FROM ${name} AS t WHERE ${texts.map((_, i) => `strpos(t::text, $${i + 1}) > 0`).join(" OR ")}`,
                [...texts]
              ).pipe(Effect.orDie, Effect.map((rows) => (rows[0]?.n ?? 0) > 0))).pipe(Effect.map((found) => found.map((t) => t.name)))
          // the scan finds what is there: the key's display prefix (tg_ and 4 characters) is kept with it
          expect(yield* holding([key.slice(0, 7)])).toContain("public.api_keys")
          // and the key itself is nowhere: not as text, not past its prefix, not as bytes (bytea is shown as hex)
          expect(yield* holding([key, key.slice(7), Buffer.from(key).toString("hex")])).toEqual([])
        }))

      it.effect("credential_required: an account tool without a connection, nothing reserved", () =>
        Effect.gen(function* () {
          const { key, orgId } = yield* givenOrg({ credits: 3 })
          const result = yield* callTool("delta_post", { text: "hello" }, { key })
          expectError(result, { status: 401, type: "auth", code: "credential_required", retryable: false, billable: false })
          const b = yield* books(orgId)
          expect(b).toEqual(expect.objectContaining({ balance: 3, held: 0, holdsByStatus: {} }))
        }))

      it.effect("tool_not_allowed: a key limited to other tools", () =>
        Effect.gen(function* () {
          const { orgId } = yield* givenOrg()
          const keys = yield* KeyStore
          const limited = yield* Effect.orDie(keys.create(orgId, { name: "search only", allowedTools: ["search"] }))
          const result = yield* callTool("weather", { q: "Berlin" }, { key: Redacted.value(limited.key) })
          expectError(result, { status: 401, type: "auth", code: "tool_not_allowed", retryable: false, billable: false })
        }))

      it.effect("not_a_member: a signed-in user who belongs to no org", () =>
        Effect.gen(function* () {
          const token = yield* devToken("stranger")
          const result = yield* dashboard("GET", "/v1/org", token)
          expectError(result, { status: 403, type: "auth", code: "not_a_member", retryable: false, billable: false })
        }))

      it.effect("beta_unavailable: a beta tool not enabled for the org", () =>
        Effect.gen(function* () {
          const { key } = yield* givenOrg()
          const result = yield* callTool("iota_delete_service", { service_id: "srv-1" }, { key })
          expectError(result, { status: 401, type: "auth", code: "beta_unavailable", retryable: false, billable: false })
        }))
    })

    describe("credits and limits", () => {
      it.effect("insufficient_credits: 402 before any provider request", () =>
        Effect.gen(function* () {
          const u = yield* TestUpstreams
          u.resetAll()
          const { key } = yield* givenOrg({ credits: 0 })
          const result = yield* callTool("weather", { q: "Berlin" }, { key })
          expectError(result, { status: 402, type: "insufficient_credits", code: "insufficient_credits", retryable: false, billable: false })
          expect(u.openMeteo.hits()).toBe(0)
        }))

      it.effect("spend_cap_exceeded: 429, not retryable, Retry-After until the month ends", () =>
        Effect.gen(function* () {
          const { key } = yield* givenOrg({ credits: 100, cap: 0 })
          const result = yield* callTool("weather", { q: "Berlin" }, { key })
          expectError(result, { status: 429, type: "rate_limited", code: "spend_cap_exceeded", retryable: false, billable: false })
          expect(Number(result.headers.get("retry-after"))).toBeLessThanOrEqual(31 * 24 * 3600)
        }))

      it.effect("key_spend_limit_exceeded: 429, not retryable, the key's own monthly limit", () =>
        Effect.gen(function* () {
          const { orgId } = yield* givenOrg({ credits: 100 })
          const keys = yield* KeyStore
          const limited = yield* Effect.orDie(keys.create(orgId, { name: "capped", spendLimit: 1 }))
          const key = Redacted.value(limited.key)
          expect((yield* callTool("weather", { q: "Berlin" }, { key })).status).toBe(200)
          const result = yield* callTool("weather", { q: "Berlin" }, { key })
          expectError(result, { status: 429, type: "rate_limited", code: "key_spend_limit_exceeded", retryable: false, billable: false })
        }))

      it.effect("rate_limit_exceeded: past the key's burst", () =>
        Effect.gen(function* () {
          const { key } = yield* givenOrg({ credits: 100 })
          const results = yield* Effect.forEach(
            Array.from({ length: 8 }, () => undefined),
            () => callTool("weather", { q: "Berlin" }, { key }),
            { concurrency: 8 }
          )
          const limited = results.filter((r) => r.status === 429)
          expect(limited.length).toBeGreaterThanOrEqual(3)
          for (const r of limited) {
            expectError(r, { status: 429, type: "rate_limited", code: "rate_limit_exceeded", retryable: true, billable: false })
          }
        }))

      it.effect("request_in_progress: the same Idempotency-Key while the first call runs", () =>
        Effect.gen(function* () {
          const u = yield* TestUpstreams
          u.resetAll()
          u.openMeteo.fault({ delayMs: 1_000, times: 1, status: 200, body: { results: [] } })
          const { key } = yield* givenOrg()
          const first = yield* Effect.fork(callTool("weather", { q: "Berlin" }, { key, idempotencyKey: "slow-1" }))
          // the first call has claimed the key once its request reached the provider (a fixed wait was outlasted on a
          // loaded machine: the second call claimed it, and the first was refused)
          for (let i = 0; i < 100 && u.openMeteo.requests.length === 0; i++) yield* Effect.sleep("20 millis")
          expect(u.openMeteo.requests.length).toBe(1)
          const second = yield* callTool("weather", { q: "Berlin" }, { key, idempotencyKey: "slow-1" })
          expectError(second, { status: 429, type: "rate_limited", code: "request_in_progress", retryable: true, billable: false })
          yield* Fiber.join(first)
          u.resetAll()
        }))
    })

    describe("provider", () => {
      const cases: ReadonlyArray<readonly [string, Parameters<import("../src/testing/harness.js").Upstream["fault"]>[0], ExpectedError]> = [
        ["a 5xx", { status: 503 }, { status: 502, type: "provider", code: "provider_unavailable", retryable: true, billable: false }],
        ["a 429", { status: 429 }, { status: 502, type: "provider", code: "provider_rate_limited", retryable: true, billable: false }],
        ["a 4xx", { status: 400, body: { errorMessage: "bad term" } }, { status: 502, type: "provider", code: "provider_rejected", retryable: false, billable: false, message: "bad term" }],
        ["a 401", { status: 401 }, { status: 502, type: "provider", code: "provider_credential_rejected", retryable: false, billable: false }],
        ["an oversized answer", { oversizedBytes: 6 * 1024 * 1024 }, { status: 502, type: "provider", code: "provider_response_too_large", retryable: false, billable: false }],
        ["a deadline", { delayMs: 3000 }, { status: 504, type: "timeout", code: "provider_timeout", retryable: true, billable: false }],
        ["a wrong shape", { wrongShape: true }, { status: 502, type: "normalization", code: "normalization_failed", retryable: false, billable: true, message: "/v1/run" }]
      ]
      for (const [name, fault, expected] of cases) {
        it.effect(`${expected.code}: ${name}`, () =>
          Effect.gen(function* () {
            const u = yield* TestUpstreams
            u.resetAll()
            u.itunes.fault(fault)
            const { key } = yield* givenOrg()
            const result = yield* callTool("mobile_app_search", { query: "notes" }, { key })
            expectError(result, expected)
            u.resetAll()
          }))
      }

      it.effect("write_outcome_unknown: a write the provider answered with a 5xx (it may have been done)", () =>
        Effect.gen(function* () {
          const u = yield* TestUpstreams
          u.resetAll()
          const { key, orgId } = yield* givenOrg()
          yield* Effect.orDie(Effect.flatMap(Connections, (c) => c.connect(orgId, "lambda", CREDENTIALS.lambda, null)))
          u.resend.fault({ status: 503 })
          const result = yield* callTool("lambda_update_broadcast", { id: "bc-1", subject: "March news" }, { key })
          expectError(result, { status: 502, type: "provider", code: "write_outcome_unknown", retryable: false, billable: false, message: "may have been carried out" })
          // sent without an Idempotency-Key: no replay to promise; a retry would send it again
          expectError(result, { status: 502, type: "provider", code: "write_outcome_unknown", retryable: false, billable: false, message: "sent without an Idempotency-Key, a retry sends the write again" })
          expect(result.text).not.toContain("the same Idempotency-Key replays")
          u.resetAll()
        }))

      it.effect("provider_not_configured", () =>
        Effect.gen(function* () {
          const { key } = yield* givenOrg()
          // This gateway has no search provider at all.
          const result = yield* callTool("search", { query: "anything" }, { key })
          expectError(result, { status: 502, type: "provider", code: "provider_not_configured", retryable: false, billable: false })
        }))
    })

    describe("routing", () => {
      it.effect("unknown_tool, after the key is checked", () =>
        Effect.gen(function* () {
          const { key } = yield* givenOrg()
          expectError(yield* callTool("no_such_tool", {}, { key }), { status: 404, type: "not_found", code: "unknown_tool", retryable: false, billable: false })
          expectError(yield* callTool("no_such_tool", {}), { status: 401, type: "auth", code: "invalid_key", retryable: false, billable: false })
        }))

      it.effect("not_found", () =>
        Effect.gen(function* () {
          expectError(yield* request("/nothing/here", { method: "GET" }), { status: 404, type: "not_found", code: "not_found", retryable: false, billable: false })
        }))

      it.effect("method_not_allowed, with Allow", () =>
        Effect.gen(function* () {
          const result = yield* request("/v1/weather", { method: "GET" })
          expectError(result, { status: 405, type: "not_found", code: "method_not_allowed", retryable: false, billable: false })
          expect(result.headers.get("allow")).toBe("POST")
        }))
    })
  }
)

// A database that goes away: internal_error, retryable, no detail leaked; the gateway recovers on its own.
layer(Layer.fresh(gatewayLayer()), { excludeTestServices: true })("internal_error", (it) => {
  it.effect("a database outage is internal_error (retryable), then the gateway recovers", () =>
    Effect.gen(function* () {
      const { key } = yield* givenOrg()
      expect((yield* callTool("weather", { q: "Berlin" }, { key })).status).toBe(200)
      yield* blockDatabase(false)
      const during = yield* callTool("weather", { q: "Berlin" }, { key })
      expectError(during, { status: 500, type: "internal", code: "internal_error", retryable: true, billable: false })
      // and the readiness probe says why, with the envelope
      expectError(yield* request("/readyz", { method: "GET" }), { status: 503, type: "internal", code: "not_ready", retryable: true, billable: false, message: "database unreachable" })
      yield* blockDatabase(true)
      const after = yield* callTool("weather", { q: "Berlin" }, { key })
      expect(after.status).toBe(200)
    }))
})
