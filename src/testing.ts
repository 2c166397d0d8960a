/**
 * `tool-gateway/testing`: for the tests of programs that use the gateway in process (or over HTTP with
 * `tool-gateway/client`), without the real providers.
 *
 * - The fake upstreams of the tools that need no operator key: `openMeteo` (Open-Meteo's geocoding and
 *   forecast APIs, for `weather`) and `itunes` (the iTunes Search API, for `mobile_app_search`) — real HTTP
 *   servers on 127.0.0.1 that speak each provider's protocol, record every request and take faults (a delay,
 *   a status, a 429, malformed JSON, a wrong shape, a reset, an oversized answer). `upstream(handler)` makes
 *   one for any other protocol.
 * - `testLayer({ databaseUrl })`: the gateway's services (`Gateway`, `Orgs`, `KeyStore`, …) over the
 *   PostgreSQL database you name, migrated when the layer is built, with those tools pointed at the fakes
 *   (`FakeUpstreams`); `testServerLayer` adds the HTTP API on a free port (`testServerUrl`).
 *
 * ```ts
 * import { Gateway, KeyStore, Orgs } from "tool-gateway"
 * import { FakeUpstreams, testLayer } from "tool-gateway/testing"
 *
 * const program = Effect.gen(function* () {
 *   const org = yield* Orgs.pipe(Effect.flatMap((orgs) => orgs.create({ name: "test", credits: 10 })))
 *   const { key } = yield* KeyStore.pipe(Effect.flatMap((keys) => keys.create(org.id, { name: "test" })))
 *   const weather = yield* Gateway.pipe(Effect.flatMap((gateway) => gateway.call("weather", { q: "Berlin" }, { apiKey: key })))
 *   const fakes = yield* FakeUpstreams // weather.current.temperature_c is 4.2; fakes.openMeteo.hits("/v1/forecast") is 1
 * }).pipe(Effect.provide(testLayer({ databaseUrl: "postgres://postgres@127.0.0.1:5432/my_app_test" })))
 * ```
 */
import * as HttpServer from "@effect/platform/HttpServer"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import { type ConfigOverrides, configLayer } from "./config.js"
import { HttpServerLive } from "./http/server.js"
import { GatewayLive } from "./layers.js"
import type { Upstream } from "./testing/harness.js"
import { itunes } from "./testing/itunes.js"
import { openMeteo } from "./testing/openMeteo.js"

export { type Fault, type Handler, json, type RecordedRequest, type Reply, startUpstream, type Upstream, upstream } from "./testing/harness.js"
export { app, handleItunes, itunes, ITUNES_THROTTLED } from "./testing/itunes.js"
export { forecastBody, forecastWithoutCurrentData, handleOpenMeteo, NO_DATA, openMeteo, PLACES } from "./testing/openMeteo.js"

/** The fake upstreams of a test gateway. */
export interface Fakes {
  readonly openMeteo: Upstream
  readonly itunes: Upstream
  /** Clear the recorded requests and the faults of every fake. */
  readonly resetAll: () => void
}

export class FakeUpstreams extends Context.Tag("tool-gateway/testing/FakeUpstreams")<FakeUpstreams, Fakes>() {}

/** Every fake upstream, listening for the life of the layer. */
export const FakeUpstreamsLive: Layer.Layer<FakeUpstreams> = Layer.scoped(
  FakeUpstreams,
  Effect.gen(function* () {
    const fakes = { openMeteo: yield* openMeteo, itunes: yield* itunes }
    return {
      ...fakes,
      resetAll: () => {
        for (const fake of Object.values(fakes)) fake.reset()
      }
    }
  })
)

/** The credentials encryption key of test gateways (32 bytes, base64): for tests only, it is public. */
export const TEST_ENCRYPTION_KEY = Buffer.alloc(32, 7).toString("base64")

export interface TestLayerOptions {
  /** The PostgreSQL database the gateway uses; migrated when the layer is built. */
  readonly databaseUrl: string | Redacted.Redacted<string>
  /** Changes to the test configuration (a rate limit, prices, another provider's endpoint, …). */
  readonly config?: ConfigOverrides | undefined
}

/**
 * The configuration of a test gateway: the named database, `weather` and `mobile_app_search` answered by the
 * fakes, no rate limit, no sweeper, the test encryption key, the HTTP server (if any) on a free port of
 * 127.0.0.1; then `options.config`. Other providers keep their defaults: a tool that needs an operator key is
 * not configured (`provider_not_configured`) unless `options.config` gives one.
 */
export const testConfig = (fakes: Fakes, options: TestLayerOptions): ConfigOverrides => {
  const overrides = options.config ?? {}
  const databaseUrl = Redacted.isRedacted(options.databaseUrl) ? options.databaseUrl : Redacted.make(options.databaseUrl)
  const at = (fake: Upstream) => ({ baseUrl: fake.url, apiKey: Option.none() })
  return {
    server: { databaseUrl: Option.some(databaseUrl), port: 0, host: "127.0.0.1", bootstrap: false, rateLimitPerSecond: 0, ...overrides.server },
    ledger: { sweepIntervalMs: 0, ...overrides.ledger },
    providers: {
      ...overrides.providers,
      endpoints: {
        weather: at(fakes.openMeteo),
        geocoding: at(fakes.openMeteo),
        appstore: at(fakes.itunes),
        ...overrides.providers?.endpoints
      }
    },
    identity: { encryptionKey: Option.some(Redacted.make(TEST_ENCRYPTION_KEY)), ...overrides.identity }
  }
}

/**
 * The gateway's services in process (what `GatewayLive` provides) over `options.databaseUrl`, with the
 * configuration of `testConfig` and the fakes (`FakeUpstreams`). Closing the layer stops the fakes and ends
 * the database connections; the database and its rows stay.
 */
export const testLayer = (options: TestLayerOptions) =>
  GatewayLive.pipe(
    Layer.provideMerge(Layer.unwrapEffect(Effect.map(FakeUpstreams, (fakes) => configLayer(testConfig(fakes, options))))),
    Layer.provideMerge(FakeUpstreamsLive)
  )

/** `testLayer` and the HTTP API on a free port of 127.0.0.1 (its base URL: `testServerUrl`). */
export const testServerLayer = (options: TestLayerOptions) => HttpServerLive.pipe(Layer.provideMerge(testLayer(options)))

/** The base URL of the test server (`http://127.0.0.1:<port>`), for `ToolGatewayClient.layer`. */
export const testServerUrl: Effect.Effect<string, never, HttpServer.HttpServer> = Effect.map(HttpServer.HttpServer, (server) => {
  const address = server.address
  if (address._tag !== "TcpAddress") return "http://localhost"
  // a server on every interface is reached on loopback
  const host = address.hostname === "0.0.0.0" || address.hostname === "::" ? "127.0.0.1" : address.hostname
  return `http://${host.includes(":") ? `[${host}]` : host}:${address.port}`
})
