/**
 * JSON Schema of a tool's input or output, from the same Effect `Schema` the gateway validates with:
 * self-contained (named parts under `$defs`), 2019-09 semantics (keywords beside a `$ref` keep their
 * meaning), without what Effect writes for itself rather than for a reader: the `$id`s it puts on `unknown`
 * (repeated, they make a document invalid), the titles and descriptions it generates for its own schemas and
 * filters (`"title": "between(1, 100)"`, `"description": "an integer"`), and named parts that say nothing but
 * a type (`Int`). The descriptions written in `src/domain/` stay.
 */
import * as JSONSchema from "effect/JSONSchema"
import type * as SchemaAST from "effect/SchemaAST"
import { isArray } from "../domain/json.js"

type Json = Record<string, unknown>

const isObject = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)

/** Effect's titles: the name of a keyword or of a filter, with its arguments (`int`, `unknown`, `maxLength(100)`). */
const GENERATED_TITLE = /^[a-z][A-Za-z]*(?:\(.*\))?$/

/** Effect's descriptions of its own schemas and filters (effect/Schema), which restate the keywords beside them. */
const GENERATED_DESCRIPTION = new RegExp(
  "^(?:" +
    [
      "an integer",
      "a (?:finite |positive |negative |non-negative |non-positive )?number",
      "a number (?:between .+ and .+|excluding NaN|divisible by .+|greater than .+|less than .+)",
      "a string (?:at (?:least|most) .+ long|matching the pattern .+|starting with .+|ending with .+|including .+|with no leading or trailing whitespace|that will be .+)",
      "a (?:non empty|lowercase|uppercase|capitalized|uncapitalized) string",
      "an array of (?:at least|at most|exactly) .+ item\\(s\\)",
      "an? .+ to be decoded into .+",
      "a valid Date(?: instance)?",
      "a template literal"
    ].join("|") +
    ")$"
)

/** Keywords whose values are data (an example, a default, allowed values), never schemas: left as they are. */
const DATA_KEYWORDS: ReadonlySet<string> = new Set(["example", "examples", "default", "enum", "const"])

const generated = (key: string, value: unknown): boolean =>
  (key === "$id" && typeof value === "string" && value.startsWith("/schemas/")) ||
  (key === "title" && typeof value === "string" && GENERATED_TITLE.test(value)) ||
  (key === "description" && typeof value === "string" && GENERATED_DESCRIPTION.test(value))

/** Drops what Effect generated (see above) from a JSON Schema, or from an OpenAPI document's schemas and parameters. */
export const dropGenerated = (u: unknown): unknown => {
  if (isArray(u)) return u.map(dropGenerated)
  if (!isObject(u)) return u
  const out: Json = {}
  for (const [k, v] of Object.entries(u)) {
    if (generated(k, v)) continue
    out[k] = DATA_KEYWORDS.has(k) ? v : dropGenerated(v)
  }
  return out
}

/** Replaces every `$ref` to `prefix + name` by the referenced schema's keywords (the ref's own stay beside them). */
const replaceRefs = (u: unknown, prefix: string, inline: ReadonlyMap<string, Json>): unknown => {
  if (isArray(u)) return u.map((v) => replaceRefs(v, prefix, inline))
  if (!isObject(u)) return u
  const out: Json = {}
  const ref = u["$ref"]
  const target = typeof ref === "string" && ref.startsWith(prefix) ? inline.get(ref.slice(prefix.length)) : undefined
  if (target !== undefined) Object.assign(out, target)
  for (const [k, v] of Object.entries(u)) {
    if (k === "$ref" && target !== undefined) continue
    out[k] = DATA_KEYWORDS.has(k) ? v : replaceRefs(v, prefix, inline)
  }
  return out
}

/**
 * Named schemas that say nothing but a type (`Int` is `{"type": "integer"}` once Effect's title and
 * description are gone) are written where they are used instead: the name is the schema library's, not the API's.
 */
