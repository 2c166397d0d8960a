/**
 * Per-key rate limits: a token bucket per key (the gateway's default, or the key's own), announced in
 * `RateLimit-Policy` and `RateLimit` on every answer to an API key, `429 rate_limit_exceeded` with
 * `Retry-After` past it; kept in memory per process, or in Redis (`REDIS_URL`) and then shared by every
 * process.
 */
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect } from "effect"
import { expectEnvelope, expectOk } from "./support/assert.js"
import { TestDatabaseUrl } from "./support/database.js"
import { callTool, capturedLogs, dashboard, gatewayLayer, givenMember, givenOrg, request, TEST_ENCRYPTION_KEY, TestUpstreams } from "./support/gateway.js"
import { KeyStore } from "../src/services/KeyStore.js"
import { post, serve } from "./support/processes.js"
import { Duration, Option, Redacted, Schema, TestClock, TestContext } from "effect"
import * as MemoryRateLimitStore from "../src/services/MemoryRateLimitStore.js"
import { Redis } from "ioredis"

const limited = { status: 429, type: "rate_limited", code: "rate_limit_exceeded", retryable: true, billable: false } as const

/**
 * A key of 1 a second with a burst of 1: a call, then one 1.9 s later and one 0.1 s after that. A bucket that counted
 * its time full as refills owed (its last refill at 1 s, not 1.9) gave the third a token 0.1 s after the second: the
 * third comes at least 2 s after the first, and less than 1 s after the second on a machine as loaded as it may be.
 */
const earlyToken = (key: string) =>
  Effect.gen(function* () {
    const statuses: Array<number> = []
    const call = Effect.map(callTool("weather", { q: 5 }, { key }), (r) => statuses.push(r.status))
    yield* call
    yield* Effect.sleep("1900 millis")
    yield* call
    yield* Effect.sleep("100 millis")
    yield* call
    return statuses
  })

/**
 * A key of 1 a second with a burst of 3, its bucket emptied, then its limit lowered to a burst of 2: the next call is
 * refused (a bucket named by its policy started full again, and two more calls passed at once).
 */
const loweredLimit = Effect.gen(function* () {
  const { orgId } = yield* givenOrg({ credits: 1000 })
  const keys = yield* KeyStore
  const created = yield* Effect.orDie(keys.create(orgId, { name: "abusive", rateLimit: { perSecond: 1, burst: 3 } }))
  const key = Redacted.value(created.key)
  const statuses = (count: number) =>
    Effect.forEach(Array.from({ length: count }), () => Effect.map(callTool("weather", { q: 5 }, { key }), (r) => r.status))
  const before = yield* statuses(4)
  yield* Effect.orDie(keys.update(created.id, orgId, { rateLimit: { perSecond: 1, burst: 2 } }))
  return { before, after: yield* statuses(1) }
})

/** A key of a fresh org with its own rate limit. */
const keyWithLimit = (perSecond: number, burst: number) =>
  Effect.gen(function* () {
    const { orgId } = yield* givenOrg({ credits: 1000 })
    const keys = yield* KeyStore
    const created = yield* Effect.orDie(keys.create(orgId, { name: "limited", rateLimit: { perSecond, burst } }))
    return Redacted.value(created.key)
  })

