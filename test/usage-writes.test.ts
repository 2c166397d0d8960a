/**
 * Usage records through database errors: a batch the database did not take goes back and is written by a later
 * flush (one comes on its own), and a batch whose commit's answer was lost is not written again.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Context, Deferred, Effect, Exit, Fiber, Layer, Logger, Redacted, Scope } from "effect"
import { pgLayer } from "../src/db/Database.js"
import type { OrgId } from "../src/domain/ids.js"
import { Usage, type UsageEntry, UsageLive, USAGE_WRITE_LOCK } from "../src/services/Usage.js"
import { blockDatabase, relay, TestDatabaseUrl } from "./support/database.js"
import { givenOrg, type GivenOrg, servicesLayer } from "./support/gateway.js"

const entry = (org: GivenOrg, requestId: string): UsageEntry => ({
  orgId: org.orgId,
  keyId: org.keyId,
  tool: "weather",
  requestId,
  status: 200,
  code: "ok",
  credits: 1,
  latencyMs: 12,
  provider: "open-meteo",
  at: Date.parse("2026-05-04T10:00:00Z")
})

/** How many rows the log holds for each of the org's request ids. */
const written = (orgId: OrgId) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ readonly request_id: string; readonly n: number }>`
      SELECT request_id, count(*)::int AS n FROM usage WHERE org_id = ${orgId} GROUP BY request_id ORDER BY request_id`).pipe(
    Effect.map((rows) => Object.fromEntries(rows.map((row) => [row.request_id, row.n]))),
    Effect.orDie
  )

