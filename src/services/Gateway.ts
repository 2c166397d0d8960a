/**
 * The tool-call pipeline, in the order that decides which error wins (DESIGN §4). After the key and its
 * rate limit (`Authentication`) and the decoded input, a call goes through named steps, each answering a
 * value the next one takes:
 *
 *   claim   the Idempotency-Key: a replay (its checks passed, the stored answer), or the call runs
 *   admit   the org's betas, and the key's tool allow-list
 *   reserve the connection's credentials, what the provider refuses on the input's face, then the hold
 *           (under a key, admit and the reads of reserve are taken before the claim, their error kept for
 *           after it, so that the hold's statement can claim the key: see `claim`)
 *   invoke  the provider call, under the call's deadline, its hold's lease renewed meanwhile
 *   charge  the hold settled at what the answer delivered (or the minimum for a normalization failure), or voided;
 *           a 200 under an Idempotency-Key is kept by the same statement that settles it
 *   store   the other outcomes kept under the Idempotency-Key (a billable failure, a write of unknown
 *           outcome), or the key freed
 *   log     the usage record, the metrics, the request's facts
 *
 * From the claim on it runs uninterruptibly: a client that hangs up does not abandon a hold or a claim, and a
 * provider call that was started is finished, charged, stored and logged.
 */
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { ProvidersConfig } from "../config.js"
import { answerProvesCredentials, isAccountProvider } from "../domain/connections.js"
import {
  type CallError,
  type CredentialRequired,
  envelope,
  envelopeOf,
  InvalidRequest,
  NormalizationFailed,
  replayedErrors,
  ToolNotAllowed,
  WriteOutcomeUnknown
} from "../domain/errors.js"
import type { OrgId } from "../domain/ids.js"
import { describeParseError } from "../domain/parse.js"
import { chargeFor, type Price, reserveFor } from "../domain/pricing.js"
import { encodesAsIs } from "../domain/schema-helpers.js"
import {
  catalog,
  type ConnectionError,
  type CredentialFor,
  type ToolInput,
  type ToolName,
  toolNames,
  type ToolOutput
} from "../domain/tools.js"
import type { Answered, ProviderFailure } from "../providers/common.js"
import { type ArtifactRef, Artifacts, ArtifactSink } from "./Artifacts.js"
import { Authentication, type AuthError } from "./Authentication.js"
import { Betas } from "./Betas.js"
import { Connections } from "./Connections.js"
import { ConversionOwner } from "./HtmlConverter.js"
import { fingerprint, Idempotency, validateKey } from "./Idempotency.js"
import { type Caller, KeyStore } from "./KeyStore.js"
import { type ClaimLease, Leases } from "./Leases.js"
import { type Hold, type KeptAnswer, Ledger, type ReserveError } from "./Ledger.js"
import { Pricing } from "./Pricing.js"
import { CallDeadline, CallOrg, ProviderIdempotencyKey } from "./ProviderClient.js"
import { type CallContext, ProviderRegistry } from "./ProviderRegistry.js"
import { randomId, sha256Hex } from "./random.js"
import { callFacts, recordCall, recordProvider, settlementsLost, withCallFacts } from "./Telemetry.js"
import { nowMillis, preciseMillis } from "./time.js"
import { traced } from "./tracing.js"
import { Usage } from "./Usage.js"

export type { AuthError } from "./Authentication.js"

/** The errors of one tool: every call's, and `credential_required` for the tools that need a connection. */
export type ToolError<T extends ToolName> = Exclude<CallError, CredentialRequired> | ConnectionError<T>

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
  /** The request id of the call whose answer this is (its log line, its usage record). */
  readonly originalRequestId: string
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
  /** The steps from the claim on, for an authenticated caller and a decoded input. */
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
   * `POST /v1/run`: validate `input` against the tool's schema, then the same steps, answering the
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

