/**
 * Every failure a caller can see, one `Schema.TaggedError` per envelope code, and the one table that
 * maps each of them onto the wire envelope `{error:{type,code,message,retryable,billable}}`.
 */
import { Schema } from "effect"

// Fields shared by the errors that tell the caller when to come back (seconds, for `Retry-After`).
const retryAfter = { retryAfter: Schema.optional(Schema.Number) }

// -- validation -------------------------------------------------------------------------------------
export class InvalidRequest extends Schema.TaggedError<InvalidRequest>()("InvalidRequest", {
  message: Schema.String
}) {}
export class MalformedJson extends Schema.TaggedError<MalformedJson>()("MalformedJson", {
  message: Schema.String
}) {}
export class UnsupportedMediaType extends Schema.TaggedError<UnsupportedMediaType>()("UnsupportedMediaType", {
  message: Schema.String
}) {}
export class InvalidIdempotencyKey extends Schema.TaggedError<InvalidIdempotencyKey>()("InvalidIdempotencyKey", {
  message: Schema.String
}) {}
export class IdempotencyKeyReused extends Schema.TaggedError<IdempotencyKeyReused>()("IdempotencyKeyReused", {
  message: Schema.String
}) {}
export class IdempotencyReplayUnavailable
  extends Schema.TaggedError<IdempotencyReplayUnavailable>()("IdempotencyReplayUnavailable", {
    message: Schema.String
  })
{}
export class RangeNotSatisfiable extends Schema.TaggedError<RangeNotSatisfiable>()("RangeNotSatisfiable", {
  message: Schema.String,
  size: Schema.optional(Schema.Number)
}) {}
export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()("PayloadTooLarge", {
  message: Schema.String
}) {}

// -- auth -------------------------------------------------------------------------------------------
export class InvalidKey extends Schema.TaggedError<InvalidKey>()("InvalidKey", {
  message: Schema.String
}) {}
export class InvalidToken extends Schema.TaggedError<InvalidToken>()("InvalidToken", {
  message: Schema.String
}) {}
export class CredentialRequired extends Schema.TaggedError<CredentialRequired>()("CredentialRequired", {
  message: Schema.String
}) {}
export class BetaUnavailable extends Schema.TaggedError<BetaUnavailable>()("BetaUnavailable", {
  message: Schema.String
}) {}
export class NotAMember extends Schema.TaggedError<NotAMember>()("NotAMember", {
  message: Schema.String
}) {}
export class ToolNotAllowed extends Schema.TaggedError<ToolNotAllowed>()("ToolNotAllowed", {
  message: Schema.String
}) {}

// -- credits and limits -----------------------------------------------------------------------------
export class InsufficientCredits extends Schema.TaggedError<InsufficientCredits>()("InsufficientCredits", {
  message: Schema.String
}) {}
export class RateLimitExceeded extends Schema.TaggedError<RateLimitExceeded>()("RateLimitExceeded", {
  message: Schema.String,
  ...retryAfter,
  /** The key's bucket size and window, for the `RateLimit-Policy` header. */
  limit: Schema.optional(Schema.Number),
  windowSeconds: Schema.optional(Schema.Number)
}) {}
export class RequestInProgress extends Schema.TaggedError<RequestInProgress>()("RequestInProgress", {
  message: Schema.String,
  ...retryAfter
}) {}
export class SpendCapExceeded extends Schema.TaggedError<SpendCapExceeded>()("SpendCapExceeded", {
  message: Schema.String,
  ...retryAfter
}) {}
export class KeySpendLimitExceeded extends Schema.TaggedError<KeySpendLimitExceeded>()("KeySpendLimitExceeded", {
  message: Schema.String,
  ...retryAfter
}) {}

// -- provider ---------------------------------------------------------------------------------------
export class ProviderUnavailable extends Schema.TaggedError<ProviderUnavailable>()("ProviderUnavailable", {
  message: Schema.String
}) {}
export class ProviderRateLimited extends Schema.TaggedError<ProviderRateLimited>()("ProviderRateLimited", {
  message: Schema.String,
  ...retryAfter
}) {}
export class ProviderRejected extends Schema.TaggedError<ProviderRejected>()("ProviderRejected", {
  message: Schema.String,
  upstreamStatus: Schema.optional(Schema.Number)
}) {}
export class ProviderCredentialRejected
  extends Schema.TaggedError<ProviderCredentialRejected>()("ProviderCredentialRejected", {
    message: Schema.String
  })
{}
export class ProviderNotConfigured extends Schema.TaggedError<ProviderNotConfigured>()("ProviderNotConfigured", {
  message: Schema.String
}) {}
export class ProviderResponseTooLarge
  extends Schema.TaggedError<ProviderResponseTooLarge>()("ProviderResponseTooLarge", {
    message: Schema.String
  })
{}
export class UrlNotAllowed extends Schema.TaggedError<UrlNotAllowed>()("UrlNotAllowed", {
  message: Schema.String
}) {}
export class ProviderTimeout extends Schema.TaggedError<ProviderTimeout>()("ProviderTimeout", {
  message: Schema.String
}) {}
/**
 * A write (a post, an email, a delete) whose request may have reached the provider — it timed out, the
 * connection broke after it was sent, or the provider answered 5xx — so it may have been carried out. Not
 * retryable: sending it again could do it twice. Under an Idempotency-Key this answer is stored and replayed.
 */
