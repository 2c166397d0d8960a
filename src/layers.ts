/**
 * The services composed: everything a running gateway needs, given its configuration.
 */
import * as Layer from "effect/Layer"
import { DatabaseLive } from "./db/Database.js"
import { ArtifactsLive } from "./services/Artifacts.js"
import { AuthenticationLive } from "./services/Authentication.js"
import { BetasLive } from "./services/Betas.js"
import { ConnectionsLive } from "./services/Connections.js"
import { EncryptionLive } from "./services/Encryption.js"
import { IdentityLive } from "./services/Identity.js"
import { MembersLive } from "./services/Members.js"
import { UsageLive } from "./services/Usage.js"
import { GatewayServiceLive } from "./services/Gateway.js"
import { IdempotencyLive } from "./services/Idempotency.js"
import { KeyStoreLive } from "./services/KeyStore.js"
import { DeltaSessionsLive } from "./services/DeltaSessions.js"
import { HtmlConverterLive } from "./services/HtmlConverter.js"
import { LeasesLive } from "./services/Leases.js"
import { LedgerLive } from "./services/Ledger.js"
import { OrgsLive } from "./services/Orgs.js"
import { PricingLive } from "./services/Pricing.js"
import { ProviderClientLive } from "./services/ProviderClient.js"
import { ProviderRegistryLive } from "./services/ProviderRegistry.js"
import { MetricsExporterLive, TracingLive } from "./services/Observability.js"
import { RateLimitLive } from "./services/RateLimit.js"
import { SweeperLive } from "./services/Sweeper.js"

/** The services over an existing database connection (`SqlClient`). */
export const ServicesLive = GatewayServiceLive.pipe(
  Layer.provideMerge(Layer.mergeAll(IdempotencyLive, MembersLive, ProviderRegistryLive, AuthenticationLive)),
  Layer.provideMerge(Layer.mergeAll(ConnectionsLive, IdentityLive)),
  Layer.provideMerge(DeltaSessionsLive),
  Layer.provideMerge(
    Layer.mergeAll(
      LedgerLive,
      OrgsLive,
      KeyStoreLive,
      BetasLive,
      RateLimitLive,
      ProviderClientLive,
      EncryptionLive,
      UsageLive,
      PricingLive,
      ArtifactsLive,
      MetricsExporterLive,
      LeasesLive,
      HtmlConverterLive
    )
  )
)

/**
 * The services, the sweeper, and the database (configured, or embedded), migrated; traced over OTLP when
 * `otlpTracesUrl` is set (tracing is off otherwise).
 */
export const GatewayLive = SweeperLive.pipe(
  Layer.provideMerge(ServicesLive),
  Layer.provideMerge(DatabaseLive),
  Layer.provideMerge(TracingLive)
)
