/**
 * The call pipeline on its own, in milliseconds: the real `Gateway`, `Authentication`, `KeyStore`, `RateLimit`
 * (its in-memory buckets) and `Pricing`, over recording stand-ins at the service boundary — the providers
 * (`ProviderRegistry`, scripted per test), the ledger, the Idempotency-Key records, the leases, betas,
 * connections and the usage log — with time driven by `TestClock`. No database, no HTTP: `KeyStore` reads
 * its one key from a stand-in `SqlClient` that answers the statements of a key lookup.
 *
 * What it pins down is the pipeline itself: which error wins when several apply, and what becomes of the
 * hold — settled at the real charge, settled at the minimum, or voided, exactly once. The end-to-end suite
 * proves the same rules over HTTP and PostgreSQL; this one fails at the step that broke them.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import { SqlClient, type SqlConnection, Statement } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Cause, Chunk, Clock, Deferred, Duration, Effect, Exit, Fiber, Layer, Logger, Option, Schema, Stream, TestClock } from "effect"
import { configLayer, type ServerConfigShape } from "../src/config.js"
import { type AccountProvider, credentialSchemas } from "../src/domain/connections.js"
import {
  BetaUnavailable,
  CredentialRequired,
  envelopeOf,
  IdempotencyKeyReused,
  InsufficientCredits,
  InvalidKey,
  InvalidRequest,
  KeySpendLimitExceeded,
  NormalizationFailed,
  ProviderCredentialRejected,
  ProviderNotConfigured,
  ProviderRateLimited,
  ProviderRejected,
  ProviderResponseTooLarge,
  ProviderTimeout,
  ProviderUnavailable,
  RequestInProgress,
  SpendCapExceeded,
  UrlNotAllowed,
  WriteOutcomeUnknown
} from "../src/domain/errors.js"
import { KeyId, OrgId } from "../src/domain/ids.js"
import { describeParseError } from "../src/domain/parse.js"
import { catalog } from "../src/domain/tools.js"
import { failedAt, type ProviderCallError } from "../src/providers/common.js"
import { bindings } from "../src/providers/index.js"
import { Artifacts } from "../src/services/Artifacts.js"
import { Authentication, AuthenticationLive } from "../src/services/Authentication.js"
import { Betas } from "../src/services/Betas.js"
import { Connections } from "../src/services/Connections.js"
import { Gateway, GatewayServiceLive } from "../src/services/Gateway.js"
import { type Claim, type ClaimRequest, Idempotency, type StoredResponse } from "../src/services/Idempotency.js"
import { type KeyRateLimit, KeyStoreLive } from "../src/services/KeyStore.js"
import { Leases } from "../src/services/Leases.js"
import { type Hold, Ledger, type ReserveRequest } from "../src/services/Ledger.js"
import { PricingLive } from "../src/services/Pricing.js"
import { CallDeadline } from "../src/services/ProviderClient.js"
import { ProviderRegistry } from "../src/services/ProviderRegistry.js"
import { RateLimit, RateLimitLive } from "../src/services/RateLimit.js"
import { sha256 } from "../src/services/random.js"
import { Usage, type UsageEntry } from "../src/services/Usage.js"

const ORG = OrgId.make("org_pipeline")
const KEY_ID = KeyId.make("key_pipeline")
const API_KEY = `tg_${"P".repeat(32)}`
/** Well formed, but no key of the org. */
const UNKNOWN_KEY = `tg_${"Q".repeat(32)}`
/** PROVIDER_TIMEOUT_MS of these tests: a call's provider phase gets three times this. */
const TIMEOUT_MS = 1_000

// -- the stand-ins -------------------------------------------------------------------------------------

/** The org's one API key, as the `api_keys` table would have it. */
interface KeyRow {
  allowedTools: ReadonlyArray<string> | null
  rateLimit: KeyRateLimit | null
  revoked: boolean
}

/** What a provider call does: answer (decoded with the tool's output schema, as a normalization would), fail, or hang. */
type Behaviour =
  | { readonly _tag: "Answer"; readonly output: unknown }
  | { readonly _tag: "Fail"; readonly error: ProviderCallError }
  /** Until the call's deadline, then `provider_timeout`: what `ProviderClient` does with an upstream that never answers. */
  | { readonly _tag: "Hang" }

const answer = (output: unknown): Behaviour => ({ _tag: "Answer", output })
const fail = (error: ProviderCallError): Behaviour => ({ _tag: "Fail", error })
const hang: Behaviour = { _tag: "Hang" }

type Refusal = "InvalidKey" | "InsufficientCredits" | "SpendCapExceeded" | "KeySpendLimitExceeded"

type LedgerEvent =
  | { readonly op: "reserve"; readonly tool: string; readonly amount: number; readonly hold?: number; readonly refused?: Refusal }
  | { readonly op: "settle"; readonly hold: number; readonly amount: number }
  | { readonly op: "void"; readonly hold: number }

type IdempotencyEvent =
  | { readonly op: "claim"; readonly key: string }
  | { readonly op: "complete"; readonly key: string; readonly status: number; readonly charged: number; readonly code: string }
  | { readonly op: "release"; readonly key: string }

interface World {
  readonly key: KeyRow
  readonly sql: { lookups: number; confirms: number }
  readonly ledger: {
    readonly events: Array<LedgerEvent>
    /** The reservation statement's refusal, if any. */
    refuse: Refusal | undefined
    /** A settlement finds its hold voided already (a sweeper took this process for dead). */
    holdsSwept: boolean
  }
  readonly provider: {
    readonly calls: Array<{ readonly tool: string; readonly input: unknown; readonly deadline: number }>
    behaviour: Behaviour
    /** What the provider refuses on the input's face (before any credit is reserved). */
    preflight: UrlNotAllowed | InvalidRequest | undefined
    /** When set, a call announces itself (`entered`) and waits for it before doing `behaviour`. */
    gate: Deferred.Deferred<void> | undefined
    readonly entered: Deferred.Deferred<void>
  }
  readonly idempotency: { readonly events: Array<IdempotencyEvent> }
  readonly leases: { readonly holds: Set<number>; readonly claims: Set<string> }
  readonly betas: Set<string>
  readonly connections: Map<AccountProvider, unknown>
  /** A stored connection cannot be opened (a key the process does not have): reading it is a defect. */
  connectionUnreadable: boolean
  readonly rejected: Array<AccountProvider>
  readonly usage: Array<UsageEntry>
  readonly logs: Array<{ readonly level: string; readonly text: string }>
}

