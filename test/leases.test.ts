/**
 * Holds carry a lease, and any process's sweeper voids a hold whose lease has passed. Two real processes on
 * one database, with a short lease: a process renews the leases of its own calls in flight, so a call that
 * outlives the lease is still charged exactly once; and a call whose hold was swept anyway (its process was
 * paused past the lease) is answered as charged 0 — never as charged without a journal row — logged at
 * ERROR and counted in /metrics.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { books, gatewayLayer, givenOrg, TestUpstreams } from "./support/gateway.js"
import { envFor, eventually, post, serve } from "./support/processes.js"

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

const metric = (base: string, name: string) =>
  Effect.promise(async () => {
    const text = await (await fetch(`${base}/metrics`)).text()
    const line = text.split("\n").find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`))
    return line === undefined ? 0 : Number(line.split(" ").pop())
  })

layer(gatewayLayer(), { excludeTestServices: true })("hold leases across two processes", (it) => {
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
})
