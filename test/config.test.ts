/**
 * A configuration that cannot be right stops the start, with one line naming the variable, instead of starting
 * and then breaking requests: timers past what Node's timers take, retentions past what a date holds, numbers
 * that are not decimal digits, rates past the API's own, unknown log levels and providers, SSRF entries and
 * base URLs that mean nothing, a DATABASE_URL that is not PostgreSQL's. A variable set to nothing is unset.
 * Read through `ConfigFromEnv` on a `ConfigProvider.fromMap`, and, for what the command itself does with the
 * mistake (LOG_LEVEL, `--json`, the exit status), through the built command.
 */
import { describe, expect, it } from "@effect/vitest"
import { SqlError } from "@effect/sql/SqlError"
import { ConfigError, ConfigProvider, Effect, Option, Redacted } from "effect"
import * as Child from "node:child_process"
import { describeStartupError } from "../src/cli/errors.js"
import { ConfigFromEnv, defaults, IdentityConfig, LedgerConfig, ProvidersConfig, ServerConfig } from "../src/config.js"
import { baseEnv, BIN } from "./support/processes.js"

/** Every concern's configuration read from `env` (and nothing else). */
const load = (env: Record<string, string>) =>
  Effect.all({ server: ServerConfig, ledger: LedgerConfig, providers: ProvidersConfig, identity: IdentityConfig }).pipe(
    Effect.provide(ConfigFromEnv),
    Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))
  )

/** The one line the command prints for what `env` gets wrong. */
const refusal = (env: Record<string, string>) =>
  Effect.map(Effect.flip(load(env)), (error) => {
    expect(ConfigError.isConfigError(error)).toBe(true)
    return describeStartupError(error, { databaseUrlSet: false })
  })

const MAX_TIMER = String(2 ** 31 - 1)
const PAST_TIMER = String(2 ** 31)

