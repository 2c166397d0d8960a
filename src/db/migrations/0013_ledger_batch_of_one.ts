/**
 * A batch of one reservation or one resolution, the ledger's usual statement below full load, goes straight to
 * its call (src/db/functions/gateway_reserve_batch.ts, gateway_resolve_batch.ts).
 */
import * as Effect from "effect/Effect"
import { gatewayReserveBatch } from "../functions/gateway_reserve_batch.js"
import { gatewayResolveBatch } from "../functions/gateway_resolve_batch.js"

export default Effect.gen(function* () {
  yield* gatewayReserveBatch.define
  yield* gatewayResolveBatch.define
})
