/**
 * A key's optional expiry: from `expires_at` on, the key is refused as `invalid_key` (null: it never expires).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE api_keys ADD COLUMN expires_at timestamptz`
})