layer(gatewayLayer({ server: { rateLimitPerSecond: 5, rateLimitBurst: 5 } }), { excludeTestServices: true })("rate limits", (it) => {
  it.effect("every answer to a key carries its policy and what is left; past the burst, 429 with Retry-After", () =>
    Effect.gen(function* () {
      const { key } = yield* givenOrg({ credits: 100 })
      const ok = yield* callTool("weather", { q: "Berlin" }, { key })
      expectOk(ok)
      expect(ok.headers.get("ratelimit-policy")).toBe(`"key";q=5;w=1`)
      expect(ok.headers.get("ratelimit")).toMatch(/^"key";r=4;t=\d+$/)

      // a key refilled at 1 per second, burst 5: quick requests use it up; validation errors count too
      const slow = yield* keyWithLimit(1, 5)
      const answers = []
      for (let i = 0; i < 8; i++) answers.push(yield* callTool("weather", { q: 5 }, { key: slow }))
      expect(answers[0]?.headers.get("ratelimit-policy")).toBe(`"key";q=5;w=5`)
      const remaining = answers.filter((a) => a.status === 400).map((a) => Number(a.headers.get("ratelimit")?.match(/r=(\d+)/)?.[1] ?? "-1"))
      expect(remaining[0]).toBe(4)
      for (let i = 1; i < remaining.length; i++) expect(remaining[i]).toBeLessThanOrEqual(remaining[i - 1] ?? 0)
      const refused = answers.find((a) => a.status === 429)
      expect(refused).toBeDefined()
      if (refused === undefined) return
      expectEnvelope(refused, limited)
      expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)
      expect(refused.headers.get("ratelimit-policy")).toBe(`"key";q=5;w=5`)
      // empty, the bucket is full again after its whole window (5 tokens at 1 a second), as a 2xx at r=0 says
      expect(refused.headers.get("ratelimit")).toBe(`"key";r=0;t=5`)
    }))

  it.effect("a key's own limit replaces the default, for that key only", () =>
    Effect.gen(function* () {
      const strict = yield* keyWithLimit(1, 2)
      const generous = yield* keyWithLimit(100, 50)
      const strictAnswers = []
      for (let i = 0; i < 3; i++) strictAnswers.push((yield* callTool("weather", { q: 5 }, { key: strict })))
      expect(strictAnswers.map((a) => a.status)).toEqual([400, 400, 429])
      expect(strictAnswers[0]?.headers.get("ratelimit-policy")).toBe(`"key";q=2;w=2`)
      // the policy says what the rate allows in its window, where that is more than the burst: a key of 100 a second
      // with a burst of 1 (said as 1 a second), and one of 3 a second with a burst of 10 (said as 10 per 4 s)
      const paced = yield* callTool("weather", { q: 5 }, { key: yield* keyWithLimit(100, 1) })
      expect(paced.headers.get("ratelimit-policy")).toBe(`"key";q=100;w=1`)
      const thirds = yield* callTool("weather", { q: 5 }, { key: yield* keyWithLimit(3, 10) })
      expect(thirds.headers.get("ratelimit-policy")).toBe(`"key";q=12;w=4`)
      const generousAnswers = []
      for (let i = 0; i < 20; i++) generousAnswers.push((yield* callTool("weather", { q: 5 }, { key: generous })).status)
      expect(generousAnswers.every((s) => s === 400)).toBe(true)
    }))

  it.effect("a bucket that was full owes no refills: one token, then the next a whole refill after it (it came early)", () =>
    Effect.gen(function* () {
      expect(yield* earlyToken(yield* keyWithLimit(1, 1))).toEqual([400, 400, 429])
    }))

  it.effect("a key's lowered limit holds at once: no new, full bucket to spend", () =>
    Effect.gen(function* () {
      expect(yield* loweredLimit).toEqual({ before: [400, 400, 400, 429], after: [429] })
    }))

  it.effect("the dashboard creates a key with its own limit, shows it, and refuses nonsense", () =>
    Effect.gen(function* () {
      const member = yield* givenMember()
      const created = yield* dashboard("POST", "/v1/keys", member.token, { name: "bot", rate_limit: { per_second: 3, burst: 6 } })
      expect(created.status).toBe(201)
      expect(created.body).toMatchObject({ name: "bot", rate_limit: { per_second: 3, burst: 6 } })
      const plain = yield* dashboard("POST", "/v1/keys", member.token, { name: "plain" })
      expect(plain.body).toMatchObject({ rate_limit: null })
      const bad = yield* dashboard("POST", "/v1/keys", member.token, { name: "bad", rate_limit: { per_second: 0, burst: 1 } })
      expectEnvelope(bad, { status: 400, type: "validation", code: "invalid_request", retryable: false, billable: false, message: "per_second" })
    }))
})

