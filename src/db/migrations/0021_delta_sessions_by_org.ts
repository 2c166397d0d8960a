/**
 * delta's (Bluesky's) sessions, kept per org and found by a mac: a row's key was an unsalted SHA-256 of the service,
 * the identifier and the app password, with which anyone who could read the table could check a guessed password
 * offline; it is now an HMAC under a secret derived from the encryption key (`Encryption.mac`), and the row names its
 * org, so that an org's sessions go with its connection.
 *
 * The rows kept so far are deleted, not converted (their new key needs the password, which only a call has): the
 * sessions are a cache, and each org's next delta call makes a new `createSession`.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`DELETE FROM delta_sessions`
  // Nullable, and `key` stays the primary key (a mac of the org and the account is one org's): a process of the
  // earlier build, running beside the newer during a rolling upgrade, still keeps its sessions as it did (`ON
  // CONFLICT (key)`, no org), rows no newer process finds and the sweeper deletes when their refresh token expires.
  yield* sql`ALTER TABLE delta_sessions ADD COLUMN org_id text REFERENCES orgs (id)`
  // an org's sessions are deleted together
  yield* sql`CREATE INDEX delta_sessions_org ON delta_sessions (org_id)`
})