interface WorldOptions {
  readonly server?: Partial<ServerConfigShape>
  readonly key?: Partial<KeyRow>
}

const StoredEnvelope = Schema.parseJson(Schema.Struct({ error: Schema.Struct({ code: Schema.String }) }))
const codeOf = (response: StoredResponse) =>
  response.status === 200 ? "ok" : Schema.decodeUnknownSync(StoredEnvelope)(response.body).error.code

const makeWorld = (options: WorldOptions = {}) =>
  Effect.gen(function* () {
    const w: World = {
      key: { allowedTools: null, rateLimit: null, revoked: false, ...options.key },
      sql: { lookups: 0, confirms: 0 },
      ledger: { events: [], refuse: undefined, holdsSwept: false },
      provider: { calls: [], behaviour: answer({}), preflight: undefined, gate: undefined, entered: yield* Deferred.make<void>() },
      idempotency: { events: [] },
      leases: { holds: new Set(), claims: new Set() },
      betas: new Set(),
      connections: new Map(),
      connectionUnreadable: false,
      rejected: [],
      usage: [],
      logs: []
    }

    // KeyStore's statements about the one key: the lookup by hash, the confirmation by id, `last_used_at`.
    const keyHash = sha256(API_KEY).toString("hex")
    const execute = (text: string, params: ReadonlyArray<unknown>): Effect.Effect<ReadonlyArray<object>> => {
      const statement = text.replace(/\s+/g, " ").trim()
      if (statement.includes("FROM api_keys WHERE key_hash = ")) {
        w.sql.lookups += 1
        const [hash] = params
        const found = hash instanceof Uint8Array && Buffer.from(hash).toString("hex") === keyHash
        if (!found || w.key.revoked) return Effect.succeed([])
        return Effect.succeed([{
          id: KEY_ID,
          org_id: ORG,
          allowed_tools: w.key.allowedTools,
          rate_limit_per_second: w.key.rateLimit?.perSecond ?? null,
          rate_limit_burst: w.key.rateLimit?.burst ?? null,
          expires_at: null
        }])
      }
      if (statement.startsWith("SELECT id FROM api_keys WHERE id = ")) {
        w.sql.confirms += 1
        return Effect.succeed(params[0] === KEY_ID && !w.key.revoked ? [{ id: KEY_ID }] : [])
      }
      if (statement.startsWith("UPDATE api_keys SET last_used_at")) return Effect.succeed([])
      return Effect.dieMessage(`no stand-in for the statement: ${statement}`)
    }
    const connection: SqlConnection.Connection = {
      execute: (text, params) => execute(text, params),
      executeRaw: (text, params) => execute(text, params),
      executeUnprepared: (text, params) => execute(text, params),
      executeValues: () => Effect.dieMessage("no stand-in for executeValues"),
      executeStream: () => Stream.dieMessage("no stand-in for executeStream")
    }
    const SqlLive = Layer.effect(
      SqlClient.SqlClient,
      SqlClient.make({ acquirer: Effect.succeed(connection), compiler: Statement.makeCompilerSqlite(), spanAttributes: [] })
    ).pipe(Layer.provide(Reactivity.layer))

    // -- Idempotency-Key records (the service is below); an answer is kept by `complete`, or a 200 by the
    // settlement that charges it, as the real ledger's statement does
    const records = new Map<string, { readonly fingerprint: string; response: StoredResponse | undefined }>()
    const keepAnswer = (key: string, response: StoredResponse) => {
      w.idempotency.events.push({ op: "complete", key, status: response.status, charged: response.charged, code: codeOf(response) })
      const record = records.get(key)
      if (record !== undefined) record.response = response
    }

    // -- the ledger: holds, each resolved exactly once
    const holds = new Map<number, "pending" | "settled" | "voided">()
    const refusal = (refuse: Refusal) => {
      switch (refuse) {
        case "InvalidKey":
          return new InvalidKey({ message: "Missing or invalid API key. Send it in the X-API-Key header." })
        case "InsufficientCredits":
          return new InsufficientCredits({ message: "the org has 0 credits available" })
        case "SpendCapExceeded":
          return new SpendCapExceeded({ message: "the org's monthly spend cap would be exceeded", retryAfter: 60 })
        case "KeySpendLimitExceeded":
          return new KeySpendLimitExceeded({ message: "the key's monthly spend limit would be exceeded", retryAfter: 60 })
      }
    }
    const resolve = (hold: Hold, to: "settled" | "voided") => {
      if (holds.get(hold.id) !== "pending" || w.ledger.holdsSwept) return false
      holds.set(hold.id, to)
      return true
    }
    const reserve = (request: ReserveRequest) =>
      Effect.suspend(() => {
        const refuse = w.ledger.refuse
        if (refuse !== undefined) {
          w.ledger.events.push({ op: "reserve", tool: request.tool, amount: request.amount, refused: refuse })
          return Effect.fail(refusal(refuse))
        }
        const hold: Hold = { id: holds.size + 1, orgId: request.orgId, amount: request.amount }
        holds.set(hold.id, "pending")
        w.ledger.events.push({ op: "reserve", tool: request.tool, amount: request.amount, hold: hold.id })
        return Effect.succeed(hold)
      })
    /** A claim of a key the org has no record under, as the real statements insert it: `DO NOTHING` otherwise. */
    const insertClaim = (key: string, fingerprint: string) => {
      w.idempotency.events.push({ op: "claim", key })
      if (records.has(key)) return false
      records.set(key, { fingerprint, response: undefined })
      return true
    }
    const ledger = Ledger.of({
      reserve,
      // the reservation is made only when the key was new, as gateway_claim_reserve_batch makes it
      claimAndReserve: (request, claim) =>
        Effect.suspend(() => insertClaim(claim.key, claim.fingerprint) ? Effect.asSome(reserve(request)) : Effect.succeedNone),
      settle: (hold, charge, keep) =>
        Effect.sync(() => {
          w.ledger.events.push({ op: "settle", hold: hold.id, amount: charge })
          const settled = resolve(hold, "settled")
          if (keep !== undefined) keepAnswer(keep.key, { status: keep.status, body: keep.body, charged: settled ? charge : 0 })
          return settled
        }),
      void: (hold) =>
        Effect.sync(() => {
          w.ledger.events.push({ op: "void", hold: hold.id })
          return resolve(hold, "voided")
        }),
      voidRequest: () => Effect.dieMessage("the pipeline never voids another request's hold"),
      sweep: Effect.succeed(0),
      pendingHolds: Effect.sync(() => ({ count: [...holds.values()].filter((s) => s === "pending").length, amount: 0 }))
    })

    // -- Idempotency-Key records, on the contract's model (no lease expiry: a running key is in progress)
    const claimTaken = (request: ClaimRequest) =>
      Effect.suspend((): Effect.Effect<Claim, IdempotencyKeyReused | RequestInProgress> => {
        const existing = records.get(request.key)
        if (existing === undefined) {
          // freed since the statement that found it
          return insertClaim(request.key, request.fingerprint) ? Effect.succeed({ _tag: "Claimed" }) : claimTaken(request)
        }
        if (existing.fingerprint !== request.fingerprint) {
          return Effect.fail(new IdempotencyKeyReused({ message: "this Idempotency-Key was used for another request" }))
        }
        if (existing.response !== undefined) return Effect.succeed({ _tag: "Replay", response: existing.response, requestId: "req_of_the_first_call" })
        return Effect.fail(new RequestInProgress({ message: "a request with this Idempotency-Key is running", retryAfter: 1 }))
      })
    const idempotency = Idempotency.of({
      claim: (request) =>
        Effect.suspend(() => insertClaim(request.key, request.fingerprint) ? Effect.succeed({ _tag: "Claimed" } as const) : claimTaken(request)),
      claimTaken,
      complete: (_orgId, key, _requestId, response) => Effect.sync(() => keepAnswer(key, response)),
      release: (_orgId, key) =>
        Effect.sync(() => {
          w.idempotency.events.push({ op: "release", key })
          if (records.get(key)?.response === undefined) records.delete(key)
        }),
      purgeExpired: Effect.succeed(0)
    })

    const leases = Leases.of({
      leaseMs: 30_000,
      holdHeld: (id) => Effect.sync(() => void w.leases.holds.add(id)),
      releaseHold: (id) => Effect.sync(() => void w.leases.holds.delete(id)),
      claimHeld: (claim) => Effect.sync(() => void w.leases.claims.add(claim.key)),
      releaseClaim: (claim) => Effect.sync(() => void w.leases.claims.delete(claim.key)),
      heldUntil: () => Number.POSITIVE_INFINITY,
      renew: Effect.void
    })

    const betas = Betas.of({
      enable: (_orgId, tool) => Effect.sync(() => void w.betas.add(tool)),
      disable: (_orgId, tool) => Effect.sync(() => void w.betas.delete(tool)),
      list: () => Effect.sync(() => [...w.betas]),
      require: (_orgId, tool) =>
        w.betas.has(tool) ? Effect.void : Effect.fail(new BetaUnavailable({ message: `${tool} is in beta and not enabled for this org.` }))
    })

    const connections = Connections.of({
      connect: () => Effect.dieMessage("no connections are made in these tests"),
      list: () => Effect.succeed([]),
      disconnect: () => Effect.dieMessage("no connections are removed in these tests"),
      credentials: (_orgId, provider, tool) => {
        if (w.connectionUnreadable) return Effect.dieMessage(`the ${provider} connection cannot be opened`)
        const stored = w.connections.get(provider)
        return stored === undefined
          ? Effect.fail(new CredentialRequired({ message: `${tool} runs on your own ${provider} account: connect it first.` }))
          : Effect.orDie(Schema.decodeUnknown(credentialSchemas[provider])(stored))
      },
      markRejected: (_orgId, provider) => Effect.sync(() => void w.rejected.push(provider)),
      markAccepted: () => Effect.void,
      reseal: Effect.succeed({ resealed: 0, unreadable: 0, sessionsDeleted: 0 })
    })

    const registry = ProviderRegistry.of({
      configured: () => true,
      // the binding table says which tools need a connection, and of which provider
      credentials: (tool, orgId) => bindings[tool].credentials(connections, orgId),
      preflight: () => (w.provider.preflight === undefined ? Effect.void : Effect.fail(w.provider.preflight)),
      // the call's own context (its deadline) is given with the call, as the real registry gets it; a failure is the stub's
      call: (tool, input, _credentials, context) =>
        failedAt("stub", Effect.gen(function* () {
          const deadline = yield* CallDeadline
          w.provider.calls.push({ tool, input, deadline: deadline.at })
          yield* Deferred.succeed(w.provider.entered, undefined)
          if (w.provider.gate !== undefined) yield* Deferred.await(w.provider.gate)
          const behaviour = w.provider.behaviour
          switch (behaviour._tag) {
            case "Fail":
              return yield* Effect.fail(behaviour.error)
            case "Hang": {
              yield* Effect.sleep(Duration.millis(deadline.at - (yield* Clock.currentTimeMillis)))
              return yield* new ProviderTimeout({ message: `stub did not answer before the call's deadline. ${deadline.describe}` })
            }
            case "Answer": {
              const output = yield* Schema.decodeUnknown(catalog[tool].output)(behaviour.output).pipe(
                Effect.mapError((error) => new NormalizationFailed({ message: `stub answered another shape: ${describeParseError(error)}` }))
              )
              return { provider: "stub", output }
            }
          }
        })).pipe(Effect.provide(context)),
      callRaw: () => Effect.dieMessage("no raw calls in these tests"),
      units: () => Effect.succeed(0),
      // the scripted answers are small: no turn to take
      inTurn: (_bytes, work) => work
    })

    const usage = Usage.of({
      record: (entry) => Effect.sync(() => void w.usage.push(entry)),
      flush: Effect.void,
      page: () => Effect.dieMessage("no usage pages in these tests"),
      export: () => Effect.dieMessage("no usage exports in these tests"),
      summary: () => Effect.dieMessage("no usage summaries in these tests")
    })

    const artifacts = Artifacts.of({
      store: () => Effect.dieMessage("no files in these tests"),
      find: () => Effect.dieMessage("no files in these tests"),
      read: () => Effect.dieMessage("no files in these tests"),
      get: () => Effect.dieMessage("no files in these tests"),
      list: () => Effect.dieMessage("no files in these tests"),
      discard: () => Effect.dieMessage("no files in these tests"),
      purgeExpired: Effect.succeed(0)
    })

    const LogsLive = Logger.replace(
      Logger.defaultLogger,
      Logger.make(({ logLevel, message }) =>
        void w.logs.push({ level: logLevel.label, text: Array.isArray(message) ? message.join(" ") : String(message) }))
    )

    const layer = GatewayServiceLive.pipe(
      Layer.provideMerge(AuthenticationLive),
      Layer.provideMerge(Layer.mergeAll(
        Layer.succeed(Ledger, ledger),
        Layer.succeed(Idempotency, idempotency),
        Layer.succeed(Leases, leases),
        Layer.succeed(Betas, betas),
        Layer.succeed(Connections, connections),
        Layer.succeed(ProviderRegistry, registry),
        Layer.succeed(Usage, usage),
        Layer.succeed(Artifacts, artifacts),
        PricingLive,
        KeyStoreLive,
        RateLimitLive
      )),
      Layer.provideMerge(SqlLive),
      Layer.provideMerge(configLayer({
        server: { rateLimitPerSecond: 0, ...options.server },
        providers: { timeoutMs: TIMEOUT_MS }
      })),
      Layer.provideMerge(LogsLive)
    )
    return { w, layer }
  })

