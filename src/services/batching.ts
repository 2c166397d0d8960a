/**
 * Group commit: many callers' requests to the database, gathered into one statement. Each caller waits for its
 * own result. One statement of a kind is in flight per process, not more: more in flight only made each batch
 * smaller — on the benchmark's machine, four in flight instead of one cost 25% more CPU per billed call and
 * about a quarter of the throughput (docs/performance.md).
 *
 * Nothing waits to form a batch. A caller that finds no statement of its kind in flight and nobody waiting
 * runs its item at once, as a batch of one, in its own fiber; callers that arrive while a statement is in flight
 * queue, and a worker fiber sends whatever is waiting (up to `MAX_SIZE`) as the next statement once the one in
 * flight has ended. A call alone so costs no queue, no hand-over to the worker and back, and no wake-up of the
 * worker (about 70 steps of the Effect runtime per statement, 15% of a billed call that arrives alone).
 * A caller alone runs the statement with its own context: the statements given here must not depend on it (the
 * ledger's and the idempotency store's do not, and none of their callers holds a transaction).
 *
 * A statement, once started, runs to its end uninterruptibly, so its callers always get their results; when the
 * owning scope closes, items still waiting die (the process is stopping after its calls drained).
 */
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import * as Metric from "effect/Metric"
import * as Queue from "effect/Queue"
import { ledgerBatchSize } from "./Telemetry.js"

export interface Batched<I, O> {
  /** Run `item` in the next batch; its own result. */
  readonly run: (item: I) => Effect.Effect<O>
}

/** Items per statement. */
const MAX_SIZE = 128

export const batched = <I, O>(options: {
  /** One statement for the batch: a result per item, in the items' order. */
  readonly execute: (items: ReadonlyArray<I>) => Effect.Effect<ReadonlyArray<O>>
  /** The `kind` label of the batch-size histogram. */
  readonly kind: string
}) =>
  Effect.gen(function* () {
    const queue = yield* Queue.unbounded<readonly [I, Deferred.Deferred<O>]>()
    const batchSize = Metric.tagged(ledgerBatchSize, "kind", options.kind)
    // Whether a statement of this kind is in flight (a caller's alone, or the worker's), and items queued and not
    // yet in a statement. Read and changed only in synchronous steps, so that no two statements overlap and no
    // caller goes ahead of items already waiting.
    let inFlight = false
    let waiting = 0
    // open while no statement is in flight: what the worker waits for when a caller alone is running its own
    const idle = yield* Effect.makeLatch(true)
    const release = () => {
      inFlight = false
      idle.unsafeOpen()
    }

    const missing = (size: number, got: number) => new Error(`a batch of ${size} returned ${got} results`)
    // the statement's end, whatever it is: a statement that throws as it is built is a defect like any other, and
    // the way is cleared after it all the same
    const send = (items: ReadonlyArray<I>) => Effect.exit(Effect.suspend(() => options.execute(items)))

    const runBatch = (taken: ReadonlyArray<readonly [I, Deferred.Deferred<O>]>) =>
      Effect.gen(function* () {
        yield* Metric.update(batchSize, taken.length)
        const exit = yield* send(taken.map(([item]) => item))
        release()
        yield* Effect.forEach(taken, ([, deferred], n) => {
          if (Exit.isFailure(exit)) return Deferred.failCause(deferred, exit.cause)
          const result = exit.value[n]
          return n < exit.value.length && result !== undefined
            ? Deferred.succeed(deferred, result)
            : Deferred.die(deferred, missing(taken.length, exit.value.length))
        }, { discard: true })
      })

    // the worker's turn: once no statement is in flight (a caller alone's, which cannot be interrupted)
    const turn: Effect.Effect<void> = Effect.suspend(() => {
      if (inFlight) return Effect.zipRight(idle.await, turn)
      inFlight = true
      idle.unsafeClose()
      return Effect.void
    })

    // The worker waits for a first item, then for its turn, and only then takes what else is waiting: the calls
    // that arrived while a statement was in flight go together. Once it holds an item, nothing interrupts it.
    const worker = Effect.uninterruptibleMask((restore) =>
      Effect.flatMap(restore(Queue.take(queue)), (first) =>
        Effect.zipRight(
          turn,
          Effect.flatMap(Queue.takeUpTo(queue, MAX_SIZE - 1), (rest) => {
            const taken = [first, ...Chunk.toReadonlyArray(rest)]
            waiting -= taken.length
            return runBatch(taken)
          })
        ))
    ).pipe(Effect.forever)
    yield* Effect.forkScoped(worker)

    yield* Effect.addFinalizer(() =>
      Effect.flatMap(Queue.takeAll(queue), (left) =>
        Effect.forEach(left, ([, deferred]) =>
          Deferred.failCause(deferred, Cause.die(new Error("the service closed before this call's turn"))), { discard: true })))

    // a caller alone: its statement, and the way cleared for the worker whatever the statement's end
    const alone = (item: I): Effect.Effect<O> =>
      Effect.uninterruptible(Effect.zipRight(
        Metric.update(batchSize, 1),
        Effect.flatMap(send([item]), (exit): Effect.Effect<O> => {
          release()
          if (Exit.isFailure(exit)) return Effect.failCause(exit.cause)
          const result = exit.value[0]
          return result !== undefined ? Effect.succeed(result) : Effect.die(missing(1, exit.value.length))
        })
      ))

    const run = (item: I): Effect.Effect<O> =>
      Effect.suspend(() => {
        if (!inFlight && waiting === 0) {
          inFlight = true
          idle.unsafeClose()
          return alone(item)
        }
        // queued in this same step, so that the count of items waiting is never off
        const deferred = Deferred.unsafeMake<O>(FiberId.none)
        waiting += 1
        queue.unsafeOffer([item, deferred])
        return Deferred.await(deferred)
      })
    return { run } satisfies Batched<I, O>
  })
