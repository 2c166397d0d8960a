/**
 * `ProviderClient` used in-process, as another Effect program uses it: a caller that gives up on an upstream
 * request (interrupts it) closes its connection at once — the upstream is not left holding a request nobody
 * waits for until the deadline — and the next request goes out as usual.
 *
 * The upstream is the fake upstream server of `tool-gateway/testing`: this is HTTP itself, no provider's protocol.
 */
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Exit, Fiber, Layer, Schedule } from "effect"
import { configLayer } from "../src/config.js"
import { ProviderClient, ProviderClientLive } from "../src/services/ProviderClient.js"
import { json, upstream } from "../src/testing/harness.js"

const client = ProviderClientLive.pipe(Layer.provide(configLayer({ providers: { timeoutMs: 30_000 } })))

/** Until `check` holds, polled every 10 ms, for at most `within`; then `failure`. */
const eventually = (check: () => boolean, within: Duration.DurationInput, failure: string) =>
  Effect.suspend(() => (check() ? Effect.void : Effect.fail(new Error(failure)))).pipe(
    Effect.retry(Schedule.spaced("10 millis")),
    Effect.timeoutFail({ duration: within, onTimeout: () => new Error(failure) })
  )

describe("ProviderClient, in-process", () => {
  it.live("an interrupted request closes its connection long before its deadline; the next request is answered", () =>
    Effect.gen(function* () {
      const fake = yield* upstream(() => json(200, { ok: true }))
      // `/stall` answers its headers, then nothing
      fake.fault({ hangAfterHeaders: true, path: "/stall" })
      const providers = yield* ProviderClient
      const stalled = yield* Effect.fork(providers.request({ provider: "Upstream", method: "POST", url: `${fake.url}/stall`, json: { n: 1 }, idempotent: false }))
      yield* eventually(() => fake.hits("/stall") === 1, "5 seconds", "the request never reached the upstream")
      const exit = yield* Fiber.interrupt(stalled)
      expect(Exit.isInterrupted(exit)).toBe(true)
      // the deadline is 30 s away: only the interruption can close the connection within 2 s
      yield* eventually(() => fake.connections() === 0, "2 seconds", "the upstream's connection stayed open")
      const next = yield* providers.request({ provider: "Upstream", method: "GET", url: `${fake.url}/fast`, idempotent: true })
      expect(next.status).toBe(200)
      expect(JSON.parse(new TextDecoder().decode(next.body))).toEqual({ ok: true })
    }).pipe(Effect.scoped, Effect.provide(client)))
})