layer(gatewayLayer({ server: { rateLimitPerSecond: 5, rateLimitBurst: 5, rateLimitMaxPerSecond: 20, rateLimitMaxBurst: 30 } }), {
  excludeTestServices: true
})("the operator's maximum for a key's own rate", (it) => {
  it.effect("a member sets a key's rate within RATE_LIMIT_MAX_PER_SECOND and RATE_LIMIT_MAX_BURST, not above", () =>
    Effect.gen(function* () {
      const member = yield* givenMember()
      const over = { status: 400, type: "validation", code: "invalid_request", retryable: false, billable: false, message: "at most 20 requests per second with a burst of 30" } as const
      // any member could give a key 100,000 a second: the operator's limit was the tenant's to lift
      expectEnvelope(yield* dashboard("POST", "/v1/keys", member.token, { name: "fast", rate_limit: { per_second: 100_000, burst: 100_000 } }), over)
      expectEnvelope(yield* dashboard("POST", "/v1/keys", member.token, { name: "bursty", rate_limit: { per_second: 20, burst: 31 } }), over)
      const within = yield* dashboard("POST", "/v1/keys", member.token, { name: "within", rate_limit: { per_second: 20, burst: 30 } })
      expect(within.status).toBe(201)
      const id = Schema.decodeUnknownSync(Schema.Struct({ id: Schema.String }))(within.body).id
      expectEnvelope(yield* dashboard("PATCH", `/v1/keys/${id}`, member.token, { rate_limit: { per_second: 21, burst: 30 } }), over)
      expect((yield* dashboard("PATCH", `/v1/keys/${id}`, member.token, { rate_limit: { per_second: 2, burst: 3 } })).status).toBe(200)
    }))

  it.effect("a key whose own rate is above the maximum (set by the CLI, or before the maximum was lowered) is held to it", () =>
    Effect.gen(function* () {
      const answer = yield* callTool("weather", { q: 5 }, { key: yield* keyWithLimit(1_000, 1_000) })
      // 20 a second with a burst of 30: said as 40 per 2 s
      expect(answer.headers.get("ratelimit-policy")).toBe(`"key";q=40;w=2`)
    }))
})

const redisUrl = process.env["TEST_REDIS_URL"] ?? ""
if (redisUrl === "") console.log("Skipping the shared (Redis) rate limit tests: TEST_REDIS_URL is not set.")

layer(gatewayLayer(), { excludeTestServices: true })("rate limits across processes", (it) => {
  const envFor = (redis: string | undefined) =>
    Effect.gen(function* () {
      const { url } = yield* TestDatabaseUrl
      const u = yield* TestUpstreams
      return {
        DATABASE_URL: url,
        GATEWAY_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
        APPSTORE_BASE_URL: u.itunes.url,
        GATEWAY_BOOTSTRAP: "false",
        LOG_LEVEL: "error",
        ...(redis !== undefined ? { REDIS_URL: redis } : {})
      }
    })

  const burstThroughBoth = (redis: string | undefined) =>
    Effect.gen(function* () {
      const env = yield* envFor(redis)
      const [a, b] = yield* Effect.all([serve([], env), serve([], env)], { concurrency: 2 })
      const key = yield* keyWithLimit(1, 5)
      const answers = yield* Effect.forEach(
        Array.from({ length: 10 }, (_, i) => (i % 2 === 0 ? a : b)),
        (p) => post(p.base, "/v1/mobile_app_search", key, { query: 5 }),
        { concurrency: 10 }
      )
      return answers.filter((r) => r.status === 400).length
    }).pipe(Effect.scoped)

  it.effect("with Redis away, the process's output stays its JSON lines: no client stack trace each second", () =>
    Effect.gen(function* () {
      const served = yield* serve([], { ...(yield* envFor("redis://127.0.0.1:1")), LOG_LEVEL: "warning" })
      const key = yield* keyWithLimit(100, 100)
      expect((yield* post(served.base, "/v1/mobile_app_search", key, { query: 5 })).status).toBe(400)
      // the client reconnects every second or so; each failure was an "[ioredis] Unhandled error event" and its stack
      yield* Effect.sleep("1500 millis")
      const lines = served.output().split("\n").filter((l) => l.trim() !== "")
      expect(served.output()).not.toContain("Unhandled error event")
      for (const line of lines) expect(() => JSON.parse(line), line).not.toThrow()
    }).pipe(Effect.scoped), 60_000)

  it.effect("without Redis, each process keeps its own buckets", () =>
    Effect.gen(function* () {
      expect(yield* burstThroughBoth(undefined)).toBe(10)
    }), 60_000)

  describe.skipIf(redisUrl === "")("with REDIS_URL", () => {
    it.effect("the processes share each key's bucket", () =>
      Effect.gen(function* () {
        const passed = yield* burstThroughBoth(redisUrl)
        // a burst of 5 for both together (a sixth token may refill while the calls run)
        expect(passed).toBeGreaterThanOrEqual(5)
        expect(passed).toBeLessThanOrEqual(6)
      }), 60_000)
  })
})

