/**
 * What is made once, when first asked for (a module loaded, a page built, files read, a thread pool started):
 * its first success is kept and answered from then on; a failure or an interruption is not kept — the next
 * caller makes it again. `Effect.cached` keeps whatever its first run ended with, an interruption included: a
 * client that hung up during the first `/docs`, `/dashboard` or `/metrics` request would break the route until
 * a restart. The making, and a caller's wait for it, are uninterruptible: a caller interrupted meanwhile ends
 * once the value is made and kept, and the callers that waited share that one run.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"

export const cachedSuccess = <A, E, R>(make: Effect.Effect<A, E, R>): Effect.Effect<Effect.Effect<A, E>, never, R> =>
  Effect.map(
    // what is kept is how the making ended, never a caller's own interruption while it waited
    Effect.cachedInvalidateWithTTL(Effect.exit(make), Duration.infinity),
    ([cached, invalidate]) =>
      Effect.flatMap(Effect.uninterruptible(cached), (exit) => (Exit.isSuccess(exit) ? exit : Effect.zipRight(invalidate, exit)))
  )
