/**
 * The ledger's group commit: reservations that arrive together are one statement, and so are settlements
 * and voids (src/db/functions/gateway_reserve_batch.ts, gateway_resolve_batch.ts).
 */
import * as Effect from "effect/Effect"
import { gatewayReserveBatch } from "../functions/gateway_reserve_batch.js"
import { gatewayResolveBatch } from "../functions/gateway_resolve_batch.js"

export default Effect.gen(function* () {
  yield* gatewayReserveBatch.define
  yield* gatewayResolveBatch.define
})
