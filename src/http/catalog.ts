/**
 * `GET /v1/tools`: every tool with its input schema (JSON Schema), output schema, price, whether it needs a
 * connection, whether it is beta, and whether it is configured on this gateway.
 */
import { HttpApiBuilder } from "@effect/platform"
import { Effect, JSONSchema, type SchemaAST } from "effect"
import { catalog, toolNames } from "../domain/tools.js"
import { isConfigured } from "../providers/index.js"
import { GatewayConfig } from "../services/GatewayConfig.js"
import { Pricing } from "../services/Pricing.js"
import { Api } from "./Api.js"

/** A self-contained JSON Schema: the schema inline ("dereferenced"), its named parts under `$defs`. */
const jsonSchemaOf = (ast: SchemaAST.AST) => {
  const definitions: Record<string, JSONSchema.JsonSchema7> = {}
  // 2019-09: keywords beside a `$ref` (a field's range, say) keep their meaning.
  const schema = JSONSchema.fromAST(ast, { definitions, topLevelReferenceStrategy: "skip", target: "jsonSchema2019-09" })
  return Object.keys(definitions).length > 0 ? { ...schema, $defs: definitions } : schema
}

export const CatalogLive = HttpApiBuilder.group(Api, "catalog", (handlers) =>
  Effect.gen(function* () {
    const config = yield* GatewayConfig
    const pricing = yield* Pricing
    // The list only changes with the configuration: built once.
    const data = toolNames.map((name) => {
      const def = catalog[name]
      const price = pricing.priceOf(name)
      return {
        name,
        summary: def.summary,
        provider: def.provider,
        account: def.account,
        beta: def.beta,
        effect: def.effect,
        configured: isConfigured(name, config),
        price,
        input_schema: jsonSchemaOf(def.input.ast),
        output_schema: jsonSchemaOf(def.output.ast)
      }
    })
    return handlers.handle("list", () => Effect.succeed({ data }))
  }))
