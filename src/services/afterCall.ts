/**
 * The database writes that follow a provider's answer — the settlement that charges it, freeing or keeping its
 * Idempotency-Key — are tried again on a database error: up to 5 attempts within about 0.3 s, and then the failure
 * is a defect as before. The provider has answered by then: given up at the first error, the call would be answered
 * 500 though it was served, and its key freed for a retry that reaches the provider again.
 * The waits are not a rule of time: they run on the real clock even under `TestClock`.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"

const afterCallRetry = Schedule.exponential("20 millis").pipe(Schedule.intersect(Schedule.recurs(4)))

export const retriedAfterCall = <A, E extends { readonly _tag: string }, R>(write: Effect.Effect<A, E, R>) =>
  Effect.withClock(Effect.retry(write, { schedule: afterCallRetry, while: (error) => error._tag === "SqlError" }), Clock.make())
