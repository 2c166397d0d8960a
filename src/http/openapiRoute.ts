/**
 * `GET /openapi.json`: the API's OpenAPI document (`Api.ts`, cleaned by `openapi.ts`) as this gateway runs it —
 * each tool's price is this gateway's (`PRICES_FILE` included) and, when `PUBLIC_URL` is set, the server is
 * that URL (else `/`: the paths are relative to where the document is served). Built once, at start-up.
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { ServerConfig } from "../config.js"
import { Pricing } from "../services/Pricing.js"
import { withPrices } from "./openapi.js"

export const OPENAPI_PATH = "/openapi.json"

export const OpenApiLive = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function* () {
    const { api } = yield* HttpApi.Api
    const pricing = yield* Pricing
    const { publicUrl } = yield* ServerConfig
    // (a copy: the framework keeps the document it made, for /docs)
    const spec = withPrices({ ...OpenApi.fromApi(api) }, pricing.priceOf)
    const served = Option.match(publicUrl, {
      onNone: () => spec,
      onSome: (url) => ({ ...spec, servers: [{ url, description: "This gateway" }] })
    })
    const response = yield* HttpServerResponse.json(served).pipe(Effect.orDie)
    yield* router.get(OPENAPI_PATH, Effect.succeed(response))
  })
)
