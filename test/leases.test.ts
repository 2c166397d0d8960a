/**
 * Holds carry a lease, and any process's sweeper voids a hold whose lease has passed. Two real processes on
 * one database, with a short lease: a process renews the leases of its own calls in flight, so a call that
 * outlives the lease is still charged exactly once; and a call whose hold was swept anyway (its process was
 * paused past the lease) is answered as charged 0 — never as charged without a journal row — logged at
 * ERROR and counted in /metrics. A process that stalled past its leases before its call reached the provider does
 * not send it: another process may have told a retry to use a new key, and a write would then be carried out twice.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Deferred, Effect, Fiber } from "effect"
import { Connections } from "../src/services/Connections.js"
import { EPSILON_TOKEN } from "./upstreams/accounts.js"
import { books, gatewayLayer, givenOrg, TestUpstreams } from "./support/gateway.js"
import { envFor, eventually, parse, post, serve } from "./support/processes.js"

const app = { query: "notes", limit: 3 }

/** A lease of 600 ms (renewed every 200 ms), swept every 100 ms; the provider may take 5 s. */
const shortLease = Effect.map(envFor, (env) => ({
  ...env,
  HOLD_LEASE_MS: "600",
  SWEEP_INTERVAL_MS: "100",
  PROVIDER_TIMEOUT_MS: "5000"
}))

const usageOf = (requestId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ readonly credits: number; readonly code: string; readonly status: number }>`
      SELECT credits, code, status FROM usage WHERE request_id = ${requestId}`).pipe(Effect.orDie)

const chargesOf = (orgId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ readonly n: number }>`SELECT count(*)::int AS n FROM journal WHERE org_id = ${orgId} AND kind = 'charge'`).pipe(
      Effect.map((rows) => rows[0]?.n ?? 0),
      Effect.orDie
    )

/** A keyed request sent again until it is no longer `request_in_progress`. */
const decided = (base: string, path: string, key: string, body: unknown, idempotencyKey: string) =>
  eventually(post(base, path, key, body, { "idempotency-key": idempotencyKey }), (answer) => answer.status !== 429, 10_000)

/** The answer for a key whose request never completed: use a new one. */
const expectLost = (answer: { readonly status: number; readonly text: string }) => {
  expect(answer.status).toBe(400)
  expect(parse(answer.text)).toMatchObject({ error: { code: "idempotency_replay_unavailable" } })
}

