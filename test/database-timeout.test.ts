/**
 * A database that does not answer a call's key lookup or reservation: the call is answered `500 internal_error` (retryable, not
 * billable) after DATABASE_TIMEOUT_MS, before its provider is called, and what the statement does when the database
 * takes it after all is undone — so a caller who retries later (with the same Idempotency-Key) is served once,
 * and a write is never sent after its caller was told it failed.
 *
 * The database here does not answer because another session holds the org's row (the reservation waits on its
 * lock): from the gateway's side, the same as a database that stopped answering on an open connection.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect, Schedule } from "effect"
import Pg from "pg"
import { expectEnvelope, expectOk } from "./support/assert.js"
import { TestDatabaseUrl } from "./support/database.js"
import { books, callTool, gatewayLayer, givenOrg, hangUp, TestUpstreams } from "./support/gateway.js"

const TIMEOUT_MS = 500

/** Another session that holds a lock (taken by `statement`) until `release`. */
const holding = (statement: string, params: ReadonlyArray<string> = []) =>
  Effect.gen(function* () {
    const { url } = yield* TestDatabaseUrl
    const session = new Pg.Client({ connectionString: url })
    yield* Effect.promise(async () => {
      await session.connect()
      await session.query("BEGIN")
      await session.query(statement, [...params])
    })
    return { release: Effect.promise(async () => { await session.query("COMMIT"); await session.end() }) }
  })

/** Another session that holds an org's row (a reservation waits for it). */
const holdOrgRow = (orgId: string) => holding("SELECT id FROM orgs WHERE id = $1 FOR UPDATE", [orgId])

/**
 * An org with 10 credits whose key has made one call (so it is verified and cached before the org's row is taken),
 * then its row held by another session: the next reservation waits.
 */
const rowHeldAfterOneCall = Effect.gen(function* () {
  const u = yield* TestUpstreams
  u.resetAll()
  const { key, orgId } = yield* givenOrg({ credits: 10 })
  expectOk(yield* callTool("mobile_app_search", { query: "warm" }, { key }), 1)
  const hitsBefore = u.itunes.hits()
  const blocker = yield* holdOrgRow(orgId)
  return { blocker, hitsBefore, key, orgId, u }
})

layer(gatewayLayer({ ledger: { databaseTimeoutMs: TIMEOUT_MS } }), { excludeTestServices: true })("a reservation the database does not answer", (it) => {
  it.effect("is answered 500 (retryable) in time, its provider not called; taken late, it is undone and the key serves the retry once", () =>
    Effect.gen(function* () {
      const { blocker, hitsBefore, key, orgId, u } = yield* rowHeldAfterOneCall
      const started = performance.now()
      const answered = yield* callTool("mobile_app_search", { query: "slow" }, { key, idempotencyKey: "slow-1" })
      const tookMs = performance.now() - started
      expectEnvelope(answered, { status: 500, type: "internal", code: "internal_error", retryable: true, billable: false })
      expect(tookMs).toBeGreaterThanOrEqual(TIMEOUT_MS - 50)
      expect(tookMs).toBeLessThan(TIMEOUT_MS + 2_500)
      expect(u.itunes.hits()).toBe(hitsBefore)
      // the database takes the statement now: the hold it made is voided, the key's claim taken back
      yield* blocker.release
      const settled = yield* books(orgId).pipe(
        Effect.filterOrFail((b) => b.pendingHolds === 0 && (b.holdsByStatus["voided"] ?? 0) === 1, () => "not undone yet"),
        Effect.retry({ schedule: Schedule.spaced("50 millis"), times: 100 }),
        Effect.orDie
      )
      expect(settled).toMatchObject({ balance: 9, held: 0, journalSum: 9 })
      expect(u.itunes.hits()).toBe(hitsBefore)
      // the same key now runs the call, once
      expectOk(yield* callTool("mobile_app_search", { query: "slow" }, { key, idempotencyKey: "slow-1" }), 1)
      expect(u.itunes.hits()).toBe(hitsBefore + 1)
      expect((yield* books(orgId)).balance).toBe(8)
    }))

  // Gateway.run is uninterruptible: a client that hangs up leaves its call to finish, charged and recorded. The wait
  // for the database had made a window where the hang-up interrupted the call (its usage record a 500 charged 0,
  // its hold left pending for the sweeper, its provider never called though the reservation went through).
  it.effect("a client that hangs up while its reservation waits for the database: the call goes on, charged once, recorded ok", () =>
    Effect.gen(function* () {
      const { blocker, hitsBefore, key, orgId, u } = yield* rowHeldAfterOneCall
      // the client is gone 100 ms in, while the reservation waits for the org's row; the row is free at 250 ms,
      // well within DATABASE_TIMEOUT_MS
      yield* Effect.fork(Effect.zipRight(Effect.sleep("250 millis"), blocker.release))
      yield* hangUp("mobile_app_search", { query: "gone while waiting" }, { "x-api-key": key }, 100)
      const sql = yield* SqlClient.SqlClient
      const usage = yield* sql<{ readonly code: string; readonly credits: number }>`
        SELECT code, credits FROM usage WHERE org_id = ${orgId} ORDER BY id`.pipe(
        Effect.orDie,
        Effect.filterOrFail((rows) => rows.length === 2, () => "not recorded yet"),
        Effect.retry({ schedule: Schedule.spaced("50 millis"), times: 100 }),
        Effect.orDie
      )
      expect(usage[1]).toMatchObject({ code: "ok", credits: 1 })
      expect(u.itunes.hits()).toBe(hitsBefore + 1)
      expect(yield* books(orgId)).toMatchObject({ balance: 8, held: 0, pendingHolds: 0, journalSum: 8 })
    }))

  it.effect("a key not cached yet, looked up while the database does not answer: 500 (retryable) in time, then served", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const { key } = yield* givenOrg({ credits: 10 })
      const hitsBefore = u.itunes.hits()
      // nobody may read the keys' table: the lookup waits, as on a database that stopped answering
      const blocker = yield* holding("LOCK TABLE api_keys IN ACCESS EXCLUSIVE MODE")
      const started = performance.now()
      const answered = yield* callTool("mobile_app_search", { query: "locked out" }, { key })
      const tookMs = performance.now() - started
      expectEnvelope(answered, { status: 500, type: "internal", code: "internal_error", retryable: true, billable: false })
      expect(tookMs).toBeLessThan(TIMEOUT_MS + 2_500)
      expect(u.itunes.hits()).toBe(hitsBefore)
      yield* blocker.release
      expectOk(yield* callTool("mobile_app_search", { query: "back" }, { key }), 1)
    }))
})
