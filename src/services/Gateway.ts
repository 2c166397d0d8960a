/**
 * The tool-call pipeline, in the order that decides which error wins (DESIGN §4):
 * key → rate limit → (tool, input: decoded by the caller of `run`) → Idempotency-Key → beta → connection →
 * reservation → provider call under a deadline → settle or void.
 *
 * Everything after the Idempotency-Key is claimed runs uninterruptibly: a client that hangs up does not
 * abandon a hold or a claim, and a provider call that was started is finished, charged and stored for replay.
 */
import { Cause, Context, Effect, Exit, Layer, Metric, Option, Redacted, Schema } from "effect"
import {
  BetaUnavailable,
  envelope,
  IdempotencyKeyReused,
  IdempotencyReplayUnavailable,
  InsufficientCredits,
  InvalidIdempotencyKey,
  KeySpendLimitExceeded,
  InvalidKey,
  InvalidRequest,
  InvalidToken,
  NormalizationFailed,
  type ProviderError,
  RateLimitExceeded,
  RequestInProgress,
  SpendCapExceeded,
  ToolNotAllowed,
  envelopeOf,
  WriteOutcomeUnknown
} from "../domain/errors.js"
import { looksLikeApiKey } from "../domain/ids.js"
import { chargeFor, reserveFor } from "../domain/pricing.js"
import { isAccountProvider } from "../domain/connections.js"
import type { OrgId } from "../domain/ids.js"
import {
  catalog,
  type ConnectionError,
  type CredentialFor,
  type ToolInput,
  type ToolName,
  type ToolOutput
} from "../domain/tools.js"
import type { Answered, ProviderCallError } from "../providers/common.js"
import { describeParseError } from "../domain/parse.js"
import { type ArtifactRef, Artifacts, ArtifactSink } from "./Artifacts.js"
import { Betas } from "./Betas.js"
import { Connections } from "./Connections.js"
import { Pricing } from "./Pricing.js"
import { Usage } from "./Usage.js"
import { nowMillis, preciseMillis } from "./time.js"
import { ProvidersConfig } from "../config.js"
import { ConversionOwner } from "./HtmlConverter.js"
import { fingerprint, Idempotency, validateKey } from "./Idempotency.js"
import { type Caller, KeyStore } from "./KeyStore.js"
import { type ClaimLease, Leases } from "./Leases.js"
import { type Hold, Ledger } from "./Ledger.js"
import { CallDeadline, ProviderIdempotencyKey } from "./ProviderClient.js"
import { ProviderRegistry } from "./ProviderRegistry.js"
import { RateLimit, type RateLimitState } from "./RateLimit.js"
import { randomId, sha256Hex } from "./random.js"
import { callFacts, rateLimitRejections, recordCall, recordProvider, settlementsLost, withCallFacts } from "./Telemetry.js"
import { traced } from "./tracing.js"

/** Errors every tool call can end in. */
export type CallError =
  | InvalidKey
  | InvalidIdempotencyKey
  | IdempotencyKeyReused
  | IdempotencyReplayUnavailable
  | RequestInProgress
  | BetaUnavailable
  | ToolNotAllowed
  | InsufficientCredits
  | SpendCapExceeded
  | KeySpendLimitExceeded
  | ProviderError
  | NormalizationFailed
  | InvalidRequest

/** The errors of one tool. */
export type ToolError<T extends ToolName> = CallError | ConnectionError<T>

export type AuthError = InvalidKey | InvalidToken | RateLimitExceeded

