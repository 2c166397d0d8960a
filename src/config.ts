/**
 * Operator configuration, per concern — the server, the ledger, the providers, identity — each read once
 * from the environment with Effect's `Config` (every name documented in docs/configuration.md). Each field is
 * written once: its name, its default and its check are the `Config` below, its type follows from it, and
 * the defaults of tests and in-process use (`configLayer`) come from running the same `Config` on an empty
 * environment. A zero where zero means nothing (a timeout, a size) is refused at start-up with one line.
 */
import * as Config from "effect/Config"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"

// -- building blocks ----------------------------------------------------------------------------------

/** A whole number of at least `min` (a timeout of 0 ms, a size of 0 bytes mean nothing: refused). */
const whole = (name: string, fallback: number, min: number) =>
  Config.integer(name).pipe(
    Config.validate({
      message: min === 0 ? `${name} must be a whole number, 0 or more` : `${name} must be a whole number of at least ${min}`,
      validation: (n) => Number.isSafeInteger(n) && n >= min
    }),
    Config.withDefault(fallback)
  )

/** Seconds in the environment, milliseconds in the program. */
const seconds = (name: string, fallback: number) => whole(name, fallback, 1).pipe(Config.map((s) => s * 1000))

const list = (name: string, fallback: ReadonlyArray<string>) =>
  Config.string(name).pipe(
    Config.map((s): ReadonlyArray<string> => s.split(",").map((x) => x.trim()).filter((x) => x.length > 0)),
    Config.withDefault(fallback)
  )

const trimSlash = (s: string) => s.replace(/\/+$/, "")

const url = (name: string) =>
  Config.string(name).pipe(
    Config.validate({ message: `${name} must be an http(s) URL`, validation: (s) => /^https?:\/\/[^/]/.test(s) }),
    Config.map(trimSlash)
  )

/** Where a provider is, and the operator's key for it (account providers use each org's own instead). */
export interface ProviderEndpoint {
  readonly baseUrl: string
  readonly apiKey: Option.Option<Redacted.Redacted>
}

/** `<NAME>_BASE_URL` (else `fallback`) and `<NAME>_API_KEY`. */
const endpoint = (name: string, fallback: string, key: Config.Config<Option.Option<Redacted.Redacted>> = Config.option(Config.redacted(`${name}_API_KEY`))) =>
  Config.all({ baseUrl: url(`${name}_BASE_URL`).pipe(Config.withDefault(fallback)), apiKey: key })

// -- the server --------------------------------------------------------------------------------------

const server = Config.all({
  port: Config.integer("PORT").pipe(
    Config.validate({ message: "PORT must be an integer from 0 to 65535", validation: (n) => n >= 0 && n <= 65535 }),
    Config.withDefault(8787)
  ),
  host: Config.string("HOST").pipe(Config.withDefault("127.0.0.1")),
  /** The gateway's public base URL, for absolute artifact URLs (else they are paths). */
  publicUrl: Config.option(url("PUBLIC_URL")),
  /** The database; none: the embedded PostgreSQL in `dataDir`. */
  databaseUrl: Config.option(Config.redacted("DATABASE_URL")),
  dataDir: Config.string("GATEWAY_DATA_DIR").pipe(Config.withDefault(".data")),
  /** Create a `default` org and print a key on first start of an empty embedded database. */
  bootstrap: Config.boolean("GATEWAY_BOOTSTRAP").pipe(Config.withDefault(true)),
  /** Largest request body, in bytes. */
  maxBodyBytes: whole("MAX_BODY_BYTES", 1024 * 1024, 1),
  /** A client sends its headers within this, the whole request within `requestTimeoutMs`. */
  headersTimeoutMs: whole("HEADERS_TIMEOUT_MS", 10_000, 1),
  requestTimeoutMs: whole("REQUEST_TIMEOUT_MS", 30_000, 1),
  /** An idle keep-alive connection is closed after this. */
  keepAliveTimeoutMs: whole("KEEP_ALIVE_TIMEOUT_MS", 5_000, 1),
  /** Per-key default rate: sustained requests per second and burst; 0 turns it off. */
  rateLimitPerSecond: whole("RATE_LIMIT_PER_SECOND", 50, 0),
  rateLimitBurst: whole("RATE_LIMIT_BURST", 100, 0),
  /** Redis for the rate limit buckets, shared by every process using it; none: per-process memory. */
  redisUrl: Config.option(
    Config.redacted("REDIS_URL").pipe(Config.validate({
      message: "must be a redis:// or rediss:// URL, e.g. redis://127.0.0.1:6379",
      validation: (url) => {
        const text = Redacted.value(url)
        return URL.canParse(text) && /^rediss?:$/.test(new URL(text).protocol) && /^(\/\d*)?$/.test(new URL(text).pathname)
      }
    }))
  ),
  /**
   * Origins (`https://dash.example.com`, comma-separated) whose pages may call the API from a browser: CORS
   * headers and preflight answers for them; none (the default): no CORS at all (the built-in dashboard is
   * same-origin).
   */
  corsOrigins: list("CORS_ORIGINS", []).pipe(
    Config.validate({
      message: "CORS_ORIGINS must be comma-separated origins such as https://dash.example.com (scheme, host, optional port; no path)",
      validation: (origins) => origins.every((o) => /^https?:\/\/[^/\s]+$/.test(o) && URL.canParse(o) && new URL(o).origin === o)
    })
  ),
  /** When set, `GET /metrics` requires `Authorization: Bearer <token>`. */
  metricsToken: Config.option(Config.redacted("METRICS_TOKEN")),
  /** OTLP/HTTP collector base URL (`…/v1/traces` is appended); none: tracing is off, at no cost. */
  otlpEndpoint: Config.option(url("OTEL_EXPORTER_OTLP_ENDPOINT")),
  serviceName: Config.string("OTEL_SERVICE_NAME").pipe(Config.withDefault("tool-gateway"))
})

