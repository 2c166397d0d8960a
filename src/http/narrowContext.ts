/**
 * Layers built in a narrowed context, so that what each request carries is small.
 *
 * The platform keeps the context a handler's layer was built in and gives each request a copy of it:
 * `HttpApiBuilder.group` merges the context its layer was built in into each request's, and the Node server's
 * handler runs each request in the context the server was started in. Built in the gateway's whole context,
 * a tool call's fiber held 50 services, and every scoped change of its context after that (the router's, the
 * handler's merge, each `provide` on the way) copied all 50. Narrowed, it holds 18, and a billed call allocates
 * about 8% less (a refused one 11% less): see docs/performance.md, "Twelfth round".
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpIncomingMessage from "@effect/platform/HttpIncomingMessage"
import * as HttpPlatform from "@effect/platform/HttpPlatform"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServer from "@effect/platform/HttpServer"
import * as Etag from "@effect/platform/Etag"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

/**
 * `layer`, built in the context `keep` makes of the one around it: `keep` answers a context holding every
 * service `layer` needs (the type says so), typically `Context.pick` of them. Built with the surrounding
 * layers' memo map, so that a layer it shares with them (the API's router) is the same instance, and with that
 * memo map in its context, as any layer has (the `/docs` page builds its router at its first request). Hence: a
 * layer provided inside `layer` that is also used elsewhere is built once, in whichever context comes first; give
 * `builtIn` a layer whose own layers are already built around it, and read what it needs as tags (the type checks
 * tags, not a `Context.Reference` or `Effect.serviceOption`).
 */
export const builtIn = <ROut, E, RIn>(
  layer: Layer.Layer<ROut, E, RIn>,
  keep: (context: Context.Context<RIn>) => Context.Context<RIn>
): Layer.Layer<ROut, E, RIn> =>
  Layer.scopedContext(
    Effect.gen(function* () {
      const context = yield* Effect.context<RIn>()
      const memoMap = yield* Layer.CurrentMemoMap
      const scope = yield* Effect.scope
      const narrowed = Context.add(keep(context), Layer.CurrentMemoMap, memoMap)
      // in place of the fiber's context, not merged into it (as `Effect.provide` would)
      return yield* Layer.buildWithMemoMap(layer, memoMap, scope).pipe(Effect.mapInputContext((_: Context.Context<never>) => narrowed))
    })
  )

/**
 * The router's longest path parameter. The platform's router (find-my-way) misses a route whose parameter is
 * longer than its default 100 characters, so `POST /v1/<a long name>` skipped the key check and a long artifact id
 * answered 405; no route here takes a parameter that costs anything to match, so any request line Node accepts
 * (its headers, request line included, are at most 16 KB) is matched whole.
 */
export const MAX_PARAM_LENGTH = 16 * 1024

/**
 * `HttpApiBuilder.serve()`, built in the platform's services only: the context the Node server's handler starts
 * every request's fiber in. Routes on the API's router can need no more (their type allows the platform's default
 * services), and the API's handlers get theirs from their group's layer. The body size limit, a reference the
 * type does not check, is kept with them; the router is built with `MAX_PARAM_LENGTH`.
 */
export const ServeNarrowed = builtIn(HttpApiBuilder.serve().pipe(
  // read when the router is built, which `serve` does as it is built
  Layer.locally(HttpRouter.currentRouterConfig, { maxParamLength: MAX_PARAM_LENGTH })
), (context) =>
  Context.pick(HttpApi.Api, HttpServer.HttpServer, HttpPlatform.HttpPlatform, Etag.Generator, FileSystem.FileSystem, Path.Path)(context).pipe(
    Context.add(HttpIncomingMessage.MaxBodySize, Context.get(context, HttpIncomingMessage.MaxBodySize))
  ))