/**
 * Run `body` in a world of its own (fresh stand-ins, fresh rate-limit buckets). Afterwards, whatever a call
 * still waits for is let go (its gate opened, its deadline passed): a call runs uninterruptibly, so a failed
 * assertion would otherwise leave the test waiting for it until it times out.
 */
const inWorld = <A, E>(
  options: WorldOptions,
  body: (w: World) => Effect.Effect<A, E, Gateway | Authentication | RateLimit>
) =>
  Effect.flatMap(makeWorld(options), ({ layer, w }) => {
    const letGo = Effect.suspend(() =>
      Effect.zipRight(
        w.provider.gate === undefined ? Effect.void : Deferred.succeed(w.provider.gate, undefined),
        Effect.flatMap(TestClock.sleeps(), (sleeps) => (Chunk.isEmpty(sleeps) ? Effect.void : TestClock.adjust("1 hour")))
      )
    )
    return Effect.provide(Effect.ensuring(body(w), letGo), layer)
  })

/** How an effect ended: "ok", or its error's tag. */
const outcome = <A, E extends { readonly _tag: string }, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.map(Effect.exit(effect), (exit) =>
    Exit.match(exit, {
      onSuccess: () => "ok",
      onFailure: (cause) => Option.match(Cause.failureOption(cause), { onNone: () => Cause.pretty(cause), onSome: (e) => e._tag })
    }))

