/**
 * A reservation may claim its call's `Idempotency-Key` in the same statement
 * (src/db/functions/gateway_claim_reserve_batch.ts).
 */
import * as Effect from "effect/Effect"
import { gatewayClaimReserveBatch } from "../functions/gateway_claim_reserve_batch.js"

export default Effect.asVoid(gatewayClaimReserveBatch.define)
