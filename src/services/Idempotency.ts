/**
 * Idempotency keys, on Stripe's model with the API contract's codes. Scope: the org. The first request
 * with a key claims it atomically with a `running` record and a lease; only billable outcomes (a 200 or
 * a normalization failure) are kept and replayed; any other outcome releases the key so a retry runs again.
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
import { Ledger } from "./Ledger.js"
import { sha256Hex } from "./random.js"
import { nowMillis, toDate } from "./time.js"
import { traced } from "./tracing.js"

/** A stored outcome, replayed byte for byte. */
export interface StoredResponse {
  readonly status: number
  readonly body: string
  readonly charged: number
}

export type Claim =
  | { readonly _tag: "Claimed" }
  | { readonly _tag: "Replay"; readonly response: StoredResponse }

export interface ClaimRequest {
  readonly orgId: OrgId
  readonly key: string
  readonly fingerprint: string
  readonly requestId: string
  /** How long the claim holds before a crashed request's key becomes `idempotency_replay_unavailable`. */
  readonly leaseMs: number
}

export class Idempotency extends Context.Tag("Idempotency")<Idempotency, {
  readonly claim: (
    request: ClaimRequest
  ) => Effect.Effect<Claim, IdempotencyKeyReused | RequestInProgress | IdempotencyReplayUnavailable>
  /** Keep a billable outcome for replay. */
  readonly complete: (orgId: OrgId, key: string, response: StoredResponse) => Effect.Effect<void>
  /** Forget a non-billable outcome: the key may be used again. */
  readonly release: (orgId: OrgId, key: string) => Effect.Effect<void>
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
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`
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
const Claimed = Schema.Struct({ claimed: Schema.Boolean })

const IdemKey = Schema.Struct({ orgId: Schema.String, key: Schema.String })
const IdemRow = Schema.Struct({
  fingerprint: Schema.String,
  status: Schema.Literal("running", "completed"),
  request_id: Schema.String,
  lease_until: Schema.DateFromSelf,
  response_status: Schema.NullOr(Schema.Number),
  response_body: Schema.NullOr(Schema.String),
  charged: Schema.NullOr(Schema.Number)
})

const Count = Schema.Struct({ n: Schema.Number })

export const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const config = yield* LedgerConfig
  const ledger = yield* Ledger

  // Insert a running record, or take over one whose retention has passed (the key is new again).
  const insertClaim = SqlSchema.findOne({
    Request: NewClaim,
    Result: Claimed,
    execute: (c) => sql`
      INSERT INTO idempotency (org_id, key, fingerprint, status, request_id, lease_until, expires_at, created_at)
      VALUES (${c.orgId}, ${c.key}, ${c.fingerprint}, 'running', ${c.requestId}, ${c.leaseUntil}, ${c.expiresAt}, ${c.now})
      ON CONFLICT (org_id, key) DO UPDATE
         SET fingerprint = EXCLUDED.fingerprint, status = 'running', request_id = EXCLUDED.request_id,
             lease_until = EXCLUDED.lease_until, expires_at = EXCLUDED.expires_at, created_at = EXCLUDED.created_at,
             response_status = NULL, response_body = NULL, charged = NULL
       WHERE idempotency.expires_at <= ${c.now}
      RETURNING true AS claimed`
  })
  const tryClaim = (request: ClaimRequest, now: number) =>
    insertClaim({
      orgId: request.orgId,
      key: request.key,
      fingerprint: request.fingerprint,
      requestId: request.requestId,
      leaseUntil: toDate(now + request.leaseMs),
      expiresAt: toDate(now + config.idempotencyRetentionMs),
      now: toDate(now)
    }).pipe(Effect.map(Option.isSome))

  const existing = SqlSchema.findOne({
    Request: IdemKey,
    Result: IdemRow,
    execute: (k) => sql`
      SELECT fingerprint, status, request_id, lease_until, response_status, response_body, charged
        FROM idempotency WHERE org_id = ${k.orgId} AND key = ${k.key}`
  })

  const deleteExpired = SqlSchema.single({
    Request: Schema.DateFromSelf,
    Result: Count,
    execute: (now) => sql`
      WITH d AS (DELETE FROM idempotency WHERE expires_at <= ${now} RETURNING 1)
      SELECT count(*)::int AS n FROM d`
  })

  const claim = (request: ClaimRequest): Effect.Effect<
    Claim,
    IdempotencyKeyReused | RequestInProgress | IdempotencyReplayUnavailable
  > =>
    Effect.gen(function* () {
      const now = yield* nowMillis
      if (yield* tryClaim(request, now)) return { _tag: "Claimed" } as const
      const found = yield* existing(request)
      // Released between the two statements: try again.
      if (Option.isNone(found)) return yield* claim(request)
      const row = found.value
      if (row.fingerprint !== request.fingerprint) {
        return yield* new IdempotencyKeyReused({
          message: "This Idempotency-Key was already used for a different request (another tool or input). " +
            "Use a new key for a new request."
        })
      }
      if (row.status === "completed" && row.response_status !== null && row.response_body !== null) {
        return {
          _tag: "Replay",
          response: { status: row.response_status, body: row.response_body, charged: row.charged ?? 0 }
        } as const
      }
      if (row.lease_until.getTime() > now) {
        return yield* new RequestInProgress({
          message: "A request with this Idempotency-Key is still running. Wait and retry with the same key.",
          retryAfter: 1
        })
      }
      // The request that claimed the key never finished (its process died): its outcome is unknown.
      yield* ledger.voidRequest(request.orgId, row.request_id)
      return yield* new IdempotencyReplayUnavailable({
        message: "This Idempotency-Key was used for a request that never completed, so there is nothing to " +
          "replay. Use a new key."
      })
    }).pipe(Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die }), traced("Idempotency.claim"))

  const complete = (orgId: OrgId, key: string, response: StoredResponse) =>
    sql`
      UPDATE idempotency
         SET status = 'completed', response_status = ${response.status}, response_body = ${response.body},
             charged = ${response.charged}
       WHERE org_id = ${orgId} AND key = ${key}`.pipe(Effect.asVoid, Effect.orDie, traced("Idempotency.complete"))

  const release = (orgId: OrgId, key: string) =>
    sql`DELETE FROM idempotency WHERE org_id = ${orgId} AND key = ${key} AND status = 'running'`.pipe(
      Effect.asVoid,
      Effect.orDie,
      traced("Idempotency.release")
    )

  const purgeExpired = Effect.flatMap(nowMillis, (now) => deleteExpired(toDate(now))).pipe(
    Effect.map((row) => row.n),
    Effect.orDie
  )

  return Idempotency.of({ claim, complete, release, purgeExpired })
})

export const IdempotencyLive = Layer.effect(Idempotency, make)