/** The Redis key of a key's bucket, as the gateway names it (one a key, whatever its policy). */
const bucketKey = (keyId: string) => `tool-gateway:rate:${keyId}`

layer(gatewayLayer({ server: { redisUrl: redisUrl === "" ? Option.none() : Option.some(Redacted.make(redisUrl)) } }), {
  excludeTestServices: true
})("a key's bucket in Redis", (it) => {
  it.effect.skipIf(redisUrl === "")("expires once it would be full again, and a half of it lost (evicted) starts it full, not unlimited", () =>
    Effect.gen(function* () {
      const redis = yield* Effect.acquireRelease(
        Effect.sync(() => new Redis(redisUrl, { lazyConnect: false })),
        (client) => Effect.promise(() => client.quit())
      )
      const { orgId } = yield* givenOrg({ credits: 1000 })
      const created = yield* Effect.orDie((yield* KeyStore).create(orgId, { name: "limited", rateLimit: { perSecond: 1, burst: 3 } }))
      const key = Redacted.value(created.key)
      const bucket = bucketKey(created.id)
      const statuses = (count: number) =>
        Effect.forEach(Array.from({ length: count }), () => Effect.map(callTool("weather", { q: 5 }, { key }), (r) => r.status))
      expect(yield* statuses(4)).toEqual([400, 400, 400, 429])
      // both halves expire: by the time the bucket is full again (3 tokens at 1 a second), at most 4 s
      for (const name of [bucket, `${bucket}:refill`]) {
        const ttl = yield* Effect.promise(() => redis.pttl(name))
        expect(ttl).toBeGreaterThan(0)
        expect(ttl).toBeLessThanOrEqual(4_000)
      }
      // Redis evicts one half under memory pressure: the bucket starts again full, and is still a limit
      yield* Effect.promise(() => redis.del(`${bucket}:refill`))
      expect(yield* statuses(5)).toEqual([400, 400, 400, 429, 429])
    }).pipe(Effect.scoped), 30_000)

  it.effect.skipIf(redisUrl === "")("a bucket that was full owes no refills: the next token a whole refill after the bucket filled", () =>
    Effect.gen(function* () {
      const { orgId } = yield* givenOrg({ credits: 1000 })
      const created = yield* Effect.orDie((yield* KeyStore).create(orgId, { name: "paced", rateLimit: { perSecond: 1, burst: 1 } }))
      expect(yield* earlyToken(Redacted.value(created.key))).toEqual([400, 400, 429])
    }), 30_000)

  it.effect.skipIf(redisUrl === "")("a key's lowered limit holds at once: no new, full bucket to spend", () =>
    Effect.gen(function* () {
      expect(yield* loweredLimit).toEqual({ before: [400, 400, 400, 429], after: [429] })
    }), 30_000)

  it.effect.skipIf(redisUrl === "")("of any rate, a refill a fraction of a millisecond included (3 a second, 333.3… ms), is a limit", () =>
    Effect.gen(function* () {
      const { orgId } = yield* givenOrg({ credits: 1000 })
      const created = yield* Effect.orDie((yield* KeyStore).create(orgId, { name: "thirds", rateLimit: { perSecond: 3, burst: 3 } }))
      const key = Redacted.value(created.key)
      const statuses = yield* Effect.forEach(Array.from({ length: 5 }), () =>
        Effect.map(callTool("weather", { q: 5 }, { key }), (r) => r.status))
      expect(statuses).toEqual([400, 400, 400, 429, 429])
    }), 30_000)
})