export interface Authenticated {
  readonly caller: Caller
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

/** What `POST /v1/run` answers: the provider's unnormalized answer. */
export interface RawOutput {
  readonly tool: ToolName
  readonly provider: string
  readonly status: number
  readonly body: unknown
  /** Files the call kept, so that they can be fetched (`/v1/artifacts/{id}`). */
  readonly artifacts?: Readonly<Record<string, ArtifactRef>>
}

export class Gateway extends Context.Tag("Gateway")<Gateway, {
  /**
   * Step 1 and 2: the API key (never in `Authorization`) and the key's rate limit.
   * `authorization` is the raw `Authorization` header, if any.
   */
  readonly authenticate: (
    apiKey: string | undefined,
    authorization?: string | undefined,
    options?: AuthenticateOptions
  ) => Effect.Effect<Authenticated, AuthError>
  /** Step 2 alone: take one token from an authenticated caller's rate limit. */
  readonly throttle: (caller: Caller) => Effect.Effect<RateLimitState | undefined, RateLimitExceeded>
  /** Steps 4 to 8 for an authenticated caller and a decoded input. */
  readonly run: <T extends ToolName>(
    caller: Caller,
    tool: T,
    input: ToolInput<T>,
    options?: CallOptions
  ) => Effect.Effect<Outcome<ToolOutput<T>>, ToolError<T>>
  /** As `run`, for an input not yet validated (MCP arguments, say): `invalid_request` names the field. */
  readonly runUnknown: <T extends ToolName>(
    caller: Caller,
    tool: T,
    input: unknown,
    options?: CallOptions
  ) => Effect.Effect<Outcome<ToolOutput<T>>, ToolError<T>>
  /**
   * `POST /v1/run`: validate `input` against the tool's schema, then the same pipeline, answering the
   * provider's raw answer instead of the normalized one.
   */
  readonly runRaw: <T extends ToolName>(
    caller: Caller,
    tool: T,
    input: unknown,
    options?: CallOptions
  ) => Effect.Effect<Outcome<RawOutput>, ToolError<T>>
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
  const config = yield* ProvidersConfig
  const keys = yield* KeyStore
  const rateLimit = yield* RateLimit
  const ledger = yield* Ledger
  const idempotency = yield* Idempotency
  const betas = yield* Betas
  const connections = yield* Connections
  const usage = yield* Usage
  const pricing = yield* Pricing
  const artifacts = yield* Artifacts
  const leases = yield* Leases
  const providers = yield* ProviderRegistry

  // The whole provider phase (fallbacks included) must end within this; holds and claims live a little longer.
  const callTimeoutMs = config.timeoutMs * 3

