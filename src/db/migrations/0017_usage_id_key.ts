/**
 * The key of the permutation usage ids are shown through (src/services/usageIds.ts): 16 random bytes, made once
 * per database (`gen_random_uuid` reads PostgreSQL's strong random source; its 122 random bits are the key's),
 * so every process shows the same ids and the ids an org sees no longer count every org's calls.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE gateway_secrets (
      name   text PRIMARY KEY,
      value  bytea NOT NULL
    )`
  yield* sql`INSERT INTO gateway_secrets (name, value) VALUES ('usage_ids', decode(replace(gen_random_uuid()::text, '-', ''), 'hex'))`
})
