/**
 * A statement whose fiber is interrupted (a dashboard request whose client hangs up, a readiness check that times
 * out, a shutdown) never stops another caller's statement. The PostgreSQL client library cancelled it by its
 * connection's process id, on another connection of the pool; when the statement ended first and its connection
 * went to the next caller, the cancel stopped that caller's statement instead (`57014 canceling statement due to
 * user request`, a `500` to a request that did nothing wrong).
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Either, Fiber, Layer, Redacted } from "effect"
import { pgLayer } from "../src/db/Database.js"
import { freshDatabaseUrl } from "./support/database.js"

/** A pool of `max` connections on an empty database of its own. */
const poolOf = (max: number, giveBackWaitMs?: number) =>
  Layer.unwrapScoped(Effect.map(freshDatabaseUrl, (url) =>
    pgLayer(Redacted.make(url), { maxConnections: max, ...(giveBackWaitMs === undefined ? {} : { giveBackWaitMs }) })))

/** The pool's connections opened (both at once), so that the statements below start when they are sent. */
const warm = (sql: SqlClient.SqlClient, count: number) =>
  Effect.all(Array.from({ length: count }, () => sql`SELECT pg_sleep(0.05)`), { concurrency: "unbounded", discard: true })

/**
 * On a pool of one: the connection's backend, a statement of `seconds` on it interrupted after 100 ms, then the
 * backend the next statement ran on, and how long that statement took.
 */
const nextAfterInterrupting = (seconds: number) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const pid = sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`
    const first = yield* pid
    const a = yield* Effect.fork(sql`SELECT pg_sleep(${seconds})`)
    yield* Effect.sleep("100 millis")
    yield* Fiber.interrupt(a)
    const [took, next] = yield* Effect.timed(pid)
    return { first: first[0]?.pid, next: next[0]?.pid, took }
  })

describe("an interrupted statement", () => {
  it.live("does not stop the statement of the caller its connection goes to next", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      yield* warm(sql, 2)
      // the pool's two connections: A's statement on one, another caller's on the other until 700 ms
      const a = yield* Effect.fork(sql`SELECT pg_sleep(0.4)`)
      const other = yield* Effect.fork(sql`SELECT pg_sleep(0.7)`)
      yield* Effect.sleep("150 millis")
      // B waits for a connection; A's is the first to come free
      const b = yield* Effect.fork(Effect.either(sql<{ pid: number }>`SELECT pg_backend_pid() AS pid FROM pg_sleep(0.5)`))
      yield* Effect.sleep("50 millis")
      const interrupting = yield* Effect.fork(Effect.timed(Fiber.interrupt(a)))
      const [tookToInterrupt] = yield* Fiber.join(interrupting)
      const answered = yield* Fiber.join(b)
      yield* Fiber.join(other)
      expect(Either.isLeft(answered) ? `${answered.left.message}: ${String(answered.left.cause)}` : "answered").toBe("answered")
      // the interruption does not wait for a cancellation that needs a connection of the same full pool
      expect(Duration.toMillis(tookToInterrupt)).toBeLessThan(150)
    }).pipe(Effect.provide(poolOf(2))), 15_000)

  it.live("leaves its connection out of the pool until its statement ends, and then gives it back", () =>
    Effect.gen(function* () {
      // the only connection is still running A's statement: the next statement waits for it, then runs on it
      const { first, next, took } = yield* nextAfterInterrupting(1)
      expect(next).toBe(first)
      expect(Duration.toMillis(took)).toBeGreaterThan(500)
    }).pipe(Effect.provide(poolOf(1))), 15_000)

  it.live("that does not end in time (a lock not let go) gives its place in the pool to a new connection", () =>
    Effect.gen(function* () {
      // the pool of one opens another connection once the first has waited 300 ms for its statement
      const { first, next, took } = yield* nextAfterInterrupting(5)
      expect(next).not.toBe(first)
      expect(Duration.toMillis(took)).toBeLessThan(3_000)
    }).pipe(Effect.provide(poolOf(1, 300))), 15_000)

  it.live("a statement that fails gives its connection back at once, to be used again", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const first = yield* sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`
      const failed = yield* Effect.either(sql`SELECT 1 / 0`)
      expect(Either.isLeft(failed)).toBe(true)
      const next = yield* sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`.pipe(Effect.timeout("2 seconds"))
      expect(next[0]?.pid).toBe(first[0]?.pid)
    }).pipe(Effect.provide(poolOf(1))), 15_000)
})
