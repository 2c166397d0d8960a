/**
 * Group commit: many callers' requests to the database, gathered into one statement. Each caller waits for its
 * own result. One statement of a kind is in flight per process, not more: more in flight only made each batch
 * smaller — on the benchmark's machine, four in flight instead of one cost 25% more CPU per billed call and
 * about a quarter of the throughput (docs/performance.md).
 *
 * The one statement in flight is a `Semaphore` of one permit. Nothing waits to form a batch: a caller that
 * finds the permit free and nobody waiting takes it and sends its item at once, as a batch of one, in its own
 * fiber; callers that arrive while a statement is in flight queue, and a worker fiber, once it holds the permit,
 * sends whatever is waiting (up to `MAX_SIZE`) as the next statement. A call alone so costs no queue, no
 * hand-over to the worker and back, and no wake-up of the worker (a billed call that arrives alone: about 930
 * steps of the Effect runtime before, about 845 with it; docs/performance.md).
 * A caller alone runs the statement with its own context: the statements given here must not depend on it (the
 * ledger's and the idempotency store's do not, and none of their callers holds a transaction).
 *
 * A statement, once started, runs to its end uninterruptibly, so its callers always get their results; when the
 * owning scope closes, items still waiting die (the process is stopping after its calls drained). A statement
 * whose `execute` stops waiting for the database (the reservation's, `databaseWait.ts`) ends its turn then: the
 * next is sent while the database still holds the first.
 */
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
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
    // each item with how to resume its caller (`Effect.async`'s callback: a `Deferred` per call cost more, its
    // making copies the properties of an Effect into each one; docs/performance.md, seventeenth round)
    const queue = yield* Queue.unbounded<readonly [I, (exit: Exit.Exit<O>) => void]>()
    const batchSize = Metric.tagged(ledgerBatchSize, "kind", options.kind)
    // the one statement of this kind in flight, whoever sends it: a caller alone, or the worker
    const statement = yield* Effect.makeSemaphore(1)
    // items queued and not yet in a statement: while any wait, a caller does not go ahead of them (read and changed
    // only in synchronous steps)
    let waiting = 0

    // the statement's end, whatever it is: a statement that throws as it is built is a defect like any other
    const send = (items: ReadonlyArray<I>) => Effect.exit(Effect.suspend(() => options.execute(items)))
    // what the statement answered the `n`th of its `size` items
    const answer = (exit: Exit.Exit<ReadonlyArray<O>>, n: number, size: number): Exit.Exit<O> => {
      if (Exit.isFailure(exit)) return Exit.failCause(exit.cause)
      const result = exit.value[n]
      return n < exit.value.length && result !== undefined
        ? Exit.succeed(result)
        : Exit.die(new Error(`a batch of ${size} returned ${exit.value.length} results`))
    }

    // The worker waits for a first item, then for its turn, and only then takes what else is waiting: the calls
    // that arrived while a statement was in flight go together. Once it holds an item, nothing interrupts it.
    const worker = Effect.uninterruptibleMask((restore) =>
      Effect.flatMap(restore(Queue.take(queue)), (first) =>
        Effect.zipRight(
          statement.take(1),
          Effect.flatMap(Queue.takeUpTo(queue, MAX_SIZE - 1), (rest) => {
            const taken = [first, ...Chunk.toReadonlyArray(rest)]
            waiting -= taken.length
            return Effect.gen(function* () {
              yield* Metric.update(batchSize, taken.length)
              const exit = yield* send(taken.map(([item]) => item))
              yield* statement.release(1)
              taken.forEach(([, resume], n) => resume(answer(exit, n, taken.length)))
            })
          })
        ))
    ).pipe(Effect.forever)
    yield* Effect.forkScoped(worker)

    yield* Effect.addFinalizer(() =>
      Effect.flatMap(Queue.takeAll(queue), (left) =>
        Effect.sync(() => {
          const closed = Exit.failCause(Cause.die(new Error("the service closed before this call's turn")))
          for (const [, resume] of left) resume(closed)
        })))

    // queued in the step that registers the caller, so that the count of items waiting is never off; a caller
    // interrupted while it waits leaves its item to run, and its result is dropped
    const queued = (item: I): Effect.Effect<O> =>
      Effect.async<O>((resume) => {
        waiting += 1
        queue.unsafeOffer([item, resume])
      })

    // a caller alone sends its own statement, uninterruptibly, if none is in flight; otherwise it queues (what does
    // not depend on the item is built once, not per call)
    const ifFree = statement.withPermitsIfAvailable(1)
    const countOne = Metric.update(batchSize, 1)
    const alone = (item: I) => ifFree(Effect.uninterruptible(Effect.zipRight(countOne, send([item]))))

    const run = (item: I): Effect.Effect<O> =>
      Effect.suspend(() =>
        waiting === 0
          ? Effect.flatMap(alone(item), (sent) => (Option.isSome(sent) ? answer(sent.value, 0, 1) : queued(item)))
          : queued(item)
      )
    return { run } satisfies Batched<I, O>
  })
