/**
 * Every failure a caller can see, one `Schema.TaggedError` per envelope code; the one table that maps each
 * of them onto the wire envelope `{error:{type,code,message,retryable,billable}}`, its HTTP status and the
 * headers it carries; and the groups of errors each part of the API can answer (sub-lists of the one list),
 * from which the HTTP API declares its errors — so the compiler proves, say, that a dashboard route cannot
 * answer `insufficient_credits`.
 */
import * as Schema from "effect/Schema"
import { withoutApiKeys } from "./ids.js"

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
  message: Schema.String,
  /** What `WWW-Authenticate` asks for where a Bearer token is the way in (RFC 9110 §11.6.1, RFC 6750 §3). */
  challenge: Schema.optional(Schema.String)
}) {}

/** The challenge of a route that takes a Bearer token (an ID token, the METRICS_TOKEN). */
export const BEARER_CHALLENGE = `Bearer realm="tool-gateway"`
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
  /** The key's quota and window, for the `RateLimit-Policy` header (src/services/RateLimit.ts says how they are read). */
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
  message: Schema.String,
  /**
   * The caller's host name could not be resolved for now (a DNS lookup that failed, not one that found no such
   * name): a curated tool does not move on to its next provider with it (see `providers/index.ts`).
   */
  hostUnresolved: Schema.optional(Schema.Literal(true))
}) {}
export class ProviderRateLimited extends Schema.TaggedError<ProviderRateLimited>()("ProviderRateLimited", {
  message: Schema.String,
  ...retryAfter
}) {}
export class ProviderRejected extends Schema.TaggedError<ProviderRejected>()("ProviderRejected", {
  message: Schema.String,
  upstreamStatus: Schema.optional(Schema.Number)
}) {}
/**
 * The provider refused the credentials. `forbidden`: it read them and refused this one request with them (RFC 9110's
 * 403 — they lack a permission it needs), which leaves a connection's `status` as it is; otherwise the credentials
 * themselves are no longer accepted, and a connection holding them is shown `rejected`.
 */
