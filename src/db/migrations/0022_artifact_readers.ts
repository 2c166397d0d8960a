/**
 * Files read a chunk at a time, and by the key that kept them:
 * - `key_id`: the API key whose call kept the file (a key limited to some tools reads only its own files). Files
 *   kept before have none: only a key with every tool reads them.
 * - `data` stored uncompressed (`EXTERNAL`): `substring` of a chunk then reads only that chunk's part of the TOAST
 *   table, not the whole file (files are mostly PDFs and images, compressed already). Rows kept before stay as
 *   they were stored, and read as before.
 * Both change only the catalog: no row is rewritten.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE artifacts ADD COLUMN key_id text`
  yield* sql`ALTER TABLE artifacts ALTER COLUMN data SET STORAGE EXTERNAL`
})