// -- the ledger --------------------------------------------------------------------------------------

const ledger = Config.all({
  /**
   * How long a hold (and an Idempotency-Key claim) stays valid without renewal; a process renews the
   * leases of its calls in flight every third of this, so only a dead process's holds expire.
   */
  holdLeaseMs: whole("HOLD_LEASE_MS", 30_000, 30),
  /** How often expired holds, Idempotency-Key records and files are swept; 0: never (tests). */
  sweepIntervalMs: whole("SWEEP_INTERVAL_MS", 15_000, 0),
  /** How long a completed Idempotency-Key is remembered. */
  idempotencyRetentionMs: seconds("IDEMPOTENCY_RETENTION_SECONDS", 24 * 60 * 60),
  /** A JSON file of tool prices that replace the catalog's. */
  pricesFile: Config.option(Config.string("PRICES_FILE")),
  /**
   * `full`: a settlement returns once its charge is on disk (the WAL flushed). `relaxed`: settlements commit
   * without waiting, like reservations and voids; a database crash can forget the last fraction of a second of
   * charges (in the callers' favour), never charge twice.
   */
  ledgerSync: Config.literal("full", "relaxed")("LEDGER_SYNC").pipe(Config.withDefault("full" as const))
})

// -- the providers -----------------------------------------------------------------------------------

const betaKey = Config.option(Config.redacted("BETA_API_KEY"))
/** BETA_BASE_URL points both Jina hosts at one server; BETA_READ_BASE_URL and BETA_SEARCH_BASE_URL win over it. */
const betaBase = (specific: string, fallback: string) =>
  url(specific).pipe(Config.orElse(() => url("BETA_BASE_URL")), Config.withDefault(fallback))

const noKey: Config.Config<Option.Option<Redacted.Redacted>> = Config.succeed(Option.none())

