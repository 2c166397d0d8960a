/**
 * Layers built in a narrowed context, so that what each request carries is small.
 *
 * The platform keeps the context a handler's layer was built in and gives each request a copy of it:
 * `HttpApiBuilder.group` merges the context its layer was built in into each request's, and the Node server's
 * handler runs each request in the context the server was started in. Built in the gateway's whole context,
 * a tool call's fiber held 50 services, and every scoped change of its context after that (the router's, the
 * handler's merge, each `provide` on the way) copied all 50. Narrowed, it holds 17, and a billed call allocates
 * about 8% less (a refused one 11% less): see docs/performance.md, "Twelfth round".
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpIncomingMessage from "@effect/platform/HttpIncomingMessage"
import * as HttpPlatform from "@effect/platform/HttpPlatform"
import * as HttpServer from "@effect/platform/HttpServer"
import * as Etag from "@effect/platform/Etag"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"

/**
 * `layer`, built in the context `keep` makes of the one around it: `keep` answers a context holding every
 * service `layer` needs (the type says so), typically `Context.pick` of them. Built with the surrounding
 * layers' memo map, so that a layer it shares with them (the API's router) is the same instance. Hence: a layer
 * provided inside `layer` that is also used elsewhere is built once, in whichever context comes first; give
 * `builtIn` a layer whose own layers are already built around it (a group, as `ToolsLive`), and read what it needs
 * as tags (the type checks tags, not a `Context.Reference` or `Effect.serviceOption`).
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
      // in place of the fiber's context, not merged into it (as `Effect.provide` would)
      return yield* Layer.buildWithMemoMap(layer, memoMap, scope).pipe(Effect.mapInputContext((_: Context.Context<never>) => keep(context)))
    })
  )

/**
 * `HttpApiBuilder.serve()`, with the server's handler started in a context of the platform's services only:
 * what every request's fiber starts with. Routes on the API's router can need no more (their type allows the
 * platform's default services), and the API's handlers get theirs from their group's layer.
 */
export const ServeNarrowed = Layer.scopedDiscard(
  Effect.gen(function* () {
    const app = yield* HttpApiBuilder.httpApp
    const context = yield* Effect.context<
      HttpServer.HttpServer | HttpPlatform.HttpPlatform | Etag.Generator | FileSystem.FileSystem | Path.Path | Scope.Scope
    >()
    // two references the platform reads at request time: the body size limit, and the layers' memo map (the
    // `/docs` page builds its router at its first request)
    const maxBodySize = yield* HttpIncomingMessage.MaxBodySize
    const memoMap = yield* Layer.CurrentMemoMap
    const kept = Context.pick(HttpServer.HttpServer, HttpPlatform.HttpPlatform, Etag.Generator, FileSystem.FileSystem, Path.Path, Scope.Scope)(
      context
    ).pipe(Context.add(HttpIncomingMessage.MaxBodySize, maxBodySize), Context.add(Layer.CurrentMemoMap, memoMap))
    yield* HttpServer.serveEffect()(app).pipe(Effect.mapInputContext((_: Context.Context<never>) => kept))
  })
).pipe(Layer.provide([HttpApiBuilder.Router.Live, HttpApiBuilder.Middleware.layer]))