/** One call, as the steps see it: who calls which tool with what, what it may cost, and its request id. */
interface Call<T extends ToolName> {
  readonly caller: Caller
  readonly tool: T
  /** The tool, or `run:<tool>` for a raw call (they are different requests to an Idempotency-Key). */
  readonly label: string
  readonly input: ToolInput<T>
  readonly requestId: string
  readonly price: Price
  /** The most this input can cost: what is reserved. */
  readonly reservation: number
  /** The caller's Idempotency-Key, checked. */
  readonly key: string | undefined
  /** Under a key: the request's fingerprint (its tool and input), which a key's claim is bound to. */
  readonly fingerprint: string | undefined
  /**
   * When the call began (a Clock reading): its hold's and claim's leases, written from later readings, hold at
   * least until this plus the lease.
   */
  readonly started: number
}

/** What a call runs its provider phase with: the credentials of its connection, and its hold. */
interface Reserved<T extends ToolName> {
  readonly credentials: CredentialFor<T>
  readonly hold: Hold
}

/** How a call answers: the provider phase, the 200 body, and what the answer delivered (for the charge). */
interface Mode<T extends ToolName, A> {
  readonly label: string
  readonly invoke: (credentials: CredentialFor<T>, context: CallContext) => Effect.Effect<Answered<A>, ProviderFailure>
  readonly encode: (answered: Answered<A>) => Effect.Effect<string>
  readonly units: (answered: Answered<A>) => number
}

/** Errors a reservation statement answered: the key was confirmed by it (the statement checks the key first). */
const REFUSED_BY_RESERVATION: ReadonlySet<string> = new Set(["InsufficientCredits", "SpendCapExceeded", "KeySpendLimitExceeded"])

/**
 * The key a provider's own idempotency mechanism receives: one per org, caller's key and request (its fingerprint),
 * never the caller's key itself. The request is part of it: a key reused for another request once its record is
 * past its retention (which the gateway allows) must not be taken by the provider for the first request again (a
 * Polar-like API dropped the new events as duplicates, and the call was charged for nothing).
 */
const providerIdempotencyKey = (orgId: OrgId, key: string, fingerprint: string) => `tg-${sha256Hex(`${orgId}\n${key}\n${fingerprint}`)}`

const isReplayedError = (failure: { readonly _tag: string }): failure is NormalizationFailed | WriteOutcomeUnknown =>
  replayedErrors.some((tag) => tag === failure._tag)

/** The typed failure of an exit, if it failed (rather than succeeded, died or was interrupted). */
const failureOf = <A, E>(exit: Exit.Exit<A, E>): E | undefined =>
  Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined

/** The provider a provider phase ended at: the one that answered, or the one its failure is put down to (none: none was tried). */
const providerOf = <A>(exit: Exit.Exit<Answered<A>, ProviderFailure>): string | undefined =>
  Exit.isSuccess(exit) ? exit.value.provider : failureOf(exit)?.provider

const StoredEnvelope = Schema.Struct({ error: Schema.Struct({ code: Schema.String, message: Schema.String }) })