describe("refused at start, naming the variable", () => {
  // with spans exported (an endpoint set): what only an export uses is checked then
  const exporting = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector.example:4318" }
  // [variable, refused value, what the line says, the rest of the environment]
  const cases: ReadonlyArray<readonly [string, string, string, Record<string, string>?]> = [
    // Node's timers take at most 2^31 − 1 ms; a longer one fires at once (every POST was reset)
    ["HEADERS_TIMEOUT_MS", PAST_TIMER, "at most 2147483647"],
    ["REQUEST_TIMEOUT_MS", PAST_TIMER, "at most 2147483647"],
    // Node adds a second to the keep-alive timeout
    ["KEEP_ALIVE_TIMEOUT_MS", String(2 ** 31 - 1000), "at most 2147482647"],
    ["HOLD_LEASE_MS", String(Number.MAX_SAFE_INTEGER), "at most 2147483647"],
    ["SWEEP_INTERVAL_MS", PAST_TIMER, "at most 2147483647"],
    ["HTML_CONVERT_TIMEOUT_MS", PAST_TIMER, "at most 2147483647"],
    ["JWKS_COOLDOWN_MS", PAST_TIMER, "at most 2147483647"],
    // the provider phase gets three times it
    ["PROVIDER_TIMEOUT_MS", "715827883", "at most 715827882"],
    // past a date (every keyed call was a 500 "Invalid date")
    ["IDEMPOTENCY_RETENTION_SECONDS", "100000000000000", "at most 3155760000"],
    ["ARTIFACT_RETENTION_SECONDS", "3155760001", "at most 3155760000"],
    ["RATE_LIMIT_PER_SECOND", "100001", "at most 100000"],
    ["RATE_LIMIT_BURST", "100001", "at most 100000"],
    ["RATE_LIMIT_MAX_PER_SECOND", "0", "at least 1"],
    ["RATE_LIMIT_MAX_BURST", "100001", "at most 100000"],
    ["SIGNUP_CREDITS", "9007199254740992", "at most 9007199254740991"],
    // decimal digits only
    ["PORT", "1e3", "decimal digits"],
    ["PORT", "0x10", "decimal digits"],
    ["PORT", "+80", "decimal digits"],
    ["PORT", "65536", "at most 65535"],
    ["MAX_BODY_BYTES", "1.5", "decimal digits"],
    ["LEDGER_SYNC", "fast", "full or relaxed"],
    ["SEARCH_PROVIDERS", "alpha,foo", `"foo" is not one of alpha, beta, gamma`],
    ["READ_PROVIDERS", " , ", "at least one"],
    ["SSRF_ALLOW", "not-a-cidr/99", "not-a-cidr/99"],
    ["SSRF_ALLOW", "10.0.0.0/33", "10.0.0.0/33"],
    ["SSRF_ALLOW", "intranet.example, bad host", "bad host"],
    ["ALPHA_BASE_URL", "https://api.exa.ai /v1", "http(s) URL"],
    ["WEATHER_BASE_URL", " https://api.open-meteo.com", "http(s) URL"],
    ["PUBLIC_URL", "https://gateway.example.com/?x=1", "http(s) URL"],
    ["DATABASE_URL", "notaurl", "postgres://"],
    ["DATABASE_URL", "mysql://root@127.0.0.1/db", "postgres://"],
    ["REDIS_URL", "http://127.0.0.1:6379", "redis://"],
    ["CORS_ORIGINS", "https://dash.example.com/app", "origins"],
    ["DEV_IDENTITY", "maybe", "true or false"],
    // written into the dashboard's Content-Security-Policy: a line break made every dashboard page a bare 500
    ["FIREBASE_AUTH_DOMAIN", "evil.example.com\r\nX-Injected: 1", "host name"],
    ["FIREBASE_AUTH_DOMAIN", "x.firebaseapp.com https://evil.example.com", "host name"],
    ["FIREBASE_AUTH_DOMAIN", "x.firebaseapp.com; script-src *", "host name"],
    ["FIREBASE_PROJECT_ID", "demo project; script-src *", "Firebase project id"],
    // a Bearer token is one word: with a space it could never match
    ["METRICS_TOKEN", "two words", "one word"],
    ["AUTO_CREATE_ORGS", "2", "true or false"],
    ["GATEWAY_BOOTSTRAP", "nah", "true or false"],
    // OpenTelemetry's exporter variables (its specification's names and formats)
    ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "collector:4318/v1/traces", "http(s) URL"],
    ["OTEL_SDK_DISABLED", "perhaps", "true or false"],
    ["OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "1.5", "decimal digits", exporting],
    ["OTEL_EXPORTER_OTLP_TIMEOUT", "0", "at least 1", exporting],
    ["OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", "not supported", exporting],
    ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/xml", "http/json or http/protobuf", exporting],
    ["OTEL_EXPORTER_OTLP_HEADERS", "x-honeycomb-team", "name=value", exporting],
    ["OTEL_EXPORTER_OTLP_TRACES_HEADERS", "bad header=1", "name=value", exporting],
    ["OTEL_EXPORTER_OTLP_HEADERS", "api-key=%E0%A4%A", "percent-encoding", exporting],
    ["OTEL_EXPORTER_OTLP_HEADERS", "api-key=a%0D%0Ab", "visible ASCII", exporting]
  ]
  for (const [name, value, says, env] of cases) {
    it.effect(`${name}=${value}${env === undefined ? "" : ", spans exported"}`, () =>
      Effect.gen(function* () {
        const line = yield* refusal({ ...env, [name]: value })
        expect(line).toContain(name)
        expect(line).toContain(says)
        expect(line).not.toContain("\n")
        // the variable is named by its message, not by a path the error lost
        expect(line).not.toContain("Invalid data at")
      }))
  }

  it.effect("a secret's value is not in its line", () =>
    Effect.gen(function* () {
      const line = yield* refusal({ DATABASE_URL: "mysql://root:s3cret-password@db/x" })
      expect(line).toContain("DATABASE_URL")
      expect(line).not.toContain("s3cret-password")
    }))

  it.effect("two wrong OTLP settings are both named", () =>
    Effect.gen(function* () {
      const line = yield* refusal({ ...exporting, OTEL_EXPORTER_OTLP_PROTOCOL: "grpc", OTEL_EXPORTER_OTLP_HEADERS: "nope" })
      expect(line).toContain("OTEL_EXPORTER_OTLP_PROTOCOL")
      expect(line).toContain("OTEL_EXPORTER_OTLP_HEADERS")
    }))

  it.effect("an OTLP header's value (a collector's API key) is not in its line", () =>
    Effect.gen(function* () {
      const line = yield* refusal({ ...exporting, OTEL_EXPORTER_OTLP_HEADERS: "x-api-key=s3cret%0Atoken" })
      expect(line).toContain("OTEL_EXPORTER_OTLP_HEADERS")
      expect(line).toContain("x-api-key")
      expect(line).not.toContain("s3cret")
    }))

  it.effect("a wrong BETA_READ_BASE_URL is refused, not replaced by BETA_BASE_URL", () =>
    Effect.gen(function* () {
      const line = yield* refusal({ BETA_READ_BASE_URL: "ftp://reader.example", BETA_BASE_URL: "https://jina.example" })
      expect(line).toContain("BETA_READ_BASE_URL")
      expect(line).not.toContain("\n")
    }))

  it.effect("every wrong variable is named in the one line", () =>
    Effect.gen(function* () {
      const line = yield* refusal({ PORT: "1e3", HOLD_LEASE_MS: PAST_TIMER, SEARCH_PROVIDERS: "foo" })
      for (const name of ["PORT", "HOLD_LEASE_MS", "SEARCH_PROVIDERS"]) expect(line).toContain(name)
      expect(line).not.toContain("\n")
    }))

  it.effect("the bounds themselves are taken", () =>
    Effect.gen(function* () {
      const config = yield* load({
        HEADERS_TIMEOUT_MS: MAX_TIMER,
        KEEP_ALIVE_TIMEOUT_MS: String(2 ** 31 - 1 - 1000),
        HOLD_LEASE_MS: MAX_TIMER,
        PROVIDER_TIMEOUT_MS: "715827882",
        IDEMPOTENCY_RETENTION_SECONDS: "3155760000",
        RATE_LIMIT_PER_SECOND: "100000",
        PORT: "65535",
        SSRF_ALLOW: "intranet.example,10.0.0.0/8,[::1],fd00::/8",
        READ_PROVIDERS: "gamma, builtin",
        DATABASE_URL: "postgresql://u:p@db.example:5432/gateway"
      })
      expect(config.server.headersTimeoutMs).toBe(2 ** 31 - 1)
      expect(config.ledger.idempotencyRetentionMs).toBe(3_155_760_000_000)
      // a date that far out is still a date
      expect(Number.isFinite(new Date(Date.UTC(2026, 0, 1) + config.ledger.idempotencyRetentionMs).getTime())).toBe(true)
      expect(config.providers.readProviders).toEqual(["gamma", "builtin"])
      expect(config.server.port).toBe(65535)
      // a Unix socket's directory in the query, with no host (the driver's form; WHATWG's URL parser refuses it)
      const socket = yield* load({ DATABASE_URL: "postgres://user:pw@/gateway?host=/run/postgresql" })
      expect(socket.server.databaseUrl._tag).toBe("Some")
      // and a value past them was refused (above): the line for one past the timer's bound
      expect(yield* refusal({ HEADERS_TIMEOUT_MS: PAST_TIMER })).toContain("HEADERS_TIMEOUT_MS")
    }))
})