export class WriteOutcomeUnknown extends Schema.TaggedError<WriteOutcomeUnknown>()("WriteOutcomeUnknown", {
  message: Schema.String
}) {}
export class NormalizationFailed extends Schema.TaggedError<NormalizationFailed>()("NormalizationFailed", {
  message: Schema.String
}) {}

// -- routing and the rest ---------------------------------------------------------------------------
export class UnknownTool extends Schema.TaggedError<UnknownTool>()("UnknownTool", {
  message: Schema.String
}) {}
export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", {
  message: Schema.String
}) {}
export class MethodNotAllowed extends Schema.TaggedError<MethodNotAllowed>()("MethodNotAllowed", {
  message: Schema.String,
  allow: Schema.optional(Schema.String)
}) {}
export class InternalError extends Schema.TaggedError<InternalError>()("InternalError", {
  message: Schema.String
}) {}
/** `GET /readyz` while this process cannot serve calls (its database is unreachable, or not migrated). */
export class NotReady extends Schema.TaggedError<NotReady>()("NotReady", {
  message: Schema.String
}) {}

/** Every error class, in one list: the API declares each of them, the client decodes each of them. */
export const gatewayErrors = [
  InvalidRequest,
  MalformedJson,
  UnsupportedMediaType,
  InvalidIdempotencyKey,
  IdempotencyKeyReused,
  IdempotencyReplayUnavailable,
  PayloadTooLarge,
  RangeNotSatisfiable,
  InvalidKey,
  InvalidToken,
  CredentialRequired,
  BetaUnavailable,
  ToolNotAllowed,
  NotAMember,
  InsufficientCredits,
  RateLimitExceeded,
  RequestInProgress,
  SpendCapExceeded,
  KeySpendLimitExceeded,
  ProviderUnavailable,
  ProviderRateLimited,
  ProviderRejected,
  ProviderCredentialRejected,
  ProviderNotConfigured,
  ProviderResponseTooLarge,
  UrlNotAllowed,
  ProviderTimeout,
  WriteOutcomeUnknown,
  NormalizationFailed,
  UnknownTool,
  NotFound,
  MethodNotAllowed,
  InternalError,
  NotReady
] as const

export type GatewayError = InstanceType<(typeof gatewayErrors)[number]>
export type GatewayErrorTag = GatewayError["_tag"]

/** The errors a provider call can end in (the ones that void or settle a hold after a provider request). */
export type ProviderError =
  | ProviderUnavailable
  | ProviderRateLimited
  | ProviderRejected
  | ProviderCredentialRejected
  | ProviderNotConfigured
  | ProviderResponseTooLarge
  | UrlNotAllowed
  | ProviderTimeout
  | WriteOutcomeUnknown

export type ErrorType =
  | "validation"
  | "auth"
  | "insufficient_credits"
  | "rate_limited"
  | "provider"
  | "timeout"
  | "normalization"
  | "not_found"
  | "internal"

export interface EnvelopeSpec {
  readonly type: ErrorType
  readonly code: string
  readonly status: number
  readonly retryable: boolean
  readonly billable: boolean
}

/**
 * The one table. Its type makes adding an error without an entry a type error.
 * `billable` is true only where the provider was called and answered (normalization).
 */
