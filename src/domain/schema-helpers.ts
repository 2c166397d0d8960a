/**
 * Small schema building blocks shared by the tool inputs and the connection credentials, and what the gateway reads
 * of a schema's shape (`encodesAsIs`).
 */
import * as Schema from "effect/Schema"
import * as SchemaAST from "effect/SchemaAST"

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

/**
 * A string PostgreSQL can store: its `text` refuses U+0000, so a value bound for a text column (a name, an id, a
 * filter) that holds one is the caller's malformed input, refused by the decode rather than by the database.
 */
const withoutNul = <I, R>(self: Schema.Schema<string, I, R>) =>
  self.pipe(Schema.filter((s) => !s.includes("\u0000"), {
    message: () => "must not contain U+0000 (NUL)",
    jsonSchema: { pattern: "^[^\\u0000]*$" }
  }))
export const Text = Schema.String.pipe(withoutNul)

/** A non-empty `Text`. */
export const NonEmptyText = NonEmpty.pipe(withoutNul)

/**
 * `.` or `..`, as the whole text or as a part of it between slashes or backslashes: a URL parser resolves the whole
 * one as a step of the path (`encodeURIComponent` leaves dots as they are), and a server that decodes `%2F` and `%5C`
 * before routing resolves a part.
 */
const DOT_SEGMENT = /(?:^|[/\\])\.\.?(?:[/\\]|$)/

/**
 * One segment of a provider's path taken from the caller's input (an id, a type): never one that names another
 * path. The same rule in JSON Schema, as a pattern that looks ahead for such a part.
 */
export const PathSegment = NonEmpty.pipe(
  Schema.filter((s) => !DOT_SEGMENT.test(s), {
    message: () => "must not be \".\" or \"..\" (nor have such a part between slashes): it would name another path",
    jsonSchema: { pattern: "^(?![\\s\\S]*(?:^|[/\\\\])\\.\\.?(?:[/\\\\]|(?![\\s\\S])))" }
  })
)

/** An http(s) scheme, as JSON Schema writes a pattern (ECMA-262, no flags): the scheme's letters in either case. */
const HTTP_URL_PATTERN = "^[Hh][Tt][Tt][Pp][Ss]?://"
const httpUrlPattern = new RegExp(HTTP_URL_PATTERN)

export const HttpUrl = Schema.String.pipe(
  Schema.filter((s) => {
    // the published pattern is the scheme's check, so that a document-valid URL is one the gateway takes (a URL that
    // starts with it parses with the protocol http: or https:); the rest is WHATWG's URL parser's
    return httpUrlPattern.test(s) && URL.canParse(s)
  }, {
    message: () => "must be an absolute http:// or https:// URL",
    jsonSchema: { format: "uri", pattern: HTTP_URL_PATTERN },
    // for property tests: draw web URLs rather than strings that almost never are one
    arbitrary: () => (fc) => fc.webUrl()
  })
)

/** A URL paths are appended to: an http(s) URL without a query or fragment (either would swallow the path). */
export const BaseUrl = HttpUrl.pipe(
  Schema.filter((s) => !s.includes("?") && !s.includes("#"), {
    message: () => "must have no query (?) or fragment (#): the call's path is appended to it"
  })
)

export const JsonObject = Schema.Record({ key: Schema.String, value: Schema.Unknown }).annotations(refusedAs("a JSON object"))

/**
 * What a refusal of a described field says it expected. Effect's message for a value of the wrong type names the
 * failing schema by its description when it has one ("numResults: Expected Results to return (Exa's numResults);
 * default 10…, actual 1.5"): a field whose own schema carries the description says this instead
 * (`numResults: must be a whole number`). A problem inside the value (an array's item) is still said as its own.
 */
export function refusedAs(expected: string) {
  return { message: () => `must be ${expected}` }
}

/**
 * What a refusal of a choice among literals says: `must be ok or error`, `must be one of a, b or c`. Effect says a
 * union's failure member by member ("Expected \"ok\", actual \"x\" (and 1 more)") unless its message overrides
 * theirs — which a union of literals can take: there is nothing inside a literal to say more precisely.
 */
export function refusedAsOneOf(values: ReadonlyArray<string>) {
  const last = values.at(-1) ?? ""
  const said = values.length <= 2 ? values.join(" or ") : `one of ${values.slice(0, -1).join(", ")} or ${last}`
  return { message: () => ({ message: `must be ${said}`, override: true }) }
}

/** An optional field: absent, or present with a value of the schema (never `null` or `undefined`). */
export const opt = <S extends Schema.Schema.All>(schema: S) => Schema.optionalWith(schema, { exact: true })

export const intBetween = (min: number, max: number) =>
  Schema.Int.pipe(Schema.between(min, max, { message: () => `must be an integer from ${min} to ${max}` }))

export const numberBetween = (min: number, max: number) =>
  Schema.Number.pipe(Schema.between(min, max, { message: () => `must be a number from ${min} to ${max}` }))

/**
 * Whether encoding a value of this schema's type gives that value back, with only the properties its structs name:
 * nothing in it transforms (no `Schema.transform`, class, declaration such as `Schema.DateFromSelf`, default or
 * renamed key), nothing refines (no filter such as `Schema.Int`, nor a record's key pattern), no union has two object
 * members (whose encode keeps the first that matches), and no part carries parse options of its own. A tool's answer
 * is built by the gateway's own typed code from an upstream answer already decoded; for such an output schema the
 * answer is written as it is, without walking it again (see Gateway), and test/providers.test.ts checks, for every
 * tool, that the answer is byte for byte what the encode would have written. Conservative: a schema nested deeper than
 * 64 levels (a recursive one whose thunk makes a new schema each time) does not qualify.
 */
export const encodesAsIs = (schema: Schema.Schema.Any): boolean => asIs(schema.ast, new Set(), 0)

const structural = (ast: SchemaAST.AST) => ast._tag === "TypeLiteral" || ast._tag === "TupleType" || ast._tag === "Suspend"

const asIs = (ast: SchemaAST.AST, seen: Set<SchemaAST.AST>, depth: number): boolean => {
  if (seen.has(ast)) return true
  seen.add(ast)
  if (depth > 64 || ast.annotations[SchemaAST.ParseOptionsAnnotationId] !== undefined) return false
  const inner = (child: SchemaAST.AST) => asIs(child, seen, depth + 1)
  switch (ast._tag) {
    case "Transformation":
    case "Declaration":
    case "Refinement":
      return false
    case "Suspend":
      return inner(ast.f())
    case "Union":
      return ast.types.filter(structural).length <= 1 && ast.types.every(inner)
    case "TupleType":
      return ast.elements.every((element) => inner(element.type)) && ast.rest.every((rest) => inner(rest.type))
    case "TypeLiteral":
      return ast.propertySignatures.every((property) => inner(property.type)) &&
        ast.indexSignatures.every((index) => index.parameter._tag === "StringKeyword" && inner(index.type))
    default:
      return true
  }
}
