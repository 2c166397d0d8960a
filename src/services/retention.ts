/**
 * Housekeeping of records kept for a while (artifacts, Idempotency-Key records): delete the rows whose
 * `expires_at` has passed, by the service's `Clock`. An expired row is already treated as gone by its service;
 * this only frees the space. Rows another statement has locked (an `Idempotency-Key` taken over) are left for
 * the next purge: a purge never waits, so it is never part of a lock cycle.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { nowMillis, toDate } from "./time.js"

/** The rows deleted. */
export const purgeExpired = (sql: SqlClient.SqlClient, table: "artifacts" | "idempotency"): Effect.Effect<number> =>
  Effect.gen(function* () {
    const now = yield* nowMillis
    const deleted = SqlSchema.single({
      Request: Schema.DateFromSelf,
      Result: Schema.Struct({ n: Schema.Number }),
      execute: (at) => sql`
        WITH d AS (
          DELETE FROM ${sql(table)} WHERE ctid IN (
            SELECT ctid FROM ${sql(table)} WHERE expires_at <= ${at} FOR UPDATE SKIP LOCKED)
          RETURNING 1)
        SELECT count(*)::int AS n FROM d`
    })
    return (yield* deleted(toDate(now))).n
  }).pipe(Effect.orDie)
