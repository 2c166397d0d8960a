/**
 * A month's spend never moves to an older month (src/db/functions/gateway_reserve.ts, gateway_settle.ts): a
 * reservation or a settlement from a process whose clock is behind, across a UTC month's turn, used to reset the
 * newer month's spend, so calls alternating between two processes never met the cap. Such a call now counts in
 * the row's newer month. The batch functions call these two, and need nothing of their own.
 */
import * as Effect from "effect/Effect"
import { gatewayReserve } from "../functions/gateway_reserve.js"
import { gatewaySettle } from "../functions/gateway_settle.js"

export default Effect.gen(function* () {
  yield* gatewayReserve.define
  yield* gatewaySettle.define
})