const metric = (base: string, name: string) =>
  Effect.promise(async () => {
    const text = await (await fetch(`${base}/metrics`)).text()
    const line = text.split("\n").find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`))
    return line === undefined ? 0 : Number(line.split(" ").pop())
  })

layer(gatewayLayer({ providers: { ssrfAllow: ["127.0.0.1"] } }), { excludeTestServices: true })("hold leases across two processes", (it) => {
  it.effect("a call that outlives its lease keeps its hold: the other process's sweeper leaves it, it is charged once", () =>
    Effect.gen(function* () {
      const env = yield* shortLease
      const u = yield* TestUpstreams
      // b's sweeper runs all along
      const [a] = yield* Effect.all([serve([], env), serve([], env)], { concurrency: 2 })
      const { key, orgId } = yield* givenOrg({ credits: 10 })
      u.itunes.reset()
      // four times the lease at the provider
      u.itunes.fault({ delayMs: 2_400, times: 1, status: 200, body: { resultCount: 0, results: [] } })
      const answer = yield* post(a.base, "/v1/mobile_app_search", key, app)
      expect(answer.status).toBe(200)
      expect(answer.headers.get("x-credits-charged")).toBe("1")
      expect(yield* books(orgId)).toMatchObject({ balance: 9, held: 0, journalSum: 9, holdsByStatus: { settled: 1 } })
      expect(yield* chargesOf(orgId)).toBe(1)
      const usage = yield* eventually(usageOf(answer.requestId ?? ""), (rows) => rows.length === 1)
      expect(usage[0]).toMatchObject({ credits: 1, code: "ok", status: 200 })
      expect(yield* metric(a.base, "tool_gateway_settlements_lost_total")).toBe(0)
      expect(yield* metric(a.base, "tool_gateway_lease_renewals_total")).toBeGreaterThanOrEqual(5)
    }).pipe(Effect.scoped), 60_000)

  it.effect("a hold swept while its process was paused: the call is answered and recorded as charged 0, logged at ERROR, counted", () =>
    Effect.gen(function* () {
      const env = yield* shortLease
      const u = yield* TestUpstreams
      // a sweeps without pause, so it is most likely stopped in the middle of a sweep: that must not keep b from
      // sweeping (a sweep is one statement, its lock is never held between statements)
      const [a] = yield* Effect.all([serve([], { ...env, SWEEP_INTERVAL_MS: "1" }), serve([], env)], { concurrency: 2 })
      const { key, orgId } = yield* givenOrg({ credits: 10 })
      u.itunes.reset()
      u.itunes.fault({ delayMs: 2_500, times: 1, status: 200, body: { resultCount: 0, results: [] } })
      const call = yield* Effect.fork(post(a.base, "/v1/mobile_app_search", key, app, { "idempotency-key": "paused-1" }))
      // the call is in flight at the provider; the process stops (as under a debugger, or a stalled VM)
      yield* eventually(Effect.sync(() => u.itunes.hits()), (n) => n === 1)
      yield* Effect.sleep("300 millis")
      a.child.kill("SIGSTOP")
      // the other process's sweeper voids the hold once its lease has passed
      yield* eventually(books(orgId), (b) => b.holdsByStatus["voided"] === 1, 10_000)
      a.child.kill("SIGCONT")
      const answer = yield* call.await.pipe(Effect.flatten)
      expect(answer.status).toBe(200)
      // what was actually charged: nothing, and it says so
      expect(answer.headers.get("x-credits-charged")).toBe("0")
      expect(yield* books(orgId)).toMatchObject({ balance: 10, held: 0, journalSum: 10, holdsByStatus: { voided: 1 } })
      expect(yield* chargesOf(orgId)).toBe(0)
      const usage = yield* eventually(usageOf(answer.requestId ?? ""), (rows) => rows.length === 1)
      expect(usage[0]).toMatchObject({ credits: 0, code: "ok", status: 200 })
      expect(yield* metric(a.base, "tool_gateway_settlements_lost_total")).toBe(1)
      expect(a.output()).toMatch(/"logLevel":"ERROR"[^\n]*settlement not posted \(its hold no longer pending|settlement not posted \(its hold no longer pending[^\n]*"logLevel":"ERROR"/)
      // the replay says the same
      const replay = yield* post(a.base, "/v1/mobile_app_search", key, app, { "idempotency-key": "paused-1" })
      expect(replay.status).toBe(200)
      expect(replay.headers.get("x-credits-charged")).toBe("0")
      expect(u.itunes.hits()).toBe(1)
    }).pipe(Effect.scoped), 60_000)

  it.effect("a write held up past its leases before it reached the provider is never sent: the retry told to use a new key is the only write", () =>
    Effect.gen(function* () {
      const env = { ...(yield* shortLease), SSRF_ALLOW: "127.0.0.1" }
      const u = yield* TestUpstreams
      const sql = yield* SqlClient.SqlClient
      const [a, b] = yield* Effect.all([serve([], env), serve([], env)], { concurrency: 2 })
      const { key, orgId } = yield* givenOrg({ credits: 10 })
      yield* Effect.orDie(Effect.flatMap(Connections, (c) => c.connect(orgId, "epsilon", { base_url: u.rest.url, token: EPSILON_TOKEN }, null)))
      u.rest.reset()
      const payment = { method: "POST", path: "/payments", body: { amount: 500 } }
      // another session holds the org's row, so a's reservation waits for it (as behind a slow statement)
      const locked = yield* Deferred.make<void>()
      const unlock = yield* Deferred.make<void>()
      const holder = yield* Effect.fork(sql.withTransaction(
        sql`SELECT id FROM orgs WHERE id = ${orgId} FOR UPDATE`.pipe(
          Effect.zipRight(Deferred.succeed(locked, undefined)),
          Effect.zipRight(Deferred.await(unlock))
        )
      ).pipe(Effect.orDie))
      yield* Deferred.await(locked)
      const first = yield* Effect.fork(post(a.base, "/v1/epsilon_request", key, payment, { "idempotency-key": "stalled-1" }))
      const waiting = sql<{ readonly n: number }>`
        SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`.pipe(
        Effect.map((rows) => rows[0]?.n ?? 0),
        Effect.orDie
      )
      yield* eventually(waiting, (n) => n === 1)
      // a stops (a stalled VM, a debugger) while its statement waits; the statement then goes through without it
      a.child.kill("SIGSTOP")
      yield* Deferred.succeed(unlock, undefined)
      yield* Fiber.join(holder)
      yield* eventually(books(orgId), (books) => books.pendingHolds === 1)
      // once the lease has run out, b takes the call for dead: the key cannot be replayed, use a new one
      expectLost(yield* decided(b.base, "/v1/epsilon_request", key, payment, "stalled-1"))
      const fresh = yield* post(b.base, "/v1/epsilon_request", key, payment, { "idempotency-key": "stalled-2" })
      expect(fresh.status).toBe(200)
      expect(u.rest.hits("/payments")).toBe(1)
      // a goes on: its call's leases may have run out, so the write is not sent
      a.child.kill("SIGCONT")
      const stalled = yield* Fiber.join(first)
      expect(stalled.status).toBe(500)
      expect(parse(stalled.text)).toMatchObject({ error: { code: "internal_error", retryable: true, billable: false } })
      expect(u.rest.hits("/payments")).toBe(1)
      // and the operator reads why, at ERROR
      const logged = yield* eventually(Effect.sync(() => a.output()), (out) => out.includes("was not sent: its call was held up past its lease"))
      expect(logged).toMatch(/"logLevel":"ERROR"[^\n]*was not sent: its call was held up past its lease|was not sent: its call was held up past its lease[^\n]*"logLevel":"ERROR"/)
      // the key's answer does not change: still never completed, whichever process is asked
      for (const base of [a.base, b.base]) {
        expectLost(yield* post(base, "/v1/epsilon_request", key, payment, { "idempotency-key": "stalled-1" }))
      }
      const after = yield* eventually(books(orgId), (books) => books.pendingHolds === 0)
      expect(after).toMatchObject({ held: 0, journalSum: after.balance, holdsByStatus: { settled: 1, voided: 1 } })
      expect(yield* chargesOf(orgId)).toBe(1)
      expect(u.rest.hits("/payments")).toBe(1)
    }).pipe(Effect.scoped), 60_000)

  it.effect("a key a retry was told is lost stays lost, though its stalled process then finishes the call", () =>
    Effect.gen(function* () {
      const env = yield* shortLease
      const u = yield* TestUpstreams
      const [a, b] = yield* Effect.all([serve([], env), serve([], env)], { concurrency: 2 })
      const { key, orgId } = yield* givenOrg({ credits: 10 })
      u.itunes.reset()
      u.itunes.fault({ delayMs: 2_500, times: 1, status: 200, body: { resultCount: 0, results: [] } })
      const call = yield* Effect.fork(post(a.base, "/v1/mobile_app_search", key, app, { "idempotency-key": "lost-1" }))
      yield* eventually(Effect.sync(() => u.itunes.hits()), (n) => n === 1)
      a.child.kill("SIGSTOP")
      // b answers the key as in progress while the lease holds, then as never completed: use a new key
      expectLost(yield* decided(b.base, "/v1/mobile_app_search", key, app, "lost-1"))
      a.child.kill("SIGCONT")
      // a's own client gets the provider's answer, charged 0 (its hold was voided)
      const answer = yield* Fiber.join(call)
      expect(answer.status).toBe(200)
      expect(answer.headers.get("x-credits-charged")).toBe("0")
      // the key keeps the answer its retry got: a does not keep its 200 under it, nor renew it back to running
      yield* Effect.sleep("700 millis")
      for (const base of [a.base, b.base]) {
        expectLost(yield* post(base, "/v1/mobile_app_search", key, app, { "idempotency-key": "lost-1" }))
      }
      expect(u.itunes.hits()).toBe(1)
      expect(yield* books(orgId)).toMatchObject({ balance: 10, held: 0, journalSum: 10, holdsByStatus: { voided: 1 } })
    }).pipe(Effect.scoped), 60_000)
})
