// Run by test/deadline.test.ts as `node --expose-gc`: ten calls through the real ProviderClient to an
// upstream that sends its headers and then nothing, while garbage collections run every few milliseconds.
// Prints one JSON line: how each call ended and how long it took.
import * as Http from "node:http"
import { Effect, Layer } from "effect"
import { configLayer, ProviderClient } from "../../dist/index.js"
import { ProviderClientLive } from "../../dist/services/ProviderClient.js"

const server = Http.createServer((_req, res) => {
  res.writeHead(200, { "content-type": "application/json" })
  res.flushHeaders()
})
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve))
const { port } = server.address()
const collector = setInterval(() => globalThis.gc(), 5)

const started = performance.now()
const outcomes = await Effect.runPromise(
  Effect.flatMap(ProviderClient, (client) =>
    Effect.forEach(Array.from({ length: 10 }), () =>
      client.request({ provider: "stall", method: "GET", url: `http://127.0.0.1:${port}/`, idempotent: true, timeoutMs: 300 }).pipe(
        Effect.match({ onFailure: (e) => e._tag, onSuccess: () => "answered" })
      ), { concurrency: 10 })
  ).pipe(Effect.provide(ProviderClientLive.pipe(Layer.provide(configLayer({ providers: { timeoutMs: 300 } })))))
)
clearInterval(collector)
console.log(JSON.stringify({ outcomes, ms: Math.round(performance.now() - started) }))
server.closeAllConnections()
server.close()
