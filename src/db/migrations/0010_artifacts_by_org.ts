/**
 * An org's kept files, newest first (MCP `resources/list` pages through them).
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE INDEX artifacts_by_org ON artifacts (org_id, created_at DESC, id DESC)`
})