const providers = Config.all({
  /** Deadline of one upstream call; a call's provider phase (fallbacks included) gets three times this. */
  timeoutMs: whole("PROVIDER_TIMEOUT_MS", 10_000, 1),
  /** Largest upstream answer the gateway reads, in bytes. */
  maxResponseBytes: whole("PROVIDER_MAX_RESPONSE_BYTES", 5 * 1024 * 1024, 1),
  /** The longest a page's conversion to markdown may work (never past the call's deadline). */
  htmlConvertTimeoutMs: whole("HTML_CONVERT_TIMEOUT_MS", 5_000, 1),
  /** Hosts or CIDRs that the SSRF guard lets through (caller-supplied URLs only). */
  ssrfAllow: list("SSRF_ALLOW", []),
  searchProviders: list("SEARCH_PROVIDERS", ["alpha", "beta", "gamma"]),
  readProviders: list("READ_PROVIDERS", ["builtin", "beta", "gamma"]),
  /** Files kept from tool answers (screenshots, PDFs): largest size, and how long they are kept. */
  artifactMaxBytes: whole("ARTIFACT_MAX_BYTES", 10 * 1024 * 1024, 1),
  artifactRetentionMs: seconds("ARTIFACT_RETENTION_SECONDS", 7 * 24 * 60 * 60),
  /**
   * The Graph API version `zeta_request` calls when its input names none. Meta keeps a version about two
   * years and then serves its calls as the oldest one it still has (developers.facebook.com/docs/graph-api/changelog).
   */
  zetaApiVersion: Config.string("ZETA_API_VERSION").pipe(
    Config.validate({ message: "ZETA_API_VERSION must be a Graph API version such as v26.0", validation: (s) => /^v\d+\.\d+$/.test(s) }),
    Config.withDefault("v26.0")
  ),
  /** The `Notion-Version` mu sends; from 2025-09-03 on, a database's properties are its data sources'. */
  muApiVersion: Config.string("MU_API_VERSION").pipe(
    Config.validate({ message: "MU_API_VERSION must be a Notion-Version date such as 2025-09-03", validation: (s) => /^\d{4}-\d{2}-\d{2}$/.test(s) }),
    Config.withDefault("2025-09-03")
  ),
  endpoints: Config.all({
    alpha: endpoint("ALPHA", "https://api.exa.ai"),
    betaRead: Config.all({ baseUrl: betaBase("BETA_READ_BASE_URL", "https://r.jina.ai"), apiKey: betaKey }),
    betaSearch: Config.all({ baseUrl: betaBase("BETA_SEARCH_BASE_URL", "https://s.jina.ai"), apiKey: betaKey }),
    gamma: endpoint("GAMMA", "https://api.firecrawl.dev"),
    xi: endpoint("XI", "https://api.themoviedb.org"),
    weather: Config.all({ baseUrl: url("WEATHER_BASE_URL").pipe(Config.withDefault("https://api.open-meteo.com")), apiKey: noKey }),
    geocoding: Config.all({
      baseUrl: url("GEOCODING_BASE_URL").pipe(Config.withDefault("https://geocoding-api.open-meteo.com")),
      apiKey: noKey
    }),
    appstore: Config.all({ baseUrl: url("APPSTORE_BASE_URL").pipe(Config.withDefault("https://itunes.apple.com")), apiKey: noKey }),
    // account providers: the base URL is the operator's; the key is each org's connection
    delta: endpoint("DELTA", "https://bsky.social", noKey),
    zeta: endpoint("ZETA", "https://graph.facebook.com", noKey),
    eta: endpoint("ETA", "https://api.monkeytype.com", noKey),
    theta: endpoint("THETA", "https://api.trakt.tv", noKey),
    iota: endpoint("IOTA", "https://api.render.com", noKey),
    kappa: endpoint("KAPPA", "https://api.polar.sh", noKey),
    lambda: endpoint("LAMBDA", "https://api.resend.com", noKey),
    mu: endpoint("MU", "https://api.notion.com", noKey),
    nu: endpoint("NU", "https://api.github.com", noKey)
  })
})

// -- identity and secrets ----------------------------------------------------------------------------

