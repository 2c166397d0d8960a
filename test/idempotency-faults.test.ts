/**
 * The writes under an Idempotency-Key after its call, through a database that drops their connection: freeing the
 * key of a non-billable failure, and keeping a write whose outcome is unknown, are tried again (a few times, within a
 * bounded backoff), so a brief database error neither leaves the key `running` (and, after its lease,
 * `idempotency_replay_unavailable` for the whole retention) nor loses the answer; a database that keeps failing
 * gives up after a bounded number of attempts.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { Connections } from "../src/services/Connections.js"
import { expectEnvelope, expectOk } from "./support/assert.js"
import { failingStatements, readAgain } from "./support/database.js"
import { books, callTool, gatewayLayer, givenOrg, TestUpstreams } from "./support/gateway.js"
import { EPSILON_TOKEN } from "./upstreams/accounts.js"

/** The first `failures` statements that delete (or complete) the idempotency record under `key` fail. */
const failWrites = (write: "release" | "complete", key: string, failures: number, how: "terminate" | "raise") =>
  failingStatements({
    name: `${write}_${key}`,
    table: "idempotency",
    event: write === "release" ? "DELETE" : "UPDATE",
    when: write === "release" ? `OLD.key = '${key}'` : `OLD.key = '${key}' AND NEW.status = 'completed'`,
    failures,
    how
  })

const recordOf = (orgId: string, key: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    readAgain(sql<{ readonly status: string }>`SELECT status FROM idempotency WHERE org_id = ${orgId} AND key = ${key}`)).pipe(
    Effect.map((rows) => rows.map((row) => row.status))
  )

layer(gatewayLayer({ providers: { ssrfAllow: ["127.0.0.1"] } }), { excludeTestServices: true })("Idempotency-Key writes through a database error", (it) => {
  it.effect("a non-billable failure frees its key although the first two deletes lose their connection: the retry runs", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      u.itunes.fault({ status: 503 })
      const { key, orgId } = yield* givenOrg({ credits: 10 })
      const fault = yield* failWrites("release", "release-1", 2, "terminate")
      const failed = yield* callTool("mobile_app_search", { query: "release" }, { key, idempotencyKey: "release-1" })
      expectEnvelope(failed, { status: 502, type: "provider", code: "provider_unavailable", retryable: true, billable: false })
      expect(yield* recordOf(orgId, "release-1")).toEqual([])
      expect(yield* fault.attempts).toBe(3)
      u.itunes.fault()
      const hitsBefore = u.itunes.hits()
      const retried = yield* callTool("mobile_app_search", { query: "release" }, { key, idempotencyKey: "release-1" })
      expectOk(retried, 1)
      expect(retried.headers.get("idempotent-replayed")).toBeNull()
      expect(u.itunes.hits()).toBe(hitsBefore + 1)
      expect(yield* books(orgId)).toMatchObject({ balance: 9, held: 0 })
      yield* fault.remove
    }))

  it.effect("a write whose outcome is unknown is kept although the first two writes lose their connection: the retry replays it", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const { key, orgId } = yield* givenOrg({ credits: 10 })
      yield* Effect.orDie(Effect.flatMap(Connections, (c) => c.connect(orgId, "epsilon", { base_url: u.rest.url, token: EPSILON_TOKEN }, null)))
      u.rest.fault({ status: 503, times: 1 })
      const payment = { method: "POST", path: "/payments", body: { amount: 500 } }
      const fault = yield* failWrites("complete", "complete-1", 2, "terminate")
      const first = yield* callTool("epsilon_request", payment, { key, idempotencyKey: "complete-1" })
      expectEnvelope(first, { status: 502, type: "provider", code: "write_outcome_unknown", retryable: false, billable: false })
      expect(yield* recordOf(orgId, "complete-1")).toEqual(["completed"])
      expect(yield* fault.attempts).toBe(3)
      const again = yield* callTool("epsilon_request", payment, { key, idempotencyKey: "complete-1" })
      expect(again.text).toBe(first.text)
      expect(again.headers.get("idempotent-replayed")).toBe("true")
      expect(u.rest.hits("/payments")).toBe(1)
      expect(yield* books(orgId)).toMatchObject({ balance: 10, held: 0 })
      yield* fault.remove
    }))

  it.effect("a database that keeps failing: five attempts, then the key stays running (a defect, beside the call's own answer)", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      u.itunes.fault({ status: 503 })
      const { key, orgId } = yield* givenOrg({ credits: 10 })
      const fault = yield* failWrites("release", "release-2", 1_000, "raise")
      const failed = yield* callTool("mobile_app_search", { query: "down" }, { key, idempotencyKey: "release-2" })
      expectEnvelope(failed, { status: 502, type: "provider", code: "provider_unavailable", retryable: true, billable: false })
      expect(yield* fault.attempts).toBe(5)
      expect(yield* recordOf(orgId, "release-2")).toEqual(["running"])
      expect(yield* books(orgId)).toMatchObject({ balance: 10, held: 0 })
      yield* fault.remove
      u.itunes.fault()
    }))
})
