/**
 * `GET /v1/tools`: every tool with its input schema (JSON Schema), output schema, price, whether it needs a
 * connection, whether it is beta, and whether it is configured on this gateway.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { catalog, toolNames } from "../domain/tools.js"
import { ProviderRegistry } from "../services/ProviderRegistry.js"
import { Pricing } from "../services/Pricing.js"
import { Api } from "./Api.js"
import { objectSchemaOf } from "./jsonSchema.js"

export const CatalogLive = HttpApiBuilder.group(Api, "catalog", (handlers) =>
  Effect.gen(function* () {
    const providers = yield* ProviderRegistry
    const pricing = yield* Pricing
    // The list only changes with the configuration: built once.
    const data = toolNames.map((name) => {
      const def = catalog[name]
      const price = pricing.priceOf(name)
      return {
        name,
        summary: def.summary,
        description: def.description,
        provider: def.provider,
        account: def.account,
        beta: def.beta,
        effect: def.effect,
        configured: providers.configured(name),
        price,
        input_schema: objectSchemaOf(def.input.ast),
        output_schema: objectSchemaOf(def.output.ast)
      }
    })
    return handlers.handle("list", () => Effect.succeed({ data }))
  }))
