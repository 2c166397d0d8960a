/**
 * The wire form of each error class: the envelope, with its code as a literal so that a client (e.g.
 * `HttpApiClient`) decodes an envelope back into the right class, annotated with its HTTP status.
 */
import { HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"
import * as E from "../domain/errors.js"
import { type EnvelopeSpec, envelopeOf, type GatewayError } from "../domain/errors.js"

const envelopeStruct = (spec: EnvelopeSpec) =>
  Schema.Struct({
    error: Schema.Struct({
      type: Schema.Literal(spec.type),
      code: Schema.Literal(spec.code),
      message: Schema.String,
      retryable: Schema.Literal(spec.retryable),
      billable: Schema.Literal(spec.billable)
    })
  })

/** The envelope ⇄ error class transformation of one class. */
export const wireOf = <A extends GatewayError, I>(
  cls: Schema.Schema<A, I> & {
    readonly _tag: A["_tag"]
    readonly make: (props: { readonly message: string }) => A
  }
) => {
  const spec = envelopeOf[cls._tag]
  return Schema.transform(envelopeStruct(spec), Schema.typeSchema(cls), {
    strict: false,
    decode: (wire) => cls.make({ message: wire.error.message }),
    encode: (error: GatewayError) => ({
      error: {
        type: spec.type,
        code: spec.code,
        message: error.message,
        retryable: spec.retryable,
        billable: spec.billable
      }
    })
  }).annotations({
    ...HttpApiSchema.annotations({ status: spec.status }),
    identifier: `${cls._tag}Error`,
    description: `${spec.code} (${spec.type}): retryable ${spec.retryable}, billable ${spec.billable}`
  })
}

export const wireErrors = [
  wireOf(E.InvalidRequest),
  wireOf(E.MalformedJson),
  wireOf(E.UnsupportedMediaType),
  wireOf(E.InvalidIdempotencyKey),
  wireOf(E.IdempotencyKeyReused),
  wireOf(E.IdempotencyReplayUnavailable),
  wireOf(E.PayloadTooLarge),
  wireOf(E.RangeNotSatisfiable),
  wireOf(E.InvalidKey),
  wireOf(E.InvalidToken),
  wireOf(E.CredentialRequired),
  wireOf(E.BetaUnavailable),
  wireOf(E.ToolNotAllowed),
  wireOf(E.NotAMember),
  wireOf(E.InsufficientCredits),
  wireOf(E.RateLimitExceeded),
  wireOf(E.RequestInProgress),
  wireOf(E.SpendCapExceeded),
  wireOf(E.KeySpendLimitExceeded),
  wireOf(E.ProviderUnavailable),
  wireOf(E.ProviderRateLimited),
  wireOf(E.ProviderRejected),
  wireOf(E.ProviderCredentialRejected),
  wireOf(E.ProviderNotConfigured),
  wireOf(E.ProviderResponseTooLarge),
  wireOf(E.UrlNotAllowed),
  wireOf(E.ProviderTimeout),
  wireOf(E.WriteOutcomeUnknown),
  wireOf(E.NormalizationFailed),
  wireOf(E.UnknownTool),
  wireOf(E.NotFound),
  wireOf(E.MethodNotAllowed),
  wireOf(E.InternalError),
  wireOf(E.NotReady)
] as const satisfies ReadonlyArray<unknown> & { readonly length: typeof E.gatewayErrors.length }

/** Every error, as one schema (a union the API splits by status). */
export const GatewayErrorWire = Schema.Union(...wireErrors)
