/**
 * A key's own request rate (null: the gateway's default).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    ALTER TABLE api_keys
      ADD COLUMN rate_limit_per_second integer CHECK (rate_limit_per_second IS NULL OR rate_limit_per_second > 0),
      ADD COLUMN rate_limit_burst integer CHECK (rate_limit_burst IS NULL OR rate_limit_burst > 0)`
})
