/**
 * delta's (Bluesky's) sessions, kept where every process can use them: one row per account (the key is a
 * hash of the service, the identifier and the app password), its tokens sealed like connections.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE delta_sessions (
      key text PRIMARY KEY,
      key_id text NOT NULL,
      iv bytea NOT NULL,
      ciphertext bytea NOT NULL,
      tag bytea NOT NULL,
      refresh_until timestamptz NOT NULL,
      updated_at timestamptz NOT NULL
    )`
})