const caller = Effect.flatMap(Authentication, (auth) => auth.authenticate(API_KEY, undefined, { rateLimit: false })).pipe(
  Effect.map((authenticated) => authenticated.caller),
  Effect.orDie
)

const searchAnswer = (results: number) => ({
  provider: "stub",
  query: "q",
  results: Array.from({ length: results }, (_, i) => ({ title: `r${i}`, url: `https://example.com/${i}`, snippet: "", published_at: null }))
})

const usageOf = (w: World) => w.usage.map((u) => ({ tool: u.tool, code: u.code, credits: u.credits }))

/** Nothing of the call left held: no hold or claim whose lease this process still renews. */
const expectNothingHeld = (w: World) => {
  expect([...w.leases.holds]).toEqual([])
  expect([...w.leases.claims]).toEqual([])
}

// -- which error wins ------------------------------------------------------------------------------------

describe("which error wins", () => {
  it.effect("key, rate limit, input, Idempotency-Key, beta, allow-list, connection, reservation, provider: each wins over all that follow", () =>
    // a key of 1 request per second: each step below waits a second (TestClock) for its token
    inWorld({ key: { allowedTools: ["weather"], rateLimit: { perSecond: 1, burst: 1 } } }, (w) =>
      Effect.gen(function* () {
        const gateway = yield* Gateway
        // everything is wrong at first: a beta tool not enabled, a key not allowed it, no connection, no
        // credits, no provider configured
        w.ledger.refuse = "InsufficientCredits"
        w.provider.behaviour = fail(new ProviderNotConfigured({ message: "iota is not configured on this gateway" }))
        const call = (input: { readonly service_id: string }, options: { readonly apiKey?: string; readonly idempotencyKey?: string } = {}) =>
          outcome(gateway.call("iota_delete_service", input, { apiKey: options.apiKey ?? API_KEY, idempotencyKey: options.idempotencyKey }))
        const valid = { service_id: "srv-1" }
        const second = TestClock.adjust("1 second")
        const seen: Array<string> = []

        seen.push(yield* call({ service_id: "" }, { apiKey: UNKNOWN_KEY, idempotencyKey: "not a key" }))
        seen.push(yield* call({ service_id: "" }, { idempotencyKey: "not a key" })) // takes the key's one token
        seen.push(yield* call({ service_id: "" }, { idempotencyKey: "not a key" }))
        yield* second
        seen.push(yield* call(valid, { idempotencyKey: "not a key" }))
        yield* second
        seen.push(yield* call(valid, { idempotencyKey: "k-1" }))
        yield* second
        w.betas.add("iota_delete_service")
        seen.push(yield* call(valid, { idempotencyKey: "k-1" }))
        yield* second
        w.key.allowedTools = ["iota_delete_service"]
        seen.push(yield* call(valid, { idempotencyKey: "k-1" }))
        yield* second
        w.connections.set("iota", { api_key: "rnd_iota" })
        seen.push(yield* call(valid, { idempotencyKey: "k-1" }))
        yield* second
        w.ledger.refuse = "SpendCapExceeded"
        seen.push(yield* call(valid, { idempotencyKey: "k-1" }))
        yield* second
        w.ledger.refuse = "KeySpendLimitExceeded"
        seen.push(yield* call(valid, { idempotencyKey: "k-1" }))
        yield* second
        w.ledger.refuse = undefined
        seen.push(yield* call(valid, { idempotencyKey: "k-1" }))

        expect(seen).toEqual([
          "InvalidKey",
          "InvalidRequest",
          "RateLimitExceeded",
          "InvalidIdempotencyKey",
          "BetaUnavailable",
          "ToolNotAllowed",
          "CredentialRequired",
          "InsufficientCredits",
          "SpendCapExceeded",
          "KeySpendLimitExceeded",
          "ProviderNotConfigured"
        ])
        // the provider was called once, after the only reservation that was granted; its hold was voided
        expect(w.provider.calls.map((c) => c.tool)).toEqual(["iota_delete_service"])
        expect(w.ledger.events).toEqual([
          { op: "reserve", tool: "iota_delete_service", amount: 1, refused: "InsufficientCredits" },
          { op: "reserve", tool: "iota_delete_service", amount: 1, refused: "SpendCapExceeded" },
          { op: "reserve", tool: "iota_delete_service", amount: 1, refused: "KeySpendLimitExceeded" },
          { op: "reserve", tool: "iota_delete_service", amount: 1, hold: 1 },
          { op: "void", hold: 1 }
        ])
        // the key was claimed from the beta check on, and freed after each failure (none was billable)
        expect(w.idempotency.events).toEqual(
          Array.from({ length: 7 }, () => [{ op: "claim", key: "k-1" }, { op: "release", key: "k-1" }]).flat()
        )
        // a usage record for each call that got past its key, rate limit and input
        expect(w.usage.map((u) => u.code)).toEqual([
          "invalid_idempotency_key",
          "beta_unavailable",
          "tool_not_allowed",
          "credential_required",
          "insufficient_credits",
          "spend_cap_exceeded",
          "key_spend_limit_exceeded",
          "provider_not_configured"
        ])
        expectNothingHeld(w)
      })))

  it.effect("a running or used Idempotency-Key is answered before beta and the allow-list; a replay must pass them", () =>
    inWorld({}, (w) =>
      Effect.gen(function* () {
        const gateway = yield* Gateway
        w.betas.add("iota_delete_service")
        w.connections.set("iota", { api_key: "rnd_iota" })
        w.provider.behaviour = answer({ provider: "stub", deleted: true, service_id: "srv-1" })
        const gate = yield* Deferred.make<void>()
        w.provider.gate = gate
        const call = (serviceId: string, idempotencyKey?: string) =>
          gateway.call("iota_delete_service", { service_id: serviceId }, { apiKey: API_KEY, idempotencyKey })

        const first = yield* Effect.fork(call("srv-1", "del-1"))
        yield* Deferred.await(w.provider.entered)
        // while it runs, the beta is turned off and the key loses the tool
        w.betas.delete("iota_delete_service")
        w.key.allowedTools = ["weather"]
        expect(yield* outcome(call("srv-1", "del-1"))).toBe("RequestInProgress")
        expect(yield* outcome(call("srv-2", "del-1"))).toBe("IdempotencyKeyReused")
        expect(yield* outcome(call("srv-1"))).toBe("BetaUnavailable")

        yield* Deferred.succeed(gate, undefined)
        expect(yield* Fiber.join(first)).toEqual({ provider: "stub", deleted: true, service_id: "srv-1" })
        // the stored answer is served only to a caller who could make the call now
        expect(yield* outcome(call("srv-1", "del-1"))).toBe("BetaUnavailable")
        w.betas.add("iota_delete_service")
        expect(yield* outcome(call("srv-1", "del-1"))).toBe("ToolNotAllowed")
        w.key.allowedTools = null
        expect(yield* call("srv-1", "del-1")).toEqual({ provider: "stub", deleted: true, service_id: "srv-1" })

        expect(w.provider.calls).toHaveLength(1)
        expect(w.ledger.events).toEqual([
          { op: "reserve", tool: "iota_delete_service", amount: 1, hold: 1 },
          { op: "settle", hold: 1, amount: 1 }
        ])
        expect(usageOf(w).map((u) => u.code)).toEqual([
          "request_in_progress",
          "idempotency_key_reused",
          "beta_unavailable",
          "ok",
          "beta_unavailable",
          "tool_not_allowed",
          "replayed"
        ])
        expectNothingHeld(w)
      })))

  it.effect("a connection that cannot be read does not beat a running or used Idempotency-Key; on a new key it frees the key", () =>
    inWorld({}, (w) =>
      Effect.gen(function* () {
        const gateway = yield* Gateway
        w.betas.add("iota_delete_service")
        w.connections.set("iota", { api_key: "rnd_iota" })
        w.provider.behaviour = answer({ provider: "stub", deleted: true, service_id: "srv-1" })
        const gate = yield* Deferred.make<void>()
        w.provider.gate = gate
        const call = (serviceId: string, idempotencyKey: string) =>
          gateway.call("iota_delete_service", { service_id: serviceId }, { apiKey: API_KEY, idempotencyKey })

        const first = yield* Effect.fork(call("srv-1", "del-1"))
        yield* Deferred.await(w.provider.entered)
        w.connectionUnreadable = true
        expect(yield* outcome(call("srv-1", "del-1"))).toBe("RequestInProgress")
        expect(yield* outcome(call("srv-2", "del-1"))).toBe("IdempotencyKeyReused")
        yield* Deferred.succeed(gate, undefined)
        yield* Fiber.join(first)
        expect(yield* call("srv-1", "del-1")).toEqual({ provider: "stub", deleted: true, service_id: "srv-1" })
        // a new key: the claim, then the defect (an internal error), and the key is free again
        expect(yield* outcome(call("srv-2", "del-2"))).toContain("the iota connection cannot be opened")
        expect(w.idempotency.events.filter((e) => e.key === "del-2")).toEqual([
          { op: "claim", key: "del-2" },
          { op: "release", key: "del-2" }
        ])
        expect(w.provider.calls).toHaveLength(1)
        expectNothingHeld(w)
      })))

  it.effect("what the provider refuses on the input's face comes after the connection and before the reservation", () =>
    inWorld({}, (w) =>
      Effect.gen(function* () {
        const gateway = yield* Gateway
        w.provider.preflight = new UrlNotAllowed({ message: "The URL is not allowed: a loopback address." })
        w.ledger.refuse = "InsufficientCredits"
        const call = outcome(gateway.call("epsilon_request", { path: "/things" }, { apiKey: API_KEY }))

        expect(yield* call).toBe("CredentialRequired")
        w.connections.set("epsilon", { base_url: "https://api.example.com" })
        expect(yield* call).toBe("UrlNotAllowed")
        expect(w.ledger.events).toEqual([])
        w.provider.preflight = undefined
        expect(yield* call).toBe("InsufficientCredits")
        expect(w.ledger.events).toEqual([{ op: "reserve", tool: "epsilon_request", amount: 1, refused: "InsufficientCredits" }])
        expect(w.provider.calls).toEqual([])
      })))

  it.effect("a key revoked while this process had it cached gets invalid_key, whatever else is wrong", () =>
    inWorld({}, (w) =>
      Effect.gen(function* () {
        const gateway = yield* Gateway
        const auth = yield* Authentication
        const cached = auth.authenticate(API_KEY, undefined, { cached: true }).pipe(Effect.map((a) => a.caller))
        const betaCall = (c: Effect.Effect.Success<typeof cached>) =>
          outcome(gateway.run(c, "iota_delete_service", { service_id: "srv-1" }))
        const search = (c: Effect.Effect.Success<typeof cached>) => outcome(gateway.run(c, "search", { query: "q" }))
        w.provider.behaviour = answer(searchAnswer(1))

        expect((yield* cached).confirmed).toBe(true)
        const fromCache = yield* cached
        expect(fromCache.confirmed).toBe(false)
        expect(w.sql.lookups).toBe(1)

        // an answer that does not pass through the reservation confirms the key first; one that does, not
        expect(yield* betaCall(fromCache)).toBe("BetaUnavailable")
        expect(w.sql.confirms).toBe(1)
        expect(yield* search(fromCache)).toBe("ok")
        expect(w.sql.confirms).toBe(1)

        // revoked: invalid_key rather than beta_unavailable, and forgotten (the next request reads the database)
        w.key.revoked = true
        expect(yield* betaCall(fromCache)).toBe("InvalidKey")
        expect(w.sql.confirms).toBe(2)
        expect(yield* outcome(cached)).toBe("InvalidKey")
        expect(w.sql.lookups).toBe(2)

        // the reservation statement finds it revoked: invalid_key, no confirmation statement, forgotten too
        w.key.revoked = false
        expect((yield* cached).confirmed).toBe(true)
        const again = yield* cached
        expect(again.confirmed).toBe(false)
        w.key.revoked = true
        w.ledger.refuse = "InvalidKey"
        expect(yield* search(again)).toBe("InvalidKey")
        expect(w.sql.confirms).toBe(2)
        expect(yield* outcome(cached)).toBe("InvalidKey")
        expect(w.sql.lookups).toBe(4)
        expect(w.provider.calls).toHaveLength(1)
      })))
})

