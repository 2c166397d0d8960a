/**
 * Tool Gateway as a library: the API definition, the services, and `GatewayLive` for in-process use.
 */
export * from "./domain/errors.js"
export * from "./domain/ids.js"
export * from "./domain/pricing.js"
export * from "./domain/tools.js"
export * as Schemas from "./domain/schemas.js"
export { Api, ApiKeyAuth, CurrentCaller } from "./http/Api.js"
export { ApiLive, HttpServerLive } from "./http/server.js"
export { GatewayLive, ServicesLive } from "./layers.js"
export { DatabaseLive, type DatabasePool } from "./db/Database.js"
export { Betas } from "./services/Betas.js"
export { Gateway, type CallOptions, type Outcome, type ToolError } from "./services/Gateway.js"
export { Authentication, type AuthError } from "./services/Authentication.js"
export * from "./config.js"
export { Idempotency } from "./services/Idempotency.js"
export { KeyStore, type Caller, type KeyInfo, type CreatedKey } from "./services/KeyStore.js"
export { type Hold, Ledger } from "./services/Ledger.js"
export { type NewOrg, type Org, Orgs } from "./services/Orgs.js"
export { ProviderClient } from "./services/ProviderClient.js"
export { RateLimit } from "./services/RateLimit.js"
export { startEmbedded, type EmbeddedDatabase, type EmbeddedOptions, EmbeddedPostgresError, type EmbeddedRole } from "./db/embedded.js"

// What building the exported layers can fail with, besides `SqlError`, `MigrationError` and `EmbeddedPostgresError`:
// no usable encryption key, a dev identity that cannot start, a prices file that cannot be read or parsed.
export { EncryptionKeyError, SealBroken } from "./services/Encryption.js"
export { IdentityError } from "./services/Identity.js"
export { PricingError } from "./services/Pricing.js"

// Services the exported layers provide or need, which a program never calls: exported as types only, so that
// a layer built from `GatewayLive`, `ServicesLive`, `ApiLive` or `HttpServerLive` can be named in a consumer's
// declarations (TS2742 otherwise).
export type { Artifacts } from "./services/Artifacts.js"
export type { Connections } from "./services/Connections.js"
export type { DeltaSessions } from "./services/DeltaSessions.js"
export type { Encryption } from "./services/Encryption.js"
export type { HtmlConverter } from "./services/HtmlConverter.js"
export type { Identity } from "./services/Identity.js"
export type { Leases } from "./services/Leases.js"
export type { Members } from "./services/Members.js"
export type { MetricsExporter } from "./services/Observability.js"
export type { Pricing } from "./services/Pricing.js"
export type { ProviderRegistry } from "./services/ProviderRegistry.js"
export type { Usage } from "./services/Usage.js"
