/**
 * The tool-call pipeline, in the order that decides which error wins (DESIGN §4):
 * key → rate limit → (tool, input: decoded by the caller of `run`) → Idempotency-Key → beta → connection →
 * reservation → provider call under a deadline → settle or void.
 *
 * Everything after the Idempotency-Key is claimed runs uninterruptibly: a client that hangs up does not
 * abandon a hold or a claim, and a provider call that was started is finished, charged and stored for replay.
 */
import { Cause, Context, Effect, Exit, Fiber, Layer, Option, Redacted, Schema } from "effect"
import {
  BetaUnavailable,
  CredentialRequired,
  envelope,
  IdempotencyKeyReused,
  IdempotencyReplayUnavailable,
  InsufficientCredits,
  InvalidIdempotencyKey,
  InvalidKey,
  InvalidRequest,
  InvalidToken,
  NormalizationFailed,
  type ProviderError,
  ProviderTimeout,
  RateLimitExceeded,
  RequestInProgress,
  SpendCapExceeded
} from "../domain/errors.js"
import { looksLikeApiKey } from "../domain/ids.js"
import { chargeFor, reserveFor } from "../domain/pricing.js"
import { type AccountToolName, type ToolInput, type ToolName, type ToolOutput, catalog } from "../domain/tools.js"
import { callProvider } from "../providers/index.js"
import { describeParseError } from "../providers/common.js"
import { Betas } from "./Betas.js"
import { GatewayConfig } from "./GatewayConfig.js"
import { fingerprint, Idempotency, validateKey } from "./Idempotency.js"
import { type Caller, KeyStore } from "./KeyStore.js"
import { Ledger } from "./Ledger.js"
import { ProviderClient } from "./ProviderClient.js"
import { RateLimit, type RateLimitState } from "./RateLimit.js"
import { randomId } from "./random.js"

/** Errors every tool call can end in. */
export type CallError =
  | InvalidIdempotencyKey
  | IdempotencyKeyReused
  | IdempotencyReplayUnavailable
  | RequestInProgress
  | BetaUnavailable
  | InsufficientCredits
  | SpendCapExceeded
  | ProviderError
  | NormalizationFailed
  | InvalidRequest

/** What a missing connection adds to a tool's errors: `credential_required`, for account tools only. */
export type ConnectionError<T extends ToolName> = T extends AccountToolName ? CredentialRequired : never

/** The errors of one tool. */
export type ToolError<T extends ToolName> = CallError | ConnectionError<T>

const noConnection = (): Effect.Effect<void> => Effect.void
const needsConnection = (tool: AccountToolName, provider: string) => (): Effect.Effect<void, CredentialRequired> =>
  Effect.fail(
    new CredentialRequired({
      message: `${tool} runs on your own ${provider} account: connect it first with POST /v1/connections.`
    })
  )

/**
 * Step 6, per tool. Written out tool by tool so that each entry's type says which tools can answer
 * `credential_required` (giving a non-account tool a connection check fails to type-check).
 */
const connectionCheck: { readonly [K in ToolName]: () => Effect.Effect<void, ConnectionError<K>> } = {
  search: noConnection,
  read: noConnection,
  weather: noConnection,
  mobile_app_search: noConnection,
  alpha_search: noConnection,
  beta_read: noConnection,
  beta_search: noConnection,
  gamma_scrape: noConnection,
  gamma_search: noConnection,
  xi_movie: noConnection,
  delta_post: needsConnection("delta_post", "delta"),
  delta_like: needsConnection("delta_like", "delta"),
  epsilon_request: needsConnection("epsilon_request", "epsilon"),
  zeta_request: needsConnection("zeta_request", "zeta"),
  eta_personal_bests: needsConnection("eta_personal_bests", "eta"),
  theta_ratings: needsConnection("theta_ratings", "theta"),
  iota_delete_service: needsConnection("iota_delete_service", "iota"),
  kappa_delete_benefit: needsConnection("kappa_delete_benefit", "kappa"),
  kappa_ingest_events: needsConnection("kappa_ingest_events", "kappa"),
  lambda_update_broadcast: needsConnection("lambda_update_broadcast", "lambda"),
  lambda_batch_emails: needsConnection("lambda_batch_emails", "lambda"),
  mu_database: needsConnection("mu_database", "mu"),
  nu_account: needsConnection("nu_account", "nu")
}