export const envelopeOf: { readonly [K in GatewayErrorTag]: EnvelopeSpec } = {
  InvalidRequest: { type: "validation", code: "invalid_request", status: 400, retryable: false, billable: false },
  MalformedJson: { type: "validation", code: "malformed_json", status: 400, retryable: false, billable: false },
  UnsupportedMediaType: {
    type: "validation",
    code: "unsupported_media_type",
    status: 415,
    retryable: false,
    billable: false
  },
  InvalidIdempotencyKey: {
    type: "validation",
    code: "invalid_idempotency_key",
    status: 400,
    retryable: false,
    billable: false
  },
  IdempotencyKeyReused: {
    type: "validation",
    code: "idempotency_key_reused",
    status: 400,
    retryable: false,
    billable: false
  },
  IdempotencyReplayUnavailable: {
    type: "validation",
    code: "idempotency_replay_unavailable",
    status: 400,
    retryable: false,
    billable: false
  },
  PayloadTooLarge: { type: "validation", code: "payload_too_large", status: 413, retryable: false, billable: false },
  RangeNotSatisfiable: {
    type: "validation",
    code: "range_not_satisfiable",
    status: 416,
    retryable: false,
    billable: false
  },
  InvalidKey: { type: "auth", code: "invalid_key", status: 401, retryable: false, billable: false },
  InvalidToken: { type: "auth", code: "invalid_token", status: 401, retryable: false, billable: false },
  CredentialRequired: { type: "auth", code: "credential_required", status: 401, retryable: false, billable: false },
  BetaUnavailable: { type: "auth", code: "beta_unavailable", status: 401, retryable: false, billable: false },
  ToolNotAllowed: { type: "auth", code: "tool_not_allowed", status: 401, retryable: false, billable: false },
  NotAMember: { type: "auth", code: "not_a_member", status: 403, retryable: false, billable: false },
  InsufficientCredits: {
    type: "insufficient_credits",
    code: "insufficient_credits",
    status: 402,
    retryable: false,
    billable: false
  },
  RateLimitExceeded: {
    type: "rate_limited",
    code: "rate_limit_exceeded",
    status: 429,
    retryable: true,
    billable: false
  },
  RequestInProgress: {
    type: "rate_limited",
    code: "request_in_progress",
    status: 429,
    retryable: true,
    billable: false
  },
  SpendCapExceeded: {
    type: "rate_limited",
    code: "spend_cap_exceeded",
    status: 429,
    retryable: false,
    billable: false
  },
  KeySpendLimitExceeded: {
    type: "rate_limited",
    code: "key_spend_limit_exceeded",
    status: 429,
    retryable: false,
    billable: false
  },
  ProviderUnavailable: {
    type: "provider",
    code: "provider_unavailable",
    status: 502,
    retryable: true,
    billable: false
  },
  ProviderRateLimited: {
    type: "provider",
    code: "provider_rate_limited",
    status: 502,
    retryable: true,
    billable: false
  },
  ProviderRejected: { type: "provider", code: "provider_rejected", status: 502, retryable: false, billable: false },
  ProviderCredentialRejected: {
    type: "provider",
    code: "provider_credential_rejected",
    status: 502,
    retryable: false,
    billable: false
  },
  ProviderNotConfigured: {
    type: "provider",
    code: "provider_not_configured",
    status: 502,
    retryable: false,
    billable: false
  },
  ProviderResponseTooLarge: {
    type: "provider",
    code: "provider_response_too_large",
    status: 502,
    retryable: false,
    billable: false
  },
  UrlNotAllowed: { type: "validation", code: "url_not_allowed", status: 400, retryable: false, billable: false },
  ProviderTimeout: { type: "timeout", code: "provider_timeout", status: 504, retryable: true, billable: false },
  WriteOutcomeUnknown: {
    type: "provider",
    code: "write_outcome_unknown",
    status: 502,
    retryable: false,
    billable: false
  },
  NormalizationFailed: {
    type: "normalization",
    code: "normalization_failed",
    status: 502,
    retryable: false,
    billable: true
  },
  UnknownTool: { type: "not_found", code: "unknown_tool", status: 404, retryable: false, billable: false },
  NotFound: { type: "not_found", code: "not_found", status: 404, retryable: false, billable: false },
  MethodNotAllowed: { type: "not_found", code: "method_not_allowed", status: 405, retryable: false, billable: false },
  InternalError: { type: "internal", code: "internal_error", status: 500, retryable: true, billable: false },
  NotReady: { type: "internal", code: "not_ready", status: 503, retryable: true, billable: false }
}

/** The wire form of an error: what every non-2xx response carries. */
export interface Envelope {
  readonly error: {
    readonly type: ErrorType
    readonly code: string
    readonly message: string
    readonly retryable: boolean
    readonly billable: boolean
  }
}

export const envelope = (error: GatewayError): Envelope => {
  const spec = envelopeOf[error._tag]
  return {
    error: {
      type: spec.type,
      code: spec.code,
      message: error.message,
      retryable: spec.retryable,
      billable: spec.billable
    }
  }
}

/** The generic envelope schema (any code), for documentation and for clients that do not know a code. */
export const EnvelopeSchema = Schema.Struct({
  error: Schema.Struct({
    type: Schema.String,
    code: Schema.String,
    message: Schema.String,
    retryable: Schema.Boolean,
    billable: Schema.Boolean
  })
}).annotations({ identifier: "ErrorEnvelope", description: "The error envelope of every non-2xx response" })

export const isGatewayError = (u: unknown): u is GatewayError =>
  u instanceof Error && "_tag" in u && typeof u._tag === "string" && Object.hasOwn(envelopeOf, u._tag)
