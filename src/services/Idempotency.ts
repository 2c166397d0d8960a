/**
 * Idempotency keys, on Stripe's model with the API contract's codes. Scope: the org. The first request
 * with a key claims it atomically with a `running` record and a lease; only billable outcomes (a 200 or
 * a normalization failure) are kept and replayed; any other outcome releases the key so a retry runs again.
 * A claim whose lease ran out (its process taken for dead) is marked `abandoned` by the retry that finds it so:
 * from then on the key answers `idempotency_replay_unavailable`, whatever the process that held it does later.
 *
 * A record is kept for `IDEMPOTENCY_RETENTION_SECONDS` after its call's last sign of life: a running claim's
 * `expires_at` is its lease's end plus the retention (set with the claim, moved with each renewal), a completed
 * one's its completion plus the retention. So a call still running never loses its key, however short the retention
 * and long the call (a retry past the retention counted from the claim took the key over and sent the write again),
 * and an answer is replayed for the whole retention after it was given.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import {
  IdempotencyKeyReused,
  IdempotencyReplayUnavailable,
  InvalidIdempotencyKey,
  RequestInProgress
} from "../domain/errors.js"
import type { OrgId } from "../domain/ids.js"
import { LedgerConfig } from "../config.js"
import { retriedAfterCall } from "./afterCall.js"
import { batched } from "./batching.js"
import { Ledger } from "./Ledger.js"
import { lockedInKeyOrder, recordId, releaseClaim } from "./recordLocks.js"
import { sha256Hex } from "./random.js"
import * as retention from "./retention.js"
import { nowMillis, toDate } from "./time.js"
import { traced } from "./tracing.js"
import { isArray } from "../domain/json.js"

/** A stored outcome, replayed byte for byte. */
export interface StoredResponse {
  readonly status: number
  readonly body: string
  readonly charged: number
}

export type Claim =
  | { readonly _tag: "Claimed" }
  /** The stored answer, and the request id of the call that made it. */
  | { readonly _tag: "Replay"; readonly response: StoredResponse; readonly requestId: string }

export type ClaimError = IdempotencyKeyReused | RequestInProgress | IdempotencyReplayUnavailable

export interface ClaimRequest {
  readonly orgId: OrgId
  readonly key: string
  readonly fingerprint: string
  readonly requestId: string
  /** How long the claim holds before a crashed request's key becomes `idempotency_replay_unavailable`. */
  readonly leaseMs: number
  /** The request is a write (its `idempotency_replay_unavailable` says it may have been done). */
  readonly write: boolean
}

export class Idempotency extends Context.Tag("Idempotency")<Idempotency, {
  readonly claim: (request: ClaimRequest) => Effect.Effect<Claim, ClaimError>
  /**
   * What a claim answers for a key a statement found not new (`Ledger.claimAndReserve`): the stored answer, an
   * error — or the claim, when the record was past its retention or freed meanwhile.
   */
  readonly claimTaken: (request: ClaimRequest) => Effect.Effect<Claim, ClaimError>
  /** Keep an outcome for replay under the claim of `requestId` (not once it was abandoned). */
  readonly complete: (orgId: OrgId, key: string, requestId: string, response: StoredResponse) => Effect.Effect<void>
  /** Forget a non-billable outcome of the request that claimed the key: the key may be used again. */
  readonly release: (orgId: OrgId, key: string, requestId: string) => Effect.Effect<void>
  /** Delete records past their retention (housekeeping: an expired record is already treated as new). */
  readonly purgeExpired: Effect.Effect<number>
}>() {}

/** 1–255 visible ASCII characters. */
export const validateKey = (key: string): Effect.Effect<string, InvalidIdempotencyKey> =>
  /^[\x21-\x7e]{1,255}$/.test(key)
    ? Effect.succeed(key)
    : Effect.fail(
      new InvalidIdempotencyKey({
        message: "Idempotency-Key must be 1 to 255 visible ASCII characters (no spaces or control characters)."
      })
    )

