/**
 * `ProviderClient` used in-process, as another Effect program uses it: a caller that gives up on an upstream
 * request (interrupts it) closes its connection at once — the upstream is not left holding a request nobody
 * waits for until the deadline — and the next request goes out as usual.
 *
 * The upstream is a plain `node:http` server: this is HTTP itself, no provider's protocol.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Exit, Fiber, Layer } from "effect"
import * as Http from "node:http"
import { configLayer } from "../src/config.js"
import { ProviderClient, ProviderClientLive } from "../src/services/ProviderClient.js"

/** An upstream that answers `/fast` at once and never answers `/stall`; it reports each request and when its connection closes. */
const upstream = Effect.acquireRelease(
  Effect.gen(function* () {
    const arrived = yield* Deferred.make<void>()
    const closed = yield* Deferred.make<void>()
    const server = Http.createServer((req, res) => {
      if (req.url === "/fast") {
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ ok: true }))
        return
      }
      Deferred.unsafeDone(arrived, Exit.void)
      req.socket.once("close", () => Deferred.unsafeDone(closed, Exit.void))
    })
    yield* Effect.async<void>((resume) => {
      server.listen(0, "127.0.0.1", () => resume(Effect.void))
    })
    const address = server.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    return { server, url: `http://127.0.0.1:${port}`, arrived, closed }
  }),
  ({ server }) =>
    Effect.async<void>((resume) => {
      server.closeAllConnections()
      server.close(() => resume(Effect.void))
    })
)

const client = ProviderClientLive.pipe(Layer.provide(configLayer({ providers: { timeoutMs: 30_000 } })))

describe("ProviderClient, in-process", () => {
  it.live("an interrupted request closes its connection long before its deadline; the next request is answered", () =>
    Effect.gen(function* () {
      const { url, arrived, closed } = yield* upstream
      const providers = yield* ProviderClient
      const stalled = yield* Effect.fork(providers.request({ provider: "Upstream", method: "POST", url: `${url}/stall`, json: { n: 1 }, idempotent: false }))
      yield* Deferred.await(arrived)
      const exit = yield* Fiber.interrupt(stalled)
      expect(Exit.isInterrupted(exit)).toBe(true)
      // the deadline is 30 s away: only the interruption can close the connection within 2 s
      yield* Deferred.await(closed).pipe(Effect.timeoutFail({ duration: Duration.seconds(2), onTimeout: () => new Error("the upstream's connection stayed open") }))
      const next = yield* providers.request({ provider: "Upstream", method: "GET", url: `${url}/fast`, idempotent: true })
      expect(next.status).toBe(200)
      expect(JSON.parse(new TextDecoder().decode(next.body))).toEqual({ ok: true })
    }).pipe(Effect.scoped, Effect.provide(client)))
})
