/**
 * The price of each tool: the catalog's, or the operator's from `PRICES_FILE` (a JSON object of tool name
 * to price, e.g. `{"search": {"unit": "results", "credits": 2, "per": 10, "min": 1}, "weather": {"unit":
 * "call", "credits": 0}}`). The file is validated at start-up: an unknown tool or a malformed price stops it.
 */
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Fs from "node:fs/promises"
import { formatPath } from "../domain/parse.js"
import { LARGEST_UNITS, Price, reserveFor } from "../domain/pricing.js"
import { isToolName, type ToolName, tools } from "../domain/tools.js"
import { LedgerConfig } from "../config.js"
import * as ParseResult from "effect/ParseResult"

export class PricingError extends Data.TaggedError("PricingError")<{ readonly message: string }> {}

export class Pricing extends Context.Tag("Pricing")<Pricing, {
  readonly priceOf: (tool: ToolName) => Price
}>() {}

const PriceFile = Schema.parseJson(Schema.Record({ key: Schema.String, value: Price }))

export const make = Effect.gen(function* () {
  const config = yield* LedgerConfig
  const overrides = new Map<ToolName, Price>()
  if (Option.isSome(config.pricesFile)) {
    const file = config.pricesFile.value
    const text = yield* Effect.tryPromise({
      try: () => Fs.readFile(file, "utf8"),
      catch: () => new PricingError({ message: `cannot read PRICES_FILE ${file}` })
    })
    const prices = yield* Schema.decodeUnknown(PriceFile)(text).pipe(
      Effect.mapError((error) => {
        const first = ParseResult.ArrayFormatter.formatErrorSync(error)[0]
        return new PricingError({
          message: `PRICES_FILE ${file}: ${first === undefined ? "invalid" : `${formatPath(first.path)} ${first.message}`}`
        })
      })
    )
    for (const [name, price] of Object.entries(prices)) {
      if (!isToolName(name)) return yield* new PricingError({ message: `PRICES_FILE ${file}: ${name} is not a tool` })
      // a tool can be priced per call, or in the unit it measures (results, characters), not in another
      const own = tools[name].price.unit
      if (price.unit !== "call" && price.unit !== own) {
        return yield* new PricingError({
          message: `PRICES_FILE ${file}: ${name} cannot be priced per ${price.unit}; use "call"${own === "call" ? "" : ` or "${own}"`}`
        })
      }
      // the most the tool can ever reserve must be a number the ledger carries exactly (a read at such a price was a
      // 500, and the other calls of its batch with it)
      const largest = reserveFor(price, price.unit === "call" ? 1 : LARGEST_UNITS)
      if (!Number.isSafeInteger(largest)) {
        return yield* new PricingError({
          message: `PRICES_FILE ${file}: ${name} would reserve up to ${largest} credits a call, past ${Number.MAX_SAFE_INTEGER}`
        })
      }
      overrides.set(name, price)
    }
  }
  return Pricing.of({ priceOf: (tool) => overrides.get(tool) ?? tools[tool].price })
})

export const PricingLive = Layer.effect(Pricing, make)
