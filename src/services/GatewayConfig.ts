/**
 * Operator configuration, read once from the environment (every name documented in the README).
 * Tests build it with `GatewayConfig.make({ ... })` instead.
 */
import { Config, type ConfigError, Context, Layer, Option, Redacted } from "effect"

export interface ProviderEndpoint {
  readonly baseUrl: string
  readonly apiKey: Option.Option<Redacted.Redacted>
}

export interface GatewayConfigShape {
  readonly port: number
  readonly host: string
  readonly databaseUrl: Option.Option<Redacted.Redacted>
  readonly dataDir: string
  /** Deadline of one upstream call, in milliseconds. */
  readonly providerTimeoutMs: number
  /** The longest a page's conversion to markdown may take (and never past the call's deadline). */
  readonly htmlConvertTimeoutMs: number
  /** Largest upstream answer the gateway reads, in bytes. */
  readonly providerMaxResponseBytes: number
  /** Largest request body the gateway accepts, in bytes. */
  readonly maxBodyBytes: number
  /** A client must send its request headers within this, and the whole request within `requestTimeoutMs`. */
  readonly headersTimeoutMs: number
  readonly requestTimeoutMs: number
  /** An idle keep-alive connection is closed after this. */
  readonly keepAliveTimeoutMs: number
  /** How long a completed Idempotency-Key is remembered, in milliseconds. */
  readonly idempotencyRetentionMs: number
  /**
   * How long a hold (and an Idempotency-Key claim) stays valid without renewal. A process renews the leases
   * of its calls in flight every third of this, so only a dead process's holds expire.
   */
  readonly holdLeaseMs: number
  /** How often expired holds are voided. */
  readonly sweepIntervalMs: number
  /** Per-key default rate limit: sustained requests per second and burst; 0 turns it off. */
  readonly rateLimitPerSecond: number
  readonly rateLimitBurst: number
  /** Hosts or CIDRs that the SSRF guard lets through (caller-supplied URLs only). */
  readonly ssrfAllow: ReadonlyArray<string>
  readonly searchProviders: ReadonlyArray<string>
  readonly readProviders: ReadonlyArray<string>
  readonly providers: {
    readonly alpha: ProviderEndpoint
    readonly betaRead: ProviderEndpoint
    readonly betaSearch: ProviderEndpoint
    readonly gamma: ProviderEndpoint
    readonly xi: ProviderEndpoint
    readonly weather: string
    readonly geocoding: string
    readonly appstore: string
    /** Base URLs of the account providers (epsilon's comes from each connection). */
    readonly delta: string
    readonly zeta: string
    readonly eta: string
    readonly theta: string
    readonly iota: string
    readonly kappa: string
    readonly lambda: string
    readonly mu: string
    readonly nu: string
  }
  readonly identity: {
    /** Firebase project whose ID tokens sign users in to the dashboard API; none: only dev tokens. */
    readonly firebaseProjectId: Option.Option<string>
    readonly firebaseJwksUrl: string
    /** Accept tokens from the local dev issuer (`tool-gateway dev token`); loopback HOST only. */
    readonly devIssuer: boolean
    /** Least time between two JWKS fetches triggered by an unknown key id. */
    readonly jwksCooldownMs: number
    /** A user who signs in without an org gets a personal one (off: they are refused). */
    readonly autoCreateOrgs: boolean
    readonly signupCredits: number
  }
  /** AES-256-GCM key for connection credentials; none: one generated into the data directory. */
  readonly encryptionKey: Option.Option<Redacted.Redacted>
  /** Earlier keys, still used to read rows written with them. */
  readonly encryptionOldKeys: ReadonlyArray<Redacted.Redacted>
  /** Files kept from tool answers (screenshots, PDFs): largest size, and how long they are kept. */
  readonly artifactMaxBytes: number
  readonly artifactRetentionMs: number
  /** The gateway's public base URL, for absolute artifact URLs (else they are paths). */
  readonly publicUrl: Option.Option<string>
  /** A JSON file of tool prices that replace the catalog's. */
  readonly pricesFile: Option.Option<string>
  /** Create a `default` org and print a key on first start of an empty embedded database. */
  readonly bootstrap: boolean
  /** OTLP/HTTP collector base URL (`…/v1/traces` is appended); none: tracing is off, at no cost. */
  readonly otlpEndpoint: Option.Option<string>
  /** The `service.name` of exported spans. */
  readonly serviceName: string
  /** When set, `GET /metrics` requires `Authorization: Bearer <token>`. */
  readonly metricsToken: Option.Option<Redacted.Redacted>
  /** Redis for the rate limit buckets, shared by every process using it; none: per-process memory. */
  readonly redisUrl: Option.Option<Redacted.Redacted>
}

