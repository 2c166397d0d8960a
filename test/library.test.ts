/**
 * Tool Gateway as a library: `Gateway.call` in process (typed input, output and errors, no HTTP hop), and a
 * typed `HttpApiClient` built from the same `Api`, which decodes envelopes back into the error classes.
 */
import { HttpApiClient, HttpClient, HttpClientRequest } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { NodeHttpClient } from "@effect/platform-node"
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Exit, Fiber, FiberRef, Layer, Redacted, Scope } from "effect"
import { CurrentCallFacts, newCallFacts } from "../src/services/Telemetry.js"
import { Api, CredentialRequired, Gateway, InsufficientCredits, InvalidKey, InvalidRequest } from "../src/index.js"
import { baseUrl, gatewayLayer, givenOrg, servicesLayer, TestUpstreams } from "./support/gateway.js"

layer(gatewayLayer(), { excludeTestServices: true })("library use", (it) => {
  it.effect("Gateway.call runs the whole pipeline in process", () =>
    Effect.gen(function* () {
      const gateway = yield* Gateway
      const { key } = yield* givenOrg({ credits: 2 })
      const weather = yield* gateway.call("weather", { q: "Berlin" }, { apiKey: Redacted.make(key) })
      // typed: `weather.current.temperature_c` is a number, or null where Open-Meteo has no data
      const temperature: number | null = weather.current.temperature_c
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

  it.effect("fifty concurrent in-process calls each keep their own facts; none is written into a shared object", () =>
    Effect.gen(function* () {
      const gateway = yield* Gateway
      const orgs = yield* Effect.forEach(Array.from({ length: 5 }), () => givenOrg({ credits: 100 }))
      const calls = Array.from({ length: 50 }, (_, i) => ({
        org: orgs[i % orgs.length] ?? orgs[0],
        tool: i % 2 === 0 ? ("weather" as const) : ("mobile_app_search" as const),
        facts: newCallFacts()
      }))
      yield* Effect.forEach(
        calls,
        (c) => {
          const call = c.tool === "weather"
            ? Effect.asVoid(gateway.call("weather", { q: "Berlin" }, { apiKey: c.org?.key ?? "" }))
            : Effect.asVoid(gateway.call("mobile_app_search", { query: "notes" }, { apiKey: c.org?.key ?? "" }))
          return Effect.locally(call, CurrentCallFacts, c.facts)
        },
        { concurrency: 50 }
      )
      for (const c of calls) {
        expect(c.facts).toMatchObject({ orgId: c.org?.orgId, keyId: c.org?.keyId, tool: c.tool, credits: 1, status: 200, code: "ok" })
      }
      // and a call made with no facts of its own leaves none behind
      yield* gateway.call("weather", { q: "Berlin" }, { apiKey: orgs[0]?.key ?? "" })
      expect(yield* FiberRef.get(CurrentCallFacts)).toBeUndefined()
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

describe("a library user's layer", () => {
  it.effect("closing it leaves nothing running: no fiber of the gateway's outlives its scope", () =>
    Effect.gen(function* () {
      const before = (yield* Fiber.roots).length
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(servicesLayer(), scope)
      yield* Effect.gen(function* () {
        const { key } = yield* givenOrg({ credits: 10 })
        const gateway = yield* Gateway
        // the work a call starts off its path (writing the key's last use) takes long here: still running
        // when the layer closes
        const sql = yield* SqlClient.SqlClient
        yield* sql`CREATE FUNCTION slow_touch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(3); RETURN NEW; END $$`
        yield* sql`CREATE TRIGGER slow_touch BEFORE UPDATE OF last_used_at ON api_keys FOR EACH ROW EXECUTE FUNCTION slow_touch()`
        yield* gateway.call("weather", { q: "Berlin" }, { apiKey: key })
      }).pipe(Effect.provide(context), Effect.orDie)
      yield* Scope.close(scope, Exit.void)
      expect((yield* Fiber.roots).length).toBeLessThanOrEqual(before)
    }), 60_000)
})
