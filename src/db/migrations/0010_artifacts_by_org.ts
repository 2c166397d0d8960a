/**
 * An org's kept files, newest first (MCP `resources/list` pages through them).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE INDEX artifacts_by_org ON artifacts (org_id, created_at DESC, id DESC)`
})