const LogLine = Schema.Struct({ message: Schema.Unknown, logLevel: Schema.String })

// Redis that cannot be reached (nothing listens on port 1): each process limits its keys on its own, and the log says
// why, in one line.
layer(gatewayLayer({ server: { rateLimitPerSecond: 5, rateLimitBurst: 5, redisUrl: Option.some(Redacted.make("redis://127.0.0.1:1")) } }), {
  excludeTestServices: true
})(
  "rate limits with Redis away",
  (it) => {
    it.effect("calls are limited by the process's own buckets (they were let through, every one); one WARN line, a string that names the store's error", () =>
      Effect.gen(function* () {
        // a key of 1 a second with a burst of 5 (a token a second: none comes back while the seven calls run)
        const key = yield* keyWithLimit(1, 5)
        expectOk(yield* callTool("mobile_app_search", { query: "no redis" }, { key }), 1)
        // four more pass, then 429
        const statuses = yield* Effect.forEach(Array.from({ length: 6 }), () =>
          Effect.map(callTool("mobile_app_search", { query: 5 }, { key }), (r) => r.status))
        expect(statuses).toEqual([400, 400, 400, 400, 429, 429])
        // each counted: the seven calls Redis did not decide
        const metrics = yield* request("/metrics", { method: "GET" })
        expect(Number(/^tool_gateway_rate_limit_store_failures_total(?:\{[^}]*\})? (\d+)$/m.exec(metrics.text)?.[1] ?? "0")).toBeGreaterThanOrEqual(7)
        const warnings = capturedLogs
          .map((line) => Schema.decodeUnknownSync(LogLine)(JSON.parse(line)))
          .filter((l) => l.logLevel === "WARN" && JSON.stringify(l.message).includes("rate limit store unavailable"))
        expect(warnings.length).toBeGreaterThanOrEqual(1)
        expect(typeof warnings[0]?.message).toBe("string")
        expect(String(warnings[0]?.message)).toMatch(/^rate limit store unavailable \(.+\); each process limits its keys on its own meanwhile$/)
      }))
  }
)

describe("the process's own buckets", () => {
  // (a member who makes key after key, or changes a key's limit again and again, made one bucket each, kept for good)
  it.effect("owe no refills for the time they were full: the next token a whole refill after the bucket filled", () =>
    Effect.gen(function* () {
      const store = yield* MemoryRateLimitStore.make()
      const take = store.tokenBucket({ key: "k", tokens: 1, limit: 1, refillRate: Duration.seconds(1), allowOverflow: false })
      expect(yield* take).toBe(0)
      yield* TestClock.adjust("1900 millis")
      expect(yield* take).toBe(0)
      // 0.6 s later: the refill counts from 1.9 s (it counted from 1 s: a token after 0.1 s)
      yield* TestClock.adjust("600 millis")
      expect(yield* take).toBe(-1)
      yield* TestClock.adjust("400 millis")
      expect(yield* take).toBe(0)
    }).pipe(Effect.provide(TestContext.TestContext)))

  it.effect("are at most so many, the least recently used dropped first (a dropped bucket starts full)", () =>
    Effect.gen(function* () {
      const store = yield* MemoryRateLimitStore.make(3)
      const take = (key: string) => store.tokenBucket({ key, tokens: 1, limit: 1, refillRate: Duration.hours(1), allowOverflow: false })
      expect(yield* Effect.forEach(["a", "b", "c"], take)).toEqual([0, 0, 0])
      expect(yield* take("a")).toBe(-1)
      // a fourth bucket: b, used least recently, is dropped; a and c are kept, and still empty
      expect(yield* take("d")).toBe(0)
      expect(yield* take("b")).toBe(0)
      expect(yield* take("a")).toBe(-1)
      // b came back, so c (used before a and d) went
      expect(yield* take("c")).toBe(0)
    }))
})
