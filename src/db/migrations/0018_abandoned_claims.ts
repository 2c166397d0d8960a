/**
 * An `Idempotency-Key` claim can be `abandoned`: a retry that finds a claim's lease run out (its process taken
 * for dead) marks it so in the statement that decides it, and from then on the key answers
 * `idempotency_replay_unavailable` for its retention. The process that held it, had it only stalled, can neither
 * renew it nor keep an answer under it (both act on `running` records only), so the key's answer never changes
 * after a retry was told to use a new one (src/services/Idempotency.ts).
 *
 * The check is replaced in one statement, which locks the table while it reads the records kept (a day's keys by
 * default): calls with an Idempotency-Key wait for it once, at the upgrade.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    ALTER TABLE idempotency
      DROP CONSTRAINT idempotency_status_check,
      ADD CONSTRAINT idempotency_status_check CHECK (status IN ('running', 'completed', 'abandoned'))`
})
