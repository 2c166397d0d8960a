/**
 * A typed client for a Tool Gateway over HTTP: `HttpApiClient` built from the same `Api` definition, as an
 * Effect Layer for a base URL and an API key (or a dashboard ID token).
 *
 * - Each operation's failures are exactly the errors its part of the API can answer, as the gateway's error
 *   classes (`InsufficientCredits`, `ProviderTimeout`, …) decoded from the envelope, plus the client's own
 *   (`ClientError`: the connection, an answer it cannot read). What an error's answer says in its headers
 *   is decoded into its fields: `retryAfter` from `Retry-After`, `limit` and `windowSeconds` from
 *   `RateLimit-Policy`, `allow` from `Allow`, `size` from `Content-Range`.
 * - `withIdempotencyKey(key)` makes the calls of an effect carry `Idempotency-Key`; without it none is sent.
 * - `withResponse: true` answers the output and the response; `callMeta(response)` decodes what the gateway
 *   says of the call: its request id, the credits charged, whether it was a replay, the key's rate limit.
 *
 * ```ts
 * import { ToolGatewayClient, withIdempotencyKey } from "tool-gateway/client"
 *
 * const program = Effect.gen(function* () {
 *   const client = yield* ToolGatewayClient
 *   const weather = yield* client.tools.weather({ payload: { q: "Berlin" } })
 *   const [post, response] = yield* client.tools.delta_post({ payload: { text: "hi" }, withResponse: true }).pipe(
 *     withIdempotencyKey("post-2026-11-23")
 *   )
 *   const meta = yield* callMeta(response) // { requestId, creditsCharged, replayed, rateLimit }
 * }).pipe(Effect.provide(ToolGatewayClient.layer({ baseUrl: "http://127.0.0.1:8787", apiKey })))
 * ```
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import type * as HttpApiError from "@effect/platform/HttpApiError"
import * as HttpApiClient from "@effect/platform/HttpApiClient"
import * as HttpClient from "@effect/platform/HttpClient"
import type * as HttpClientError from "@effect/platform/HttpClientError"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as ParseResult from "effect/ParseResult"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { Api, IDEMPOTENCY_HEADER } from "./http/Api.js"

export * from "./domain/errors.js"
export { Api } from "./http/Api.js"

/** The client's own failures, besides the gateway's errors: the connection, or an answer it cannot read. */
export type ClientError = HttpClientError.HttpClientError | ParseResult.ParseError | HttpApiError.HttpApiDecodeError

/** The `Idempotency-Key` the calls of the current fiber carry (see `withIdempotencyKey`). */
export const CurrentIdempotencyKey = FiberRef.unsafeMake<string | undefined>(undefined)

/** Make the calls of `effect` carry `Idempotency-Key: key`: a retry of the same call then replays its answer. */
export const withIdempotencyKey = (key: string) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.locally(effect, CurrentIdempotencyKey, key)

/** What the gateway says of a call in its headers. */
export interface CallMeta {
  readonly requestId: string
  /** Credits the call was charged (0 for a replay: it was charged when it ran). */
  readonly creditsCharged: number
  /** The answer is the stored answer of an earlier call with the same Idempotency-Key. */
  readonly replayed: boolean
  /** For a replay: the request id of the call that produced the answer. */
  readonly originalRequestId: string | undefined
  /** The key's rate limit: `limit` requests per `windowSeconds`, `remaining` now, full again in `resetSeconds`. */
  readonly rateLimit: {
    readonly limit: number
    readonly windowSeconds: number
    readonly remaining: number
    readonly resetSeconds: number
  } | undefined
}

const MetaHeaders = Schema.Struct({
  "x-request-id": Schema.String,
  "x-credits-charged": Schema.optional(Schema.NumberFromString),
  "idempotent-replayed": Schema.optional(Schema.Literal("true")),
  "x-original-request-id": Schema.optional(Schema.String),
  ratelimit: Schema.optional(Schema.String),
  "ratelimit-policy": Schema.optional(Schema.String)
})

/** A parameter of a structured header (`"key";q=100;w=2` → q = 100). */
const parameter = (header: string | undefined, name: string): number | undefined => {
  const match = header === undefined ? null : new RegExp(`;${name}=(\\d+)`).exec(header)
  return match?.[1] === undefined ? undefined : Number(match[1])
}