export type AuthError = InvalidKey | InvalidToken | RateLimitExceeded

export interface Authenticated {
  readonly caller: Caller
  readonly rateLimit: RateLimitState | undefined
}

export interface CallOptions {
  readonly idempotencyKey?: string | undefined
  readonly requestId?: string | undefined
}

/** A call that ran now. */
export interface Fresh<A> {
  readonly _tag: "Fresh"
  readonly requestId: string
  readonly output: A
  /** `output` encoded as the JSON of the 200 answer. */
  readonly body: string
  readonly provider: string
  readonly charged: number
}

/** The stored answer of an earlier call with the same Idempotency-Key. */
export interface Replayed {
  readonly _tag: "Replayed"
  readonly requestId: string
  readonly status: number
  readonly body: string
  readonly charged: number
}

export type Outcome<A> = Fresh<A> | Replayed

export class Gateway extends Context.Tag("Gateway")<Gateway, {
  /**
   * Step 1 and 2: the API key (never in `Authorization`) and the key's rate limit.
   * `authorization` is the raw `Authorization` header, if any.
   */
  readonly authenticate: (
    apiKey: string | undefined,
    authorization?: string | undefined
  ) => Effect.Effect<Authenticated, AuthError>
  /** Steps 4 to 8 for an authenticated caller and a decoded input. */
  readonly run: <T extends ToolName>(
    caller: Caller,
    tool: T,
    input: ToolInput<T>,
    options?: CallOptions
  ) => Effect.Effect<Outcome<ToolOutput<T>>, ToolError<T>>
  /**
   * The whole pipeline for in-process use: authenticate `apiKey`, validate `input`, run, and answer the
   * typed output (a replayed answer is decoded back into it).
   */
  readonly call: <T extends ToolName>(
    tool: T,
    input: ToolInput<T>,
    options: CallOptions & { readonly apiKey: string | Redacted.Redacted<string> }
  ) => Effect.Effect<ToolOutput<T>, ToolError<T> | AuthError>
}>() {}

