/**
 * The journal is the record of every balance change: rows are only ever added.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { journalAppendOnly } from "../functions/journal_append_only.js"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* journalAppendOnly.define
  yield* sql`
    CREATE TRIGGER journal_append_only BEFORE UPDATE OR DELETE ON journal
    FOR EACH ROW EXECUTE FUNCTION journal_append_only()`
})
