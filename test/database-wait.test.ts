/**
 * `waitAtMost`: every answer of a statement reaches exactly one place — its caller, or (too late) `onLate` — also
 * when it arrives at the very moment the wait gives up. A statement whose answer reached neither would leave
 * what it did (a hold, an Idempotency-Key claim) undone for a caller told it failed.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { waitAtMost } from "../src/services/databaseWait.js"

describe("waitAtMost", () => {
  it.live("an answer right at the deadline goes to the caller or to onLate, never to neither nor both", () =>
    Effect.gen(function* () {
      let late = 0
      // a busy runtime, as under load: fibers that keep yielding, so an answer and the end of a wait can fall
      // between each other's steps
      const busy = yield* Effect.forEach(Array.from({ length: 100 }), () => Effect.fork(Effect.forever(Effect.yieldNow())))
      const runs = Array.from({ length: 1_000 }, (_, i) => 15 + (i % 10))
      const outcomes = yield* Effect.forEach(runs, (ms, i) =>
        waitAtMost(Effect.async<number>((resume) => { setTimeout(() => resume(Effect.succeed(i)), ms) }), {
          ms: 20,
          what: "a test statement",
          onLate: () => Effect.sync(() => { late += 1 })
        }).pipe(
          Effect.uninterruptible,
          Effect.match({ onFailure: () => "failed" as const, onSuccess: () => "answered" as const })
        ), { concurrency: "unbounded" })
      yield* Effect.forEach(busy, Fiber.interrupt)
      // let the late answers arrive
      yield* Effect.sleep("100 millis")
      const failed = outcomes.filter((o) => o === "failed").length
      const answered = outcomes.length - failed
      expect(answered + failed).toBe(runs.length)
      expect(failed).toBeGreaterThan(0)
      expect(late).toBe(failed)
    }))

  it.live("a statement that fails in time fails its caller with its own error", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(waitAtMost(Effect.fail("no such row" as const), { ms: 1_000, what: "x" }))
      expect(error).toBe("no such row")
    }))
})