  const authenticate = (apiKey: string | undefined, authorization?: string | undefined, options?: AuthenticateOptions) =>
    Effect.gen(function* () {
      const bearer = authorization?.match(/^\s*bearer\s+(\S+)/i)?.[1]
      if (bearer !== undefined && looksLikeApiKey(bearer)) {
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
    }).pipe(traced("Gateway.authenticate"))

  const throttle = (caller: Caller) =>
    rateLimit.consume(caller).pipe(Effect.tapError(() => Metric.increment(rateLimitRejections)))

  /**
   * Steps 4 to 8, shared by tool calls and raw runs: `invoke` is the provider phase, `encode` the 200 body,
   * `units` what the answer delivered (for the charge).
   */
  const pipeline = <T extends ToolName, A>(
    caller: Caller,
    tool: T,
    input: ToolInput<T>,
    options: CallOptions,
    mode: {
      readonly label: string
      readonly invoke: (credentials: CredentialFor<T>) => Effect.Effect<Answered<A>, ProviderCallError, ArtifactSink>
      readonly encode: (answered: Answered<A>) => Effect.Effect<string>
      readonly units: (answered: Answered<A>) => number
    }
  ): Effect.Effect<Outcome<A>, ToolError<T>> => {
    // A key taken from the cache is confirmed by the reservation statement; any other answer confirms it first.
    let confirmed = caller.confirmed
    // What a billable failure (normalization) was actually charged, for its usage record and its replay.
    let failureCharge = 0
    const confirmOnFailure = (error: ToolError<T>): Effect.Effect<never, ToolError<T>> =>
      confirmed || error._tag === "InvalidKey"
        ? Effect.fail(error)
        : keys.confirm(caller).pipe(
          Effect.tap(() => Effect.sync(() => (confirmed = true))),
          Effect.zipRight(Effect.fail(error))
        )
    return Effect.gen(function* () {
      const def = catalog[tool]
      const price = pricing.priceOf(tool)
      const reservation = reserveFor(price, def.maxUnits(input))
      const requestId = options.requestId ?? (yield* randomId("req", 20))

      // 5. beta, and the key's tool allow-list: a fresh call and a replay alike must pass them
      const admit = Effect.gen(function* () {
        if (def.beta) yield* betas.require(caller.orgId, tool)
        if (caller.allowedTools !== null && !caller.allowedTools.includes(tool)) {
          return yield* new ToolNotAllowed({ message: `This API key may not call ${tool}; its tools are limited.` })
        }
      })

      // 4. Idempotency-Key
      const key = options.idempotencyKey === undefined ? undefined : yield* validateKey(options.idempotencyKey)
      if (key !== undefined) {
        const claim = yield* idempotency.claim({
          orgId: caller.orgId,
          key,
          fingerprint: fingerprint(mode.label, input),
          requestId,
          leaseMs: leases.leaseMs
        })
        if (claim._tag === "Replay") {
          // A stored answer is served only to a caller who could make the call now: a revoked key, a key
          // whose tools are limited, or an org whose beta was turned off gets what a fresh call would get.
          if (!confirmed) yield* keys.confirm(caller)
          confirmed = true
          yield* admit
          return { _tag: "Replayed", requestId, ...claim.response } satisfies Replayed
        }
      }

      const execute: Effect.Effect<Fresh<A>, ToolError<T>> = Effect.gen(function* () {
        yield* admit
        // 6. account tools need the org's connection to the provider (credentials for this call only)
        const credentials = yield* providers.credentials(tool, caller.orgId)
        // what the provider refuses on the input's face (a URL the SSRF guard refuses) costs nothing
        yield* providers.preflight(tool, input, credentials)
        // 7. reserve the most this input can cost
        const hold = yield* ledger.reserve({
          orgId: caller.orgId,
          keyId: caller.keyId,
          tool,
          requestId,
          amount: reservation,
          leaseMs: leases.leaseMs
        }).pipe(
          Effect.tapError((e) => e._tag === "InvalidKey" ? keys.forget(caller.keyId) : Effect.sync(() => (confirmed = true)))
        )
        confirmed = true
        // this process renews the hold's lease until it is settled or voided, however long the provider takes
        yield* leases.holdHeld(hold.id)
        return yield* invokeAndSettle(hold, credentials).pipe(Effect.ensuring(leases.releaseHold(hold.id)))
      })

      /**
       * The charge that was actually posted: `charge`, or 0 when the hold was no longer pending (a sweeper
       * took this process for dead and voided it). Never silent: logged at ERROR and counted.
       */
      const settle = (hold: Hold, charge: number) =>
        Effect.flatMap(ledger.settle(hold, charge), (settled) =>
          settled
            ? Effect.succeed(charge)
            : Effect.logError("settlement found its hold no longer pending: the call is answered as charged 0").pipe(
              Effect.annotateLogs({ request_id: requestId, org_id: caller.orgId, tool: mode.label, hold_id: hold.id, charge }),
              Effect.zipRight(Metric.increment(settlementsLost)),
              Effect.as(0)
            ))

      // 8. the provider call, under the call's deadline (abort signals end it; nothing interrupts it, so a
      // client that hangs up cannot abandon a call the provider may already be serving)
      const invokeAndSettle = (hold: Hold, credentials: CredentialFor<T>): Effect.Effect<Fresh<A>, ToolError<T>> =>
        Effect.gen(function* () {
          const sink = ArtifactSink.of({
            store: (contentType, data) => artifacts.store(caller.orgId, contentType, data),
            maxBytes: config.artifactMaxBytes
          })
          const started = yield* preciseMillis
          // one context for the provider phase (each provide copies the fiber's whole context)
          const callContext = Context.make(ArtifactSink, sink).pipe(
            Context.add(ArtifactSink, sink),
            Context.add(CallDeadline, {
              at: (yield* nowMillis) + callTimeoutMs,
              describe: `${tool} did not complete within ${callTimeoutMs} ms.`
            }),
            Context.add(ProviderIdempotencyKey, key === undefined ? undefined : providerIdempotencyKey(caller.orgId, key)),
            Context.add(ConversionOwner, caller.orgId)
          )
          const exit = yield* mode.invoke(credentials).pipe(
            Effect.provide(callContext),
            traced("Gateway.provider", { attributes: { tool } }),
            Effect.exit
          )
          const providerMs = (yield* preciseMillis) - started
          const facts = yield* callFacts
          facts.providerMs = providerMs
          yield* recordProvider(mode.label, providerMs / 1000)
          if (Exit.isSuccess(exit)) {
            facts.provider = exit.value.provider
            const answered = exit.value
            const body = yield* mode.encode(answered)
            const charged = yield* settle(hold, chargeFor(price, mode.units(answered), reservation))
            return {
              _tag: "Fresh",
              requestId,
              output: answered.output,
              body,
              provider: answered.provider,
              charged
            } satisfies Fresh<A>
          }
          const failure = failureOf(exit)
          if (failure?._tag === "NormalizationFailed") {
            // The provider answered: the call is billed at its minimum price.
            failureCharge = yield* settle(hold, chargeFor(price, 0, reservation))
          } else {
            yield* ledger.void(hold)
          }
          // The provider refused the org's own credentials: show it on the connection.
          if (failure?._tag === "ProviderCredentialRejected" && def.account && isAccountProvider(def.provider)) {
            yield* connections.markRejected(caller.orgId, def.provider)
          }
          return yield* Effect.failCause(exit.cause)
        })

      if (key === undefined) return yield* execute
      const claim: ClaimLease = { orgId: caller.orgId, key, requestId }
      yield* leases.claimHeld(claim)
      // Only billable outcomes are kept for replay; anything else frees the key for a retry.
      return yield* execute.pipe(
        Effect.onExit((exit) => {
          if (Exit.isSuccess(exit)) {
            return idempotency.complete(caller.orgId, key, { status: 200, body: exit.value.body, charged: exit.value.charged })
          }
          // A billable failure is kept, and so is a write that may have been carried out: the same request
          // again must not send it twice. Any other failure frees the key for a retry.
          const failure = failureOf(exit)
          if (failure?._tag === "NormalizationFailed" || failure?._tag === "WriteOutcomeUnknown") {
            return idempotency.complete(caller.orgId, key, {
              status: envelopeOf[failure._tag].status,
              body: JSON.stringify(envelope(failure)),
              charged: failure._tag === "NormalizationFailed" ? failureCharge : 0
            })
          }
          return idempotency.release(caller.orgId, key)
        }),
        Effect.ensuring(leases.releaseClaim(claim))
      )
    }).pipe(
      Effect.catchAll(confirmOnFailure),
      Effect.ensuring(Effect.flatMap(callFacts, (facts) =>
        Effect.sync(() => {
          if (confirmed) facts.unconfirmed = undefined
        }))),
      // the usage record and the call's facts are part of the uninterruptible tail: a client that hangs up
      // leaves a call that is charged, recorded and logged as what it was
      logUsage(caller, mode.label, options.requestId, () => failureCharge),
      Effect.uninterruptible,
      traced("Gateway.run", { attributes: { tool: mode.label, org: caller.orgId } }),
      withCallFacts
    )
  }

  const run = <T extends ToolName>(
    caller: Caller,
    tool: T,
    input: ToolInput<T>,
    options: CallOptions = {}
  ): Effect.Effect<Outcome<ToolOutput<T>>, ToolError<T>> => {
    const def = catalog[tool]
    return pipeline(caller, tool, input, options, {
      label: tool,
      invoke: (credentials) => providers.call(tool, input, credentials),
      encode: (answered) =>
        Schema.encode(def.output)(answered.output).pipe(Effect.map((encoded) => JSON.stringify(encoded)), Effect.orDie),
      units: (answered) => def.units(answered.output)
    })
  }

  const runUnknown = <T extends ToolName>(
    caller: Caller,
    tool: T,
    rawInput: unknown,
    options: CallOptions = {}
  ): Effect.Effect<Outcome<ToolOutput<T>>, ToolError<T>> =>
    Effect.flatMap(decodeInput(tool, rawInput), (input) => run(caller, tool, input, options))

  const runRaw = <T extends ToolName>(
    caller: Caller,
    tool: T,
    rawInput: unknown,
    options: CallOptions = {}
  ): Effect.Effect<Outcome<RawOutput>, ToolError<T>> =>
    Effect.flatMap(decodeInput(tool, rawInput, "input."), (input) => runRawDecoded(caller, tool, input, options))

  const runRawDecoded = <T extends ToolName>(
    caller: Caller,
    tool: T,
    input: ToolInput<T>,
    options: CallOptions
  ): Effect.Effect<Outcome<RawOutput>, ToolError<T>> => {
    // charged as the tool would be: what its normalization would count (see ProviderRegistry.units)
    let delivered = 0
    return pipeline(caller, tool, input, options, {
      label: `run:${tool}`,
      invoke: (credentials) =>
        Effect.flatMap(providers.callRaw(tool, input, credentials), (answered) => Effect.map(providers.units(tool, input, answered.output), (units) => {
          delivered = units
          return answered
        })).pipe(Effect.map((answered) => ({
          provider: answered.provider,
          output: {
            tool,
            provider: answered.provider,
            status: answered.output.status,
            body: answered.output.body,
            ...(answered.output.artifacts !== undefined && Object.keys(answered.output.artifacts).length > 0
              ? { artifacts: answered.output.artifacts }
              : {})
          }
        }))),
      encode: (answered) => Effect.succeed(JSON.stringify(answered.output)),
      units: () => delivered
    })
  }

  /** One usage record per call that reached the pipeline, whatever its outcome (written off the caller's path). */
  const logUsage = (caller: Caller, tool: string, requestId: string | undefined, failureCharge: () => number) =>
  <A extends Outcome<unknown>, E extends { readonly _tag: keyof typeof envelopeOf }>(
    self: Effect.Effect<A, E>
  ): Effect.Effect<A, E> =>
    Effect.gen(function* () {
      const started = yield* nowMillis
      const exit = yield* Effect.exit(self)
      const ended = yield* nowMillis
      const base = { orgId: caller.orgId, keyId: caller.keyId, tool, latencyMs: ended - started, at: started }
      const facts = yield* callFacts
      facts.orgId = caller.orgId
      facts.keyId = caller.keyId
      facts.tool = tool
      if (Exit.isSuccess(exit)) {
        const outcome = exit.value
        const code = outcome._tag === "Fresh" ? "ok" : "replayed"
        const credits = outcome._tag === "Fresh" ? outcome.charged : 0
        facts.credits = credits
        facts.status = outcome._tag === "Fresh" ? 200 : outcome.status
        facts.code = code
        yield* recordCall(tool, code, credits, base.latencyMs / 1000)
        yield* usage.record({
          ...base,
          requestId: outcome.requestId,
          status: outcome._tag === "Fresh" ? 200 : outcome.status,
          code,
          credits,
          provider: outcome._tag === "Fresh" ? outcome.provider : null
        })
      } else {
        const failure = failureOf(exit)
        const spec = failure === undefined ? envelopeOf.InternalError : envelopeOf[failure._tag]
        const credits = failure?._tag === "NormalizationFailed" ? failureCharge() : 0
        facts.credits = credits
        facts.status = spec.status
        facts.code = spec.code
        yield* recordCall(tool, spec.code, credits, base.latencyMs / 1000)
        yield* usage.record({
          ...base,
          requestId: requestId ?? "",
          status: spec.status,
          code: spec.code,
          credits,
          provider: null
        })
      }
      return yield* exit
    })

  const decodeInput = <T extends ToolName>(
    tool: T,
    input: unknown,
    prefix = ""
  ): Effect.Effect<ToolInput<T>, InvalidRequest> =>
    Schema.decodeUnknown(catalog[tool].input, { errors: "all" })(input).pipe(
      Effect.mapError((error) =>
        new InvalidRequest({ message: `Invalid ${tool} input: ${prefix}${describeParseError(error)}` })
      )
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
      // a stored failure: a normalization failure, or a write whose outcome is unknown
      const stored = yield* Schema.decodeUnknown(Schema.parseJson(StoredEnvelope))(outcome.body).pipe(Effect.orDie)
      return yield* stored.error.code === envelopeOf.WriteOutcomeUnknown.code
        ? new WriteOutcomeUnknown({ message: stored.error.message })
        : new NormalizationFailed({ message: stored.error.message })
    }).pipe(withCallFacts)

  return Gateway.of({ authenticate, throttle, run, runUnknown, runRaw, call })
})

/** The key a provider's own idempotency mechanism receives: one per org and caller's key, never the caller's key itself. */
const providerIdempotencyKey = (orgId: OrgId, key: string) => `tg-${sha256Hex(`${orgId}\n${key}`)}`

const StoredEnvelope = Schema.Struct({ error: Schema.Struct({ code: Schema.String, message: Schema.String }) })

/** The typed failure of an exit, if it failed (rather than succeeded, died or was interrupted). */
const failureOf = <A, E>(exit: Exit.Exit<A, E>): E | undefined =>
  Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined

export const GatewayServiceLive = Layer.effect(Gateway, make)
