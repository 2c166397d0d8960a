/**
 * Operator configuration, per concern — the server, the ledger, the providers, identity, the logs — each read
 * once from the environment with Effect's `Config` (every name documented in docs/configuration.md). Each field
 * is written once: its name, its default and its check are the `Config` below, its type follows from it, and
 * the defaults of tests and in-process use (`configLayer`) come from running the same `Config` on an empty
 * environment.
 *
 * A variable set to nothing (or only spaces) counts as unset: `PORT=` is the default port, not port 0. A value
 * that cannot be right stops the start with one line naming the variable (`describeConfigError`): a number that
 * is not decimal digits or is out of its range, a timer past what Node's timers take, an unknown name in a list.
 */
import * as Config from "effect/Config"
import * as ConfigError from "effect/ConfigError"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import { MAX_CREDITS } from "./domain/credits.js"
import { MAX_RATE } from "./domain/dashboard.js"
import { GRAPH_API_VERSION } from "./domain/schemas.js"
import { isPolicyEntry } from "./services/Ssrf.js"

// -- building blocks ----------------------------------------------------------------------------------

/** The longest delay Node's timers take (2^31 − 1 ms, about 24.8 days); a longer one fires after 1 ms. */
export const MAX_TIMER_MS = 2 ** 31 - 1
/** The longest retention: 100 years, in seconds (a longer one takes dates past what a `Date` holds). */
export const MAX_RETENTION_SECONDS = 36_525 * 24 * 60 * 60

/** The value as written, quoted (control characters escaped) and cut short, for a message. */
const shown = (text: string) => JSON.stringify(text.length > 40 ? `${text.slice(0, 40)}…` : text)

const invalid = (message: string) => Either.left(ConfigError.InvalidData([], message))

/** A variable's text; set to nothing or to spaces only, it counts as unset (so its default applies). */
const setting = (name: string): Config.Config<string> =>
  Config.string(name).pipe(
    Config.mapOrFail((text) => text.trim() === "" ? Either.left(ConfigError.MissingData([], `${name} is not set`)) : Either.right(text))
  )

/** A whole number from `min` to `max`, written in decimal digits only (no sign, exponent, fraction or hex). */
const parseWhole = (name: string, text: string, min: number, max: number): Either.Either<number, ConfigError.ConfigError> => {
  const n = /^\d{1,16}$/.test(text) ? Number(text) : Number.NaN
  return Number.isSafeInteger(n) && n >= min && n <= max
    ? Either.right(n)
    : invalid(`${name} must be a whole number of at least ${min} and at most ${max}, in decimal digits (got ${shown(text)})`)
}

/** A whole number from `min` to `max`, `fallback` when unset. */
const whole = (name: string, fallback: number, min: number, max: number = Number.MAX_SAFE_INTEGER) =>
  setting(name).pipe(Config.mapOrFail((text) => parseWhole(name, text, min, max)), Config.withDefault(fallback))

/** A timer's duration in milliseconds: at least `min`, at most what Node's timers take. */
const timer = (name: string, fallback: number, min: number, max: number = MAX_TIMER_MS) => whole(name, fallback, min, max)

/** Seconds in the environment (a retention: 1 s to 100 years), milliseconds in the program. */
const retention = (name: string, fallback: number) =>
  whole(name, fallback, 1, MAX_RETENTION_SECONDS).pipe(Config.map((s) => s * 1000))

/** One of `values`, written as they are. */
const oneOf = <const A extends string>(name: string, values: ReadonlyArray<A>): Config.Config<A> =>
  setting(name).pipe(
    Config.mapOrFail((text) => {
      const found = values.find((v) => v === text)
      return found !== undefined ? Either.right(found) : invalid(`${name} must be ${values.join(" or ")} (got ${shown(text)})`)
    })
  )

const TRUE = ["true", "yes", "on", "1"]
const FALSE = ["false", "no", "off", "0"]
const boolean = (name: string, fallback: boolean) =>
  setting(name).pipe(
    Config.mapOrFail((text) => {
      const lower = text.toLowerCase()
      return TRUE.includes(lower)
        ? Either.right(true)
        : FALSE.includes(lower)
        ? Either.right(false)
        : invalid(`${name} must be true or false (got ${shown(text)})`)
    }),
    Config.withDefault(fallback)
  )