/** Decode what the gateway says of a call, from its response (`withResponse: true`). */
export const callMeta = (response: HttpClientResponse.HttpClientResponse): Effect.Effect<CallMeta, ParseResult.ParseError> =>
  Effect.map(HttpClientResponse.schemaHeaders(MetaHeaders)(response), (h) => {
    const limit = parameter(h["ratelimit-policy"], "q")
    const windowSeconds = parameter(h["ratelimit-policy"], "w")
    const remaining = parameter(h.ratelimit, "r")
    const resetSeconds = parameter(h.ratelimit, "t")
    return {
      requestId: h["x-request-id"],
      creditsCharged: h["x-credits-charged"] ?? 0,
      replayed: h["idempotent-replayed"] === "true",
      originalRequestId: h["x-original-request-id"],
      rateLimit: limit !== undefined && windowSeconds !== undefined && remaining !== undefined && resetSeconds !== undefined
        ? { limit, windowSeconds, remaining, resetSeconds }
        : undefined
    }
  })

const ErrorBody = Schema.Struct({ error: Schema.Record({ key: Schema.String, value: Schema.Unknown }) })

/**
 * An error answer with what its headers say copied into its envelope (`retry_after`, `limit`,
 * `window_seconds`, `allow`, `size`), so that the decoded error class has them as fields.
 */
const withHeaderFields = (response: HttpClientResponse.HttpClientResponse) =>
  Effect.gen(function* () {
    if (response.status < 400) return response
    const headers = response.headers
    const fields: Record<string, string | number> = {}
    const retryAfter = Number(headers["retry-after"] ?? Number.NaN)
    if (Number.isFinite(retryAfter)) fields["retry_after"] = retryAfter
    const limit = parameter(headers["ratelimit-policy"], "q")
    const windowSeconds = parameter(headers["ratelimit-policy"], "w")
    if (limit !== undefined && windowSeconds !== undefined) Object.assign(fields, { limit, window_seconds: windowSeconds })
    if (headers["allow"] !== undefined) fields["allow"] = headers["allow"]
    const size = /^bytes \*\/(\d+)$/.exec(headers["content-range"] ?? "")?.[1]
    if (size !== undefined) fields["size"] = Number(size)
    if (Object.keys(fields).length === 0) return response
    const body = yield* HttpClientResponse.schemaBodyJson(ErrorBody)(response).pipe(Effect.option)
    return Option.match(body, {
      onNone: () => response,
      onSome: (envelope) =>
        HttpClientResponse.fromWeb(
          response.request,
          new Response(JSON.stringify({ error: { ...envelope.error, ...fields } }), {
            status: response.status,
            headers: new Headers(Object.entries(headers))
          })
        )
    })
  })

const make = (options: ClientOptions) =>
  HttpApiClient.make(Api, {
    baseUrl: options.baseUrl,
    transformClient: (client) =>
      client.pipe(
        HttpClient.mapRequestEffect((request) =>
          Effect.map(FiberRef.get(CurrentIdempotencyKey), (key) => {
            const withKey = options.apiKey === undefined
              ? request
              : HttpClientRequest.setHeader(request, "x-api-key", Redacted.isRedacted(options.apiKey) ? Redacted.value(options.apiKey) : options.apiKey)
            const withToken = options.idToken === undefined
              ? withKey
              : HttpClientRequest.bearerToken(withKey, Redacted.isRedacted(options.idToken) ? Redacted.value(options.idToken) : options.idToken)
            return key === undefined ? withToken : HttpClientRequest.setHeader(withToken, IDEMPOTENCY_HEADER, key)
          })
        ),
        HttpClient.transformResponse(Effect.flatMap(withHeaderFields))
      )
  })

export interface ClientOptions {
  readonly baseUrl: string
  /** For the tool routes. */
  readonly apiKey?: string | Redacted.Redacted<string> | undefined
  /** For the dashboard routes. */
  readonly idToken?: string | Redacted.Redacted<string> | undefined
}

/** The client: one method per operation, grouped as the API is (`tools`, `dashboard`, `catalog`, `artifacts`). */
export class ToolGatewayClient extends Context.Tag("ToolGatewayClient")<
  ToolGatewayClient,
  Effect.Effect.Success<ReturnType<typeof make>>
>() {
  /** The client over any `HttpClient` (Node's undici, fetch, …). */
  static layerWithoutHttpClient = (options: ClientOptions) => Layer.effect(ToolGatewayClient, make(options))

  /** The client over the platform's `fetch`. */
  static layer = (options: ClientOptions) =>
    ToolGatewayClient.layerWithoutHttpClient(options).pipe(Layer.provide(FetchHttpClient.layer))
}