export const inlineTypeOnly = (root: Json, defs: Json, prefix: string): { readonly root: Json; readonly defs: Json } => {
  const inline = new Map<string, Json>()
  for (const [name, schema] of Object.entries(defs)) {
    if (isObject(schema) && Object.keys(schema).length === 1 && typeof schema["type"] === "string") inline.set(name, schema)
  }
  if (inline.size === 0) return { root, defs }
  const kept: Json = {}
  for (const [name, schema] of Object.entries(defs)) if (!inline.has(name)) kept[name] = schema
  const replacedRoot = replaceRefs(root, prefix, inline)
  const replacedDefs = replaceRefs(kept, prefix, inline)
  return { root: isObject(replacedRoot) ? replacedRoot : root, defs: isObject(replacedDefs) ? replacedDefs : kept }
}

export const jsonSchemaOf = (ast: SchemaAST.AST): Json => {
  const definitions: Record<string, JSONSchema.JsonSchema7> = {}
  const schema = dropGenerated(JSONSchema.fromAST(ast, { definitions, topLevelReferenceStrategy: "skip", target: "jsonSchema2019-09" }))
  const defs = dropGenerated(definitions)
  const { root, defs: kept } = inlineTypeOnly(isObject(schema) ? schema : {}, isObject(defs) ? defs : {}, "#/$defs/")
  return Object.keys(kept).length > 0 ? { ...root, $defs: kept } : root
}

/** Keywords that combine schemas: model APIs refuse a tool's input schema with one of these at its top. */
const COMBINATORS = ["allOf", "anyOf", "oneOf"] as const

/** The object schemas a top-level choice offers, with a `$ref` to the document's own `$defs` read in place. */
const choices = (schema: Json, combinator: "anyOf" | "oneOf"): ReadonlyArray<Json> | undefined => {
  const members = schema[combinator]
  if (!isArray(members)) return undefined
  const defs = isObject(schema["$defs"]) ? schema["$defs"] : {}
  const resolved = members.map((m): unknown => {
    const ref = isObject(m) ? m["$ref"] : undefined
    return typeof ref === "string" && ref.startsWith("#/$defs/") ? defs[ref.slice("#/$defs/".length)] : m
  })
  return resolved.every(isObject) ? resolved.filter(isObject) : undefined
}

/**
 * One object schema for a choice of object shapes: every field of any of them (a field two of them type
 * differently, as either), required only what all of them require, and more fields allowed if any allows them.
 */
const merged = (shapes: ReadonlyArray<Json>): Json => {
  const properties: Json = {}
  for (const shape of shapes) {
    for (const [name, field] of Object.entries(isObject(shape["properties"]) ? shape["properties"] : {})) {
      const seen = properties[name]
      properties[name] = seen === undefined || JSON.stringify(seen) === JSON.stringify(field) ? field : { anyOf: [seen, field] }
    }
  }
  const requiredOf = (shape: Json): ReadonlyArray<unknown> => (isArray(shape["required"]) ? shape["required"] : [])
  const required = requiredOf(shapes[0] ?? {}).filter((name) => shapes.every((shape) => requiredOf(shape).includes(name)))
  const closed = shapes.every((shape) => shape["additionalProperties"] === false)
  return { properties, required, ...(closed ? { additionalProperties: false } : {}) }
}

/**
 * A tool's input or output as the catalog and MCP's tool listing publish it: `type: object` at the top (MCP requires
 * it), and no `allOf`, `anyOf` or `oneOf` there — the model APIs agents hand these schemas to (Anthropic's, OpenAI's)
 * refuse a tool whose input schema has one at its top. A rule between fields (weather's `q`, or `lat` and `lon`) is
 * dropped from the schema, said in the fields' descriptions, and checked by the gateway; a choice of shapes
 * (`lambda_batch_emails`' batch, or one email) is one object with every field of either and required what both
 * require. The OpenAPI document keeps the exact schema.
 */
export const objectSchemaOf = (ast: SchemaAST.AST): Json & { readonly type: "object" } => {
  const schema = jsonSchemaOf(ast)
  const shapes = choices(schema, "anyOf") ?? choices(schema, "oneOf")
  const top: Json = shapes === undefined ? { ...schema } : { ...schema, ...merged(shapes) }
  for (const combinator of COMBINATORS) delete top[combinator]
  return { ...top, type: "object" }
}
