/**
 * JSON Schema of a tool's input or output, from the same Effect `Schema` the gateway validates with:
 * self-contained (named parts under `$defs`), 2019-09 semantics (keywords beside a `$ref` keep their
 * meaning), without the `$id`s Effect puts on `unknown` (repeated, they make a document invalid).
 */
import { JSONSchema, type SchemaAST } from "effect"

type Json = Record<string, unknown>

const isObject = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)

export const dropSchemaIds = (u: unknown): unknown => {
  if (Array.isArray(u)) return u.map(dropSchemaIds)
  if (!isObject(u)) return u
  const out: Json = {}
  for (const [k, v] of Object.entries(u)) {
    if (k === "$id" && typeof v === "string" && v.startsWith("/schemas/")) continue
    out[k] = dropSchemaIds(v)
  }
  return out
}

export const jsonSchemaOf = (ast: SchemaAST.AST): Json => {
  const definitions: Record<string, JSONSchema.JsonSchema7> = {}
  const schema = JSONSchema.fromAST(ast, { definitions, topLevelReferenceStrategy: "skip", target: "jsonSchema2019-09" })
  const whole = Object.keys(definitions).length > 0 ? { ...schema, $defs: definitions } : schema
  const cleaned = dropSchemaIds(whole)
  return isObject(cleaned) ? cleaned : {}
}
