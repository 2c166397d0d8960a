/**
 * Time, always from Effect's `Clock` (so `TestClock` drives every rule that depends on it).
 */
import * as Clock from "effect/Clock"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"

export const nowMillis: Effect.Effect<number> = Clock.currentTimeMillis

/** A JavaScript Date for a Clock reading (what the database driver takes as a timestamptz). */
export const toDate = (millis: number): Date => DateTime.toDateUtc(DateTime.unsafeMake(millis))

/** The UTC calendar month of a Clock reading, as yyyymm (the unit of spend caps). */
export const monthOf = (millis: number): number => {
  const d = DateTime.unsafeMake(millis)
  const parts = DateTime.toPartsUtc(d)
  return parts.year * 100 + parts.month
}

/** Milliseconds until the next UTC month begins. */
export const millisToNextMonth = (millis: number): number => {
  const parts = DateTime.toPartsUtc(DateTime.unsafeMake(millis))
  const next = DateTime.unsafeMake({ year: parts.year, month: parts.month + 1, day: 1 })
  return DateTime.toEpochMillis(next) - millis
}

/** A monotonic-precision Clock reading in milliseconds (fractional), for measuring durations. */
export const preciseMillis: Effect.Effect<number> = Effect.clockWith((clock) =>
  Effect.sync(() => Number(clock.unsafeCurrentTimeNanos()) / 1e6))
