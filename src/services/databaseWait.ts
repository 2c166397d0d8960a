/**
 * How long a call waits for the database before its provider is called (`DATABASE_TIMEOUT_MS`): a database that
 * stops answering without closing its connections (a network partition, a lock held too long) would otherwise hold
 * a call as long as it lasts, and the call would then go on to its provider after its client had gone.
 *
 * The statement runs to its end in a fiber of its own, whoever waits for it: nothing cancels it half-way (a
 * cancellation needs the same database, on another connection, and leaves the first one busy). Only the wait is
 * cut short, with an `SqlError` (a call answers `500 internal_error`, retryable). Whether the statement's answer
 * reached its caller or came too late is decided in one synchronous step, where the answer arrives or where the
 * wait gives up, whichever is first: an answer that comes too late goes to `onLate` (to undo what the statement
 * did), never to the caller, and is never lost between the two.
 */
import { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"

export const waitAtMost = <A, E, R>(
  statement: Effect.Effect<A, E, R>,
  options: {
    readonly ms: number
    readonly what: string
    /** What to do with an answer that came after the caller was told the database did not answer. */
    readonly onLate?: (answer: A) => Effect.Effect<void>
  }
): Effect.Effect<A, E | SqlError, R> =>
  Effect.gen(function* () {
    // read and written only in synchronous steps (the answer's arrival, the wait's end)
    const state: { value: "waiting" | "answered" | "late" } = { value: "waiting" }
    const run = Effect.tap(statement, (answer) =>
      Effect.suspend(() => {
        if (state.value === "late") return options.onLate?.(answer) ?? Effect.void
        state.value = "answered"
        return Effect.void
      }))
    const fiber = yield* Effect.forkDaemon(run)
    // The wait is interruptible so that its timeout can end it. Made so on the caller's fiber, it would be a child of
    // it, and a child is interrupted the moment its parent is told to stop, even a parent that cannot be (a tool
    // call: `Gateway.run`): a client that hung up while its call waited here cut the call off after its statement
    // had gone. `disconnect` runs the wait on a fiber of its own, which only the timeout interrupts.
    const joined = yield* Effect.disconnect(Effect.timeoutOption(Effect.interruptible(Fiber.join(fiber)), options.ms))
    if (Option.isSome(joined)) return joined.value
    // the wait ran out: unless the answer is in already (then it is the caller's), it is now too late
    if (state.value === "answered") return yield* Fiber.join(fiber)
    state.value = "late"
    return yield* new SqlError({
      cause: new Error(`no answer within DATABASE_TIMEOUT_MS (${options.ms} ms)`),
      message: `The database did not answer ${options.what} in time`
    })
  })
