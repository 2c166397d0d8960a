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
import { books, callTool, gatewayLayer, givenOrg, TestUpstreams } from "./support/gateway.js"
import { EPSILON_TOKEN } from "./upstreams/accounts.js"

/** A read of the test's own, on the gateway's pool: its first try may get a session the fault has just ended. */
const read = <A, E, R>(statement: Effect.Effect<A, E, R>) => Effect.orDie(Effect.retry(statement, { times: 3 }))

/**
 * The first `failures` statements that delete (or complete) the idempotency record under `key` fail, and are
 * rolled back: `terminate`, the server ends the statement's session (its connection is lost); `raise`, the
 * statement gets an error and the session lives on. The attempts are counted by a sequence (which a rollback
 * does not undo).
 */
const failWrites = (write: "release" | "complete", key: string, failures: number, how: "terminate" | "raise") =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const name = `fault_${write}_${key.replace(/[^a-z0-9]/g, "_")}`
    yield* sql.unsafe(`CREATE SEQUENCE ${name}`)
    yield* sql.unsafe(`CREATE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF nextval('${name}') <= ${failures} THEN
          ${how === "terminate" ? "PERFORM pg_terminate_backend(pg_backend_pid());" : "RAISE EXCEPTION 'the database is failing';"}
        END IF;
        RETURN ${write === "release" ? "OLD" : "NEW"};
      END $$`)
    yield* sql.unsafe(write === "release"
      ? `CREATE TRIGGER ${name} BEFORE DELETE ON idempotency FOR EACH ROW
           WHEN (OLD.key = '${key}') EXECUTE FUNCTION ${name}()`
      : `CREATE TRIGGER ${name} BEFORE UPDATE ON idempotency FOR EACH ROW
           WHEN (OLD.key = '${key}' AND NEW.status = 'completed') EXECUTE FUNCTION ${name}()`)
    const attempts = read(Effect.map(
      sql<{ readonly n: number }>`SELECT CASE WHEN is_called THEN last_value ELSE 0 END::int AS n FROM ${sql(name)}`,
      (rows) => rows[0]?.n ?? 0
    ))
    const remove = sql.unsafe(`DROP TRIGGER ${name} ON idempotency`)
    return { attempts, remove }
  }).pipe(Effect.orDie)

const recordOf = (orgId: string, key: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    read(sql<{ readonly status: string }>`SELECT status FROM idempotency WHERE org_id = ${orgId} AND key = ${key}`)).pipe(
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
      yield* Effect.orDie(fault.remove)
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
      yield* Effect.orDie(fault.remove)
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
      yield* Effect.orDie(fault.remove)
      u.itunes.fault()
    }))
})