export const make = Effect.gen(function* () {
  const config = yield* ProvidersConfig
  const authentication = yield* Authentication
  const keys = yield* KeyStore
  const ledger = yield* Ledger
  const idempotency = yield* Idempotency
  const betas = yield* Betas
  const connections = yield* Connections
  const usage = yield* Usage
  const pricing = yield* Pricing
  const artifacts = yield* Artifacts
  const leases = yield* Leases
  const providers = yield* ProviderRegistry

  // The whole provider phase (fallbacks included) must end within this.
  const callTimeoutMs = config.timeoutMs * 3
  // The tools whose answer is written as the provider's normalization built it (see `encodesAsIs`)
  const plainOutputs: ReadonlySet<ToolName> = new Set(toolNames.filter((tool) => encodesAsIs(catalog[tool].output)))

  // -- claim ------------------------------------------------------------------------------------------
  /**
   * The Idempotency-Key: the stored answer to replay, or the claim this call runs under (none without a key),
   * with the call's way to its hold. The steps between the claim and the hold (`admit`, `prepare`) only read,
   * so they are taken first, their exit kept as a value: when they pass, the reservation's own statement
   * claims the key (`Ledger.claimAndReserve`: one statement and one commit, where a claim alone and a
   * reservation were two), and otherwise the key is claimed alone and their failure (an error or a defect)
   * answered after it. Either way the claim's answer wins over theirs, as DESIGN §4 orders them. (The cost: a
   * replay of an account tool's call reads and opens the connection's credentials, which it then does not use.)
   */
  const claim = <T extends ToolName>(call: Call<T>, key: string) =>
    Effect.gen(function* () {
      const request = {
        orgId: call.caller.orgId,
        key,
        fingerprint: call.fingerprint ?? fingerprint(call.label, call.input),
        requestId: call.requestId,
        leaseMs: leases.leaseMs,
        write: catalog[call.tool].effect === "write"
      }
      // the whole exit, defects included: a connection that cannot be read must not beat the claim's answer either
      const prepared = yield* Effect.exit(Effect.zipRight(admit(call), prepare(call)))
      let reserved: Effect.Effect<Reserved<T>, ToolError<T>>
      if (Exit.isFailure(prepared)) {
        const claimed = yield* idempotency.claim(request)
        if (claimed._tag === "Replay") return claimed
        reserved = Effect.failCause(prepared.cause)
      } else {
        const credentials = prepared.value
        const fused = yield* Effect.either(
          forgetRevoked(call, ledger.claimAndReserve(reservation(call), { key, fingerprint: request.fingerprint }))
        )
        if (Either.isLeft(fused)) {
          reserved = Effect.fail(fused.left)
        } else if (Option.isSome(fused.right)) {
          reserved = Effect.succeed({ credentials, hold: fused.right.value })
        } else {
          const claimed = yield* idempotency.claimTaken(request)
          if (claimed._tag === "Replay") return claimed
          // a record past its retention, taken over: the reservation is still to make
          reserved = Effect.map(hold(call), (made) => ({ credentials, hold: made }))
        }
      }
      const lease: ClaimLease = { orgId: call.caller.orgId, key, requestId: call.requestId }
      yield* leases.claimHeld(lease, call.started + leases.leaseMs)
      return { _tag: "Claimed", key, lease, reserved } as const
    })

  // -- admit ------------------------------------------------------------------------------------------
  /** The org's betas and the key's allow-list: a fresh call and a replay alike must pass them. */
  const admit = <T extends ToolName>(call: Call<T>) =>
    Effect.gen(function* () {
      if (catalog[call.tool].beta) yield* betas.require(call.caller.orgId, call.tool)
      const allowed = call.caller.allowedTools
      if (allowed !== null && !allowed.includes(call.tool)) {
        return yield* new ToolNotAllowed({ message: `This API key may not call ${call.tool}; its tools are limited.` })
      }
    })

  // -- reserve ----------------------------------------------------------------------------------------
  /** The credentials of the org's connection (account tools), then what the provider refuses on the input's face (free). */
  const prepare = <T extends ToolName>(call: Call<T>) =>
    Effect.tap(providers.credentials(call.tool, call.caller.orgId), (credentials) =>
      providers.preflight(call.tool, call.input, credentials))

  const reservation = <T extends ToolName>(call: Call<T>) => ({
    orgId: call.caller.orgId,
    keyId: call.caller.keyId,
    tool: call.tool,
    requestId: call.requestId,
    amount: call.reservation,
    leaseMs: leases.leaseMs
  })

  /** The reservation statement also confirms a key taken from the cache; one found revoked is forgotten. */
  const forgetRevoked = <T extends ToolName, A>(call: Call<T>, reserving: Effect.Effect<A, ReserveError>) =>
    Effect.tapErrorTag(reserving, "InvalidKey", () => keys.forget(call.caller.keyId))

  /** The hold: the most this input can cost. */
  const hold = <T extends ToolName>(call: Call<T>) => forgetRevoked(call, ledger.reserve(reservation(call)))

  /** An unkeyed call's way to its hold: the steps in order. */
  const reserve = <T extends ToolName>(call: Call<T>): Effect.Effect<Reserved<T>, ToolError<T>> =>
    Effect.gen(function* () {
      yield* admit(call)
      const credentials = yield* prepare(call)
      return { credentials, hold: yield* hold(call) }
    })

  // -- invoke -----------------------------------------------------------------------------------------
  /**
   * The provider phase, under the call's deadline and its leases (`heldUntil`: a request is not sent once they may
   * have run out); the exit, whatever it is (abort signals end it: nothing interrupts it).
   */
  const invoke = <T extends ToolName, A>(call: Call<T>, mode: Mode<T, A>, credentials: CredentialFor<T>, heldUntil: () => number) =>
    Effect.gen(function* () {
      // the files this call keeps: deleted if it fails after keeping them (nothing would name them)
      const kept: Array<string> = []
      const sink = ArtifactSink.of({
        store: (contentType, data) => Effect.tap(artifacts.store(call.caller, contentType, data), (ref) => kept.push(ref.id)),
        maxBytes: config.artifactMaxBytes
      })
      // what belongs to this call: where files go, its deadline, its key at providers, whose pages it converts
      const context: CallContext = Context.make(ArtifactSink, sink).pipe(
        Context.add(CallDeadline, {
          at: (yield* nowMillis) + callTimeoutMs,
          describe: `${call.tool} did not complete within ${callTimeoutMs} ms.`,
          heldUntil,
          keyed: call.key !== undefined
        }),
        Context.add(
          ProviderIdempotencyKey,
          call.key === undefined || call.fingerprint === undefined ? undefined : providerIdempotencyKey(call.caller.orgId, call.key, call.fingerprint)
        ),
        Context.add(ConversionOwner, call.caller.orgId),
        Context.add(CallOrg, call.caller.orgId)
      )
      const started = yield* preciseMillis
      const exit = yield* mode.invoke(credentials, context).pipe(
        traced("Gateway.provider", { attributes: { tool: call.tool } }),
        Effect.exit
      )
      const providerMs = (yield* preciseMillis) - started
      if (Exit.isFailure(exit) && kept.length > 0) yield* artifacts.discard(call.caller.orgId, kept)
      const facts = yield* callFacts
      facts.providerMs = providerMs
      yield* recordProvider(call.label, providerMs / 1000)
      return { exit, kept }
    })

  // -- charge -----------------------------------------------------------------------------------------
  /**
   * The charge actually posted: `amount`, or 0 when it was not (a sweeper took this process for dead and voided
   * the hold, or the database kept failing: Ledger.settle). Never silent: logged at ERROR and counted.
   */
  const settle = <T extends ToolName>(call: Call<T>, hold: Hold, amount: number, keep?: KeptAnswer) =>
    Effect.flatMap(ledger.settle(hold, amount, keep), (settled) =>
      settled
        ? Effect.succeed(amount)
        : Effect.logError("settlement not posted (its hold no longer pending, or the database kept failing): the call is answered as charged 0").pipe(
          Effect.annotateLogs({ request_id: call.requestId, org_id: call.caller.orgId, tool: call.label, hold_id: hold.id, charge: amount }),
          Effect.zipRight(Metric.increment(settlementsLost)),
          Effect.as(0)
        ))

  /**
   * The hold settled at what the answer delivered, or at the tool's minimum for a normalization failure
   * (the provider answered), or voided: the call's answer, with what it was charged.
   */
  const charge = <T extends ToolName, A>(
    call: Call<T>,
    mode: Mode<T, A>,
    hold: Hold,
    exit: Exit.Exit<Answered<A>, ProviderFailure>,
    credentials: CredentialFor<T>,
    kept: ReadonlyArray<string>
  ): Effect.Effect<Fresh<A>, ToolError<T>> =>
    Effect.gen(function* () {
      /** Charged the tool's minimum (the provider answered), kept by the settlement's statement like a 200. */
      const normalizationFailed = (failure: { readonly message: string }) =>
        Effect.gen(function* () {
          // kept by the settlement's statement too: a charged failure is never left without its answer to replay
          const failed = new NormalizationFailed({ message: failure.message })
          const keep = call.key === undefined
            ? undefined
            : {
              orgId: call.caller.orgId,
              key: call.key,
              requestId: call.requestId,
              status: envelopeOf.NormalizationFailed.status,
              body: JSON.stringify(envelope(failed))
            }
          const charged = yield* settle(call, hold, chargeFor(call.price, 0, call.reservation), keep)
          return yield* new NormalizationFailed({ message: failure.message, charged })
        })
      if (Exit.isSuccess(exit)) {
        const answered = exit.value
        // an answer made from a large upstream answer is encoded in its turn, as it was read
        const encoded = yield* Effect.exit(providers.inTurn(answered.bytes ?? 0, mode.encode(answered)))
        if (Exit.isFailure(encoded)) {
          // the provider answered (a write may have been done): never a 500 that a retry would answer by sending
          // it again, but the answer that could not be written, charged and kept as a normalization failure
          yield* Effect.logError("a provider's answer could not be encoded as the tool's output", encoded.cause).pipe(
            Effect.annotateLogs({ request_id: call.requestId, tool: call.label, provider: answered.provider })
          )
          // the files it kept are named by no answer
          if (kept.length > 0) yield* artifacts.discard(call.caller.orgId, kept)
          return yield* normalizationFailed({
            message: `The ${answered.provider} answer could not be written as ${call.label}'s output; the call was carried out ` +
              "(check before sending a write again)."
          })
        }
        const body = encoded.value
        // under an Idempotency-Key, the answer is kept by the settlement's statement (see `store`)
        const keep = call.key === undefined ? undefined : { orgId: call.caller.orgId, key: call.key, requestId: call.requestId, status: 200, body }
        const charged = yield* settle(call, hold, chargeFor(call.price, mode.units(answered), call.reservation), keep)
        // the provider took the org's own credentials: a connection shown rejected for them is active again
        const def = catalog[call.tool]
        if (def.account && isAccountProvider(def.provider) && answerProvesCredentials(def.provider)) {
          yield* connections.markAccepted(call.caller.orgId, def.provider, credentials)
        }
        return { _tag: "Fresh", requestId: call.requestId, output: answered.output, body, provider: answered.provider, charged }
      }
      const failure = failureOf(exit)?.error
      if (failure?._tag === "NormalizationFailed") return yield* normalizationFailed(failure)
      yield* ledger.void(hold)
      // the provider refused the org's own credentials: show it on the connection (if it still holds them) — not
      // when it refused one request with them (`forbidden`)
      const def = catalog[call.tool]
      if (
        failure?._tag === "ProviderCredentialRejected" && failure.forbidden !== true && def.account &&
        isAccountProvider(def.provider)
      ) {
        yield* connections.markRejected(call.caller.orgId, def.provider, credentials)
      }
      return yield* Effect.failCause(Cause.map(exit.cause, (failed) => failed.error))
    })

  // -- store ------------------------------------------------------------------------------------------
  /**
   * Keep the outcome under the claimed key: a write that may have been carried out (the same request again must
   * not send it twice); a 200 and a normalization failure are already kept, by the settlement that charged them.
   * Any other failure frees the key for a retry.
   */
  const store = <T extends ToolName, A>(call: Call<T>, key: string, exit: Exit.Exit<Fresh<A>, ToolError<T>>) => {
    const orgId = call.caller.orgId
    // kept with the settlement that charged it (`charge`): one statement, one commit
    if (Exit.isSuccess(exit)) return Effect.void
    const failure = failureOf(exit)
    if (failure?._tag === "NormalizationFailed") return Effect.void
    if (failure !== undefined && isReplayedError(failure)) {
      return idempotency.complete(orgId, key, call.requestId, { status: envelopeOf[failure._tag].status, body: JSON.stringify(envelope(failure)), charged: 0 })
    }
    return idempotency.release(orgId, key, call.requestId)
  }

  // -- log --------------------------------------------------------------------------------------------
  /**
   * One usage record per call that reached the steps, whatever its outcome, with its metrics and facts. `provider`:
   * where its provider phase ended (`providerOf`), if it ran.
   */
  const log = <T extends ToolName, A>(
    call: Pick<Call<T>, "caller" | "label" | "requestId">,
    exit: Exit.Exit<Outcome<A>, ToolError<T>>,
    started: number,
    provider: string | undefined
  ) =>
    Effect.gen(function* () {
      const ended = yield* nowMillis
      const failure = failureOf(exit)
      const spec = failure === undefined ? envelopeOf.InternalError : envelopeOf[failure._tag]
      const [status, code, credits] = Exit.isSuccess(exit)
        ? exit.value._tag === "Fresh"
          ? [200, "ok", exit.value.charged] as const
          : [exit.value.status, "replayed", 0] as const
        : [spec.status, spec.code, failure?._tag === "NormalizationFailed" ? failure.charged ?? 0 : 0] as const
      const facts = yield* callFacts
      Object.assign(facts, { orgId: call.caller.orgId, keyId: call.caller.keyId, tool: call.label, credits, status, code, provider })
      yield* recordCall(call.label, code, credits, (ended - started) / 1000)
      yield* usage.record({
        orgId: call.caller.orgId,
        keyId: call.caller.keyId,
        tool: call.label,
        latencyMs: ended - started,
        // when the call was answered and charged: the month its charge counts in, and the order records are written in
        at: ended,
        requestId: call.requestId,
        status,
        code,
        credits,
        provider: provider ?? null
      })
    })

  /**
   * The steps, shared by tool calls and raw runs. A key taken from the cache is confirmed by the reservation
   * statement; an answer that did not reach it confirms the key first (a revoked key gets `invalid_key`).
   */
  const pipeline = <T extends ToolName, A>(
    caller: Caller,
    tool: T,
    input: ToolInput<T>,
    options: CallOptions,
    mode: Mode<T, A>
  ): Effect.Effect<Outcome<A>, ToolError<T>> =>
    Effect.gen(function* () {
      const started = yield* nowMillis
      const price = pricing.priceOf(tool)
      const requestId = options.requestId ?? (yield* randomId("req", 20))
      // where the provider phase ended, once it has (a replay, and a call refused before it, have none)
      let provider: string | undefined
      const steps = Effect.gen(function* () {
        const key = options.idempotencyKey === undefined ? undefined : yield* validateKey(options.idempotencyKey)
        const call: Call<T> = {
          caller,
          tool,
          label: mode.label,
          input,
          requestId,
          price,
          reservation: reserveFor(price, catalog[tool].maxUnits(input)),
          key,
          fingerprint: key === undefined ? undefined : fingerprint(mode.label, input),
          started
        }
        const claimed = key === undefined ? { _tag: "Unkeyed" } as const : yield* claim(call, key)
        if (claimed._tag === "Replay") {
          // A stored answer is served only to a caller who could make the call now: a revoked key, a key
          // whose tools are limited, or an org whose beta was turned off gets what a fresh call would get.
          yield* keys.confirm(caller)
          yield* admit(call)
          return { _tag: "Replayed", requestId, originalRequestId: claimed.requestId, ...claimed.response } satisfies Replayed
        }
        const run = (reserved: Effect.Effect<Reserved<T>, ToolError<T>>, lease?: ClaimLease) =>
          Effect.gen(function* () {
            const { credentials, hold } = yield* reserved
            // this process renews the hold's lease until it is settled or voided, however long the provider takes
            yield* leases.holdHeld(hold.id, started + leases.leaseMs)
            return yield* invoke(call, mode, credentials, () => leases.heldUntil(hold.id, lease)).pipe(
              Effect.flatMap(({ exit, kept }) => {
                provider = providerOf(exit)
                return charge(call, mode, hold, exit, credentials, kept)
              }),
              Effect.ensuring(leases.releaseHold(hold.id))
            )
          })
        return claimed._tag === "Claimed"
          ? yield* run(claimed.reserved, claimed.lease).pipe(
            Effect.onExit((exit) => store(call, claimed.key, exit)),
            Effect.ensuring(leases.releaseClaim(claimed.lease))
          )
          : yield* run(reserve(call))
      })
      const exit = yield* Effect.exit(steps.pipe(Effect.catchAll((error) => confirmBeforeFailing(caller, error))))
      // an answer other than invalid_key has confirmed the key: the request's error answer need not again
      if (failureOf(exit)?._tag !== "InvalidKey") (yield* callFacts).unconfirmed = undefined
      yield* log({ caller, label: mode.label, requestId }, exit, started, provider)
      return yield* exit
    }).pipe(
      // the whole of it is the call's tail: a client that hangs up leaves it charged, recorded and logged
      Effect.uninterruptible,
      traced("Gateway.run", { attributes: { tool: mode.label, org: caller.orgId } }),
      withCallFacts
    )

  /**
   * Before a failure is answered, the caller's key is confirmed valid — unless the database lookup, the
   * reservation statement or the provider phase (which follows the reservation) already did: a key revoked
   * while it sat in this process's cache then gets `invalid_key`, whatever else was wrong.
   */
  const confirmBeforeFailing = <T extends ToolName>(caller: Caller, error: ToolError<T>): Effect.Effect<never, ToolError<T>> =>
    caller.confirmed || error._tag === "InvalidKey" || REFUSED_BY_RESERVATION.has(error._tag) || isProviderPhase(error)
      ? Effect.fail(error)
      : Effect.zipRight(keys.confirm(caller), Effect.fail(error))

  const run = <T extends ToolName>(caller: Caller, tool: T, input: ToolInput<T>, options: CallOptions = {}) => {
    const def = catalog[tool]
    return pipeline(caller, tool, input, options, {
      label: tool,
      invoke: (credentials, context) => providers.call(tool, input, credentials, context),
      // an output whose schema neither transforms nor refines is written as built, not walked again (a normalization
      // names every property it writes: test/providers.test.ts)
      encode: plainOutputs.has(tool)
        ? (answered) => Effect.sync(() => JSON.stringify(answered.output))
        : (answered) =>
          Schema.encode(def.output)(answered.output).pipe(Effect.map((encoded) => JSON.stringify(encoded)), Effect.orDie),
      units: (answered) => def.units(answered.output)
    })
  }

  const decodeInput = <T extends ToolName>(tool: T, input: unknown, prefix = ""): Effect.Effect<ToolInput<T>, InvalidRequest> =>
    Schema.decodeUnknown(catalog[tool].input, { errors: "all" })(input).pipe(
      Effect.mapError((error) => new InvalidRequest({ message: `Invalid ${tool} input: ${prefix}${describeParseError(error)}` }))
    )

  const runUnknown = <T extends ToolName>(caller: Caller, tool: T, rawInput: unknown, options: CallOptions = {}) =>
    Effect.flatMap(decodeInput(tool, rawInput), (input) => run(caller, tool, input, options))

  const runRaw = <T extends ToolName>(caller: Caller, tool: T, rawInput: unknown, options: CallOptions = {}) =>
    Effect.flatMap(decodeInput(tool, rawInput, "input."), (input) =>
      pipeline<T, RawOutput>(caller, tool, input, options, {
        label: `run:${tool}`,
        // charged as the tool would be: what its normalization would count (see ProviderRegistry.units)
        invoke: (credentials, context) =>
          Effect.flatMap(providers.callRaw(tool, input, credentials, context), (answered) =>
            Effect.map(providers.units(tool, input, answered.output), (units) => ({
              provider: answered.provider,
              units,
              ...(answered.bytes === undefined ? {} : { bytes: answered.bytes }),
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
        encode: (answered) => Effect.sync(() => JSON.stringify(answered.output)),
        units: (answered) => answered.units ?? 0
      }))

  const call = <T extends ToolName>(
    tool: T,
    input: ToolInput<T>,
    options: CallOptions & { readonly apiKey: string | Redacted.Redacted<string> }
  ): Effect.Effect<ToolOutput<T>, ToolError<T> | AuthError> =>
    Effect.gen(function* () {
      const apiKey = Redacted.isRedacted(options.apiKey) ? Redacted.value(options.apiKey) : options.apiKey
      const { caller } = yield* authentication.authenticate(apiKey)
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
        : new NormalizationFailed({ message: stored.error.message, charged: 0 })
    }).pipe(withCallFacts)

  return Gateway.of({ run, runUnknown, runRaw, call })
})

/** Failures that come from the provider phase: the reservation was made, so the key was confirmed by it. */
const isProviderPhase = (failure: { readonly _tag: string }) =>
  failure._tag.startsWith("Provider") || failure._tag === "WriteOutcomeUnknown" || failure._tag === "NormalizationFailed" ||
  failure._tag === "ArtifactQuotaExceeded"

export const GatewayServiceLive = Layer.effect(Gateway, make)