describe("OpenTelemetry's exporter variables", () => {
  // https://opentelemetry.io/docs/specs/otel/protocol/exporter/ : the per-signal endpoint is used as written, the
  // general one gets the signal's path; per-signal settings win; headers are name=value pairs, percent-encoded
  it.effect("a request's timeout is never shorter than its headers': set shorter, refused; unset, 30 s or the headers' if longer", () =>
    Effect.gen(function* () {
      expect(yield* refusal({ REQUEST_TIMEOUT_MS: "5000" })).toContain(
        "REQUEST_TIMEOUT_MS (5000) must be at least HEADERS_TIMEOUT_MS (10000): a request cannot end before its headers"
      )
      expect(yield* refusal({ HEADERS_TIMEOUT_MS: "20000", REQUEST_TIMEOUT_MS: "15000" })).toContain("REQUEST_TIMEOUT_MS (15000)")
      const timeouts = (env: Record<string, string>) =>
        Effect.map(load(env), (c) => [c.server.headersTimeoutMs, c.server.requestTimeoutMs])
      expect(yield* timeouts({})).toEqual([10_000, 30_000])
      expect(yield* timeouts({ HEADERS_TIMEOUT_MS: "60000" })).toEqual([60_000, 60_000])
      expect(yield* timeouts({ REQUEST_TIMEOUT_MS: "10000" })).toEqual([10_000, 10_000])
      expect(yield* timeouts({ HEADERS_TIMEOUT_MS: "500", REQUEST_TIMEOUT_MS: "1000" })).toEqual([500, 1_000])
    }))

  it.effect("where spans go: the traces endpoint as written, else the general one with /v1/traces; none when disabled", () =>
    Effect.gen(function* () {
      const url = (env: Record<string, string>) => Effect.map(load(env), (c) => Option.getOrUndefined(c.server.otlpTracesUrl))
      expect(yield* url({})).toBeUndefined()
      expect(yield* url({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318/base/" })).toBe("http://collector:4318/base/v1/traces")
      expect(yield* url({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "https://otlp.example/api/traces" })).toBe("https://otlp.example/api/traces")
      expect(yield* url({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://a:4318", OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://b:4318/x" }))
        .toBe("http://b:4318/x")
      expect(yield* url({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://a:4318", OTEL_SDK_DISABLED: "true" })).toBeUndefined()
    }))

  it.effect("with tracing off (no endpoint, or OTEL_SDK_DISABLED) what only an export uses is not read: a shared environment's grpc starts", () =>
    Effect.gen(function* () {
      const elsewhere = { OTEL_EXPORTER_OTLP_PROTOCOL: "grpc", OTEL_EXPORTER_OTLP_HEADERS: "not a list", OTEL_EXPORTER_OTLP_TIMEOUT: "soon" }
      expect(Option.isNone((yield* load(elsewhere)).server.otlpTracesUrl)).toBe(true)
      const disabled = yield* load({ ...elsewhere, OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4317", OTEL_SDK_DISABLED: "true" })
      expect(Option.isNone(disabled.server.otlpTracesUrl)).toBe(true)
    }))

  it.effect("headers, protocol and timeout: the traces variable over the general one", () =>
    Effect.gen(function* () {
      const config = yield* load({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318",
        OTEL_EXPORTER_OTLP_HEADERS: "X-Api-Key=general, x-dataset = spans%20here ,",
        OTEL_EXPORTER_OTLP_TRACES_HEADERS: "x-api-key=traces%3D1",
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf",
        OTEL_EXPORTER_OTLP_TIMEOUT: "2000",
        OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: "500"
      })
      expect(Redacted.value(config.server.otlpHeaders)).toEqual({ "x-api-key": "traces=1", "x-dataset": "spans here" })
      expect(config.server.otlpProtocol).toBe("http/protobuf")
      expect(config.server.otlpTimeoutMs).toBe(500)
      const general = yield* load({
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://collector:4318/v1/traces",
        OTEL_EXPORTER_OTLP_TIMEOUT: "2000",
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/json",
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf",
        // an empty value is a value (the format allows it)
        OTEL_EXPORTER_OTLP_HEADERS: "x-empty="
      })
      expect(Redacted.value(general.server.otlpHeaders)).toEqual({ "x-empty": "" })
      expect(general.server.otlpTimeoutMs).toBe(2000)
      expect(general.server.otlpProtocol).toBe("http/json")
      const unset = yield* load({})
      expect(Redacted.value(unset.server.otlpHeaders)).toEqual({})
      expect(unset.server.otlpProtocol).toBe("http/json")
      expect(unset.server.otlpTimeoutMs).toBe(10_000)
    }))
})

describe("a variable set to nothing is unset", () => {
  it.effect("empty or blank: the default, not 0, nothing or an empty list", () =>
    Effect.gen(function* () {
      const names = [
        "PORT", "HOST", "DATABASE_URL", "GATEWAY_DATA_DIR", "RATE_LIMIT_PER_SECOND", "RATE_LIMIT_BURST", "RATE_LIMIT_MAX_PER_SECOND", "RATE_LIMIT_MAX_BURST", "METRICS_TOKEN",
        "REDIS_URL", "CORS_ORIGINS", "PUBLIC_URL", "HOLD_LEASE_MS", "IDEMPOTENCY_RETENTION_SECONDS", "LEDGER_SYNC",
        "SEARCH_PROVIDERS", "READ_PROVIDERS", "SSRF_ALLOW", "ALPHA_BASE_URL", "ALPHA_API_KEY", "PROVIDER_TIMEOUT_MS",
        "DEV_IDENTITY", "GATEWAY_BOOTSTRAP", "GATEWAY_ENCRYPTION_KEY", "FIREBASE_PROJECT_ID", "ZETA_API_VERSION"
      ]
      for (const blank of ["", "   "]) {
        const config = yield* load(Object.fromEntries(names.map((name) => [name, blank])))
        expect(config.server, JSON.stringify(blank)).toEqual(defaults.server)
        expect(config.ledger).toEqual(defaults.ledger)
        expect(config.providers).toEqual(defaults.providers)
        expect(config.identity).toEqual(defaults.identity)
      }
      // what this protects: rate limiting on, the default port and host, no database named, /metrics as unset
      const config = yield* load({ RATE_LIMIT_PER_SECOND: "", PORT: "", HOST: "", DATABASE_URL: "", METRICS_TOKEN: "" })
      expect(config.server).toMatchObject({ rateLimitPerSecond: 50, port: 8787, host: "127.0.0.1" })
      expect(Option.isNone(config.server.databaseUrl)).toBe(true)
      expect(Option.isNone(config.server.metricsToken)).toBe(true)
      expect(config.providers.readProviders).toEqual(["builtin", "beta", "gamma"])
    }))
})

describe("a database error", () => {
  it("says to check DATABASE_URL only when it is set", () => {
    const error = new SqlError({ cause: new Error("connect ECONNREFUSED 127.0.0.1:5432"), message: "PgClient: Failed to connect" })
    expect(describeStartupError(error, { databaseUrlSet: true })).toContain("(check DATABASE_URL)")
    // the embedded database's failure is not about a variable nobody set
    expect(describeStartupError(error, { databaseUrlSet: false })).not.toContain("DATABASE_URL")
  })
})

interface Run {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

const run = (args: ReadonlyArray<string>, env: Record<string, string>) =>
  Effect.async<Run>((resume) => {
    Child.execFile("node", [BIN, ...args], { env: { ...baseEnv(), ...env }, timeout: 60_000 }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === "number" ? error.code : 1
      resume(Effect.succeed({ code, stdout, stderr }))
    })
  })

/** Nothing is reachable here: a command that got past its configuration would fail on the database instead. */
const NO_DATABASE = { DATABASE_URL: "postgres://nobody@127.0.0.1:1/none" }

describe("the command", () => {
  it.live("a LOG_LEVEL or LOG_FORMAT it does not know, or a timer past Node's: exit 2, one line naming it", () =>
    Effect.gen(function* () {
      const cases = [
        [["migrate"], { LOG_LEVEL: "verbose" }, "LOG_LEVEL"],
        [["migrate"], { LOG_FORMAT: "xml" }, "LOG_FORMAT"],
        [["serve"], { HEADERS_TIMEOUT_MS: PAST_TIMER, PORT: "0" }, "HEADERS_TIMEOUT_MS"],
        [["serve"], { IDEMPOTENCY_RETENTION_SECONDS: "100000000000000", PORT: "0" }, "IDEMPOTENCY_RETENTION_SECONDS"]
      ] as const
      const runs = yield* Effect.forEach(cases, ([args, env]) => run(args, { ...NO_DATABASE, ...env }), { concurrency: 4 })
      runs.forEach((refused, i) => {
        const [, , name] = cases[i] ?? [[], {}, ""]
        expect(refused.code, name).toBe(2)
        const lines = refused.stderr.trim().split("\n")
        expect(lines, refused.stderr).toHaveLength(1)
        expect(lines[0], name).toMatch(new RegExp(`^configuration error: ${name} `))
      })
    }), 60_000)

  it.live("DATABASE_URL=notaurl is refused as a configuration mistake, with --json as the envelope", () =>
    Effect.gen(function* () {
      const refused = yield* run(["org", "list", "--json"], { DATABASE_URL: "notaurl" })
      expect(refused.code).toBe(2)
      expect(refused.stderr).not.toContain("ENOTFOUND")
      expect(JSON.parse(refused.stdout)).toEqual({
        error: { type: "validation", code: "invalid_request", message: expect.stringContaining("DATABASE_URL must be a postgres://"), retryable: false, billable: false }
      })
    }), 60_000)
})
