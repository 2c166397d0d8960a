/**
 * The services composed: everything a running gateway needs, given its configuration.
 */
import { Layer } from "effect"
import { DatabaseLive } from "./db/Database.js"
import { BetasLive } from "./services/Betas.js"
import { GatewayServiceLive } from "./services/Gateway.js"
import { IdempotencyLive } from "./services/Idempotency.js"
import { KeyStoreLive } from "./services/KeyStore.js"
import { LedgerLive, SweeperLive } from "./services/Ledger.js"
import { ProviderClientLive } from "./services/ProviderClient.js"
import { RateLimitLive } from "./services/RateLimit.js"

/** The services over an existing database connection (`SqlClient`). */
export const ServicesLive = GatewayServiceLive.pipe(
  Layer.provideMerge(IdempotencyLive),
  Layer.provideMerge(Layer.mergeAll(LedgerLive, KeyStoreLive, BetasLive, RateLimitLive, ProviderClientLive))
)

/** The services, the hold sweeper, and the database (configured, or embedded), migrated. */
export const GatewayLive = Layer.merge(ServicesLive, SweeperLive.pipe(Layer.provide(LedgerLive))).pipe(
  Layer.provideMerge(DatabaseLive)
)