// -- what becomes of the hold ----------------------------------------------------------------------------

describe("the hold", () => {
  it.effect("a success settles the hold at what the answer delivered (never more than held), and never voids", () =>
    inWorld({}, (w) =>
      Effect.gen(function* () {
        const gateway = yield* Gateway
        const c = yield* caller
        // search reserves 1 credit per 10 results asked for: 30 → 3
        w.provider.behaviour = answer(searchAnswer(12))
        const twelve = yield* gateway.run(c, "search", { query: "q", max_results: 30 }, { idempotencyKey: "s-1" })
        expect(twelve).toMatchObject({ _tag: "Fresh", provider: "stub", charged: 2 })
        w.provider.behaviour = answer(searchAnswer(50))
        const fifty = yield* gateway.run(c, "search", { query: "q", max_results: 30 })
        expect(fifty).toMatchObject({ _tag: "Fresh", charged: 3 })

        expect(w.ledger.events).toEqual([
          { op: "reserve", tool: "search", amount: 3, hold: 1 },
          { op: "settle", hold: 1, amount: 2 },
          { op: "reserve", tool: "search", amount: 3, hold: 2 },
          { op: "settle", hold: 2, amount: 3 }
        ])
        expect(w.idempotency.events).toEqual([
          { op: "claim", key: "s-1" },
          { op: "complete", key: "s-1", status: 200, charged: 2, code: "ok" }
        ])
        expect(usageOf(w)).toEqual([{ tool: "search", code: "ok", credits: 2 }, { tool: "search", code: "ok", credits: 3 }])
        expectNothingHeld(w)
      })))

  it.effect("a provider failure voids the hold, never settles, and frees the Idempotency-Key", () =>
    Effect.gen(function* () {
      const failures: ReadonlyArray<ProviderCallError> = [
        new ProviderUnavailable({ message: "upstream answered 503" }),
        new ProviderRateLimited({ message: "upstream answered 429", retryAfter: 7 }),
        new ProviderRejected({ message: "upstream answered 400", upstreamStatus: 400 }),
        new ProviderCredentialRejected({ message: "upstream answered 401" }),
        new ProviderNotConfigured({ message: "no provider for search is configured" }),
        new ProviderResponseTooLarge({ message: "the answer is larger than allowed" }),
        new UrlNotAllowed({ message: "redirected to a private address" }),
        new ProviderTimeout({ message: "upstream did not answer in time" }),
        new InvalidRequest({ message: "upstream refused a field of the input" })
      ]
      for (const failure of failures) {
        yield* inWorld({}, (w) =>
          Effect.gen(function* () {
            const gateway = yield* Gateway
            w.provider.behaviour = fail(failure)
            const error = yield* Effect.flip(gateway.run(yield* caller, "search", { query: "q", max_results: 30 }, { idempotencyKey: "f-1" }))
            // the provider's error is the answer, as it was
            expect({ tag: error._tag, message: error.message }).toEqual({ tag: failure._tag, message: failure.message })
            expect(w.ledger.events, failure._tag).toEqual([
              { op: "reserve", tool: "search", amount: 3, hold: 1 },
              { op: "void", hold: 1 }
            ])
            expect(w.idempotency.events, failure._tag).toEqual([{ op: "claim", key: "f-1" }, { op: "release", key: "f-1" }])
            expect(usageOf(w), failure._tag).toEqual([{ tool: "search", code: envelopeOf[failure._tag].code, credits: 0 }])
            // search runs on the operator's keys: no connection of the org to mark
            expect(w.rejected).toEqual([])
            expectNothingHeld(w)
          }))
      }
    }))

  it.effect("an account tool's credentials refused by the provider: the hold voided, and the connection marked rejected", () =>
    inWorld({}, (w) =>
      Effect.gen(function* () {
        const gateway = yield* Gateway
        w.connections.set("delta", { identifier: "alice.example.com", app_password: "rnd-delta" })
        w.provider.behaviour = fail(new ProviderCredentialRejected({ message: "the app password was refused" }))
        expect(yield* outcome(gateway.run(yield* caller, "delta_post", { text: "hello" }))).toBe("ProviderCredentialRejected")
        expect(w.ledger.events).toEqual([{ op: "reserve", tool: "delta_post", amount: 1, hold: 1 }, { op: "void", hold: 1 }])
        expect(w.rejected).toEqual(["delta"])
      })))

  it.effect("normalization_failed settles the tool's minimum (billable), and the answer is kept for replay", () =>
    inWorld({}, (w) =>
      Effect.gen(function* () {
        const gateway = yield* Gateway
        w.provider.behaviour = answer({ provider: "stub", query: "q", results: "not a list" })
        const call = gateway.call("search", { query: "q", max_results: 30 }, { apiKey: API_KEY, idempotencyKey: "n-1" })
        const first = yield* Effect.flip(call)
        expect(first).toBeInstanceOf(NormalizationFailed)
        expect(first).toMatchObject({ charged: 1 })
        expect(w.ledger.events).toEqual([{ op: "reserve", tool: "search", amount: 3, hold: 1 }, { op: "settle", hold: 1, amount: 1 }])
        expect(w.idempotency.events).toEqual([
          { op: "claim", key: "n-1" },
          { op: "complete", key: "n-1", status: 502, charged: 1, code: "normalization_failed" }
        ])
        expect(usageOf(w)).toEqual([{ tool: "search", code: "normalization_failed", credits: 1 }])

        // the replay: the same failure, charged nothing again, no provider call, no hold
        const replay = yield* Effect.flip(call)
        expect(replay).toMatchObject({ _tag: "NormalizationFailed", charged: 0 })
        expect(w.provider.calls).toHaveLength(1)
        expect(w.ledger.events).toHaveLength(2)
        expect(usageOf(w)[1]).toEqual({ tool: "search", code: "replayed", credits: 0 })
        expectNothingHeld(w)
      })))

  it.effect("a provider that never answers: at three times PROVIDER_TIMEOUT_MS the hold is voided and the call answers provider_timeout", () =>
    inWorld({}, (w) =>
      Effect.gen(function* () {
        const gateway = yield* Gateway
        const c = yield* caller
        w.provider.behaviour = hang
        const started = yield* Clock.currentTimeMillis
        const fiber = yield* Effect.fork(gateway.run(c, "search", { query: "q", max_results: 30 }))
        yield* Deferred.await(w.provider.entered)
        expect(w.provider.calls[0]?.deadline).toBe(started + 3 * TIMEOUT_MS)

        yield* TestClock.adjust(Duration.millis(3 * TIMEOUT_MS - 1))
        expect(Option.isNone(yield* Fiber.poll(fiber))).toBe(true)
        expect(w.ledger.events).toEqual([{ op: "reserve", tool: "search", amount: 3, hold: 1 }])
        expect([...w.leases.holds]).toEqual([1])

        yield* TestClock.adjust(Duration.millis(1))
        const error = yield* Effect.flip(Fiber.join(fiber))
        expect(error).toBeInstanceOf(ProviderTimeout)
        expect(error.message).toContain(`did not complete within ${3 * TIMEOUT_MS} ms`)
        expect(w.ledger.events).toEqual([{ op: "reserve", tool: "search", amount: 3, hold: 1 }, { op: "void", hold: 1 }])
        expect(usageOf(w)).toEqual([{ tool: "search", code: "provider_timeout", credits: 0 }])
        expectNothingHeld(w)
      })))

  it.effect("write_outcome_unknown voids the hold (nothing charged) and keeps the answer under the key; a write that never left frees it", () =>
    inWorld({}, (w) =>
      Effect.gen(function* () {
        const gateway = yield* Gateway
        w.connections.set("delta", { identifier: "alice.example.com", app_password: "rnd-delta" })
        const post = (idempotencyKey: string) => gateway.call("delta_post", { text: "hello" }, { apiKey: API_KEY, idempotencyKey })

        w.provider.behaviour = fail(new WriteOutcomeUnknown({ message: "the connection broke after the post was sent" }))
        expect(yield* outcome(post("p-1"))).toBe("WriteOutcomeUnknown")
        expect(w.ledger.events).toEqual([{ op: "reserve", tool: "delta_post", amount: 1, hold: 1 }, { op: "void", hold: 1 }])
        expect(w.idempotency.events).toEqual([
          { op: "claim", key: "p-1" },
          { op: "complete", key: "p-1", status: 502, charged: 0, code: "write_outcome_unknown" }
        ])
        // the same request again is not sent twice: the stored answer
        w.provider.behaviour = answer({ provider: "stub", uri: "at://alice/post/1", cid: "cid-1" })
        expect(yield* outcome(post("p-1"))).toBe("WriteOutcomeUnknown")
        expect(w.provider.calls).toHaveLength(1)
        expect(w.ledger.events).toHaveLength(2)

        // a post that never reached the provider (the connection was refused) frees its key: a retry runs
        w.provider.behaviour = fail(new ProviderUnavailable({ message: "connection refused" }))
        expect(yield* outcome(post("p-2"))).toBe("ProviderUnavailable")
        w.provider.behaviour = answer({ provider: "stub", uri: "at://alice/post/2", cid: "cid-2" })
        expect(yield* post("p-2")).toEqual({ provider: "stub", uri: "at://alice/post/2", cid: "cid-2" })
        expect(w.ledger.events.slice(2)).toEqual([
          { op: "reserve", tool: "delta_post", amount: 1, hold: 2 },
          { op: "void", hold: 2 },
          { op: "reserve", tool: "delta_post", amount: 1, hold: 3 },
          { op: "settle", hold: 3, amount: 1 }
        ])
        expect(w.idempotency.events.slice(3)).toEqual([
          { op: "claim", key: "p-2" },
          { op: "release", key: "p-2" },
          { op: "claim", key: "p-2" },
          { op: "complete", key: "p-2", status: 200, charged: 1, code: "ok" }
        ])
        expectNothingHeld(w)
      })))

  it.effect("interrupting a call in the provider phase waits for it: the call is charged, stored and logged", () =>
    inWorld({}, (w) =>
      Effect.gen(function* () {
        const gateway = yield* Gateway
        const c = yield* caller
        const gate = yield* Deferred.make<void>()
        w.provider.gate = gate
        w.provider.behaviour = answer(searchAnswer(12))
        const fiber = yield* Effect.fork(gateway.run(c, "search", { query: "q", max_results: 30 }, { idempotencyKey: "i-1" }))
        yield* Deferred.await(w.provider.entered)

        const interrupting = yield* Effect.fork(Fiber.interrupt(fiber))
        // time passes; the interruption still waits for the provider
        yield* TestClock.adjust("1 minute")
        expect(Option.isNone(yield* Fiber.poll(interrupting))).toBe(true)
        expect(w.ledger.events).toEqual([{ op: "reserve", tool: "search", amount: 3, hold: 1 }])

        yield* Deferred.succeed(gate, undefined)
        const exit = yield* Fiber.join(interrupting)
        expect(Exit.isInterrupted(exit)).toBe(true)
        expect(w.ledger.events).toEqual([{ op: "reserve", tool: "search", amount: 3, hold: 1 }, { op: "settle", hold: 1, amount: 2 }])
        expect(w.idempotency.events).toEqual([
          { op: "claim", key: "i-1" },
          { op: "complete", key: "i-1", status: 200, charged: 2, code: "ok" }
        ])
        expect(usageOf(w)).toEqual([{ tool: "search", code: "ok", credits: 2 }])
        expectNothingHeld(w)
      })))

  it.effect("a settlement that finds its hold swept is answered as charged 0, and said at ERROR", () =>
    inWorld({}, (w) =>
      Effect.gen(function* () {
        const gateway = yield* Gateway
        w.provider.behaviour = answer(searchAnswer(12))
        w.ledger.holdsSwept = true
        const fresh = yield* gateway.run(yield* caller, "search", { query: "q", max_results: 30 })
        expect(fresh).toMatchObject({ _tag: "Fresh", charged: 0 })
        expect(w.ledger.events).toEqual([{ op: "reserve", tool: "search", amount: 3, hold: 1 }, { op: "settle", hold: 1, amount: 2 }])
        expect(usageOf(w)).toEqual([{ tool: "search", code: "ok", credits: 0 }])
        expect(w.logs.filter((l) => l.level === "ERROR").map((l) => l.text)).toEqual([
          "settlement not posted (its hold no longer pending, or the database kept failing): the call is answered as charged 0"
        ])
      })))
})

