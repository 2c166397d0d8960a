/**
 * A typed client for a Tool Gateway over HTTP: `HttpApiClient` built from the same `Api` definition, as an
 * Effect Layer for a base URL and an API key (or a dashboard ID token). Failures come back as the gateway's
 * error classes (`InsufficientCredits`, `ProviderTimeout`, …), decoded from the envelope.
 *
 * ```ts
 * import { ToolGatewayClient } from "tool-gateway/client"
 *
 * const program = Effect.gen(function* () {
 *   const client = yield* ToolGatewayClient
 *   const weather = yield* client.tools.weather({ payload: { q: "Berlin" }, headers: {} })
 * }).pipe(Effect.provide(ToolGatewayClient.layer({ baseUrl: "http://127.0.0.1:8787", apiKey })))
 * ```
 */
import { FetchHttpClient, HttpApiClient, HttpClient, HttpClientRequest } from "@effect/platform"
import { Context, Effect, Layer, Redacted } from "effect"
import { Api } from "./http/Api.js"

export * from "./domain/errors.js"
export { Api } from "./http/Api.js"

const make = (options: ClientOptions) =>
  HttpApiClient.make(Api, {
    baseUrl: options.baseUrl,
    transformClient: HttpClient.mapRequest((request) => {
      const withKey = options.apiKey === undefined
        ? request
        : HttpClientRequest.setHeader(request, "x-api-key", Redacted.isRedacted(options.apiKey) ? Redacted.value(options.apiKey) : options.apiKey)
      return options.idToken === undefined
        ? withKey
        : HttpClientRequest.bearerToken(withKey, Redacted.isRedacted(options.idToken) ? Redacted.value(options.idToken) : options.idToken)
    })
  })

export interface ClientOptions {
  readonly baseUrl: string
  /** For the tool routes. */
  readonly apiKey?: string | Redacted.Redacted<string> | undefined
  /** For the dashboard routes. */
  readonly idToken?: string | Redacted.Redacted<string> | undefined
}

/** The client: one method per operation, grouped as the API is (`tools`, `dashboard`, `catalog`). */
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