/** Canonical JSON: object keys sorted at every level, so key order does not change the fingerprint. */
export const canonicalJson = (value: unknown): string => {
  if (value === null || typeof value !== "object") return JSON.stringify(value) ?? "null"
  if (isArray(value)) return `[${value.map(canonicalJson).join(",")}]`
  const entries = Object.entries(value).filter(([, v]) => v !== undefined).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`
}

export const fingerprint = (tool: string, input: unknown): string => sha256Hex(`${tool}\n${canonicalJson(input)}`)

const NewClaim = Schema.Struct({
  orgId: Schema.String,
  key: Schema.String,
  fingerprint: Schema.String,
  requestId: Schema.String,
  leaseUntil: Schema.DateFromSelf,
  expiresAt: Schema.DateFromSelf,
  now: Schema.DateFromSelf
})
const ClaimedKey = Schema.Struct({ org_id: Schema.String, key: Schema.String })
const Outcome = Schema.Struct({
  expiresAt: Schema.DateFromSelf,
  orgId: Schema.String,
  key: Schema.String,
  requestId: Schema.String,
  status: Schema.Number,
  body: Schema.String,
  charged: Schema.Number
})


const IdemKey = Schema.Struct({ orgId: Schema.String, key: Schema.String })
const IdemRow = Schema.Struct({
  fingerprint: Schema.String,
  status: Schema.Literal("running", "completed", "abandoned"),
  request_id: Schema.String,
  lease_until: Schema.DateFromSelf,
  expires_at: Schema.DateFromSelf,
  response_status: Schema.NullOr(Schema.Number),
  response_body: Schema.NullOr(Schema.String),
  charged: Schema.NullOr(Schema.Number)
})

export const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const config = yield* LedgerConfig
  const ledger = yield* Ledger

  // Insert running records: the claims that arrive together are one statement (group commit, as the
  // ledger's), in (org, key) order, so two statements inserting the same keys wait for each other in one order.
  // A key twice in one batch goes in once, and its other claims are not claimed: the first holds it. An
  // existing record is left alone (`DO NOTHING` neither updates nor locks it), so a claim never waits for a
  // settlement keeping its answer; one past its retention is taken over by `takeOver`, one row at a time.
  const insertClaims = SqlSchema.findAll({
    Request: Schema.Array(NewClaim),
    Result: ClaimedKey,
    execute: (claims) => sql`
      INSERT INTO idempotency (org_id, key, fingerprint, status, request_id, lease_until, expires_at, created_at)
      SELECT c.org_id, c.key, c.fingerprint, 'running', c.request_id, c.lease_until, c.expires_at, c.now
        FROM unnest(${claims.map((c) => c.orgId)}::text[], ${claims.map((c) => c.key)}::text[],
                    ${claims.map((c) => c.fingerprint)}::text[], ${claims.map((c) => c.requestId)}::text[],
                    ${claims.map((c) => c.leaseUntil)}::timestamptz[], ${claims.map((c) => c.expiresAt)}::timestamptz[],
                    ${claims.map((c) => c.now)}::timestamptz[])
             AS c (org_id, key, fingerprint, request_id, lease_until, expires_at, now)
      ON CONFLICT (org_id, key) DO NOTHING
      RETURNING org_id, key`
  })
  // A record past its retention: the key is new again, if no other request took it over first.
  const takeOverRecord = SqlSchema.findOne({
    Request: NewClaim,
    Result: ClaimedKey,
    execute: (c) => sql`
      UPDATE idempotency
         SET fingerprint = ${c.fingerprint}, status = 'running', request_id = ${c.requestId},
             lease_until = ${c.leaseUntil}, expires_at = ${c.expiresAt}, created_at = ${c.now},
             response_status = NULL, response_body = NULL, charged = NULL
       WHERE org_id = ${c.orgId} AND key = ${c.key} AND expires_at <= ${c.now}
      RETURNING org_id, key`
  })
  const claims = yield* batched({
    execute: (items: ReadonlyArray<typeof NewClaim.Type>) => {
      const first = new Map<string, typeof NewClaim.Type>()
      for (const item of items) {
        const id = recordId(item.orgId, item.key)
        if (!first.has(id)) first.set(id, item)
      }
      const rows = [...first.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, item]) => item)
      return insertClaims(rows).pipe(
        Effect.map((claimed) => {
          const won = new Set(claimed.map((row) => recordId(row.org_id, row.key)))
          return items.map((item) => {
            const id = recordId(item.orgId, item.key)
            return first.get(id) === item && won.has(id)
          })
        }),
        Effect.orDie
      )
    },
    kind: "claim"
  })
  const newClaim = (request: ClaimRequest, now: number): typeof NewClaim.Type => ({
    orgId: request.orgId,
    key: request.key,
    fingerprint: request.fingerprint,
    requestId: request.requestId,
    leaseUntil: toDate(now + request.leaseMs),
    expiresAt: toDate(now + request.leaseMs + config.idempotencyRetentionMs),
    now: toDate(now)
  })
  const tryClaim = (request: ClaimRequest, now: number) => claims.run(newClaim(request, now))
  const takeOver = (request: ClaimRequest, now: number) => Effect.map(takeOverRecord(newClaim(request, now)), Option.isSome)

  // Outcomes kept for replay, together likewise (only a key's claimant completes it, once, and only while its claim
  // runs: not one a retry abandoned), locked in key order.
  const storeOutcomes = SqlSchema.void({
    Request: Schema.Array(Outcome),
    execute: (outcomes) => sql`
      UPDATE idempotency AS i
         SET status = 'completed', response_status = o.status, response_body = o.body, charged = o.charged,
             expires_at = o.expires_at
        FROM unnest(${outcomes.map((o) => o.orgId)}::text[], ${outcomes.map((o) => o.key)}::text[],
                    ${outcomes.map((o) => o.status)}::integer[], ${outcomes.map((o) => o.body)}::text[],
                    ${outcomes.map((o) => o.charged)}::bigint[], ${outcomes.map((o) => o.requestId)}::text[],
                    ${outcomes.map((o) => o.expiresAt)}::timestamptz[])
             AS o (org_id, key, status, body, charged, request_id, expires_at)
       WHERE i.org_id = o.org_id AND i.key = o.key AND i.status = 'running' AND i.request_id = o.request_id
         AND ${lockedInKeyOrder(sql, "i", outcomes)}`
  })
  const outcomes = yield* batched({
    execute: (items: ReadonlyArray<typeof Outcome.Type>) =>
      // an outcome written twice is written the same: trying the statement again is safe
      retriedAfterCall(storeOutcomes(items)).pipe(Effect.as(items.map(() => true)), Effect.orDie),
    kind: "complete"
  })

  const existing = SqlSchema.findOne({
    Request: IdemKey,
    Result: IdemRow,
    execute: (k) => sql`
      SELECT fingerprint, status, request_id, lease_until, expires_at, response_status, response_body, charged
        FROM idempotency WHERE org_id = ${k.orgId} AND key = ${k.key}`
  })
  /**
   * The decision that a claim's request is dead, made once, by the statement that finds its lease run out: a
   * renewal that came meanwhile (the process was alive after all), a completion or a release leaves it as it is.
   */
  const abandonRecord = SqlSchema.findOne({
    Request: Schema.Struct({ orgId: Schema.String, key: Schema.String, requestId: Schema.String, now: Schema.DateFromSelf }),
    Result: ClaimedKey,
    execute: (c) => sql`
      UPDATE idempotency SET status = 'abandoned'
       WHERE org_id = ${c.orgId} AND key = ${c.key} AND request_id = ${c.requestId} AND status = 'running'
         AND lease_until <= ${c.now}
      RETURNING org_id, key`
  })


  const claim = (request: ClaimRequest): Effect.Effect<Claim, ClaimError> =>
    Effect.gen(function* () {
      if (yield* tryClaim(request, yield* nowMillis)) return { _tag: "Claimed" } as const
      return yield* taken(request)
    }).pipe(traced("Idempotency.claim"))

  const taken = (request: ClaimRequest): Effect.Effect<Claim, ClaimError> =>
    Effect.gen(function* () {
      const now = yield* nowMillis
      const found = yield* existing(request)
      // Released between the two statements: try again.
      if (Option.isNone(found)) return yield* claim(request)
      const row = found.value
      // Past its retention the key is new again (another request may have taken it over meanwhile: look again).
      if (row.expires_at.getTime() <= now) {
        return (yield* takeOver(request, now)) ? { _tag: "Claimed" } as const : yield* claim(request)
      }
      if (row.fingerprint !== request.fingerprint) {
        return yield* new IdempotencyKeyReused({
          message: "This Idempotency-Key was already used for a different request (another tool or input). " +
            "Use a new key for a new request."
        })
      }
      if (row.status === "completed") {
        if (row.response_status === null || row.response_body === null) {
          return yield* Effect.dieMessage("a completed Idempotency-Key record has no answer")
        }
        return {
          _tag: "Replay",
          response: { status: row.response_status, body: row.response_body, charged: row.charged ?? 0 },
          requestId: row.request_id
        } as const
      }
      if (row.status !== "abandoned") {
        if (row.lease_until.getTime() > now) {
          // Retry-After: a claim renewed on time is a call alive (its process renews it every third of the lease, so
          // more than half of it is always left): a second, as it will likely answer soon. One whose renewal is
          // overdue may have lost its process: the seconds until its lease ends, when the retry has its answer (the
          // replay, or idempotency_replay_unavailable) — never more than one lease.
          const leaseLeftMs = Math.min(row.lease_until.getTime() - now, request.leaseMs)
          return yield* new RequestInProgress({
            message: "A request with this Idempotency-Key is still running. Wait and retry with the same key.",
            retryAfter: leaseLeftMs > request.leaseMs / 2 ? 1 : Math.max(1, Math.ceil(leaseLeftMs / 1000))
          })
        }
        // The request that claimed the key never finished (its process died, or stalled past its lease): its hold is
        // voided first, then the claim abandoned, unless its record changed since it was read (renewed, or completed
        // by a settlement that came first and is then replayed, or freed): then look again. In that order a late
        // settlement either came first (charged, its answer kept and replayed) or finds its hold voided (charged 0).
        yield* ledger.voidRequest(request.orgId, row.request_id)
        const abandoned = yield* abandonRecord({ orgId: request.orgId, key: request.key, requestId: row.request_id, now: toDate(now) })
        if (Option.isNone(abandoned)) return yield* taken(request)
      } else {
        // abandoned before: its hold voided again, should that retry's void not have got through
        yield* ledger.voidRequest(request.orgId, row.request_id)
      }
      return yield* new IdempotencyReplayUnavailable({
        message: request.write
          // the process may have sent the write before it stopped: a new key would send it again, unchecked
          ? "This Idempotency-Key was used for a write that never completed here (the process handling it stopped), " +
            "so there is nothing to replay — and it may have reached the provider: check whether it was done before " +
            "sending it again with a new key."
          : "This Idempotency-Key was used for a request that never completed, so there is nothing to " +
            "replay. Use a new key."
      })
    }).pipe(Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die }))

  const claimTaken = (request: ClaimRequest) => taken(request).pipe(traced("Idempotency.claimTaken"))

  const complete = (orgId: OrgId, key: string, requestId: string, response: StoredResponse) =>
    Effect.flatMap(nowMillis, (now) =>
      outcomes.run({
        expiresAt: toDate(now + config.idempotencyRetentionMs),
        orgId,
        key,
        requestId,
        status: response.status,
        body: response.body,
        charged: response.charged
      })).pipe(
      Effect.asVoid,
      traced("Idempotency.complete")
    )

  const release = (orgId: OrgId, key: string, requestId: string) =>
    retriedAfterCall(releaseClaim(sql, { orgId, key, requestId })).pipe(
      Effect.asVoid,
      Effect.orDie,
      traced("Idempotency.release")
    )

  const purgeExpired = retention.purgeExpired(sql, "idempotency")

  return Idempotency.of({ claim, claimTaken, complete, release, purgeExpired })
})

export const IdempotencyLive = Layer.scoped(Idempotency, make)
