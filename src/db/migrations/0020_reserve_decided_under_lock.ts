/**
 * The reservation decides a refusal on the row under its lock, and a reservation of nothing fits under any cap or
 * limit (src/db/functions/gateway_reserve.ts): a refusal's reason was read after the refusal, at another moment, and
 * a free call was refused by a cap or key limit lowered below the month's spend. The batch functions call this one.
 */
import * as Effect from "effect/Effect"
import { gatewayReserve } from "../functions/gateway_reserve.js"

export default Effect.gen(function* () {
  yield* gatewayReserve.define
})