const identity = Config.all({
  /** Firebase project whose ID tokens sign users in to the dashboard; none: only dev tokens. */
  firebaseProjectId: Config.option(Config.string("FIREBASE_PROJECT_ID")),
  firebaseJwksUrl: url("FIREBASE_JWKS_URL").pipe(
    Config.withDefault("https://www.googleapis.com/service_accounts/v1/jwk/securetoken@system.gserviceaccount.com")
  ),
  /** The Firebase web app's API key and auth domain, for the dashboard's sign-in page (public values). */
  firebaseWebApiKey: Config.option(Config.string("FIREBASE_WEB_API_KEY")),
  /** Default: `<FIREBASE_PROJECT_ID>.firebaseapp.com`. */
  firebaseAuthDomain: Config.option(Config.string("FIREBASE_AUTH_DOMAIN")),
  /** A Firebase Auth emulator (`host:port`, the name Firebase's own tools use) the sign-in page talks to. */
  firebaseAuthEmulatorHost: Config.option(
    Config.string("FIREBASE_AUTH_EMULATOR_HOST").pipe(Config.validate({
      message: "FIREBASE_AUTH_EMULATOR_HOST must be host:port, e.g. 127.0.0.1:9099",
      validation: (s) => /^([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\]):\d{1,5}$/.test(s)
    }))
  ),
  /** Accept tokens from the local dev issuer (`tool-gateway dev token`); loopback HOST only. */
  devIssuer: Config.boolean("DEV_IDENTITY").pipe(Config.withDefault(false)),
  /** Least time between two JWKS fetches triggered by an unknown key id. */
  jwksCooldownMs: whole("JWKS_COOLDOWN_MS", 30_000, 0),
  /** A user who signs in without an org gets a personal one (off: they are refused). */
  autoCreateOrgs: Config.boolean("AUTO_CREATE_ORGS").pipe(Config.withDefault(false)),
  signupCredits: whole("SIGNUP_CREDITS", 0, 0),
  /** AES-256-GCM key for connection credentials; none: one generated into the data directory. */
  encryptionKey: Config.option(Config.redacted("GATEWAY_ENCRYPTION_KEY")),
  /** Earlier keys, still used to read rows written with them. */
  encryptionOldKeys: list("GATEWAY_ENCRYPTION_OLD_KEYS", []).pipe(Config.map((keys) => keys.map((k) => Redacted.make(k))))
})

// -- the tags ----------------------------------------------------------------------------------------

export type ServerConfigShape = Config.Config.Success<typeof server>
export type LedgerConfigShape = Config.Config.Success<typeof ledger>
export type ProvidersConfigShape = Config.Config.Success<typeof providers>
export type IdentityConfigShape = Config.Config.Success<typeof identity>

export class ServerConfig extends Context.Tag("ServerConfig")<ServerConfig, ServerConfigShape>() {}
export class LedgerConfig extends Context.Tag("LedgerConfig")<LedgerConfig, LedgerConfigShape>() {}
export class ProvidersConfig extends Context.Tag("ProvidersConfig")<ProvidersConfig, ProvidersConfigShape>() {}
export class IdentityConfig extends Context.Tag("IdentityConfig")<IdentityConfig, IdentityConfigShape>() {}

export type GatewayConfigs = ServerConfig | LedgerConfig | ProvidersConfig | IdentityConfig

/** Every concern's configuration, read from the environment (a mistake stops the start with one line). */
export const ConfigFromEnv = Layer.mergeAll(
  Layer.effect(ServerConfig, server),
  Layer.effect(LedgerConfig, ledger),
  Layer.effect(ProvidersConfig, providers),
  Layer.effect(IdentityConfig, identity)
)

/** What a `Config` reads from an empty environment: its defaults. */
const defaultsOf = <A>(config: Config.Config<A>): A =>
  Effect.runSync(Effect.orDie(Effect.withConfigProvider(config, ConfigProvider.fromMap(new Map()))))

export const defaults = {
  server: defaultsOf(server),
  ledger: defaultsOf(ledger),
  providers: defaultsOf(providers),
  identity: defaultsOf(identity)
}

export interface ConfigOverrides {
  readonly server?: Partial<ServerConfigShape>
  readonly ledger?: Partial<LedgerConfigShape>
  readonly providers?: Partial<Omit<ProvidersConfigShape, "endpoints">> & {
    readonly endpoints?: Partial<ProvidersConfigShape["endpoints"]>
  }
  readonly identity?: Partial<IdentityConfigShape>
}

/** Every concern's configuration: the defaults, with `overrides` (tests, in-process use). */
export const configLayer = (overrides: ConfigOverrides = {}): Layer.Layer<GatewayConfigs> =>
  Layer.mergeAll(
    Layer.succeed(ServerConfig, { ...defaults.server, ...overrides.server }),
    Layer.succeed(LedgerConfig, { ...defaults.ledger, ...overrides.ledger }),
    Layer.succeed(ProvidersConfig, {
      ...defaults.providers,
      ...overrides.providers,
      endpoints: { ...defaults.providers.endpoints, ...overrides.providers?.endpoints }
    }),
    Layer.succeed(IdentityConfig, { ...defaults.identity, ...overrides.identity })
  )