export class GatewayConfig extends Context.Tag("GatewayConfig")<GatewayConfig, GatewayConfigShape>() {
  static readonly defaults: GatewayConfigShape = {
    port: 8787,
    host: "127.0.0.1",
    databaseUrl: Option.none(),
    dataDir: ".data",
    providerTimeoutMs: 10_000,
    htmlConvertTimeoutMs: 5_000,
    providerMaxResponseBytes: 5 * 1024 * 1024,
    maxBodyBytes: 1024 * 1024,
    headersTimeoutMs: 10_000,
    requestTimeoutMs: 30_000,
    keepAliveTimeoutMs: 5_000,
    idempotencyRetentionMs: 24 * 60 * 60 * 1000,
    holdLeaseMs: 30_000,
    sweepIntervalMs: 15_000,
    rateLimitPerSecond: 50,
    rateLimitBurst: 100,
    ssrfAllow: [],
    searchProviders: ["alpha", "beta", "gamma"],
    readProviders: ["builtin", "beta", "gamma"],
    providers: {
      alpha: { baseUrl: "https://api.exa.ai", apiKey: Option.none() },
      betaRead: { baseUrl: "https://r.jina.ai", apiKey: Option.none() },
      betaSearch: { baseUrl: "https://s.jina.ai", apiKey: Option.none() },
      gamma: { baseUrl: "https://api.firecrawl.dev", apiKey: Option.none() },
      xi: { baseUrl: "https://api.themoviedb.org", apiKey: Option.none() },
      weather: "https://api.open-meteo.com",
      geocoding: "https://geocoding-api.open-meteo.com",
      appstore: "https://itunes.apple.com",
      delta: "https://bsky.social",
      zeta: "https://graph.facebook.com",
      eta: "https://api.monkeytype.com",
      theta: "https://api.trakt.tv",
      iota: "https://api.render.com",
      kappa: "https://api.polar.sh",
      lambda: "https://api.resend.com",
      mu: "https://api.notion.com",
      nu: "https://api.github.com"
    },
    identity: {
      firebaseProjectId: Option.none(),
      firebaseJwksUrl: "https://www.googleapis.com/service_accounts/v1/jwk/securetoken@system.gserviceaccount.com",
      devIssuer: false,
      jwksCooldownMs: 30_000,
      autoCreateOrgs: false,
      signupCredits: 0
    },
    encryptionKey: Option.none(),
    encryptionOldKeys: [],
    pricesFile: Option.none(),
    artifactMaxBytes: 10 * 1024 * 1024,
    artifactRetentionMs: 7 * 24 * 60 * 60 * 1000,
    publicUrl: Option.none(),
    bootstrap: true,
    otlpEndpoint: Option.none(),
    serviceName: "tool-gateway",
    metricsToken: Option.none(),
    redisUrl: Option.none()
  }

  /** A configuration from the defaults and the given overrides (tests, in-process use). */
  static make(overrides: Partial<GatewayConfigShape> = {}): GatewayConfigShape {
    return { ...GatewayConfig.defaults, ...overrides }
  }

  static layerWith(overrides: Partial<GatewayConfigShape> = {}): Layer.Layer<GatewayConfig> {
    return Layer.succeed(GatewayConfig, GatewayConfig.make(overrides))
  }
}

const d = GatewayConfig.defaults

const list = (name: string, fallback: ReadonlyArray<string>) =>
  Config.string(name).pipe(
    Config.map((s) => s.split(",").map((x) => x.trim()).filter((x) => x.length > 0)),
    Config.withDefault(fallback)
  )

const positiveInt = (name: string, fallback: number) =>
  Config.integer(name).pipe(
    Config.validate({
      message: `${name} must be a whole number from 0 to ${Number.MAX_SAFE_INTEGER}`,
      validation: (n) => Number.isSafeInteger(n) && n >= 0
    }),
    Config.withDefault(fallback)
  )

const trimSlash = (s: string) => s.replace(/\/+$/, "")

const base = (name: string, fallback: string) =>
  Config.string(`${name}_BASE_URL`).pipe(Config.withDefault(fallback), Config.map(trimSlash))

const endpoint = (name: string, fallback: ProviderEndpoint, baseOverride: Option.Option<string> = Option.none()) =>
  Config.all({
    baseUrl: Config.string(`${name}_BASE_URL`).pipe(
      Config.withDefault(Option.getOrElse(baseOverride, () => fallback.baseUrl)),
      Config.map(trimSlash)
    ),
    apiKey: Config.option(Config.redacted(`${name}_API_KEY`))
  })

