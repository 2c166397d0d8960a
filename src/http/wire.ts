/**
 * The wire form of each error class: the envelope, with its code as a literal so that a client (e.g.
 * `HttpApiClient`) decodes an envelope back into the right class, annotated with its HTTP status. Derived
 * from the one list of errors and the one table: `wireOf` keeps each class's type, and `wireUnion` makes the
 * union of a group's errors, typed as exactly that group.
 *
 * The envelope itself has five fields. What an error says in its answer's headers (`Retry-After`,
 * `RateLimit-Policy`, `Allow`, `Content-Range`) the typed client copies into the envelope before decoding
 * (`withHeaderFields`), so that the decoded error has them as fields: `retryAfter`, `limit`, …
 */
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { type Envelope, type EnvelopeSpec, envelopeOf, type GatewayError, type GatewayErrorTag } from "../domain/errors.js"

/** The envelope, as it travels: the one `Envelope` of the error table. */
type WireEnvelope = Envelope

/** Fields some errors carry in their answer's headers, which the typed client copies into the envelope. */
const HeaderFields = {
  retry_after: Schema.optional(Schema.Number),
  limit: Schema.optional(Schema.Number),
  window_seconds: Schema.optional(Schema.Number),
  allow: Schema.optional(Schema.String),
  size: Schema.optional(Schema.Number)
}

const envelopeStruct = (spec: EnvelopeSpec) =>
  Schema.Struct({
    error: Schema.Struct({
      type: Schema.Literal(spec.type),
      code: Schema.Literal(spec.code),
      message: Schema.String,
      retryable: Schema.Literal(spec.retryable),
      billable: Schema.Literal(spec.billable),
      ...HeaderFields
    })
  })

/** An error class of the one list (its schema, and its tag). */
export type ErrorClass = Schema.Schema.AnyNoContext & { readonly _tag: GatewayErrorTag; readonly Type: GatewayError }

/** The envelope ⇄ error class transformation of one class. */
export const wireOf = <C extends ErrorClass>(cls: C): Schema.Schema<Schema.Schema.Type<C>, WireEnvelope> => {
  const spec = envelopeOf[cls._tag]
  return Schema.transformOrFail(envelopeStruct(spec), Schema.typeSchema(cls), {
    strict: true,
    decode: ({ error }) =>
      ParseResult.decodeUnknown(cls)({
        _tag: cls._tag,
        message: error.message,
        ...(error.retry_after !== undefined ? { retryAfter: error.retry_after } : {}),
        ...(error.limit !== undefined ? { limit: error.limit } : {}),
        ...(error.window_seconds !== undefined ? { windowSeconds: error.window_seconds } : {}),
        ...(error.allow !== undefined ? { allow: error.allow } : {}),
        ...(error.size !== undefined ? { size: error.size } : {})
      }),
    // exactly the five fields of the envelope: what else an error knows goes in its headers
    encode: (error: GatewayError) =>
      ParseResult.succeed({
        error: { type: spec.type, code: spec.code, message: error.message, retryable: spec.retryable, billable: spec.billable }
      })
  }).annotations({
    ...HttpApiSchema.annotations({ status: spec.status }),
    identifier: `${cls._tag}Error`,
    description: `${spec.code} (${spec.type}): retryable ${spec.retryable}, billable ${spec.billable}`
  })
}

/** The union of some errors' wire forms, typed as exactly those errors. */
export const wireUnion = <const L extends readonly [ErrorClass, ...ReadonlyArray<ErrorClass>]>(
  ...classes: L
): Schema.Schema<Schema.Schema.Type<L[number]>, WireEnvelope> => {
  const [first, ...rest] = classes
  const [second, ...more] = rest
  return second === undefined ? wireOf(first) : Schema.Union(wireOf(first), wireOf(second), ...more.map((c) => wireOf(c)))
}
