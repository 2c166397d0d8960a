/**
 * Prices are data. A tool is priced per call, per block of results, or per block of characters; the
 * reservation covers the most the input can cost, the charge what the output delivered (never more).
 */
import * as Schema from "effect/Schema"

export const Price = Schema.Union(
  Schema.Struct({ unit: Schema.Literal("call"), credits: Schema.Int.pipe(Schema.nonNegative()) }),
  Schema.Struct({
    unit: Schema.Literal("results", "chars"),
    /** Credits per block of `per` units. */
    credits: Schema.Int.pipe(Schema.nonNegative()),
    per: Schema.Int.pipe(Schema.positive()),
    /** The least a successful call costs. */
    min: Schema.Int.pipe(Schema.nonNegative())
  })
).annotations({ identifier: "Price" })
export type Price = typeof Price.Type

const credits = (n: number) => `${n} credit${n === 1 ? "" : "s"}`

/** A price in words: "1 credit per call", "1 credit per 10 results (at least 1)". */
export const describePrice = (price: Price): string =>
  price.unit === "call"
    ? `${credits(price.credits)} per call`
    : `${credits(price.credits)} per ${price.per} ${price.unit === "results" ? "results" : "characters"} (at least ${price.min})`

const blocks = (price: Price, units: number): number =>
  price.unit === "call" ? price.credits : Math.max(price.min, Math.ceil(Math.max(0, units) / price.per) * price.credits)

/**
 * The most units any tool's input can ask for: `read`'s `max_chars` (at most 500,000); the tools priced per result
 * take far fewer.
 */
export const LARGEST_UNITS = 500_000

/** The hold placed before the provider is called. */
export const reserveFor = (price: Price, maxUnits: number): number => blocks(price, maxUnits)

/** The actual charge for what was delivered, capped by the hold. */
export const chargeFor = (price: Price, units: number, held: number): number => Math.min(held, blocks(price, units))
