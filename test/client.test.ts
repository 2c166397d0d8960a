/**
 * The typed client (`tool-gateway/client`) over HTTP: what the gateway says of a call decoded into
 * `CallMeta`, `Idempotency-Key` sent only when asked for, and an error's header fields (`Retry-After`,
 * `RateLimit-Policy`) decoded into the error's fields.
 */
import { NodeHttpClient } from "@effect/platform-node"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { callMeta, ToolGatewayClient, withIdempotencyKey } from "tool-gateway/client"
import { KeyStore } from "../src/services/KeyStore.js"
import { baseUrl, gatewayLayer, givenOrg, TestUpstreams } from "./support/gateway.js"

/** The client for `apiKey`, over Node's undici. */
const clientLayer = (apiKey: string) =>
  Effect.map(baseUrl, (base) =>
    ToolGatewayClient.layerWithoutHttpClient({ baseUrl: base, apiKey }).pipe(Layer.provide(NodeHttpClient.layerUndici)))

layer(gatewayLayer(), { excludeTestServices: true })("the typed client", (it) => {
  it.effect("decodes what the gateway says of a call, and sends Idempotency-Key only under withIdempotencyKey", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const { key } = yield* givenOrg({ credits: 10 })
      const result = yield* Effect.gen(function* () {
        const client = yield* ToolGatewayClient
        const first = yield* client.tools.weather({ payload: { q: "Berlin" }, withResponse: true }).pipe(withIdempotencyKey("client-1"))
        const replay = yield* client.tools.weather({ payload: { q: "Berlin" }, withResponse: true }).pipe(withIdempotencyKey("client-1"))
        const fresh = yield* client.tools.weather({ payload: { q: "Berlin" }, withResponse: true })
        return {
          output: first[0],
          again: replay[0],
          meta: yield* callMeta(first[1]),
          replayed: yield* callMeta(replay[1]),
          fresh: yield* callMeta(fresh[1])
        }
      }).pipe(Effect.provide(yield* clientLayer(key)))
      expect(result.output.location.name).toBe("Berlin")
      expect(result.meta).toEqual({ requestId: expect.stringMatching(/^req_/), creditsCharged: 1, replayed: false, rateLimit: undefined })
      expect(result.again).toEqual(result.output)
      expect(result.replayed).toMatchObject({ creditsCharged: 0, replayed: true })
      expect(result.fresh).toMatchObject({ creditsCharged: 1, replayed: false })
      // the replay reached no provider; the call without a key did
      expect(u.openMeteo.hits("/v1/forecast")).toBe(2)
    }))

  it.effect("decodes an error's header fields into the error: retryAfter, limit and windowSeconds", () =>
    Effect.gen(function* () {
      const { orgId } = yield* givenOrg({ credits: 10, cap: 0 })
      const keys = yield* KeyStore
      const limited = yield* Effect.orDie(keys.create(orgId, { name: "slow", rateLimit: { perSecond: 1, burst: 1 } }))
      const { capped, limitedError, meta } = yield* Effect.gen(function* () {
        const client = yield* ToolGatewayClient
        // the first call takes the burst and meets the cap (0); the second meets the rate limit
        const capped = yield* Effect.flip(client.tools.weather({ payload: { q: "Berlin" } }))
        const limitedError = yield* Effect.flip(client.tools.weather({ payload: { q: "Berlin" } }))
        const [, response] = yield* client.catalog.list({ withResponse: true })
        return { capped, limitedError, meta: yield* callMeta(response) }
      }).pipe(Effect.provide(yield* clientLayer(Redacted.value(limited.key))))
      expect(capped).toMatchObject({ _tag: "SpendCapExceeded", retryAfter: expect.any(Number) })
      expect(capped._tag === "SpendCapExceeded" && (capped.retryAfter ?? 0) > 0).toBe(true)
      expect(limitedError).toMatchObject({ _tag: "RateLimitExceeded", retryAfter: 1, limit: 1, windowSeconds: 1 })
      expect(meta.creditsCharged).toBe(0)
    }))
})
