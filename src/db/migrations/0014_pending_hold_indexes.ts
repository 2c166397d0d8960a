/**
 * The holds' indexes are the ones a statement reads, and they hold pending holds only where only pending
 * holds are looked for. `holds_request` becomes `holds_pending_request` (a process voiding the hold of a request
 * it gave up on looks for a pending hold: `Ledger.voidRequest`), and `holds_org`, which no statement read, goes.
 *
 * A settlement changes its hold's `status`, which both partial indexes name, so it writes each index the new
 * version of its hold belongs to: with the two full indexes, three (the id's, the org's, the request's); now one,
 * the id's. A reservation writes three instead of four. The WAL a call writes: −17% between checkpoints, −35%
 * just after one (docs/performance.md, nineteenth round).
 *
 * Creating the partial index reads the whole table once, under a lock that holds reservations back meanwhile
 * (the migrations run in one transaction at start-up); it writes an entry only for the holds still pending.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`DROP INDEX holds_org`
  yield* sql`DROP INDEX holds_request`
  yield* sql`CREATE INDEX holds_pending_request ON holds (request_id) WHERE status = 'pending'`
})
