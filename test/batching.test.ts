/**
 * Group commit's rules (`src/services/batching.ts`), with a statement that records what it was given: a call
 * alone runs at once in its own fiber, calls that arrive meanwhile wait and go together, never two statements
 * in flight, and a statement that fails or a caller that goes away leaves the next call its turn. The ledger's
 * and the idempotency store's use of it against PostgreSQL is tested in credits.test.ts and
 * idempotency.test.ts.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, FiberId } from "effect"
import { batched } from "../src/services/batching.js"

/**
 * A statement that answers each item doubled; the first `gated` statements wait for `gate` once started, and
 * signal `ending` as they end.
 */
const recorder = (gated: number) =>
  Effect.gen(function* () {
    const gate = yield* Deferred.make<void>()
    const started = yield* Deferred.make<void>()
    const ending = yield* Deferred.make<void>()
    const batches: Array<ReadonlyArray<number>> = []
    const fibers: Array<FiberId.FiberId> = []
    let inFlight = 0
    let most = 0
    const batcher = yield* batched({
      kind: "test",
      execute: (items: ReadonlyArray<number>) => {
        // a statement that throws as it is built
        if (items.includes(-2)) throw new Error("no statement for -2")
        return Effect.gen(function* () {
          inFlight += 1
          most = Math.max(most, inFlight)
          batches.push(items)
          fibers.push(yield* Effect.fiberId)
          yield* Deferred.succeed(started, undefined)
          if (batches.length <= gated) {
            yield* Deferred.await(gate)
            yield* Deferred.succeed(ending, undefined)
          }
          inFlight -= 1
          if (items.includes(-1)) return yield* Effect.dieMessage("the statement failed")
          return items.map((n) => n * 2)
        })
      }
    })
    return { batcher, gate, started, ending, batches, fibers, most: () => most }
  })

/** Give every other fiber its turn a few times over. */
const settle = Effect.repeatN(Effect.yieldNow(), 20)

describe("group commit", () => {
  it.scoped("a call alone is a batch of one, sent at once by the caller's own fiber", () =>
    Effect.gen(function* () {
      const r = yield* recorder(0)
      const me = yield* Effect.fiberId
      expect(yield* r.batcher.run(21)).toBe(42)
      expect(r.batches).toEqual([[21]])
      expect(r.fibers).toEqual([me])
      expect(yield* r.batcher.run(5)).toBe(10)
      expect(r.batches).toEqual([[21], [5]])
    }))

  it.scoped("calls that arrive while a statement is in flight wait for it, then go as one; never two in flight", () =>
    Effect.gen(function* () {
      const r = yield* recorder(1)
      const first = yield* Effect.fork(r.batcher.run(1))
      yield* Deferred.await(r.started)
      const rest = yield* Effect.forEach([2, 3, 4, 5], (n) => Effect.fork(r.batcher.run(n)))
      yield* settle
      // nothing else was sent while the first statement was in flight
      expect(r.batches).toEqual([[1]])
      yield* Deferred.succeed(r.gate, undefined)
      expect(yield* Fiber.join(first)).toBe(2)
      expect(yield* Effect.forEach(rest, Fiber.join)).toEqual([4, 6, 8, 10])
      expect(r.batches).toEqual([[1], [2, 3, 4, 5]])
      expect(r.most()).toBe(1)
      // the queue drained: a call alone goes at once again
      const me = yield* Effect.fiberId
      expect(yield* r.batcher.run(6)).toBe(12)
      expect(r.fibers[r.fibers.length - 1]).toEqual(me)
    }))

  it.scoped("a call that arrives as a statement ends does not go ahead of the calls already waiting", () =>
    Effect.gen(function* () {
      const r = yield* recorder(1)
      const first = yield* Effect.fork(r.batcher.run(1))
      yield* Deferred.await(r.started)
      const queued = yield* Effect.forEach([2, 3], (n) => Effect.fork(r.batcher.run(n)))
      yield* settle
      // woken as the first statement ends, before the worker takes its turn
      const late = yield* Effect.fork(Effect.zipRight(Deferred.await(r.ending), r.batcher.run(4)))
      yield* settle
      yield* Deferred.succeed(r.gate, undefined)
      expect(yield* Effect.forEach([first, ...queued, late], Fiber.join)).toEqual([2, 4, 6, 8])
      expect(r.batches).toEqual([[1], [2, 3, 4]])
    }))

  it.scoped("a statement that fails, or throws as it is built, fails its own calls only, and the next call still goes", () =>
    Effect.gen(function* () {
      const r = yield* recorder(1)
      // alone
      const failed = yield* Effect.fork(r.batcher.run(-1))
      yield* Deferred.await(r.started)
      // queued behind it: a batch whose statement throws as it is built
      const queued = yield* Effect.forEach([-2, 7], (n) => Effect.fork(Effect.exit(r.batcher.run(n))))
      yield* settle
      yield* Deferred.succeed(r.gate, undefined)
      expect(Exit.isFailure(yield* Fiber.await(failed))).toBe(true)
      const exits = yield* Effect.forEach(queued, Fiber.join)
      expect(exits.map(Exit.isFailure)).toEqual([true, true])
      expect(yield* r.batcher.run(8)).toBe(16)
      // and alone
      expect(Exit.isFailure(yield* Effect.exit(r.batcher.run(-2)))).toBe(true)
      expect(yield* r.batcher.run(3)).toBe(6)
      expect(yield* Effect.forEach([9, 10], (n) => r.batcher.run(n), { concurrency: "unbounded" })).toEqual([18, 20])
      expect(r.most()).toBe(1)
    }))

  it.scoped("a caller alone that is interrupted mid-statement: the statement ends, and the calls queued behind it are sent", () =>
    Effect.gen(function* () {
      const r = yield* recorder(1)
      const first = yield* Effect.fork(r.batcher.run(1))
      yield* Deferred.await(r.started)
      const interrupting = yield* Effect.fork(Fiber.interrupt(first))
      const second = yield* Effect.fork(r.batcher.run(2))
      yield* settle
      expect(r.batches).toEqual([[1]])
      yield* Deferred.succeed(r.gate, undefined)
      yield* Fiber.join(interrupting)
      expect(yield* Fiber.join(second)).toBe(4)
      expect(r.batches).toEqual([[1], [2]])
      expect(r.most()).toBe(1)
    }))
})
