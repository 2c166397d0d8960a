/**
 * The framework's own ceilings, on the gateway's stack with its settings (tracing off when nothing
 * exports it): `--mode router` is an `HttpRouter` route answering constant JSON; `--mode api` is an
 * `HttpApi` endpoint that decodes the same payload as the benchmarked tool and answers constant JSON.
 * Prints `{"port":…}` when ready.
 */
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiGroup, HttpRouter, HttpServer, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { Effect, Layer, Schema } from "effect"
import * as Http from "node:http"
import { catalog } from "tool-gateway"
import { argValue } from "./proc.js"

const mode = argValue("--mode") ?? "api"
const constant = { provider: "bench", query: "constant", results: [{ id: "1", name: "Benchmark App" }] }

const Answer = Schema.Struct({
  provider: Schema.String,
  query: Schema.String,
  results: Schema.Array(Schema.Struct({ id: Schema.String, name: Schema.String }))
})

class Group extends HttpApiGroup.make("tools").add(
  HttpApiEndpoint.post("call", "/v1/mobile_app_search").setPayload(catalog.mobile_app_search.input).addSuccess(Answer)
) {}
class Api extends HttpApi.make("ceiling").add(Group) {}

const GroupLive = HttpApiBuilder.group(Api, "tools", (handlers) => handlers.handle("call", () => Effect.succeed(constant)))

const apiServer = HttpApiBuilder.serve().pipe(
  Layer.provide(HttpApiBuilder.api(Api).pipe(Layer.provide(GroupLive)))
)

const routerServer = HttpRouter.empty.pipe(
  HttpRouter.post("/v1/mobile_app_search", HttpServerResponse.unsafeJson(constant)),
  HttpServer.serve()
)

const printPort = Layer.effectDiscard(
  Effect.flatMap(HttpServer.HttpServer, (server) =>
    Effect.sync(() => {
      const port = server.address._tag === "TcpAddress" ? server.address.port : 0
      process.stdout.write(`${JSON.stringify({ port })}\n`)
    }))
)

const main = Layer.mergeAll(mode === "router" ? routerServer : apiServer, printPort).pipe(
  Layer.provide(NodeHttpServer.layer(() => Http.createServer(), { port: 0, host: "127.0.0.1" })),
  Layer.provide(Layer.setTracerEnabled(false))
)

NodeRuntime.runMain(Layer.launch(main))