/** Comma-separated entries (blanks between commas ignored), each checked by `check` (else the message). */
const list = (name: string, fallback: ReadonlyArray<string>, check?: { readonly is: (entry: string) => boolean; readonly expected: string }) =>
  setting(name).pipe(
    Config.mapOrFail((text) => {
      const entries = text.split(",").map((x) => x.trim()).filter((x) => x.length > 0)
      const wrong = check === undefined ? [] : entries.filter((e) => !check.is(e))
      if (entries.length === 0) return invalid(`${name} must be a comma-separated list with at least one entry (got ${shown(text)})`)
      return wrong.length === 0
        ? Either.right<ReadonlyArray<string>>(entries)
        : invalid(`${name}: ${wrong.map(shown).join(", ")} ${wrong.length === 1 ? "is" : "are"} not ${check?.expected ?? "valid"}`)
    }),
    Config.withDefault(fallback)
  )

/** Providers a curated tool may try, in order. */
const providerList = (name: string, fallback: ReadonlyArray<string>, known: ReadonlyArray<string>) =>
  list(name, fallback, { is: (e) => known.includes(e), expected: `one of ${known.join(", ")}` })

const trimSlash = (s: string) => s.replace(/\/+$/, "")

/** An http(s) URL the gateway appends paths to: no spaces, no query, no fragment. */
const isBaseUrl = (s: string) => {
  if (/[\s\p{Cc}]/u.test(s) || !/^https?:\/\/[^/?#]/i.test(s) || !URL.canParse(s)) return false
  const url = new URL(s)
  return (url.protocol === "http:" || url.protocol === "https:") && url.hostname !== "" && url.search === "" && url.hash === "" &&
    !s.includes("?") && !s.includes("#")
}

const exactUrl = (name: string, example = "https://api.example.com") =>
  setting(name).pipe(
    Config.mapOrFail((text) =>
      isBaseUrl(text)
        ? Either.right(text)
        : invalid(`${name} must be an http(s) URL such as ${example}, without spaces, query or fragment (got ${shown(text)})`)
    )
  )

/** A base URL the gateway appends paths to, without its trailing slashes. */
const url = (name: string) => exactUrl(name).pipe(Config.map(trimSlash))

/** An HTTP header's name (RFC 9110 §5.1: a token). */
const isToken = (s: string) => /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(s)

/**
 * OpenTelemetry's header list: `name=value` pairs, comma-separated, each value percent-encoded (`api-key=abc%20def`).
 * Values are secrets (a collector's API key): a message names the variable and the header, never a value.
 */
const parseOtlpHeaders = (name: string, text: string): Either.Either<Readonly<Record<string, string>>, ConfigError.ConfigError> => {
  const headers: Record<string, string> = {}
  for (const entry of text.split(",").map((x) => x.trim()).filter((x) => x.length > 0)) {
    const at = entry.indexOf("=")
    const key = (at < 0 ? entry : entry.slice(0, at)).trim().toLowerCase()
    if (at < 0 || !isToken(key)) {
      return invalid(`${name} must be comma-separated name=value pairs, each name an HTTP header name (an entry ${at < 0 ? "has no =" : "has no valid name"})`)
    }
    let value: string
    try {
      value = decodeURIComponent(entry.slice(at + 1).trim())
    } catch {
      return invalid(`${name}: the value of ${key} is not valid percent-encoding`)
    }
    // what an HTTP header's value may hold (RFC 9110 §5.5): visible ASCII, spaces and tabs inside; or nothing
    if (!/^([\x21-\x7e]([\x20-\x7e\t]*[\x21-\x7e])?)?$/.test(value)) {
      return invalid(`${name}: the value of ${key} must be visible ASCII characters (spaces inside only) once percent-decoded`)
    }
    headers[key] = value
  }
  return Either.right(headers)
}

/** OTLP's transport: over HTTP, JSON or binary protobuf. */
const parseOtlpProtocol = (name: string, text: string): Either.Either<"http/json" | "http/protobuf", ConfigError.ConfigError> =>
  text === "http/json" || text === "http/protobuf"
    ? Either.right(text)
    : invalid(
      `${name} must be http/json or http/protobuf (got ${shown(text)}${
        text === "grpc" ? "; OTLP over gRPC is not supported: point the endpoint at the collector's OTLP/HTTP port, usually 4318" : ""
      })`
    )

/**
 * OpenTelemetry's exporter variables, read as the specification has them (the `TRACES_` ones over the general ones,
 * the traces endpoint used as written, the general one with `/v1/traces` appended). What only an export uses —
 * headers, protocol, timeouts — is checked only when spans are exported: with no endpoint, or `OTEL_SDK_DISABLED`,
 * the settings a shared environment sets for other services (`grpc` for port 4317, say) do not stop the gateway.
 */
const otlp = Config.all({
  traces: Config.option(exactUrl("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://collector.example.com/v1/traces")),
  base: Config.option(url("OTEL_EXPORTER_OTLP_ENDPOINT")),
  disabled: boolean("OTEL_SDK_DISABLED", false),
  headers: Config.option(setting("OTEL_EXPORTER_OTLP_HEADERS")),
  tracesHeaders: Config.option(setting("OTEL_EXPORTER_OTLP_TRACES_HEADERS")),
  protocol: Config.option(setting("OTEL_EXPORTER_OTLP_PROTOCOL")),
  tracesProtocol: Config.option(setting("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")),
  timeout: Config.option(setting("OTEL_EXPORTER_OTLP_TIMEOUT")),
  tracesTimeout: Config.option(setting("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"))
}).pipe(Config.mapOrFail((raw) => {
  const tracesUrl = raw.disabled ? Option.none() : Option.orElse(raw.traces, () => Option.map(raw.base, (b) => `${b}/v1/traces`))
  const off: {
    readonly otlpTracesUrl: Option.Option<string>
    readonly otlpHeaders: Redacted.Redacted<Readonly<Record<string, string>>>
    readonly otlpProtocol: "http/json" | "http/protobuf"
    readonly otlpTimeoutMs: number
  } = { otlpTracesUrl: tracesUrl, otlpHeaders: Redacted.make({}), otlpProtocol: "http/json", otlpTimeoutMs: 10_000 }
  if (Option.isNone(tracesUrl)) return Either.right(off)
  const wrong: Array<ConfigError.ConfigError> = []
  const read = <A>(parsed: Either.Either<A, ConfigError.ConfigError>, fallback: A): A =>
    Either.getOrElse(Either.mapLeft(parsed, (error) => wrong.push(error)), () => fallback)
  /** The first of the variables (`OTEL_EXPORTER_OTLP_TRACES_…`, then the general one) that is set, parsed; else `fallback`. */
  const first = <A>(
    parse: (name: string, text: string) => Either.Either<A, ConfigError.ConfigError>,
    fallback: A,
    ...variables: ReadonlyArray<readonly [string, Option.Option<string>]>
  ): A => {
    const set = variables.find(([, text]) => Option.isSome(text))
    return set === undefined ? fallback : read(parse(set[0], Option.getOrElse(set[1], () => "")), fallback)
  }
  const headers = (name: string, text: Option.Option<string>) => first(parseOtlpHeaders, {}, [name, text])
  const general = headers("OTEL_EXPORTER_OTLP_HEADERS", raw.headers)
  const traces = headers("OTEL_EXPORTER_OTLP_TRACES_HEADERS", raw.tracesHeaders)
  const protocol = first(parseOtlpProtocol, off.otlpProtocol, ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", raw.tracesProtocol], [
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    raw.protocol
  ])
  const whole = (name: string, text: string) => parseWhole(name, text, 1, MAX_TIMER_MS)
  const timeout = first(whole, off.otlpTimeoutMs, ["OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", raw.tracesTimeout], [
    "OTEL_EXPORTER_OTLP_TIMEOUT",
    raw.timeout
  ])
  const [error, ...more] = wrong
  if (error !== undefined) return Either.left(more.reduce((all, next) => ConfigError.And(all, next), error))
  return Either.right({
    otlpTracesUrl: tracesUrl,
    otlpHeaders: Redacted.make<Readonly<Record<string, string>>>({ ...general, ...traces }),
    otlpProtocol: protocol,
    otlpTimeoutMs: timeout
  })
}))

/** A secret: its text is never in a message. */
const secret = (name: string) => Config.option(Config.redacted(setting(name)))

/** Where a provider is, and the operator's key for it (account providers use each org's own instead). */
export interface ProviderEndpoint {
  readonly baseUrl: string
  readonly apiKey: Option.Option<Redacted.Redacted>
}

/** `<NAME>_BASE_URL` (else `fallback`) and `<NAME>_API_KEY`. */
const endpoint = (name: string, fallback: string, key: Config.Config<Option.Option<Redacted.Redacted>> = secret(`${name}_API_KEY`)) =>
  Config.all({ baseUrl: url(`${name}_BASE_URL`).pipe(Config.withDefault(fallback)), apiKey: key })

// -- the server --------------------------------------------------------------------------------------

const server = Config.all({
  port: whole("PORT", 8787, 0, 65535),
  host: setting("HOST").pipe(Config.withDefault("127.0.0.1")),
  /** The gateway's public base URL, for absolute artifact URLs (else they are paths). */
  publicUrl: Config.option(url("PUBLIC_URL")),
  /** The database; none: the embedded PostgreSQL in `dataDir`. */
  databaseUrl: Config.option(
    // checked outside `redacted`, which replaces the messages of what fails inside it with "<redacted>"
    Config.redacted(setting("DATABASE_URL")).pipe(Config.validate({
      message: "DATABASE_URL must be a postgres:// or postgresql:// URL, e.g. postgres://user:password@host:5432/database",
      // the scheme only: the driver reads the rest, including forms WHATWG's URL parser refuses (a Unix socket's
      // directory as `?host=` with no host before the path)
      validation: (url) => /^postgres(ql)?:\/\//i.test(Redacted.value(url))
    }))
  ),
  dataDir: setting("GATEWAY_DATA_DIR").pipe(Config.withDefault(".data")),
  /** Create a `default` org and print a key on first start of an empty embedded database. */
  bootstrap: boolean("GATEWAY_BOOTSTRAP", true),
  /** Largest request body, in bytes. */
  maxBodyBytes: whole("MAX_BODY_BYTES", 1024 * 1024, 1),
  /**
   * A client sends its headers within this, the whole request within `requestTimeoutMs`: unset, 30 s or the headers'
   * timeout if that is longer; set, at least the headers' timeout (a request cannot end before its headers).
   */
  timeouts: Config.all({
    headersTimeoutMs: timer("HEADERS_TIMEOUT_MS", 10_000, 1),
    requestTimeoutMs: Config.option(setting("REQUEST_TIMEOUT_MS").pipe(
      Config.mapOrFail((text) => parseWhole("REQUEST_TIMEOUT_MS", text, 1, MAX_TIMER_MS))
    ))
  }).pipe(Config.mapOrFail(({ headersTimeoutMs, requestTimeoutMs }) => {
    const request = Option.getOrElse(requestTimeoutMs, () => Math.max(30_000, headersTimeoutMs))
    return request < headersTimeoutMs
      ? invalid(`REQUEST_TIMEOUT_MS (${request}) must be at least HEADERS_TIMEOUT_MS (${headersTimeoutMs}): a request cannot end before its headers`)
      : Either.right({ headersTimeoutMs, requestTimeoutMs: request })
  })),
  /** An idle keep-alive connection is closed after this (Node's timer for it runs 1 s longer). */
  keepAliveTimeoutMs: timer("KEEP_ALIVE_TIMEOUT_MS", 5_000, 1, MAX_TIMER_MS - 1_000),
  /** Per-key default rate: sustained requests per second and burst; 0 turns it off. */
  rateLimitPerSecond: whole("RATE_LIMIT_PER_SECOND", 50, 0, MAX_RATE),
  rateLimitBurst: whole("RATE_LIMIT_BURST", 100, 0, MAX_RATE),
  /**
   * The most a key's own rate limit may be (what an org's member sets in the dashboard): sustained requests per
   * second and burst. Never below the default above (the default always fits).
   */
  rateLimitMaxPerSecond: whole("RATE_LIMIT_MAX_PER_SECOND", 1_000, 1, MAX_RATE),
  rateLimitMaxBurst: whole("RATE_LIMIT_MAX_BURST", 2_000, 1, MAX_RATE),
  /** Redis for the rate limit buckets, shared by every process using it; none: per-process memory. */
  redisUrl: Config.option(
    Config.redacted(setting("REDIS_URL")).pipe(Config.validate({
      message: "REDIS_URL must be a redis:// or rediss:// URL, e.g. redis://127.0.0.1:6379",
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
  metricsToken: Config.option(Config.redacted(setting("METRICS_TOKEN")).pipe(Config.validate({
    // a Bearer token is one word (RFC 6750's b64token): a space in it could never be sent and matched (checked
    // outside `redacted`, which replaces a message with "<redacted>")
    message: "METRICS_TOKEN must be one word of visible ASCII (it is sent as Authorization: Bearer <token>)",
    validation: (token) => /^[\x21-\x7e]+$/.test(Redacted.value(token))
  }))),
  /**
   * Where spans are exported over OTLP/HTTP (none: tracing is off, at no cost), the headers sent with each export
   * (a collector's API key), JSON or binary protobuf, and how long one export may take: `otlp` above.
   */
  otlp,
  serviceName: setting("OTEL_SERVICE_NAME").pipe(Config.withDefault("tool-gateway"))
}).pipe(Config.map(({ otlp, timeouts, ...rest }) => ({ ...rest, ...timeouts, ...otlp })))

// -- the ledger --------------------------------------------------------------------------------------

const ledger = Config.all({
  /**
   * How long a hold (and an Idempotency-Key claim) stays valid without renewal; a process renews the
   * leases of its calls in flight every third of this, so only a dead process's holds expire.
   */
  holdLeaseMs: timer("HOLD_LEASE_MS", 30_000, 30),
  /**
   * How long a call waits for the statement that reserves its credits: past it, the call answers `500
   * internal_error` (retryable) without calling its provider, and what the statement does if it commits later is
   * undone (a database that stopped answering, or a lock held that long).
   */
  databaseTimeoutMs: timer("DATABASE_TIMEOUT_MS", 10_000, 1),
  /** How often expired holds, Idempotency-Key records and files are swept; 0: never (tests). */
  sweepIntervalMs: timer("SWEEP_INTERVAL_MS", 15_000, 0),
  /** How long a completed Idempotency-Key is remembered. */
  idempotencyRetentionMs: retention("IDEMPOTENCY_RETENTION_SECONDS", 24 * 60 * 60),
  /** A JSON file of tool prices that replace the catalog's. */
  pricesFile: Config.option(setting("PRICES_FILE")),
  /**
   * `full`: a settlement returns once its charge is on disk (the WAL flushed). `relaxed`: settlements commit
   * without waiting, like reservations and voids; a database crash can forget the last fraction of a second of
   * charges (in the callers' favour), never charge twice.
   */
  ledgerSync: oneOf("LEDGER_SYNC", ["full", "relaxed"]).pipe(Config.withDefault("full" as const))
})

// -- the providers -----------------------------------------------------------------------------------

const betaKey = secret("BETA_API_KEY")
/**
 * BETA_BASE_URL points both Jina hosts at one server; BETA_READ_BASE_URL and BETA_SEARCH_BASE_URL win over it
 * (when set: a wrong one is an error, not a reason to use the other).
 */
const betaBase = (specific: string, fallback: string) =>
  url(specific).pipe(
    Config.orElseIf({ if: ConfigError.isMissingDataOnly, orElse: () => url("BETA_BASE_URL") }),
    Config.withDefault(fallback)
  )

/** The providers `search` and `read` can try (src/providers/index.ts). */
export const SEARCH_PROVIDERS = ["alpha", "beta", "gamma"] as const
export const READ_PROVIDERS = ["builtin", "beta", "gamma"] as const

const noKey: Config.Config<Option.Option<Redacted.Redacted>> = Config.succeed(Option.none())

const providers = Config.all({
  /** Deadline of one upstream call; a call's provider phase (fallbacks included) gets three times this. */
  timeoutMs: timer("PROVIDER_TIMEOUT_MS", 10_000, 1, Math.floor(MAX_TIMER_MS / 3)),
  /** Largest upstream answer the gateway reads, in bytes. */
  maxResponseBytes: whole("PROVIDER_MAX_RESPONSE_BYTES", 5 * 1024 * 1024, 1),
  /** The longest a page's conversion to markdown may work (never past the call's deadline). */
  htmlConvertTimeoutMs: timer("HTML_CONVERT_TIMEOUT_MS", 5_000, 1),
  /** Hosts or CIDRs that the SSRF guard lets through (caller-supplied URLs only). */
  ssrfAllow: list("SSRF_ALLOW", [], { is: isPolicyEntry, expected: "a host name, an IP address or a CIDR such as 10.0.0.0/8" }),
  searchProviders: providerList("SEARCH_PROVIDERS", SEARCH_PROVIDERS, SEARCH_PROVIDERS),
  readProviders: providerList("READ_PROVIDERS", READ_PROVIDERS, READ_PROVIDERS),
  /** Files kept from tool answers (screenshots, PDFs): largest size, and how long they are kept. */
  artifactMaxBytes: whole("ARTIFACT_MAX_BYTES", 10 * 1024 * 1024, 1),
  artifactRetentionMs: retention("ARTIFACT_RETENTION_SECONDS", 7 * 24 * 60 * 60),
  /** The most bytes of files an org keeps at once (its files that have not expired); a file past it is not kept. */
  artifactQuotaBytes: whole("ARTIFACT_QUOTA_BYTES", 1024 * 1024 * 1024, 1),
  /**
   * The Graph API version `zeta_request` calls when its input names none. Meta keeps a version about two
   * years and then serves its calls as the oldest one it still has (developers.facebook.com/docs/graph-api/changelog).
   */
  zetaApiVersion: setting("ZETA_API_VERSION").pipe(
    Config.validate({ message: "ZETA_API_VERSION must be a Graph API version such as v26.0", validation: (s) => GRAPH_API_VERSION.test(s) }),
    Config.withDefault("v26.0")
  ),
  /** The `Notion-Version` mu sends; from 2025-09-03 on, a database's properties are its data sources'. */
  muApiVersion: setting("MU_API_VERSION").pipe(
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
  firebaseProjectId: Config.option(setting("FIREBASE_PROJECT_ID").pipe(Config.validate({
    // Firebase's (Google Cloud's) project ids: 6 to 30 lower-case letters, digits and hyphens. The id is written
    // into the dashboard's Content-Security-Policy (the default auth domain) and its sign-in page
    message: "FIREBASE_PROJECT_ID must be a Firebase project id: 6 to 30 lower-case letters, digits and hyphens, starting with a letter",
    validation: (s) => /^[a-z][a-z0-9-]{4,28}[a-z0-9]$/.test(s)
  }))),
  firebaseJwksUrl: url("FIREBASE_JWKS_URL").pipe(
    Config.withDefault("https://www.googleapis.com/service_accounts/v1/jwk/securetoken@system.gserviceaccount.com")
  ),
  /** The Firebase web app's API key and auth domain, for the dashboard's sign-in page (public values). */
  firebaseWebApiKey: Config.option(setting("FIREBASE_WEB_API_KEY")),
  /** Default: `<FIREBASE_PROJECT_ID>.firebaseapp.com`. */
  firebaseAuthDomain: Config.option(setting("FIREBASE_AUTH_DOMAIN").pipe(Config.validate({
    // written into the dashboard's Content-Security-Policy header: a host name, nothing that header would read
    // as more sources or directives (or a line break, which made every dashboard page a bare 500)
    message: "FIREBASE_AUTH_DOMAIN must be a host name such as my-project.firebaseapp.com (an optional :port, nothing else)",
    validation: (s) => /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*(?::\d{1,5})?$/.test(s)
  }))),
  /** A Firebase Auth emulator (`host:port`, the name Firebase's own tools use) the sign-in page talks to. */
  firebaseAuthEmulatorHost: Config.option(
    setting("FIREBASE_AUTH_EMULATOR_HOST").pipe(Config.validate({
      message: "FIREBASE_AUTH_EMULATOR_HOST must be host:port, e.g. 127.0.0.1:9099",
      validation: (s) => /^([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\]):\d{1,5}$/.test(s)
    }))
  ),
  /** Accept tokens from the local dev issuer (`tool-gateway dev token`); loopback HOST only. */
  devIssuer: boolean("DEV_IDENTITY", false),
  /** Least time between two JWKS fetches triggered by an unknown key id. */
  jwksCooldownMs: timer("JWKS_COOLDOWN_MS", 30_000, 0),
  /** A user who signs in without an org gets a personal one (off: they are refused). */
  autoCreateOrgs: boolean("AUTO_CREATE_ORGS", false),
  signupCredits: whole("SIGNUP_CREDITS", 0, 0, MAX_CREDITS),
  /** AES-256-GCM key for connection credentials; none: one generated into the data directory. */
  encryptionKey: secret("GATEWAY_ENCRYPTION_KEY"),
  /** Earlier keys, still used to read rows written with them. */
  encryptionOldKeys: list("GATEWAY_ENCRYPTION_OLD_KEYS", []).pipe(Config.map((keys) => keys.map((k) => Redacted.make(k))))
})

// -- the logs (read by the `tool-gateway` process, src/bin.ts) --------------------------------------

const LOG_LEVEL_ALIASES: Readonly<Record<string, string>> = { warning: "warn", none: "off", silent: "off" }
const logLevelNames = [...LogLevel.allLevels.map((l) => l.label.toLowerCase()), ...Object.keys(LOG_LEVEL_ALIASES)]

export const logging = Config.all({
  /** The least level logged; any case. */
  level: setting("LOG_LEVEL").pipe(
    Config.mapOrFail((text) => {
      const name = text.toLowerCase()
      const level = LogLevel.allLevels.find((l) => l.label.toLowerCase() === (LOG_LEVEL_ALIASES[name] ?? name))
      return level !== undefined ? Either.right(level) : invalid(`LOG_LEVEL must be one of ${logLevelNames.join(", ")} (got ${shown(text)})`)
    }),
    Config.withDefault(LogLevel.Info)
  ),
  /** none: JSON lines, or readable ones on a terminal. */
  format: Config.option(oneOf("LOG_FORMAT", ["json", "pretty"]))
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

/** Every concern's configuration, as one `Config`: reading it reports every wrong variable at once. */
export const gatewayConfig = Config.all({ server, ledger, providers, identity })

/** Every concern's configuration, read from the environment (a mistake stops the start with one line). */
export const ConfigFromEnv: Layer.Layer<GatewayConfigs, ConfigError.ConfigError> = Layer.effectContext(
  Effect.map(gatewayConfig, (c) =>
    Context.make(ServerConfig, c.server).pipe(
      Context.add(LedgerConfig, c.ledger),
      Context.add(ProvidersConfig, c.providers),
      Context.add(IdentityConfig, c.identity)
    ))
)

/** Whether `DATABASE_URL` is set (to something other than blanks), whatever its value. */
export const databaseUrlIsSet: Config.Config<boolean> = Config.option(setting("DATABASE_URL")).pipe(Config.map(Option.isSome))

/**
 * A configuration mistake as one line: what is wrong with each variable (every message above names its
 * variable), `; `-separated. Where a variable was read in turn from two places, the wrong value is reported,
 * not the other's absence.
 */
export const describeConfigError = (error: ConfigError.ConfigError): string => {
  const collect = (e: ConfigError.ConfigError): { readonly invalid: ReadonlyArray<string>; readonly missing: ReadonlyArray<string> } => {
    switch (e._op) {
      case "And":
      case "Or": {
        const [l, r] = [collect(e.left), collect(e.right)]
        return { invalid: [...l.invalid, ...r.invalid], missing: [...l.missing, ...r.missing] }
      }
      case "MissingData":
        return { invalid: [], missing: [e.path.length > 0 ? `${e.path.join(".")} is not set` : e.message] }
      case "InvalidData":
      case "SourceUnavailable":
      case "Unsupported": {
        const name = e.path.join(".")
        // a secret's own message is "<redacted>": say which variable, not what it holds
        const message = e.message === "<redacted>" && name !== "" ? `${name} is not valid` : e.message.replace(/\s*\n\s*/g, " ")
        return { invalid: [name === "" || message.includes(name) ? message : `${name}: ${message}`], missing: [] }
      }
    }
  }
  const { invalid, missing } = collect(error)
  return [...new Set(invalid.length > 0 ? invalid : missing)].join("; ")
}

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
