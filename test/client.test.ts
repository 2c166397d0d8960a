/**
 * The typed client (`tool-gateway/client`) over HTTP: what the gateway says of a call decoded into
 * `CallMeta`, `Idempotency-Key` sent only when asked for, an error's header fields (`Retry-After`,
 * `RateLimit-Policy`) decoded into the error's fields, and every envelope a route can answer — those the server
 * writes at the socket included — decoded into its class.
 */
import { HttpApi, HttpClient, HttpClientRequest } from "@effect/platform"
import { NodeHttpClient } from "@effect/platform-node"
import { describe, expect, it as plain, layer } from "@effect/vitest"
import { Effect, Either, Layer, Redacted, Schema } from "effect"
import * as Http from "node:http"
import {
  Api,
  callMeta,
  envelope,
  envelopeOf,
  InternalError,
  responseHeaders,
  ToolGatewayClient,
  withIdempotencyKey
} from "tool-gateway/client"
import { clientErrorOf } from "../src/http/server.js"
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
      expect(result.meta).toEqual({ requestId: expect.stringMatching(/^req_/), creditsCharged: 1, replayed: false, originalRequestId: undefined, rateLimit: undefined })
      expect(result.again).toEqual(result.output)
      // the replay has a request id of its own, and names the call whose answer it is
      expect(result.replayed).toMatchObject({ creditsCharged: 0, replayed: true, originalRequestId: result.meta.requestId })
      expect(result.replayed.requestId).not.toBe(result.meta.requestId)
      expect(result.fresh).toMatchObject({ creditsCharged: 1, replayed: false })
      // the replay reached no provider; the call without a key did
      expect(u.openMeteo.hits("/v1/forecast")).toBe(2)
    }))

  it.effect("headers larger than the server reads answer 431, decoded as HeadersTooLarge", () =>
    Effect.gen(function* () {
      const { key } = yield* givenOrg({ credits: 10 })
      const base = yield* baseUrl
      // every request of this client carries 20 KB of headers (the server reads 16 KB)
      const padded = Layer.effect(
        HttpClient.HttpClient,
        Effect.map(HttpClient.HttpClient, HttpClient.mapRequest(HttpClientRequest.setHeader("x-padding", "a".repeat(20_000))))
      ).pipe(Layer.provide(NodeHttpClient.layerUndici))
      const error = yield* Effect.flip(Effect.flatMap(ToolGatewayClient, (client) => client.tools.weather({ payload: { q: "Berlin" } }))).pipe(
        Effect.provide(ToolGatewayClient.layerWithoutHttpClient({ baseUrl: base, apiKey: key }).pipe(Layer.provide(padded)))
      )
      expect(error).toMatchObject({ _tag: "HeadersTooLarge", message: expect.stringContaining("headers are larger") })
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

/** What the server answers at the socket, before any route (src/http/server.ts), and what any route can fail with. */
const anyRoute = [
  clientErrorOf("ERR_HTTP_REQUEST_TIMEOUT"),
  clientErrorOf("HPE_HEADER_OVERFLOW"),
  clientErrorOf("HPE_INVALID_METHOD"),
  new InternalError({ message: "An internal error occurred." })
]

describe("the typed client's error decoding", () => {
  plain("every route decodes what any route can answer (408, 431, 400 at the socket; 500) into its class", () => {
    const undecoded: Array<string> = []
    HttpApi.reflect(Api, {
      onGroup: () => {},
      onEndpoint: ({ endpoint, errors, group }) => {
        for (const error of anyRoute) {
          const status = envelopeOf[error._tag].status
          const ast = errors.get(status)?.ast
          const decoded = ast === undefined || ast._tag === "None"
            ? undefined
            : Either.getOrUndefined(Schema.decodeUnknownEither(Schema.make(ast.value))(envelope(error)))
          if (!(decoded instanceof Error) || !("_tag" in decoded) || decoded._tag !== error._tag) {
            undecoded.push(`${group.identifier}.${endpoint.name} ${status} ${error._tag}`)
          }
        }
      }
    })
    expect(undecoded).toEqual([])
  })

  /** A server that answers every request as the gateway's server answers `error` at the socket. */
  const answering = (error: ReturnType<typeof clientErrorOf>) =>
    Effect.acquireRelease(
      Effect.async<Http.Server>((resume) => {
        const server = Http.createServer((_request, response) => {
          const spec = envelopeOf[error._tag]
          response.writeHead(spec.status, { "content-type": "application/json", ...responseHeaders(error) })
          response.end(JSON.stringify(envelope(error)))
        })
        server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
      }),
      (server) => Effect.async<void>((resume) => {
        server.close(() => resume(Effect.void))
      })
    )

  plain.scoped("a 408 request_timeout decodes as RequestTimeout, on a tool call and on the catalog", () =>
    Effect.gen(function* () {
      const server = yield* answering(clientErrorOf("ERR_HTTP_REQUEST_TIMEOUT"))
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      const [call, list] = yield* Effect.gen(function* () {
        const client = yield* ToolGatewayClient
        return [
          yield* Effect.flip(client.tools.weather({ payload: { q: "Berlin" } })),
          yield* Effect.flip(client.catalog.list())
        ] as const
      }).pipe(Effect.provide(ToolGatewayClient.layerWithoutHttpClient({ baseUrl: `http://127.0.0.1:${port}`, apiKey: "tg_x" }).pipe(
        Layer.provide(NodeHttpClient.layerUndici)
      )))
      expect(call).toMatchObject({ _tag: "RequestTimeout", message: expect.stringContaining("not received in time") })
      expect(list._tag).toBe("RequestTimeout")
    }))
})
