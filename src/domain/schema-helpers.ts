/**
 * Small schema building blocks shared by the tool inputs and the connection credentials.
 */
import * as Schema from "effect/Schema"
import type * as SchemaAST from "effect/SchemaAST"

/** A struct that refuses properties it does not name. */
export const strict = <F extends Schema.Struct.Fields>(fields: F, identifier: string, description: string) =>
  Schema.Struct(fields).annotations({
    identifier,
    description,
    parseOptions: { onExcessProperty: "error" }
  })

/** A struct that keeps (and forwards) properties it does not name. */
export const open = <F extends Schema.Struct.Fields>(fields: F, identifier: string, description: string) =>
  Schema.Struct(fields, Schema.Record({ key: Schema.String, value: Schema.Unknown })).annotations({
    identifier,
    description
  })

export const NonEmpty = Schema.String.pipe(
  Schema.filter((s) => s.trim().length > 0, {
    message: () => "must not be empty",
    // the same check in JSON Schema (`\S` is what `trim` keeps), so that the schema and its description are published
    jsonSchema: { pattern: "\\S" }
  })
)

export const HttpUrl = Schema.String.pipe(
  Schema.filter((s) => {
    if (!URL.canParse(s)) return false
    const protocol = new URL(s).protocol
    return protocol === "http:" || protocol === "https:"
  }, {
    message: () => "must be an absolute http:// or https:// URL",
    jsonSchema: { format: "uri" },
    // for property tests: draw web URLs rather than strings that almost never are one
    arbitrary: () => (fc) => fc.webUrl()
  })
)

export const JsonObject = Schema.Record({ key: Schema.String, value: Schema.Unknown })

/** An optional field: absent, or present with a value of the schema (never `null` or `undefined`). */
export const opt = <S extends Schema.Schema.All>(schema: S) => Schema.optionalWith(schema, { exact: true })

export const intBetween = (min: number, max: number) =>
  Schema.Int.pipe(Schema.between(min, max, { message: () => `must be an integer from ${min} to ${max}` }))

export const numberBetween = (min: number, max: number) =>
  Schema.Number.pipe(Schema.between(min, max, { message: () => `must be a number from ${min} to ${max}` }))


/**
 * Whether encoding a value of this schema can do no more than drop the properties its structs do not name: nothing
 * in it transforms (no `Schema.transform`, no class, no declaration such as `Schema.DateFromSelf`, no property with a
 * default or a rename) and nothing refines (no filter such as `Schema.Int`, whose check of a value the gateway
 * computed is kept). A tool's answer is built by the gateway's own typed code from an upstream answer already
 * decoded; for such an output schema the answer is written as it is, without walking it again (see Gateway), and
 * test/providers.test.ts checks, for every tool, that the answer is exactly its own encoding.
 */
export const isPlainJson = (schema: Schema.Schema.Any): boolean => plain(schema.ast, new Set())

const plain = (ast: SchemaAST.AST, seen: Set<SchemaAST.AST>): boolean => {
  if (seen.has(ast)) return true
  seen.add(ast)
  switch (ast._tag) {
    case "Transformation":
    case "Declaration":
    case "Refinement":
      return false
    case "Suspend":
      return plain(ast.f(), seen)
    case "Union":
      return ast.types.every((type) => plain(type, seen))
    case "TupleType":
      return ast.elements.every((element) => plain(element.type, seen)) && ast.rest.every((rest) => plain(rest.type, seen))
    case "TypeLiteral":
      return ast.propertySignatures.every((property) => plain(property.type, seen)) &&
        ast.indexSignatures.every((index) => plain(index.type, seen))
    default:
      return true
  }
}
