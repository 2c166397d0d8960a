/**
 * `tool-gateway serve`: the HTTP server over the services and the database; on the first start of an
 * empty embedded database, a `default` org and a key, printed once.
 */
import { HttpServer } from "@effect/platform"
import { Console, Effect, Layer, Option, Redacted } from "effect"
import { HttpServerLive } from "../http/server.js"
import { GatewayLive } from "../layers.js"
import { GatewayConfig, GatewayConfigFromEnv } from "../services/GatewayConfig.js"
import { KeyStore } from "../services/KeyStore.js"
import { Ledger } from "../services/Ledger.js"

const curlExample = (base: string, key: string) =>
  `curl -s ${base}/v1/weather -H "X-API-Key: ${key}" -H "Content-Type: application/json" -d '{"q":"Berlin"}'`

/** First start on an empty embedded database: a `default` org with 1000 credits and one key, printed once. */
const bootstrap = Effect.gen(function* () {
  const config = yield* GatewayConfig
  if (!config.bootstrap || Option.isSome(config.databaseUrl)) return
  const ledger = yield* Ledger
  if ((yield* ledger.countOrgs) > 0) return
  const org = yield* ledger.createOrg({ name: "default", credits: 1000 })
  const key = yield* Effect.orDie(KeyStore.pipe(Effect.flatMap((keys) => keys.create(org.id, { name: "default" }))))
  const server = yield* HttpServer.HttpServer
  const address = server.address
  const base = address._tag === "TcpAddress" ? `http://${address.hostname}:${address.port}` : "http://localhost"
  yield* Console.log(
    [
      "",
      `Created org "default" (${org.id}) with 1000 credits and an API key. It is shown only this once:`,
      "",
      `  ${Redacted.value(key.key)}`,
      "",
      "Try it:",
      `  ${curlExample(base, Redacted.value(key.key))}`,
      ""
    ].join("\n")
  )
})

/** Run the gateway until interrupted (SIGINT, SIGTERM). */
export const serve = Layer.launch(
  Layer.effectDiscard(bootstrap).pipe(
    Layer.provideMerge(HttpServerLive),
    Layer.provideMerge(GatewayLive),
    Layer.provideMerge(GatewayConfigFromEnv)
  )
)

