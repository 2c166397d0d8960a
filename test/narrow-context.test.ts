/**
 * src/http/narrowContext.ts: `builtIn`, a layer built in a context narrowed to what it needs, and `ServeNarrowed`,
 * the server's handler started in the platform's services only. The gateway's tool handlers' group and its server
 * are built this way, so that each request's fiber carries a small context (the gateway's behaviour through them
 * is tested by every HTTP test; what it saves is in docs/performance.md, twelfth round).
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpIncomingMessage from "@effect/platform/HttpIncomingMessage"
import * as HttpServer from "@effect/platform/HttpServer"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { describe, expect, expectTypeOf, it } from "@effect/vitest"
import { Context, Effect, Layer, Option, Schema } from "effect"
import * as Http from "node:http"
import { builtIn, ServeNarrowed } from "../src/http/narrowContext.js"

class Needed extends Context.Tag("test/Needed")<Needed, { readonly name: string }>() {}
class Other extends Context.Tag("test/Other")<Other, { readonly name: string }>() {}
class Shared extends Context.Tag("test/Shared")<Shared, { readonly instance: number }>() {}
class Seen extends Context.Tag("test/Seen")<Seen, { readonly needed: string; readonly other: boolean; readonly shared: number }>() {}

/** What a layer built in the surrounding context sees of it: `Needed` and `Shared` it requires, `Other` if present. */
const SeenLive = Layer.effect(
  Seen,
  Effect.gen(function* () {
    const needed = yield* Needed
    const shared = yield* Shared
    const other = yield* Effect.serviceOption(Other)
    return { needed: needed.name, other: Option.isSome(other), shared: shared.instance }
  })
)

const surrounding = (builds: { count: number }) =>
  Layer.mergeAll(
    Layer.succeed(Needed, { name: "needed" }),
    Layer.succeed(Other, { name: "other" }),
    Layer.effect(Shared, Effect.sync(() => ({ instance: ++builds.count })))
  )

describe("a layer built in a narrowed context", () => {
  it.effect("sees only what it is given, although the surrounding context holds more", () =>
    Effect.gen(function* () {
      const builds = { count: 0 }
      const narrowed = yield* Seen.pipe(Effect.provide(builtIn(SeenLive, Context.pick(Needed, Shared)).pipe(Layer.provide(surrounding(builds)))))
      expect(narrowed).toEqual({ needed: "needed", other: false, shared: 1 })
      // the same layer built the usual way sees the whole context
      const whole = yield* Seen.pipe(Effect.provide(SeenLive.pipe(Layer.provide(surrounding(builds)))))
      expect(whole).toEqual({ needed: "needed", other: true, shared: 2 })
    }))

  it.effect("shares the surrounding layers' instances: a layer both use is built once", () =>
    Effect.gen(function* () {
      const builds = { count: 0 }
      const SharedLive = Layer.effect(Shared, Effect.sync(() => ({ instance: ++builds.count })))
      const Inner = Layer.effect(Seen, Effect.map(Shared, (shared) => ({ needed: "", other: false, shared: shared.instance }))).pipe(
        Layer.provide(SharedLive)
      )
      const both = Layer.mergeAll(builtIn(Inner, (context) => context), SharedLive)
      const [seen, shared] = yield* Effect.all([Seen, Shared]).pipe(Effect.provide(both))
      expect(builds.count).toBe(1)
      expect(seen.shared).toBe(shared.instance)
    }))

  it("is typed to be given all the layer needs (checked by `npm run typecheck`)", () => {
    // the only argument that can be refused on this line is the pick: `SeenLive` needs `Shared` too
    // @ts-expect-error a context without a service the layer needs does not type-check
    builtIn(SeenLive, Context.pick(Needed))
    expectTypeOf(builtIn(SeenLive, Context.pick(Needed, Shared))).toEqualTypeOf<Layer.Layer<Seen, never, Needed | Shared>>()
  })
})

// A server as the gateway's is made: an API whose group is built narrowed, a route on the API's router, and
// `ServeNarrowed`, in a surrounding context that holds a service neither needs (`Other`).
const Answer = Schema.Struct({ other: Schema.Boolean, needed: Schema.String })
class ProbeGroup extends HttpApiGroup.make("probe").add(HttpApiEndpoint.get("context", "/group").addSuccess(Answer)) {}
class ProbeApi extends HttpApi.make("probe").add(ProbeGroup) {}

const ProbeGroupLive = builtIn(
  HttpApiBuilder.group(ProbeApi, "probe", (handlers) =>
    Effect.gen(function* () {
      const needed = yield* Needed
      return handlers.handle("context", () =>
        Effect.map(Effect.serviceOption(Other), (other) => ({ other: Option.isSome(other), needed: needed.name })))
    })),
  Context.pick(Needed)
)

const RouteLive = HttpApiBuilder.Router.use((router) =>
  router.get(
    "/route",
    Effect.gen(function* () {
      const other = yield* Effect.serviceOption(Other)
      const maxBody = yield* HttpIncomingMessage.MaxBodySize
      return HttpServerResponse.unsafeJson({ other: Option.isSome(other), maxBody: Option.getOrNull(Option.map(maxBody, Number)) })
    })
  ))

const ProbeServerLive = ServeNarrowed.pipe(
  Layer.provide(RouteLive),
  Layer.provide(HttpApiBuilder.api(ProbeApi).pipe(Layer.provide(ProbeGroupLive))),
  Layer.provide(Layer.succeed(HttpIncomingMessage.MaxBodySize, Option.some(FileSystem.Size(1234)))),
  Layer.provideMerge(NodeHttpServer.layer(() => Http.createServer(), { port: 0, host: "127.0.0.1" })),
  Layer.provide(Layer.mergeAll(Layer.succeed(Needed, { name: "needed" }), Layer.succeed(Other, { name: "other" })))
)

const getJson = (path: string) =>
  Effect.gen(function* () {
    const server = yield* HttpServer.HttpServer
    const port = server.address._tag === "TcpAddress" ? server.address.port : 0
    return yield* Effect.promise(async (): Promise<unknown> => {
      const response = await fetch(`http://127.0.0.1:${port}${path}`)
      return response.json()
    })
  })

describe("the server's handler, started narrowed", () => {
  it.effect("a route runs without the services around the server, with the body size limit set there", () =>
    Effect.gen(function* () {
      expect(yield* getJson("/route")).toEqual({ other: false, maxBody: 1234 })
    }).pipe(Effect.provide(ProbeServerLive)))

  it.effect("an API handler built narrowed runs with what it was given, and no more", () =>
    Effect.gen(function* () {
      expect(yield* getJson("/group")).toEqual({ other: false, needed: "needed" })
    }).pipe(Effect.provide(ProbeServerLive)))
})
