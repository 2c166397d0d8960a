/**
 * A call's settlement through a database error: the provider has answered, so the statement that charges the call
 * (and keeps its answer under an Idempotency-Key) is tried again, and a statement that committed but lost its answer
 * with its connection is not applied twice.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Context, Effect, Layer, Metric, Redacted } from "effect"
import { defaults, LedgerConfig } from "../src/config.js"
import { pgLayer } from "../src/db/Database.js"
import { Ledger, LedgerLive } from "../src/services/Ledger.js"
import { ledgerBatchSize } from "../src/services/Telemetry.js"
import { expectEnvelope, expectOk } from "./support/assert.js"
import { failingStatements, readAgain, relay, TestDatabaseUrl } from "./support/database.js"
import { books, callTool, capturedLogs, gatewayLayer, givenOrg, TestUpstreams } from "./support/gateway.js"

/** Statements that settle one of the org's holds: the first `failures` of them fail; every one is counted. */
const failSettlements = (orgId: string, failures: number, how: "terminate" | "raise") =>
  failingStatements({
    name: `settle_${orgId}`,
    table: "holds",
    event: "UPDATE",
    when: `OLD.org_id = '${orgId}' AND NEW.status = 'settled'`,
    failures,
    how
  })

const keptRecord = (orgId: string, key: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    readAgain(sql<{ readonly status: string; readonly charged: number | null }>`
      SELECT status, charged FROM idempotency WHERE org_id = ${orgId} AND key = ${key}`))

layer(gatewayLayer(), { excludeTestServices: true })("a settlement through a database error", (it) => {
  it.effect("a settlement that loses its connection twice is sent again: the call is answered 200 and charged once", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const { key, orgId } = yield* givenOrg({ credits: 10 })
      const fault = yield* failSettlements(orgId, 2, "terminate")
      const answered = yield* callTool("mobile_app_search", { query: "settle" }, { key })
      expectOk(answered, 1)
      expect(yield* fault.attempts).toBe(3)
      expect(yield* books(orgId)).toMatchObject({ balance: 9, held: 0, journalSum: 9, holdsByStatus: { settled: 1 } })
      yield* fault.remove
    }))

  it.effect("under an Idempotency-Key, the answer is kept with the charge that was retried: the same request replays it", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const { key, orgId } = yield* givenOrg({ credits: 10 })
      const fault = yield* failSettlements(orgId, 2, "terminate")
      const first = yield* callTool("mobile_app_search", { query: "kept" }, { key, idempotencyKey: "settle-1" })
      expectOk(first, 1)
      expect(yield* keptRecord(orgId, "settle-1")).toEqual([{ status: "completed", charged: 1 }])
      const again = yield* callTool("mobile_app_search", { query: "kept" }, { key, idempotencyKey: "settle-1" })
      expect(again.text).toBe(first.text)
      expect(again.headers.get("idempotent-replayed")).toBe("true")
      expect(u.itunes.hits()).toBe(1)
      expect(yield* books(orgId)).toMatchObject({ balance: 9, held: 0, journalSum: 9 })
      yield* fault.remove
    }))

  it.effect("a normalization failure under an Idempotency-Key is kept by the statement that charges it: no write of its own", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      u.itunes.fault({ wrongShape: true, times: 1 })
      const { key, orgId } = yield* givenOrg({ credits: 10 })
      const completes = Metric.tagged(ledgerBatchSize, "kind", "complete")
      const before = (yield* Metric.value(completes)).count
      const failed = yield* callTool("mobile_app_search", { query: "kept" }, { key, idempotencyKey: "normalization-1" })
      expectEnvelope(failed, { status: 502, type: "normalization", code: "normalization_failed", retryable: false, billable: true })
      expect(failed.headers.get("x-credits-charged")).toBe("1")
      expect((yield* Metric.value(completes)).count).toBe(before)
      expect(yield* keptRecord(orgId, "normalization-1")).toEqual([{ status: "completed", charged: 1 }])
      const again = yield* callTool("mobile_app_search", { query: "kept" }, { key, idempotencyKey: "normalization-1" })
      expect(again.status).toBe(502)
      expect(again.text).toBe(failed.text)
      expect(again.headers.get("idempotent-replayed")).toBe("true")
      expect(u.itunes.hits()).toBe(1)
      expect(yield* books(orgId)).toMatchObject({ balance: 9, held: 0, journalSum: 9 })
    }))

  it.effect("a database that keeps failing: six statements (the first and five tries), then the provider's answer, charged 0", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const { key, orgId } = yield* givenOrg({ credits: 10 })
      const fault = yield* failSettlements(orgId, 1_000, "raise")
      // a 500 would invite a retry that sends the call (a write, say) again: it was carried out, and is free
      const answered = yield* callTool("mobile_app_search", { query: "down" }, { key, idempotencyKey: "settle-2" })
      expectOk(answered, 0)
      expect(yield* fault.attempts).toBe(6)
      expect(capturedLogs.some((line) => line.includes("settlements and voids not written (1): the database kept failing"))).toBe(true)
      // its answer could not be kept: the key is not freed for a second provider call
      const again = yield* callTool("mobile_app_search", { query: "down" }, { key, idempotencyKey: "settle-2" })
      expectEnvelope(again, { status: 429, type: "rate_limited", code: "request_in_progress", retryable: true, billable: false })
      expect(u.itunes.hits()).toBe(1)
      expect(yield* books(orgId)).toMatchObject({ balance: 10, journalSum: 10, holdsByStatus: { pending: 1 } })
      yield* fault.remove
    }))

  it.scoped("a settlement that committed and lost its answer is not sent again: it is answered as settled, charged once, its answer kept", () =>
    Effect.gen(function* () {
      const { keyId, orgId } = yield* givenOrg({ credits: 10 })
      const { url } = yield* TestDatabaseUrl
      const lossy = yield* relay(new URL(url))
      const context = yield* Layer.build(LedgerLive.pipe(
        Layer.provide(Layer.orDie(pgLayer(Redacted.make(lossy.url), { maxConnections: 2 }))),
        Layer.provide(Layer.succeed(LedgerConfig, defaults.ledger))
      ))
      const ledger = Context.get(context, Ledger)
      const counted = yield* failSettlements(orgId, 0, "raise")
      const hold = yield* ledger.claimAndReserve(
        { orgId, keyId, tool: "weather", requestId: "req_lost_commit", amount: 3, leaseMs: 60_000 },
        { key: "lost-commit", fingerprint: "f".repeat(64) }
      ).pipe(Effect.flatMap((claimed) => claimed), Effect.orDie)
      lossy.cutAfter = "gateway_resolve_batch"
      lossy.afterCut = "up"
      const settled = yield* ledger.settle(hold, 2, { orgId, key: "lost-commit", requestId: "req_lost_commit", status: 200, body: "{\"kept\":true}" })
      expect(lossy.cuts).toBe(1)
      expect(settled).toBe(true)
      // one settlement statement reached the hold: the one whose answer was lost
      expect(yield* counted.attempts).toBe(1)
      expect(yield* books(orgId)).toMatchObject({ balance: 8, held: 0, journalSum: 8, holdsByStatus: { settled: 1 } })
      expect(yield* keptRecord(orgId, "lost-commit")).toEqual([{ status: "completed", charged: 2 }])
      yield* counted.remove
    }))
})
