/**
 * Amounts stay below 2^53 (see src/domain/credits.ts): no column of credits can hold more, and a
 * reservation that would take the month's spend past it is refused like one past a cap. The constraints
 * are NOT VALID so that a database holding such a value already still starts (new writes are checked).
 * A database migrated before this gets gateway_reserve in its current definition (src/db/functions/).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { gatewayReserve } from "../functions/gateway_reserve.js"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    ALTER TABLE orgs
      ADD CONSTRAINT balance_safe CHECK (balance <= 9007199254740991) NOT VALID,
      ADD CONSTRAINT month_spend_safe CHECK (month_spend + held <= 9007199254740991) NOT VALID,
      ADD CONSTRAINT spend_cap_safe CHECK (spend_cap <= 9007199254740991) NOT VALID`
  yield* sql`
    ALTER TABLE api_keys
      ADD CONSTRAINT spend_limit_safe CHECK (spend_limit <= 9007199254740991) NOT VALID`
  yield* gatewayReserve.define
})
