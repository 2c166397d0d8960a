/**
 * The reservation also confirms the key (a key verified from a process's cache is checked here, in the
 * same statement), and reservations and voids commit without waiting for the WAL flush: neither moves a
 * credit, so a database crash that loses one loses nothing (a lost hold has nothing to settle, and a lost
 * void leaves a pending hold that the sweeper voids). Settlements, which charge, still wait for it.
 * A database migrated before this gets both functions in their current definitions (src/db/functions/).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { gatewayReserve } from "../functions/gateway_reserve.js"
import { gatewayVoid } from "../functions/gateway_void.js"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`DROP FUNCTION gateway_reserve(text, text, text, text, bigint, timestamptz, integer, timestamptz)`
  yield* gatewayReserve.define
  yield* gatewayVoid.define
})
