/**
 * Group commit: many callers' requests to the database, gathered into one statement. Each caller offers its
 * item and waits for its own result; one worker fiber takes whatever is waiting (up to `MAX_SIZE`) and runs it
 * as one batch. Nothing waits to form a batch: a caller alone is sent at once, as a batch of one, and the
 * items that arrive while a statement is in flight form the next batch. One statement of a kind in flight per
 * process, not more: more in flight only made each batch smaller — on the benchmark's machine, four in flight
 * instead of one cost 25% more CPU per billed call and about a quarter of the throughput (docs/performance.md).
 *
 * A batch, once taken, runs to its end uninterruptibly, so its callers always get their results; when the
 * owning scope closes, items still waiting die (the process is stopping after its calls drained).
 */
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
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

    const runBatch = (taken: ReadonlyArray<readonly [I, Deferred.Deferred<O>]>) =>
      Effect.gen(function* () {
        yield* Metric.update(batchSize, taken.length)
        const exit = yield* Effect.exit(options.execute(taken.map(([item]) => item)))
        yield* Effect.forEach(taken, ([, deferred], n) => {
          if (Exit.isFailure(exit)) return Deferred.failCause(deferred, exit.cause)
          const result = exit.value[n]
          return n < exit.value.length && result !== undefined
            ? Deferred.succeed(deferred, result)
            : Deferred.die(deferred, new Error(`a batch of ${taken.length} returned ${exit.value.length} results`))
        }, { discard: true })
      })

    const worker = Queue.takeBetween(queue, 1, MAX_SIZE).pipe(
      Effect.flatMap((taken) => Effect.uninterruptible(runBatch(Chunk.toReadonlyArray(taken)))),
      Effect.forever
    )
    yield* Effect.forkScoped(worker)

    yield* Effect.addFinalizer(() =>
      Effect.flatMap(Queue.takeAll(queue), (left) =>
        Effect.forEach(left, ([, deferred]) =>
          Deferred.failCause(deferred, Cause.die(new Error("the service closed before this call's turn"))), { discard: true })))

    const run = (item: I): Effect.Effect<O> =>
      Effect.flatMap(Deferred.make<O>(), (deferred) =>
        Effect.zipRight(Queue.offer(queue, [item, deferred]), Deferred.await(deferred)))
    return { run } satisfies Batched<I, O>
  })