// -- rate-limit windows ----------------------------------------------------------------------------------

describe("rate-limit windows, on TestClock", () => {
  it.effect("a key's own limit: its burst passes, the next is refused until a token is back, and a whole window refills it", () =>
    // 1 per second, bursts of 5: a window of 5 s, a token every second
    inWorld({ key: { rateLimit: { perSecond: 1, burst: 5 } } }, () =>
      Effect.gen(function* () {
        const limits = yield* RateLimit
        const c = yield* caller
        const states: Array<unknown> = []
        for (let i = 0; i < 5; i++) states.push(yield* limits.consume(c))
        expect(states).toEqual([1, 2, 3, 4, 5].map((n) => ({ limit: 5, windowSeconds: 5, remaining: 5 - n, resetSeconds: n })))

        const refused = yield* Effect.flip(limits.consume(c))
        expect(refused).toMatchObject({ _tag: "RateLimitExceeded", retryAfter: 1, limit: 5, windowSeconds: 5 })
        // Retry-After is exact: a millisecond early is still refused
        yield* TestClock.adjust("999 millis")
        expect(yield* outcome(limits.consume(c))).toBe("RateLimitExceeded")
        yield* TestClock.adjust("1 millis")
        expect(yield* limits.consume(c)).toMatchObject({ remaining: 0 })
        expect(yield* outcome(limits.consume(c))).toBe("RateLimitExceeded")

        // past a whole window the bucket is full again: the burst once more, and no further
        yield* TestClock.adjust("5 seconds")
        const again: Array<string> = []
        for (let i = 0; i < 6; i++) again.push(yield* outcome(limits.consume(c)))
        expect(again).toEqual(["ok", "ok", "ok", "ok", "ok", "RateLimitExceeded"])
      })))

  it.effect("the gateway's default: 2 per second with bursts of 4; Retry-After rounds half a second up to 1", () =>
    inWorld({ server: { rateLimitPerSecond: 2, rateLimitBurst: 4 } }, () =>
      Effect.gen(function* () {
        const limits = yield* RateLimit
        const c = yield* caller
        for (let i = 0; i < 4; i++) expect(yield* limits.consume(c)).toMatchObject({ limit: 4, windowSeconds: 2, remaining: 3 - i })
        const refused = yield* Effect.flip(limits.consume(c))
        expect(refused).toMatchObject({ _tag: "RateLimitExceeded", retryAfter: 1, limit: 4, windowSeconds: 2 })
        // a token is back after half a second
        yield* TestClock.adjust("499 millis")
        expect(yield* outcome(limits.consume(c))).toBe("RateLimitExceeded")
        yield* TestClock.adjust("1 millis")
        expect(yield* outcome(limits.consume(c))).toBe("ok")
        yield* TestClock.adjust("2 seconds")
        const again: Array<string> = []
        for (let i = 0; i < 5; i++) again.push(yield* outcome(limits.consume(c)))
        expect(again).toEqual(["ok", "ok", "ok", "ok", "RateLimitExceeded"])
      })))

  it.effect("a call refused by the rate limit reaches nothing: no claim, no hold, no provider, no usage record", () =>
    inWorld({ key: { rateLimit: { perSecond: 1, burst: 2 } } }, (w) =>
      Effect.gen(function* () {
        const gateway = yield* Gateway
        w.provider.behaviour = answer(searchAnswer(3))
        const call = (key: string) => outcome(gateway.call("search", { query: "q" }, { apiKey: API_KEY, idempotencyKey: key }))
        expect([yield* call("a"), yield* call("b"), yield* call("c")]).toEqual(["ok", "ok", "RateLimitExceeded"])
        expect(w.provider.calls).toHaveLength(2)
        expect(w.ledger.events.filter((e) => e.op === "reserve")).toHaveLength(2)
        expect(w.idempotency.events.filter((e) => e.key === "c")).toEqual([])
        expect(w.usage).toHaveLength(2)
        yield* TestClock.adjust("1 second")
        expect(yield* call("c")).toBe("ok")
      })))
})
