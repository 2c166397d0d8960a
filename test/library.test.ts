/**
 * Tool Gateway as a library: `Gateway.call` in process (typed input, output and errors, no HTTP hop), and a
 * typed `HttpApiClient` built from the same `Api`, which decodes envelopes back into the error classes.
 */
import { HttpApiClient, HttpClient, HttpClientRequest } from "@effect/platform"
import { NodeHttpClient } from "@effect/platform-node"
import { expect, layer } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { Api, CredentialRequired, Gateway, InsufficientCredits, InvalidKey, InvalidRequest } from "../src/index.js"
import { baseUrl, gatewayLayer, givenOrg, TestUpstreams } from "./support/gateway.js"

layer(gatewayLayer(), { excludeTestServices: true })("library use", (it) => {
  it.effect("Gateway.call runs the whole pipeline in process", () =>
    Effect.gen(function* () {
      const gateway = yield* Gateway
      const { key } = yield* givenOrg({ credits: 2 })
      const weather = yield* gateway.call("weather", { q: "Berlin" }, { apiKey: Redacted.make(key) })
      // typed: `weather.current.temperature_c` is a number
      const temperature: number = weather.current.temperature_c
      expect(temperature).toBe(4.2)
      expect(weather.location.name).toBe("Berlin")

      const apps = yield* gateway.call("mobile_app_search", { query: "notes", limit: 1 }, { apiKey: key })
      expect(apps.results[0]?.name).toBe("notes App 0")

      // the typed error channel
      const broke = yield* Effect.flip(gateway.call("weather", { q: "Berlin" }, { apiKey: key }))
      expect(broke).toBeInstanceOf(InsufficientCredits)
      const account = yield* Effect.flip(gateway.call("delta_post", { text: "hi" }, { apiKey: key }))
      expect(account).toBeInstanceOf(CredentialRequired)
      const badKey = yield* Effect.flip(gateway.call("weather", { q: "Berlin" }, { apiKey: "tg_nope" }))
      expect(badKey).toBeInstanceOf(InvalidKey)
      // input is validated in process too
      const invalid = yield* Effect.flip(gateway.call("read", { url: "https://example.com", max_chars: 1 }, { apiKey: key }))
      expect(invalid).toBeInstanceOf(InvalidRequest)
    }))

  it.effect("Gateway.call replays an Idempotency-Key as the typed output", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const gateway = yield* Gateway
      const { key } = yield* givenOrg({ credits: 5 })
      const first = yield* gateway.call("weather", { q: "Paris" }, { apiKey: key, idempotencyKey: "lib-1" })
      const again = yield* gateway.call("weather", { q: "Paris" }, { apiKey: key, idempotencyKey: "lib-1" })
      expect(again).toEqual(first)
      expect(u.openMeteo.hits("/v1/forecast")).toBe(1)
    }))

  it.effect("a typed HttpApiClient calls tools and decodes errors into their classes", () =>
    Effect.gen(function* () {
      const { key } = yield* givenOrg({ credits: 1 })
      const client = yield* HttpApiClient.make(Api, {
        baseUrl: yield* baseUrl,
        transformClient: HttpClient.mapRequest(HttpClientRequest.setHeader("x-api-key", key))
      })
      const weather = yield* client.tools.weather({ payload: { q: "Berlin" } })
      expect(weather.location.country).toBe("Germany")
      const error = yield* Effect.flip(client.tools.weather({ payload: { q: "Berlin" } }))
      expect(error).toBeInstanceOf(InsufficientCredits)
      expect(error).toMatchObject({ _tag: "InsufficientCredits", message: expect.stringContaining("available") })
    }).pipe(Effect.provide(NodeHttpClient.layerUndici)))
})