/** The configuration read from the environment. */
export const fromEnv: Config.Config<GatewayConfigShape> = Config.all({
  port: Config.integer("PORT").pipe(
    Config.validate({ message: "PORT must be an integer from 0 to 65535", validation: (n) => n >= 0 && n <= 65535 }),
    Config.withDefault(d.port)
  ),
  host: Config.string("HOST").pipe(Config.withDefault(d.host)),
  databaseUrl: Config.option(Config.redacted("DATABASE_URL")),
  dataDir: Config.string("GATEWAY_DATA_DIR").pipe(Config.withDefault(d.dataDir)),
  providerTimeoutMs: positiveInt("PROVIDER_TIMEOUT_MS", d.providerTimeoutMs),
  htmlConvertTimeoutMs: positiveInt("HTML_CONVERT_TIMEOUT_MS", d.htmlConvertTimeoutMs),
  providerMaxResponseBytes: positiveInt("PROVIDER_MAX_RESPONSE_BYTES", d.providerMaxResponseBytes),
  maxBodyBytes: positiveInt("MAX_BODY_BYTES", d.maxBodyBytes),
  headersTimeoutMs: positiveInt("HEADERS_TIMEOUT_MS", d.headersTimeoutMs),
  requestTimeoutMs: positiveInt("REQUEST_TIMEOUT_MS", d.requestTimeoutMs),
  keepAliveTimeoutMs: positiveInt("KEEP_ALIVE_TIMEOUT_MS", d.keepAliveTimeoutMs),
  idempotencyRetentionMs: positiveInt("IDEMPOTENCY_RETENTION_SECONDS", d.idempotencyRetentionMs / 1000).pipe(
    Config.map((s) => s * 1000)
  ),
  holdLeaseMs: positiveInt("HOLD_LEASE_MS", d.holdLeaseMs).pipe(
    Config.validate({ message: "HOLD_LEASE_MS must be at least 30 (it is renewed every third of it)", validation: (n) => n >= 30 })
  ),
  sweepIntervalMs: positiveInt("SWEEP_INTERVAL_MS", d.sweepIntervalMs),
  rateLimitPerSecond: positiveInt("RATE_LIMIT_PER_SECOND", d.rateLimitPerSecond),
  rateLimitBurst: positiveInt("RATE_LIMIT_BURST", d.rateLimitBurst),
  ssrfAllow: list("SSRF_ALLOW", d.ssrfAllow),
  searchProviders: list("SEARCH_PROVIDERS", d.searchProviders),
  readProviders: list("READ_PROVIDERS", d.readProviders),
  betaBase: Config.option(Config.string("BETA_BASE_URL")),
  alpha: endpoint("ALPHA", d.providers.alpha),
  gamma: endpoint("GAMMA", d.providers.gamma),
  xi: endpoint("XI", d.providers.xi),
  betaKey: Config.option(Config.redacted("BETA_API_KEY")),
  weather: Config.string("WEATHER_BASE_URL").pipe(Config.withDefault(d.providers.weather), Config.map(trimSlash)),
  geocoding: Config.string("GEOCODING_BASE_URL").pipe(
    Config.withDefault(d.providers.geocoding),
    Config.map(trimSlash)
  ),
  appstore: Config.string("APPSTORE_BASE_URL").pipe(Config.withDefault(d.providers.appstore), Config.map(trimSlash)),
  betaReadBase: Config.option(Config.string("BETA_READ_BASE_URL")),
  betaSearchBase: Config.option(Config.string("BETA_SEARCH_BASE_URL")),
  bootstrap: Config.boolean("GATEWAY_BOOTSTRAP").pipe(Config.withDefault(d.bootstrap)),
  accountBases: Config.all({
    delta: base("DELTA", d.providers.delta),
    zeta: base("ZETA", d.providers.zeta),
    eta: base("ETA", d.providers.eta),
    theta: base("THETA", d.providers.theta),
    iota: base("IOTA", d.providers.iota),
    kappa: base("KAPPA", d.providers.kappa),
    lambda: base("LAMBDA", d.providers.lambda),
    mu: base("MU", d.providers.mu),
    nu: base("NU", d.providers.nu)
  }),
  identity: Config.all({
    firebaseProjectId: Config.option(Config.string("FIREBASE_PROJECT_ID")),
    firebaseJwksUrl: Config.string("FIREBASE_JWKS_URL").pipe(Config.withDefault(d.identity.firebaseJwksUrl)),
    devIssuer: Config.boolean("DEV_IDENTITY").pipe(Config.withDefault(d.identity.devIssuer)),
    jwksCooldownMs: positiveInt("JWKS_COOLDOWN_MS", d.identity.jwksCooldownMs),
    autoCreateOrgs: Config.boolean("AUTO_CREATE_ORGS").pipe(Config.withDefault(d.identity.autoCreateOrgs)),
    signupCredits: positiveInt("SIGNUP_CREDITS", d.identity.signupCredits)
  }),
  encryptionKey: Config.option(Config.redacted("GATEWAY_ENCRYPTION_KEY")),
  pricesFile: Config.option(Config.string("PRICES_FILE")),
  artifactMaxBytes: positiveInt("ARTIFACT_MAX_BYTES", d.artifactMaxBytes),
  artifactRetentionMs: positiveInt("ARTIFACT_RETENTION_SECONDS", d.artifactRetentionMs / 1000).pipe(
    Config.map((s) => s * 1000)
  ),
  publicUrl: Config.option(Config.string("PUBLIC_URL").pipe(Config.map(trimSlash))),
  encryptionOldKeys: Config.string("GATEWAY_ENCRYPTION_OLD_KEYS").pipe(
    Config.map((s) => s.split(",").map((x) => x.trim()).filter((x) => x.length > 0).map((x) => Redacted.make(x))),
    Config.withDefault([])
  ),
  otlpEndpoint: Config.option(
    Config.string("OTEL_EXPORTER_OTLP_ENDPOINT").pipe(
      Config.map(trimSlash),
      Config.validate({ message: "OTEL_EXPORTER_OTLP_ENDPOINT must be an http(s) URL", validation: (s) => /^https?:\/\//.test(s) })
    )
  ),
  serviceName: Config.string("OTEL_SERVICE_NAME").pipe(Config.withDefault(d.serviceName)),
  metricsToken: Config.option(Config.redacted("METRICS_TOKEN")),
  redisUrl: Config.option(
    Config.redacted("REDIS_URL").pipe(Config.validate({
      message: "must be a redis:// or rediss:// URL, e.g. redis://127.0.0.1:6379",
      validation: (url) => {
        const text = Redacted.value(url)
        return URL.canParse(text) && /^rediss?:$/.test(new URL(text).protocol) && /^(\/\d*)?$/.test(new URL(text).pathname)
      }
    }))
  )
}).pipe(
  Config.map((c): GatewayConfigShape => {
    // BETA_BASE_URL points both Jina hosts at one server; the specific names win over it.
    const betaRead = Option.orElse(c.betaReadBase, () => c.betaBase)
    const betaSearch = Option.orElse(c.betaSearchBase, () => c.betaBase)
    return {
      port: c.port,
      host: c.host,
      databaseUrl: c.databaseUrl,
      dataDir: c.dataDir,
      providerTimeoutMs: c.providerTimeoutMs,
      htmlConvertTimeoutMs: c.htmlConvertTimeoutMs,
      providerMaxResponseBytes: c.providerMaxResponseBytes,
      maxBodyBytes: c.maxBodyBytes,
      headersTimeoutMs: c.headersTimeoutMs,
      requestTimeoutMs: c.requestTimeoutMs,
      keepAliveTimeoutMs: c.keepAliveTimeoutMs,
      idempotencyRetentionMs: c.idempotencyRetentionMs,
      holdLeaseMs: c.holdLeaseMs,
      sweepIntervalMs: c.sweepIntervalMs,
      rateLimitPerSecond: c.rateLimitPerSecond,
      rateLimitBurst: c.rateLimitBurst,
      ssrfAllow: c.ssrfAllow,
      searchProviders: c.searchProviders,
      readProviders: c.readProviders,
      providers: {
        alpha: c.alpha,
        gamma: c.gamma,
        xi: c.xi,
        betaRead: {
          baseUrl: trimSlash(Option.getOrElse(betaRead, () => d.providers.betaRead.baseUrl)),
          apiKey: c.betaKey
        },
        betaSearch: {
          baseUrl: trimSlash(Option.getOrElse(betaSearch, () => d.providers.betaSearch.baseUrl)),
          apiKey: c.betaKey
        },
        weather: c.weather,
        geocoding: c.geocoding,
        appstore: c.appstore,
        ...c.accountBases
      },
      identity: c.identity,
      encryptionKey: c.encryptionKey,
      encryptionOldKeys: c.encryptionOldKeys,
      pricesFile: c.pricesFile,
      artifactMaxBytes: c.artifactMaxBytes,
      artifactRetentionMs: c.artifactRetentionMs,
      publicUrl: c.publicUrl,
      bootstrap: c.bootstrap,
      otlpEndpoint: c.otlpEndpoint,
      serviceName: c.serviceName,
      metricsToken: c.metricsToken,
      redisUrl: c.redisUrl
    }
  })
)

export const GatewayConfigFromEnv: Layer.Layer<GatewayConfig, ConfigError.ConfigError> = Layer.effect(
  GatewayConfig,
  fromEnv
)
