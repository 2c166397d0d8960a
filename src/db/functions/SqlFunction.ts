/**
 * A PL/pgSQL function of the schema, written once: its current `CREATE OR REPLACE FUNCTION` statement,
 * which every migration that creates or changes the function applies (see src/db/migrations/index.ts).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"

export interface SqlFunction {
  /** The function's name in the database. */
  readonly name: string
  /**
   * The statement. PostgreSQL keeps the text between the `$$` quotes byte for byte as the body, and the
   * ledger's functions were measured in exactly this text: do not re-indent it.
   */
  readonly statement: string
  /** Create the function, or replace whatever body an earlier migration gave it. */
  readonly define: Effect.Effect<void, SqlError, SqlClient.SqlClient>
}

export const sqlFunction = (name: string, statement: string): SqlFunction => ({
  name,
  statement,
  define: Effect.asVoid(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(statement)))
})