export class ProviderCredentialRejected
  extends Schema.TaggedError<ProviderCredentialRejected>()("ProviderCredentialRejected", {
    message: Schema.String,
    forbidden: Schema.optional(Schema.Boolean)
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
/**
 * A file a tool answered with would take its org's kept files past `ARTIFACT_QUOTA_BYTES`: it is not kept, and the
 * call is not charged. `retryAfter`: when enough of the org's files will have expired for it to fit.
 */
export class ArtifactQuotaExceeded extends Schema.TaggedError<ArtifactQuotaExceeded>()("ArtifactQuotaExceeded", {
  message: Schema.String,
  ...retryAfter
}) {}
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
  message: Schema.String,
  /** What the call was charged for it (its minimum price: the provider answered); set by the pipeline. */
  charged: Schema.optional(Schema.Number)
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
/** A request that was not received within the server's timeouts (answered by the server itself). */
export class RequestTimeout extends Schema.TaggedError<RequestTimeout>()("RequestTimeout", {
  message: Schema.String
}) {}
/** Request headers larger than the server reads (answered by the server itself, 431). */
export class HeadersTooLarge extends Schema.TaggedError<HeadersTooLarge>()("HeadersTooLarge", {
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
  ArtifactQuotaExceeded,
  UrlNotAllowed,
  ProviderTimeout,
  WriteOutcomeUnknown,
  NormalizationFailed,
  UnknownTool,
  NotFound,
  MethodNotAllowed,
  InternalError,
  NotReady,
  RequestTimeout,
  HeadersTooLarge
] as const

export type GatewayError = InstanceType<(typeof gatewayErrors)[number]>
export type GatewayErrorTag = GatewayError["_tag"]

/**
 * The failures a tool call keeps under its `Idempotency-Key` and replays (a billable failure, and a write
 * that may have been carried out); any other failure frees the key for a retry.
 */
export const replayedErrors = ["NormalizationFailed", "WriteOutcomeUnknown"] as const satisfies ReadonlyArray<GatewayErrorTag>

/** The errors a provider call can end in (the ones that void or settle a hold after a provider request). */
export type ProviderError =
  | ProviderUnavailable
  | ProviderRateLimited
  | ProviderRejected
  | ProviderCredentialRejected
  | ProviderNotConfigured
  | ProviderResponseTooLarge
  | ArtifactQuotaExceeded
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

/**
 * The headers an answer carries besides the envelope, each from a field of its error: `retry-after` (the
 * error's `retryAfter`, or 1 s), `ratelimit` (the key's policy: `limit`, `windowSeconds`), `allow`,
 * `content-range` (the file's `size`), `connection-close` (the rest of the request is not read), and
 * `credits-charged` (`X-Credits-Charged`: what a billable failure was charged, its `charged`, as a success says), and
 * `www-authenticate` (the `challenge` of a route that takes a Bearer token).
 */
export type ErrorHeader = "retry-after" | "ratelimit" | "allow" | "content-range" | "connection-close" | "credits-charged" | "www-authenticate"

export interface EnvelopeSpec {
  readonly type: ErrorType
  readonly code: string
  readonly status: number
  readonly retryable: boolean
  readonly billable: boolean
  readonly headers?: ReadonlyArray<ErrorHeader>
}

/**
 * The one table. Its type makes adding an error without an entry a type error.
 * `billable` is true only where the provider was called and answered (normalization).
 */
/** A table of envelopes: one entry for every tag of `E`, or it does not compile. */
export type EnvelopeTable<E extends { readonly _tag: string }> = { readonly [K in E["_tag"]]: EnvelopeSpec }

export const envelopeOf: EnvelopeTable<GatewayError> = {
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
  PayloadTooLarge: {
    type: "validation",
    code: "payload_too_large",
    status: 413,
    retryable: false,
    billable: false,
    headers: ["connection-close"]
  },
  RangeNotSatisfiable: {
    type: "validation",
    code: "range_not_satisfiable",
    status: 416,
    retryable: false,
    billable: false,
    headers: ["content-range"]
  },
  InvalidKey: { type: "auth", code: "invalid_key", status: 401, retryable: false, billable: false },
  InvalidToken: { type: "auth", code: "invalid_token", status: 401, retryable: false, billable: false, headers: ["www-authenticate"] },
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
    billable: false,
    headers: ["retry-after", "ratelimit"]
  },
  RequestInProgress: {
    type: "rate_limited",
    code: "request_in_progress",
    status: 429,
    retryable: true,
    billable: false,
    headers: ["retry-after"]
  },
  SpendCapExceeded: {
    type: "rate_limited",
    code: "spend_cap_exceeded",
    status: 429,
    retryable: false,
    billable: false,
    headers: ["retry-after"]
  },
  KeySpendLimitExceeded: {
    type: "rate_limited",
    code: "key_spend_limit_exceeded",
    status: 429,
    retryable: false,
    billable: false,
    headers: ["retry-after"]
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
    billable: false,
    headers: ["retry-after"]
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
  ArtifactQuotaExceeded: {
    type: "rate_limited",
    code: "artifact_quota_exceeded",
    status: 429,
    retryable: false,
    billable: false,
    headers: ["retry-after"]
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
    billable: true,
    headers: ["credits-charged"]
  },
  UnknownTool: { type: "not_found", code: "unknown_tool", status: 404, retryable: false, billable: false },
  NotFound: { type: "not_found", code: "not_found", status: 404, retryable: false, billable: false },
  MethodNotAllowed: {
    type: "not_found",
    code: "method_not_allowed",
    status: 405,
    retryable: false,
    billable: false,
    headers: ["allow"]
  },
  InternalError: { type: "internal", code: "internal_error", status: 500, retryable: true, billable: false },
  NotReady: { type: "internal", code: "not_ready", status: 503, retryable: true, billable: false },
  RequestTimeout: {
    type: "timeout",
    code: "request_timeout",
    status: 408,
    retryable: true,
    billable: false,
    headers: ["connection-close"]
  },
  // Node refuses such a request before it is one; it is still a request the client must fix, as invalid_request
  HeadersTooLarge: {
    type: "validation",
    code: "invalid_request",
    status: 431,
    retryable: false,
    billable: false,
    headers: ["connection-close"]
  }
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
      // an API key the caller put where something else goes (a key's id, say) is not sent back whole
      message: withoutApiKeys(error.message),
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

/** Where a key stands against its rate limit: `limit` requests per `windowSeconds`, `remaining` now. */
export interface RateLimitState {
  readonly limit: number
  readonly windowSeconds: number
  readonly remaining: number
  readonly resetSeconds: number
}

/** Where a refused key's bucket stands: empty, full again after the whole window (the next token comes sooner, which Retry-After says). */
export const exceededState = (error: RateLimitExceeded): RateLimitState | undefined =>
  error.limit === undefined || error.windowSeconds === undefined
    ? undefined
    : { limit: error.limit, windowSeconds: error.windowSeconds, remaining: 0, resetSeconds: error.windowSeconds }

/**
 * A key's rate limit as draft-ietf-httpapi-ratelimit-headers has it: the policy (quota `q` requests per
 * window `w` seconds) and where the key stands (`r` requests remaining, full again in `t` seconds).
 */
export const rateLimitHeaders = (state: RateLimitState): Record<string, string> => ({
  "ratelimit-policy": `"key";q=${state.limit};w=${state.windowSeconds}`,
  ratelimit: `"key";r=${Math.max(0, Math.floor(state.remaining))};t=${Math.max(0, state.resetSeconds)}`
})

/**
 * The headers of an error's answer, as its table entry names them, from the error's own fields. A 429
 * always says when to come back (1 s when the error does not know better).
 */
export const responseHeaders = (error: GatewayError): Record<string, string> => {
  const headers: Record<string, string> = {}
  for (const header of envelopeOf[error._tag].headers ?? []) {
    switch (header) {
      case "retry-after":
        headers["retry-after"] = String("retryAfter" in error && error.retryAfter !== undefined ? error.retryAfter : 1)
        break
      case "ratelimit": {
        const state = error._tag === "RateLimitExceeded" ? exceededState(error) : undefined
        if (state !== undefined) Object.assign(headers, rateLimitHeaders(state))
        break
      }
      case "allow":
        if (error._tag === "MethodNotAllowed" && error.allow !== undefined) headers["allow"] = error.allow
        break
      case "content-range":
        if (error._tag === "RangeNotSatisfiable" && error.size !== undefined) headers["content-range"] = `bytes */${error.size}`
        break
      case "connection-close":
        headers["connection"] = "close"
        break
      case "credits-charged":
        if ("charged" in error && error.charged !== undefined) headers["x-credits-charged"] = String(error.charged)
        break
      case "www-authenticate":
        if (error._tag === "InvalidToken" && error.challenge !== undefined) headers["www-authenticate"] = error.challenge
        break
    }
  }
  return headers
}

// -- the groups: what each part of the API can answer -------------------------------------------------
// Each is a sub-list of `gatewayErrors`; the HTTP API declares them where they apply (src/http/Api.ts).

/** A JSON body that cannot be read as an object (every route that takes one). */
export const BodyErrors = [InvalidRequest, MalformedJson, UnsupportedMediaType, PayloadTooLarge] as const
/** An API key that cannot call: missing, unknown or revoked, sent as a Bearer token, or over its rate. */
export const ApiKeyErrors = [InvalidKey, InvalidToken, RateLimitExceeded] as const
/** A dashboard session that cannot act (its signing keys unreachable: provider_unavailable). */
export const IdTokenErrors = [InvalidToken, NotAMember, ProviderUnavailable] as const
/** What a tool call can end in once its key and body are accepted (a key revoked meanwhile included). */
export const CallErrors = [
  InvalidKey,
  InvalidRequest,
  InvalidIdempotencyKey,
  IdempotencyKeyReused,
  IdempotencyReplayUnavailable,
  RequestInProgress,
  BetaUnavailable,
  ToolNotAllowed,
  CredentialRequired,
  InsufficientCredits,
  SpendCapExceeded,
  KeySpendLimitExceeded,
  UrlNotAllowed,
  ProviderUnavailable,
  ProviderRateLimited,
  ProviderRejected,
  ProviderCredentialRejected,
  ProviderNotConfigured,
  ProviderResponseTooLarge,
  ArtifactQuotaExceeded,
  ProviderTimeout,
  WriteOutcomeUnknown,
  NormalizationFailed
] as const
/** The dashboard's own refusals: a field it cannot take, something that is not there, a URL it will not call. */
export const DashboardErrors = [InvalidRequest, NotFound, UrlNotAllowed] as const
/** A kept file: not there (or expired), or a range outside it. */
export const ArtifactErrors = [NotFound, RangeNotSatisfiable] as const
/**
 * What any route can answer: an unexpected failure, and what the server answers at the socket before a request
 * reaches a route (src/http/server.ts `clientErrorOf`): a request not received in time, headers too large, a
 * request that is not valid HTTP/1.1.
 */
export const ServerErrors = [InternalError, RequestTimeout, HeadersTooLarge, InvalidRequest] as const

type ErrorList = ReadonlyArray<{ readonly Type: GatewayError }>
/** The errors of a list, as a union. */
export type ErrorsOf<L extends ErrorList> = L[number]["Type"]
export type BodyError = ErrorsOf<typeof BodyErrors>
export type ApiKeyError = ErrorsOf<typeof ApiKeyErrors>
export type IdTokenError = ErrorsOf<typeof IdTokenErrors>
export type CallError = ErrorsOf<typeof CallErrors>
export type DashboardError = ErrorsOf<typeof DashboardErrors>
export type ArtifactError = ErrorsOf<typeof ArtifactErrors>
export type ServerError = ErrorsOf<typeof ServerErrors>

/**
 * One of the gateway's own errors: an instance of one of its classes — not another library's error that happens to
 * share a tag (the platform's `HttpApiError.NotFound` is a `NotFound` too, without the message an envelope says).
 */
export const isGatewayError = (u: unknown): u is GatewayError => gatewayErrors.some((error) => u instanceof error)