layer(servicesLayer(), { excludeTestServices: true })("usage records through database errors", (it) => {
  it.effect("a batch written while the database refuses connections is written once it answers, by a flush that comes on its own", () =>
    Effect.gen(function* () {
      const usage = yield* Usage
      const org = yield* givenOrg()
      yield* blockDatabase(false)
      for (const id of ["req_a1", "req_a2", "req_a3"]) yield* usage.record(entry(org, id))
      yield* usage.flush
      // the flush the first record scheduled fails too
      yield* Effect.sleep("400 millis")
      yield* blockDatabase(true)
      // no call comes and nobody reads: the failed flush scheduled the next one
      let rows = yield* written(org.orgId)
      for (let tries = 0; Object.keys(rows).length < 3 && tries < 50; tries++) {
        yield* Effect.sleep("100 millis")
        rows = yield* written(org.orgId)
      }
      expect(rows).toEqual({ req_a1: 1, req_a2: 1, req_a3: 1 })
      yield* usage.flush
      expect(yield* written(org.orgId)).toEqual({ req_a1: 1, req_a2: 1, req_a3: 1 })
    }))

  it.scoped("a flush waits for another process's flush to commit: a record that appears after a page was read is newer than the page", () =>
    Effect.gen(function* () {
      const usage = yield* Usage
      // a client's reads, through another process (this one's reads flush its own records first)
      const reader = Context.get(yield* Layer.build(UsageLive), Usage)
      const sql = yield* SqlClient.SqlClient
      const org = yield* givenOrg()
      yield* usage.record(entry(org, "req_c1"))
      yield* usage.flush
      // another process's flush, its lock taken and its record inserted (its id drawn), not committed yet
      const inserted = yield* Deferred.make<void>()
      const commit = yield* Deferred.make<void>()
      const other = yield* Effect.fork(sql.withTransaction(Effect.gen(function* () {
        yield* sql`SELECT pg_advisory_xact_lock(${USAGE_WRITE_LOCK})`
        yield* sql`INSERT INTO usage (org_id, key_id, tool, request_id, status, code, credits, latency_ms, provider, created_at)
                   VALUES (${org.orgId}, ${org.keyId}, 'weather', 'req_c2', 200, 'ok', 1, 12, 'open-meteo', now())`
        yield* Deferred.succeed(inserted, undefined)
        yield* Deferred.await(commit)
      })))
      yield* Deferred.await(inserted)
      yield* usage.record(entry(org, "req_c3"))
      const flushing = yield* Effect.fork(usage.flush)
      yield* Effect.sleep("300 millis")
      // a client reads the newest page meanwhile
      const page = (yield* reader.page(org.orgId, { limit: 2 })).records.map((r) => r.requestId)
      yield* Deferred.succeed(commit, undefined)
      yield* Fiber.join(other)
      yield* Fiber.join(flushing)
      const log = (yield* reader.page(org.orgId, { limit: 10 })).records.map((r) => r.requestId)
      expect(log).toEqual(["req_c3", "req_c2", "req_c1"])
      // the page is a run of the log: what it did not show is above it (read from the newest again) or below its
      // cursor. Flushes committed out of their ids' order showed [req_c3, req_c1], and req_c2 was in neither.
      const start = log.indexOf(page[0] ?? "")
      expect(log.slice(start, start + page.length)).toEqual(page)
    }).pipe(Effect.orDie))

  it.scoped("the last flush, as the process stops, tries again while the database is away: written once it is back within seconds, said lost when it is not", () =>
    Effect.gen(function* () {
      const org = yield* givenOrg()
      const { url } = yield* TestDatabaseUrl
      const logged: Array<string> = []
      const logger = Logger.make(({ logLevel, message }) => {
        logged.push(`${logLevel.label} ${String(Array.isArray(message) ? message[0] : message)}`)
      })
      /** A process's usage records taken while the database is away, then the process stopped; `back` meanwhile. */
      const stopping = (ids: ReadonlyArray<string>, back: Effect.Effect<void, never, TestDatabaseUrl>) =>
        Effect.gen(function* () {
          const scope = yield* Scope.make()
          // the layer's finalizer runs with the loggers it was built with
          const context = yield* Layer.buildWithScope(
            UsageLive.pipe(Layer.provide(Layer.orDie(pgLayer(Redacted.make(url), { maxConnections: 2 })))),
            scope
          ).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
          const usage = Context.get(context, Usage)
          yield* blockDatabase(false)
          for (const id of ids) yield* usage.record(entry(org, id))
          yield* Effect.all([Scope.close(scope, Exit.void), back], { concurrency: 2 })
          yield* blockDatabase(true)
        })
      // away for a second
      yield* stopping(["req_c1", "req_c2"], Effect.sleep("1 second").pipe(Effect.zipRight(blockDatabase(true))))
      expect(yield* written(org.orgId)).toEqual({ req_c1: 1, req_c2: 1 })
      expect(logged.filter((line) => line.startsWith("ERROR"))).toEqual([])
      expect(logged.some((line) => line.includes("trying again before the process stops")), JSON.stringify(logged)).toBe(true)
      // away for good
      yield* stopping(["req_d1", "req_d2", "req_d3"], Effect.void)
      expect(yield* written(org.orgId)).toEqual({ req_c1: 1, req_c2: 1 })
      expect(logged.filter((line) => line.startsWith("ERROR"))).toEqual([
        "ERROR 3 usage records could not be written before the process stopped (the database did not take them): they are lost"
      ])
    }), 30_000)

  it.scoped("a batch whose commit's answer was lost is not written again; the batch after it, refused, is", () =>
    Effect.gen(function* () {
      const org = yield* givenOrg()
      const { url } = yield* TestDatabaseUrl
      const lossy = yield* relay(new URL(url))
      const context = yield* Layer.build(UsageLive.pipe(Layer.provide(Layer.orDie(pgLayer(Redacted.make(lossy.url), { maxConnections: 2 })))))
      const usage = Context.get(context, Usage)
      // the first batch commits, its answer is lost, and the database cannot be asked about it for now
      lossy.cutAfter = "COMMIT"
      for (const id of ["req_b1", "req_b2"]) yield* usage.record(entry(org, id))
      yield* usage.flush
      expect(lossy.cuts).toBe(1)
      expect(yield* written(org.orgId)).toEqual({ req_b1: 1, req_b2: 1 })
      // the second is refused
      yield* usage.record(entry(org, "req_b3"))
      yield* usage.flush
      expect(yield* written(org.orgId)).toEqual({ req_b1: 1, req_b2: 1 })
      // the database answers again
      lossy.mode = "up"
      yield* usage.flush
      yield* usage.flush
      expect(yield* written(org.orgId)).toEqual({ req_b1: 1, req_b2: 1, req_b3: 1 })
    }))
})
