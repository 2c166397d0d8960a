/**
 * `GET /openapi.json` and `GET /docs` (the API reference) show one document: the API's (`Api.ts`, cleaned by
 * `openapi.ts`) as this gateway runs it — each tool's price is this gateway's (`PRICES_FILE` included) and,
 * when `PUBLIC_URL` is set, the server is that URL (else `/`: the paths are relative to where the document is
 * served). Both are sent compressed (brotli or gzip) to a client that accepts it: `compression.ts`.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import type * as HttpApiScalar from "@effect/platform/HttpApiScalar"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { ServerConfig } from "../config.js"
import { Pricing } from "../services/Pricing.js"
import { Api } from "./Api.js"
import { cleanSpec, withPrices } from "./openapi.js"
import { cachedSuccess } from "../services/cachedSuccess.js"
import { negotiatedEncoding } from "./compression.js"

/** The API annotated to produce the served document (one transform: it replaces `Api.ts`'s `cleanSpec`). */
const servedApi = Effect.gen(function* () {
  const pricing = yield* Pricing
  const { publicUrl } = yield* ServerConfig
  return Api.annotate(OpenApi.Transform, (spec) => {
    const priced = withPrices(cleanSpec(spec), pricing.priceOf)
    return Option.match(publicUrl, {
      onNone: () => priced,
      onSome: (url) => ({ ...priced, servers: [{ url, description: "This gateway" }] })
    })
  })
})

/**
 * Built once, when first asked for: a process that only serves tool calls never holds the document (about 360 KB
 * of JSON) nor spends its start-up making it.
 */
const OpenApiLive = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function* () {
    const api = yield* servedApi
    const response = yield* cachedSuccess(
      Effect.suspend(() => HttpServerResponse.json(OpenApi.fromApi(api))).pipe(Effect.orDie, Effect.flatMap(negotiatedEncoding))
    )
    yield* router.get("/openapi.json", Effect.flatten(response))
  })
)

/**
 * Options of the inlined Scalar (@scalar/api-reference 1.39) that `HttpApiScalar` passes through to it but
 * does not type (they are in the configuration schema of the bundle that `HttpApiScalar` inlines).
 */
interface ScalarPageConfig extends HttpApiScalar.ScalarConfig {
  /** The "Open API Client" button: a link to client.scalar.com. */
  readonly hideClientButton?: boolean
  /** The toolbar (Share, Generate SDKs, Configure): Scalar's cloud; shown on localhost unless "never". */
  readonly showToolbar?: "always" | "localhost" | "never"
  /** Analytics of the API client, sent to api.scalar.com. */
  readonly telemetry?: boolean
}

/**
 * The reference page loads nothing from another host and offers nothing that needs a Scalar account: the
 * system's fonts instead of fonts.scalar.com, no cloud buttons, no telemetry, no "Powered by" link, and
 * no `proxyUrl` (the page's "Test Request" calls this gateway directly).
 */
const docsPage: ScalarPageConfig = {
  withDefaultFonts: false,
  hideClientButton: true,
  showToolbar: "never",
  telemetry: false,
  customCss: `a[href^="https://www.scalar.com"] { display: none; }`
}

/**
 * The reference page is never framed by another site (its "Test Request" sends what a visitor types to this
 * gateway), never sniffed, and sends no Referer. Its scripts and styles are inline, as `HttpApiScalar` writes
 * them, so the policy says where the page may be shown and what it may not load, not which scripts run.
 */
const DOCS_HEADERS = {
  "content-security-policy": "frame-ancestors 'none'; base-uri 'none'; form-action 'none'; object-src 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer"
}

/**
 * `GET /docs`: `HttpApiScalar`'s page, with its script inline (it works offline). The module holds that
 * script (3.4 MB of source, a string twice that size in memory, and the page built from it), so it is
 * loaded, and the page built, when `/docs` is first asked for, not by every process that never serves it; each
 * compressed variant of the page (about a quarter of its size) is made when a client first accepts it.
 */
const ScalarLive = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function* () {
    const api = yield* servedApi
    const page = yield* cachedSuccess(
      Effect.promise(() => Promise.all([import("@effect/platform/HttpApiScalar"), import("@effect/platform/HttpLayerRouter")])).pipe(
        Effect.flatMap(([Scalar, LayerRouter]) =>
          LayerRouter.toHttpEffect(Scalar.layerHttpLayerRouter({ api, path: "/docs", scalar: docsPage }))
        ),
        // the page is the same for every request: asked for once, here, and kept
        Effect.flatMap((app) => Effect.provideService(app, HttpServerRequest.HttpServerRequest, HttpServerRequest.fromWeb(new Request("http://localhost/docs")))),
        Effect.orDie,
        Effect.scoped,
        Effect.flatMap((response) => negotiatedEncoding(HttpServerResponse.setHeaders(response, DOCS_HEADERS)))
      )
    )
    yield* router.get("/docs", Effect.flatten(page))
  })
)

export const DocsLive = Layer.mergeAll(OpenApiLive, ScalarLive)
