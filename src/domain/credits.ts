/**
 * Amounts of credits are whole numbers from 0 to 2^53 − 1 (`Number.MAX_SAFE_INTEGER`): the largest integer
 * that a JSON number, a JavaScript number and therefore every client carries exactly. Every amount that
 * enters the gateway — the dashboard API, the CLI, the library — is checked against this range with a clear
 * message, and the database refuses to store a balance, a cap, a limit or a month's spend past it.
 *
 * A JSON body cannot smuggle a larger value in by rounding: 9007199254740993 parses as 9007199254740992,
 * which is itself out of range.
 */
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"

export const MAX_CREDITS = Number.MAX_SAFE_INTEGER

const range = (min: number) => `a whole number of credits from ${min} to ${MAX_CREDITS}`

const creditsFrom = (min: number) =>
  Schema.Int.annotations({ message: () => `must be ${range(min)}` }).pipe(
    Schema.between(min, MAX_CREDITS, { message: () => `must be ${range(min)}` })
  )

/** An amount of credits: 0 to `MAX_CREDITS`. */
export const Credits = creditsFrom(0)

/** A positive amount of credits (a grant): 1 to `MAX_CREDITS`. */
export const PositiveCredits = creditsFrom(1)

/**
 * An amount written as text (a CLI argument): digits only — no sign, no exponent, no fraction — within the
 * range. The message names the argument.
 */
export const parseCredits = (text: string, name: string, min = 0): Either.Either<number, string> => {
  const trimmed = text.trim()
  const value = /^\d{1,20}$/.test(trimmed) ? Number(trimmed) : Number.NaN
  return Number.isSafeInteger(value) && value >= min
    ? Either.right(value)
    : Either.left(`${name} must be ${range(min)} (got ${trimmed.slice(0, 40)})`)
}

/** Whether `value` is an amount of credits (for the library's own checks). */
export const isCredits = (value: number, min = 0): boolean => Number.isSafeInteger(value) && value >= min

/** The message for an amount the library was given out of range. */
export const creditsMessage = (name: string, value: number, min = 0): string =>
  `${name} must be ${range(min)} (got ${String(value)})`
