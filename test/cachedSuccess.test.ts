/**
 * What the gateway makes once, when first asked for (the MCP SDK, the /docs page, the dashboard's files, the
 * OpenAPI document, the metrics exporter, the page converter's threads): its first success is kept, and neither a
 * failure nor a caller that was interrupted — a client that hung up during the first request — is kept in its
 * place for every later caller.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Ref } from "effect"
import { cachedSuccess } from "../src/services/cachedSuccess.js"

describe("cachedSuccess", () => {
  it.effect("makes the value once and answers it from then on", () =>
    Effect.gen(function* () {
      const runs = yield* Ref.make(0)
      const value = yield* cachedSuccess(Ref.updateAndGet(runs, (n) => n + 1))
      const answers = yield* Effect.all([value, value, value], { concurrency: "unbounded" })
      expect(answers).toEqual([1, 1, 1])
      expect(yield* value).toBe(1)
      expect(yield* Ref.get(runs)).toBe(1)
    }))

  it.effect("does not keep a failure: the next caller makes it again", () =>
    Effect.gen(function* () {
      const runs = yield* Ref.make(0)
      const value = yield* cachedSuccess(
        Effect.flatMap(Ref.updateAndGet(runs, (n) => n + 1), (n) => (n === 1 ? Effect.fail("not yet" as const) : Effect.succeed(n)))
      )
      expect(yield* Effect.exit(value)).toEqual(Exit.fail("not yet"))
      expect(yield* value).toBe(2)
      expect(yield* value).toBe(2)
    }))

  it.effect("a first caller interrupted while the value is made does not break the later ones", () =>
    Effect.gen(function* () {
      const runs = yield* Ref.make(0)
      const started = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const value = yield* cachedSuccess(
        Effect.gen(function* () {
          yield* Ref.update(runs, (n) => n + 1)
          yield* Deferred.succeed(started, undefined)
          yield* Deferred.await(release)
          return "made"
        })
      )
      const first = yield* Effect.fork(value)
      yield* Deferred.await(started)
      // the client hangs up: its request's fiber is interrupted while the value is being made
      yield* Fiber.interruptFork(first)
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.await(first)
      expect(yield* value).toBe("made")
      expect(yield* Ref.get(runs)).toBe(1)
    }))
})
