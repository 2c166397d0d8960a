/**
 * Steps 1 and 2 of every call (DESIGN §4): the API key — never in `Authorization`, where a key is refused
 * as `invalid_token` — and the key's rate limit. The caller it answers is minted by `KeyStore` only.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import { type InvalidKey, InvalidToken, type RateLimitExceeded, type RateLimitState } from "../domain/errors.js"
import { looksLikeApiKey } from "../domain/ids.js"
import { type Caller, KeyStore } from "./KeyStore.js"
import { RateLimit } from "./RateLimit.js"
import { callFacts, rateLimitRejections } from "./Telemetry.js"
import { traced } from "./tracing.js"

export type AuthError = InvalidKey | InvalidToken | RateLimitExceeded

export interface Authenticated {
  readonly caller: Caller
  /** Where the key stands against its rate limit (none when it was not taken, or the key has no limit). */
  readonly rateLimit: RateLimitState | undefined
}

export interface AuthenticateOptions {
  /**
   * Take a key this process verified before from its cache (the reservation confirms it; see KeyStore).
   * Only for tool calls: every other use of a key reads it from the database.
   */
  readonly cached?: boolean
  /** Take a token from the key's rate limit (the default). MCP takes it per message instead (`throttle`). */
  readonly rateLimit?: boolean
}

export class Authentication extends Context.Tag("Authentication")<Authentication, {
  /** The caller of `apiKey`; `authorization` is the raw `Authorization` header, if any. */
  readonly authenticate: (
    apiKey: string | undefined,
    authorization?: string | undefined,
    options?: AuthenticateOptions
  ) => Effect.Effect<Authenticated, AuthError>
  /** Step 2 alone: one token from an authenticated caller's rate limit. */
  readonly throttle: (caller: Caller) => Effect.Effect<RateLimitState | undefined, RateLimitExceeded>
}>() {}

/**
 * Whether an `Authorization` header carries an API key, in any scheme (`Bearer`, `Token`, none) or inside
 * `Basic`'s user or password: it is refused there, whatever else the request sends.
 */
const carriesApiKey = (authorization: string): boolean => {
  const words = authorization.trim().split(/\s+/)
  if (words.some(looksLikeApiKey)) return true
  const [scheme, credentials] = words
  return scheme?.toLowerCase() === "basic" && credentials !== undefined &&
    Buffer.from(credentials, "base64").toString("utf8").split(":").some(looksLikeApiKey)
}

export const make = Effect.gen(function* () {
  const keys = yield* KeyStore
  const rateLimit = yield* RateLimit

  const throttle = (caller: Caller) =>
    rateLimit.consume(caller).pipe(Effect.tapError(() => Metric.increment(rateLimitRejections)))

  const authenticate = (apiKey: string | undefined, authorization?: string | undefined, options?: AuthenticateOptions) =>
    Effect.gen(function* () {
      if (authorization !== undefined && carriesApiKey(authorization)) {
        return yield* new InvalidToken({
          message: "API keys are never accepted in the Authorization header. Send the key in X-API-Key."
        })
      }
      const caller = yield* keys.verify(apiKey?.trim() ?? "", { cached: options?.cached === true })
      const facts = yield* callFacts
      facts.orgId = caller.orgId
      facts.keyId = caller.keyId
      facts.unconfirmed = caller.confirmed ? undefined : caller
      const state = options?.rateLimit === false ? undefined : yield* throttle(caller)
      return { caller, rateLimit: state }
    }).pipe(traced("Authentication.authenticate"))

  return Authentication.of({ authenticate, throttle })
})

export const AuthenticationLive = Layer.effect(Authentication, make)
