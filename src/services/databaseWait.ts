/**
 * How long a call waits for the database before its provider is called (`DATABASE_TIMEOUT_MS`): a database that
 * stops answering without closing its connections (a network partition, a lock held too long) would otherwise hold
 * a call as long as it lasts, and the call would then go on to its provider after its client had gone.
 *
 * The statement runs to its end in a fiber of its own, whoever waits for it: nothing cancels it half-way (a
 * cancellation needs the same database, on another connection, and leaves the first one busy). Only the wait is
 * cut short, with an `SqlError` (a call answers `500 internal_error`, retryable); what the statement does after
 * that is its caller's to undo, if anything (`onGiveUp` says when it gave up).
 */
import { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"

export const waitAtMost = <A, E, R>(
  statement: Effect.Effect<A, E, R>,
  options: { readonly ms: number; readonly what: string; readonly onGiveUp?: () => void }
): Effect.Effect<A, E | SqlError, R> =>
  Effect.flatMap(Effect.forkDaemon(statement), (fiber) => Effect.interruptible(Fiber.join(fiber))).pipe(
    Effect.timeoutFail({
      duration: options.ms,
      onTimeout: () => {
        options.onGiveUp?.()
        return new SqlError({
          cause: new Error(`no answer within DATABASE_TIMEOUT_MS (${options.ms} ms)`),
          message: `The database did not answer ${options.what} in time`
        })
      }
    })
  )
