/**
 * A batch of one reservation or one resolution, the ledger's usual statement below full load, goes straight to
 * its call (src/db/functions/gateway_reserve_batch.ts, gateway_resolve_batch.ts); a settlement and a void find
 * their hold by its id, whatever the planner's statistics say of pending holds (gateway_settle.ts,
 * gateway_void.ts).
 */
import * as Effect from "effect/Effect"
import { gatewayReserveBatch } from "../functions/gateway_reserve_batch.js"
import { gatewayResolveBatch } from "../functions/gateway_resolve_batch.js"
import { gatewaySettle } from "../functions/gateway_settle.js"
import { gatewayVoid } from "../functions/gateway_void.js"

export default Effect.gen(function* () {
  yield* gatewaySettle.define
  yield* gatewayVoid.define
  yield* gatewayReserveBatch.define
  yield* gatewayResolveBatch.define
})
