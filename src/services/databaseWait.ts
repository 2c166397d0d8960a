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
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
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
    // Decided once, by whichever comes first: the statement's exit, or none when the wait runs out. The caller only
    // awaits the decision: no fiber of its own is forked for the wait, and none made interruptible. (An interruptible
    // wait forked from the caller is its child, and a child is sent an interrupt the moment its parent is, even a
    // parent that cannot be interrupted — a tool call, `Gateway.run`: a client that hung up while its call waited here
    // cut the call off after its statement had gone.) The timer is a daemon, interrupted once the decision is in.
    const decided = yield* Deferred.make<Option.Option<Exit.Exit<A, E>>>()
    const observer = (exit: Exit.Exit<A, E>) => Deferred.unsafeDone(decided, Exit.succeed(Option.some(exit)))
    fiber.addObserver(observer)
    const timer = yield* Effect.forkDaemon(Effect.zipRight(
      Effect.interruptible(Effect.sleep(Duration.millis(options.ms))),
      Effect.sync(() => {
        // the answer is in already: it is the caller's, its exit on its way to the observer
        if (state.value === "answered") return
        state.value = "late"
        fiber.removeObserver(observer)
        Deferred.unsafeDone(decided, Exit.succeed(Option.none()))
      })
    ))
    const joined = yield* Effect.ensuring(Deferred.await(decided), Fiber.interruptFork(timer))
    if (Option.isSome(joined)) return yield* joined.value
    return yield* new SqlError({
      cause: new Error(`no answer within DATABASE_TIMEOUT_MS (${options.ms} ms)`),
      message: `The database did not answer ${options.what} in time`
    })
  })