export const make = Effect.gen(function* () {
  const config = yield* GatewayConfig
  const keys = yield* KeyStore
  const rateLimit = yield* RateLimit
  const ledger = yield* Ledger
  const idempotency = yield* Idempotency
  const betas = yield* Betas
  const providerContext = Context.make(GatewayConfig, config).pipe(Context.add(ProviderClient, yield* ProviderClient))

  // The whole provider phase (fallbacks included) must end within this; holds and claims live a little longer.
  const callTimeoutMs = config.providerTimeoutMs * 3
  const leaseMs = callTimeoutMs + config.holdLeaseGraceMs

  const authenticate = (apiKey: string | undefined, authorization?: string) =>
    Effect.gen(function* () {
      const bearer = authorization?.match(/^\s*bearer\s+(\S+)/i)?.[1]
      if (bearer !== undefined && looksLikeApiKey(bearer)) {
        return yield* new InvalidToken({
          message: "API keys are never accepted in the Authorization header. Send the key in X-API-Key."
        })
      }
      const caller = yield* keys.verify(apiKey?.trim() ?? "")
      const state = yield* rateLimit.consume(caller.keyId)
      return { caller, rateLimit: state }
    })

  const run = <T extends ToolName>(
    caller: Caller,
    tool: T,
    input: ToolInput<T>,
    options: CallOptions = {}
  ): Effect.Effect<Outcome<ToolOutput<T>>, ToolError<T>> =>
    Effect.gen(function* () {
      const def = catalog[tool]
      const requestId = options.requestId ?? (yield* randomId("req", 20))

      // 4. Idempotency-Key
      const key = options.idempotencyKey === undefined ? undefined : yield* validateKey(options.idempotencyKey)
      if (key !== undefined) {
        const claim = yield* idempotency.claim({
          orgId: caller.orgId,
          key,
          fingerprint: fingerprint(tool, input),
          requestId,
          leaseMs
        })
        if (claim._tag === "Replay") {
          return { _tag: "Replayed", requestId, ...claim.response } satisfies Replayed
        }
      }

      const execute: Effect.Effect<Fresh<ToolOutput<T>>, ToolError<T>> = Effect.gen(function* () {
        // 5. beta
        if (def.beta) yield* betas.require(caller.orgId, tool)
        // 6. account tools need the org's connection to the provider
        yield* connectionCheck[tool]()
        // 7. reserve the most this input can cost
        const amount = reserveFor(def.price, def.maxUnits(input))
        const hold = yield* ledger.reserve({
          orgId: caller.orgId,
          keyId: caller.keyId,
          tool,
          requestId,
          amount,
          leaseMs
        })
        // 8. the provider call, in a fiber of its own: only its deadline can interrupt it
        const providerCall = callProvider(tool, input).pipe(
          Effect.provide(providerContext),
          Effect.interruptible,
          Effect.timeoutFail({
            duration: callTimeoutMs,
            onTimeout: () => new ProviderTimeout({ message: `${tool} did not complete within ${callTimeoutMs} ms.` })
          })
        )
        const fiber = yield* Effect.forkDaemon(providerCall)
        const exit = yield* Fiber.await(fiber)
        if (Exit.isSuccess(exit)) {
          const { output, provider } = exit.value
          const charged = chargeFor(def.price, def.units(output), amount)
          const body = yield* Schema.encode(def.output)(output).pipe(
            Effect.map((encoded) => JSON.stringify(encoded)),
            Effect.orDie
          )
          yield* ledger.settle(hold, charged)
          return { _tag: "Fresh", requestId, output, body, provider, charged } satisfies Fresh<ToolOutput<T>>
        }
        if (failureOf(exit)?._tag === "NormalizationFailed") {
          // The provider answered: the call is billed at its minimum price.
          yield* ledger.settle(hold, chargeFor(def.price, 0, amount))
        } else {
          yield* ledger.void(hold)
        }
        return yield* Effect.failCause(exit.cause)
      })

      if (key === undefined) return yield* execute
      // Only billable outcomes are kept for replay; anything else frees the key for a retry.
      return yield* execute.pipe(
        Effect.onExit((exit) => {
          if (Exit.isSuccess(exit)) {
            return idempotency.complete(caller.orgId, key, { status: 200, body: exit.value.body, charged: exit.value.charged })
          }
          const failure = failureOf(exit)
          if (failure?._tag === "NormalizationFailed") {
            return idempotency.complete(caller.orgId, key, {
              status: 502,
              body: JSON.stringify(envelope(failure)),
              charged: chargeFor(def.price, 0, reserveFor(def.price, def.maxUnits(input)))
            })
          }
          return idempotency.release(caller.orgId, key)
        })
      )
    }).pipe(
      Effect.uninterruptible,
      Effect.withSpan("Gateway.run", { attributes: { tool, org: caller.orgId } })
    )

  const decodeInput = <T extends ToolName>(tool: T, input: unknown): Effect.Effect<ToolInput<T>, InvalidRequest> =>
    Schema.decodeUnknown(catalog[tool].input, { errors: "all" })(input).pipe(
      Effect.mapError((error) => new InvalidRequest({ message: `Invalid ${tool} input: ${describeParseError(error)}` }))
    )

  const call = <T extends ToolName>(
    tool: T,
    input: ToolInput<T>,
    options: CallOptions & { readonly apiKey: string | Redacted.Redacted<string> }
  ): Effect.Effect<ToolOutput<T>, ToolError<T> | AuthError> =>
    Effect.gen(function* () {
      const apiKey = Redacted.isRedacted(options.apiKey) ? Redacted.value(options.apiKey) : options.apiKey
      const { caller } = yield* authenticate(apiKey)
      const decoded = yield* decodeInput(tool, input)
      const outcome = yield* run(caller, tool, decoded, options)
      if (outcome._tag === "Fresh") return outcome.output
      if (outcome.status === 200) {
        return yield* Schema.decodeUnknown(Schema.parseJson(catalog[tool].output))(outcome.body).pipe(Effect.orDie)
      }
      const stored = yield* Schema.decodeUnknown(Schema.parseJson(StoredEnvelope))(outcome.body).pipe(Effect.orDie)
      return yield* new NormalizationFailed({ message: stored.error.message })
    })

  return Gateway.of({ authenticate, run, call })
})

const StoredEnvelope = Schema.Struct({ error: Schema.Struct({ message: Schema.String }) })

/** The typed failure of an exit, if it failed (rather than succeeded, died or was interrupted). */
const failureOf = <A, E>(exit: Exit.Exit<A, E>): E | undefined =>
  Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined

export const GatewayServiceLive = Layer.effect(Gateway, make)
