/**
 * Several real gateway processes (the built `tool-gateway serve`) on one PostgreSQL: idempotency, key
 * revocation and the spend cap hold across them; a process killed with calls in flight loses no credit
 * and leaves no hold behind once restarted; SIGTERM drains in-flight calls and exits 0; a database outage
 * under load is `internal_error`, charges nothing, orphans no hold, and the processes recover by themselves.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { errorOf } from "./support/assert.js"
import { blockDatabase } from "./support/database.js"
import { books, gatewayLayer, givenMember, givenOrg, TestUpstreams } from "./support/gateway.js"
import { type Answer, envFor, eventually, parse, post, serve, settledBooks, start, statuses, stop } from "./support/processes.js"

const app = { query: "notes", limit: 3 }

layer(gatewayLayer(), { excludeTestServices: true })("two processes on one database", (it) => {
  it.effect("the same Idempotency-Key sent to both at once: one provider call, one charge", () =>
    Effect.gen(function* () {
      const env = yield* envFor
      const u = yield* TestUpstreams
      const [a, b] = yield* Effect.all([serve([], env), serve([], env)], { concurrency: 2 })
      const { key, orgId } = yield* givenOrg({ credits: 10 })
      u.itunes.reset()
      u.itunes.fault({ delayMs: 300, times: 1 })
      const answers = yield* Effect.all(
        [
          post(a.base, "/v1/mobile_app_search", key, app, { "idempotency-key": "twice-1" }),
          post(b.base, "/v1/mobile_app_search", key, app, { "idempotency-key": "twice-1" })
        ],
        { concurrency: 2 }
      )
      expect(u.itunes.hits()).toBe(1)
      // one ran; the other either waited its turn (request_in_progress) or got the replay
      const ok = answers.filter((r) => r.status === 200)
      expect(ok.length).toBeGreaterThanOrEqual(1)
      for (const r of answers.filter((x) => x.status !== 200)) expect(errorOf({ ...r, body: parse(r.text) })?.code).toBe("request_in_progress")
      // a retry through either process is the replay
      const again = yield* post(b.base, "/v1/mobile_app_search", key, app, { "idempotency-key": "twice-1" })
      expect(again.status).toBe(200)
      expect(again.headers.get("idempotent-replayed")).toBe("true")
      expect(u.itunes.hits()).toBe(1)
      expect(yield* settledBooks(orgId)).toMatchObject({ balance: 9, held: 0, journalSum: 9 })
    }).pipe(Effect.scoped), 60_000)

  it.effect("a key revoked through one process is refused by the other on its very next request", () =>
    Effect.gen(function* () {
      const env = yield* envFor
      const [a, b] = yield* Effect.all([serve([], env), serve([], env)], { concurrency: 2 })
      const member = yield* givenMember({ credits: 100 })
      // both processes have the key in their cache
      expect((yield* post(a.base, "/v1/mobile_app_search", member.key, app)).status).toBe(200)
      expect((yield* post(b.base, "/v1/mobile_app_search", member.key, app)).status).toBe(200)
      const revoked = yield* Effect.promise(() =>
        fetch(`${a.base}/v1/keys/${member.keyId}`, { method: "DELETE", headers: { authorization: `Bearer ${member.token}` } })
      )
      expect(revoked.status).toBe(200)
      for (const body of [app, { query: 5 }]) {
        const answer = yield* post(b.base, "/v1/mobile_app_search", member.key, body)
        expect(answer.status).toBe(401)
        expect(errorOf({ ...answer, body: parse(answer.text) })?.code).toBe("invalid_key")
      }
    }).pipe(Effect.scoped), 60_000)

  it.effect("the spend cap holds across processes under concurrent calls", () =>
    Effect.gen(function* () {
      const env = yield* envFor
      const [a, b] = yield* Effect.all([serve([], env), serve([], env)], { concurrency: 2 })
      const { key, orgId } = yield* givenOrg({ credits: 100, cap: 10 })
      const answers = yield* Effect.forEach(
        Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? a : b)),
        (p) => post(p.base, "/v1/mobile_app_search", key, app),
        { concurrency: 40 }
      )
      expect(statuses(answers)).toEqual({ "200": 10, "429 spend_cap_exceeded": 30 })
      expect(yield* settledBooks(orgId)).toMatchObject({ balance: 90, held: 0, monthSpend: 10, journalSum: 90 })
    }).pipe(Effect.scoped), 60_000)

  it.effect("many concurrent calls on both against a balance that covers a quarter: exactly that many charged", () =>
    Effect.gen(function* () {
      const env = yield* envFor
      const [a, b] = yield* Effect.all([serve([], env), serve([], env)], { concurrency: 2 })
      const { key, orgId } = yield* givenOrg({ credits: 30 })
      const answers = yield* Effect.forEach(
        Array.from({ length: 120 }, (_, i) => (i % 2 === 0 ? a : b)),
        (p) => post(p.base, "/v1/mobile_app_search", key, app),
        { concurrency: 60 }
      )
      expect(statuses(answers)).toEqual({ "200": 30, "402 insufficient_credits": 90 })
      expect(yield* settledBooks(orgId)).toMatchObject({ balance: 0, held: 0, journalSum: 0 })
    }).pipe(Effect.scoped), 60_000)
})

layer(gatewayLayer(), { excludeTestServices: true })("a process that dies", (it) => {
  it.effect("SIGKILL with 200 calls in flight: after the lease every hold is settled or voided, the journal sums to the balance, no lost answer is charged unless settled, keys are replayable or replay_unavailable", () =>
    Effect.gen(function* () {
      const env = yield* envFor
      const u = yield* TestUpstreams
      const sql = yield* SqlClient.SqlClient
      const { key, orgId } = yield* givenOrg({ credits: 1000 })
      const victim = yield* start([], env)
      u.itunes.reset()
      // 50 calls that complete, then 200 held up at the provider when the process is killed
      const done = yield* Effect.forEach(
        Array.from({ length: 50 }, (_, i) => i),
        (i) => post(victim.base, "/v1/mobile_app_search", key, app, { "idempotency-key": `crash-${i}` }),
        { concurrency: 10 }
      )
      expect(done.every((r) => r.status === 200)).toBe(true)
      u.itunes.fault({ delayMs: 1_200 })
      const calls = yield* Effect.forEach(
        Array.from({ length: 200 }, (_, i) => 50 + i),
        (i) => post(victim.base, "/v1/mobile_app_search", key, app, { "idempotency-key": `crash-${i}` }),
        { concurrency: 200 }
      ).pipe(Effect.fork)
      // kill it once (nearly) all of them are at the provider, past their reservation
      yield* eventually(Effect.sync(() => u.itunes.hits()), (n) => n >= 50 + 180)
      expect(yield* stop(victim, "SIGKILL")).toBe(null)
      const answers = [...done, ...(yield* calls.await.pipe(Effect.flatMap((exit) => exit)))]
      u.itunes.fault()
      const answered = answers.filter((r) => r.status === 200).length

      // a restarted process sweeps the dead one's holds once their lease is over
      const restarted = yield* serve([], env)
      const after = yield* settledBooks(orgId)
      expect(after.held).toBe(0)
      expect(after.journalSum).toBe(after.balance)
      // charged: the calls that settled; that includes every answer the client received, and no call
      // the provider never saw
      const charged = 1000 - after.balance
      const settled = Number(after.holdsByStatus["settled"] ?? 0)
      expect(charged).toBe(settled)
      expect(charged).toBeGreaterThanOrEqual(answered)
      expect(charged).toBeLessThanOrEqual(u.itunes.hits())
      expect(Number(after.holdsByStatus["voided"] ?? 0) + settled).toBe(Number(yield* sql<{ readonly n: number }>`
        SELECT count(*)::int AS n FROM holds WHERE org_id = ${orgId}`.pipe(Effect.orDie, Effect.map((r) => r[0]?.n ?? 0))))

      // every key the dead process claimed: the stored answer, or idempotency_replay_unavailable — never a
      // second provider call; a key it never claimed is new, and runs once
      const claimed = new Set((yield* sql<{ readonly key: string }>`
        SELECT key FROM idempotency WHERE org_id = ${orgId}`.pipe(Effect.orDie)).map((r) => r.key))
      const hitsBefore = u.itunes.hits()
      const retries = yield* Effect.forEach(
        Array.from({ length: 250 }, (_, i) => `crash-${i}`),
        (k) => Effect.map(post(restarted.base, "/v1/mobile_app_search", key, app, { "idempotency-key": k }), (r) => ({ k, r })),
        { concurrency: 20 }
      )
      let fresh = 0
      for (const { k, r } of retries) {
        if (!claimed.has(k)) {
          expect(r.status).toBe(200)
          fresh++
        } else if (r.status === 200) {
          expect(r.headers.get("idempotent-replayed")).toBe("true")
        } else {
          expect(errorOf({ ...r, body: parse(r.text) })?.code).toBe("idempotency_replay_unavailable")
        }
      }
      expect(u.itunes.hits() - hitsBefore).toBe(fresh)
      const unavailable = retries.filter(({ r }) => r.status !== 200).length
      console.log(`crash: 250 calls (200 in flight at the kill), ${answered} answered before SIGKILL, ${hitsBefore} reached the provider, ` +
        `${settled} settled and charged, ${Number(after.holdsByStatus["voided"] ?? 0)} holds voided by the sweeper; ` +
        `retries: ${retries.length - unavailable - fresh} replayed, ${unavailable} idempotency_replay_unavailable, ${fresh} never claimed (ran once)`)
      const final = yield* settledBooks(orgId)
      expect(final.balance).toBe(after.balance - fresh)
      expect(final.journalSum).toBe(final.balance)
    }).pipe(Effect.scoped), 120_000)

  it.effect("SIGTERM lets in-flight calls finish and settle, then exits 0", () =>
    Effect.gen(function* () {
      const env = yield* envFor
      const u = yield* TestUpstreams
      const { key, orgId } = yield* givenOrg({ credits: 100 })
      const served = yield* start([], env)
      u.itunes.reset()
      u.itunes.fault({ delayMs: 600 })
      const calls = yield* Effect.forEach(
        Array.from({ length: 20 }),
        () => post(served.base, "/v1/mobile_app_search", key, app),
        { concurrency: 20 }
      ).pipe(Effect.fork)
      yield* eventually(Effect.sync(() => u.itunes.hits()), (n) => n >= 20)
      const code = yield* stop(served, "SIGTERM")
      const answers = yield* calls.await.pipe(Effect.flatMap((exit) => exit))
      u.itunes.fault()
      expect(code).toBe(0)
      expect(statuses(answers)).toEqual({ "200": 20 })
      expect(yield* books(orgId)).toMatchObject({ balance: 80, held: 0, pendingHolds: 0, journalSum: 80 })
      // and it no longer accepts anything (test ports are never handed out twice: see freePort)
      expect((yield* post(served.base, "/v1/mobile_app_search", key, app)).status).toBe(0)
    }).pipe(Effect.scoped), 60_000)
})

layer(gatewayLayer(), { excludeTestServices: true })("a database outage under load", (it) => {
  it.effect("calls fail with internal_error (retryable) and charge nothing; no hold is orphaned; both processes recover by themselves", () =>
    Effect.gen(function* () {
      const env = yield* envFor
      const [a, b] = yield* Effect.all([serve([], env), serve([], env)], { concurrency: 2 })
      const { key, orgId } = yield* givenOrg({ credits: 1000 })
      const answers: Array<Answer> = []
      const traffic = Effect.forEach(
        Array.from({ length: 150 }, (_, i) => (i % 2 === 0 ? a : b)),
        (p) => Effect.tap(post(p.base, "/v1/mobile_app_search", key, app), (r) => Effect.sync(() => answers.push(r))).pipe(
          Effect.zipLeft(Effect.sleep("10 millis"))
        ),
        { concurrency: 4 }
      )
      const fiber = yield* Effect.fork(traffic)
      yield* Effect.sleep("300 millis")
      yield* blockDatabase(false)
      yield* Effect.sleep("700 millis")
      yield* blockDatabase(true)
      yield* fiber.await

      const counted = statuses(answers)
      expect(counted["200"] ?? 0).toBeGreaterThan(0)
      expect(counted["500 internal_error"] ?? 0).toBeGreaterThan(0)
      expect(Object.keys(counted).sort()).toEqual(["200", "500 internal_error"])
      for (const r of answers.filter((x) => x.status === 500)) {
        expect(parse(r.text)).toMatchObject({ error: { code: "internal_error", retryable: true, billable: false } })
      }
      // recovered without a restart
      expect((yield* post(a.base, "/v1/mobile_app_search", key, app)).status).toBe(200)
      expect((yield* post(b.base, "/v1/mobile_app_search", key, app)).status).toBe(200)
      const after = yield* settledBooks(orgId)
      // charged: exactly what the answered calls say (plus the two above) — a call whose settlement the database did
      // not take says 0 — and a failed call is never charged
      const said = answers.reduce((sum, r) => sum + Number(r.headers.get("x-credits-charged") ?? 0), 0)
      const free = answers.filter((r) => r.status === 200 && r.headers.get("x-credits-charged") === "0").length
      expect(after).toMatchObject({ held: 0, journalSum: after.balance })
      expect(1000 - after.balance).toBe(said + 2)
      console.log(`database outage: ${answers.length} calls, ${JSON.stringify(counted)} (${free} answered charged 0), ` +
        `charged ${1000 - after.balance - 2}, holds ${JSON.stringify(after.holdsByStatus)}`)
    }).pipe(Effect.scoped), 90_000)
})
