/**
 * Files kept from tool answers, byte for byte.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE artifacts (
      id            text PRIMARY KEY,
      org_id        text NOT NULL REFERENCES orgs (id),
      content_type  text NOT NULL,
      bytes         bigint NOT NULL,
      sha256        text NOT NULL,
      data          bytea NOT NULL,
      created_at    timestamptz NOT NULL,
      expires_at    timestamptz NOT NULL
    )`
  yield* sql`CREATE INDEX artifacts_expiry ON artifacts (expires_at)`
})
