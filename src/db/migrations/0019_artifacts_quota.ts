/**
 * An org's kept files against its quota (`ARTIFACT_QUOTA_BYTES`): keeping a file sums the bytes of the org's files
 * that have not expired, read from this index alone (an index-only scan, the expired ones skipped by the range).
 *
 * Creating it reads the whole table once, under the migrations' lock at start-up.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE INDEX artifacts_quota ON artifacts (org_id, expires_at) INCLUDE (bytes)`
})
