/**
 * A key's optional expiry: from `expires_at` on, the key is refused as `invalid_key` (null: it never expires).
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE api_keys ADD COLUMN expires_at timestamptz`
})
