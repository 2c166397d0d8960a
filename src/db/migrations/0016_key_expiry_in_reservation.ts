/**
 * The reservation confirms a key's expiry as it confirms its revocation (src/db/functions/gateway_reserve.ts): a key
 * whose `expires_at` another process moved earlier was still charged on a process that had it cached, for up to
 * the cache's 5 minutes. The batch functions call this one, and need nothing of their own.
 */
import * as Effect from "effect/Effect"
import { gatewayReserve } from "../functions/gateway_reserve.js"

export default Effect.gen(function* () {
  yield* gatewayReserve.define
})
