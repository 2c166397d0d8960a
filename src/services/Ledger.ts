/**
 * Credits, in two phases like a pending transfer: a call reserves its maximum price as a hold, then the
 * actual charge is posted (never more than the hold) or the hold is voided. Each phase is one statement,
 * so the check and the write cannot be separated by another process. Balance changes are appended to a
 * journal whose sum is the balance.
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, Layer } from "effect"
import { creditsMessage, isCredits, MAX_CREDITS } from "../domain/credits.js"
import {
  InsufficientCredits,
  InvalidKey,
  InvalidRequest,
  KeySpendLimitExceeded,
  NotFound,
  SpendCapExceeded
} from "../domain/errors.js"
import { type KeyId, OrgId } from "../domain/ids.js"
import { randomId } from "./random.js"
import { millisToNextMonth, monthOf, nowMillis, toDate } from "./time.js"
import { traced } from "./tracing.js"

export interface Org {
  readonly id: OrgId
  readonly name: string
  readonly balance: number
  readonly held: number
  readonly available: number
  /** Charged in the current UTC month. */
  readonly monthSpend: number
  readonly spendCap: number | null
  readonly createdAt: Date
}

export interface Hold {
  readonly id: number
  readonly orgId: OrgId
  readonly amount: number
}

export interface ReserveRequest {
  readonly orgId: OrgId
  readonly keyId: KeyId
  readonly tool: string
  readonly requestId: string
  readonly amount: number
  /** How long the hold may stay pending before the sweeper voids it. */
  readonly leaseMs: number
}

export class Ledger extends Context.Tag("Ledger")<Ledger, {
  /** Amounts are whole numbers of credits up to `MAX_CREDITS`; anything else is `invalid_request`. */
  readonly createOrg: (input: {
    readonly name: string
    readonly credits?: number
    readonly spendCap?: number | null
  }) => Effect.Effect<Org, InvalidRequest>
  readonly getOrg: (id: OrgId) => Effect.Effect<Org, NotFound>
  readonly countOrgs: Effect.Effect<number>
  /** Add credits; a grant that would take the balance past `MAX_CREDITS` is refused. */
  readonly grant: (id: OrgId, amount: number, note?: string) => Effect.Effect<Org, NotFound | InvalidRequest>
  readonly setSpendCap: (id: OrgId, cap: number | null) => Effect.Effect<Org, NotFound | InvalidRequest>
  readonly reserve: (
    request: ReserveRequest
  ) => Effect.Effect<Hold, InvalidKey | InsufficientCredits | SpendCapExceeded | KeySpendLimitExceeded>
  readonly settle: (hold: Hold, charge: number) => Effect.Effect<boolean>
  readonly void: (hold: Hold) => Effect.Effect<boolean>
  /** Void the pending hold of a request (one whose process died), if it is still pending. */
  readonly voidRequest: (orgId: OrgId, requestId: string) => Effect.Effect<number>
  /** Void every pending hold whose lease has expired; returns how many. */
  readonly sweep: Effect.Effect<number>
  /** Pending holds across every process: how many, and the credits they reserve. */
  readonly pendingHolds: Effect.Effect<{ readonly count: number; readonly amount: number }, SqlError>
}>() {}

interface ReserveRow {
  readonly hold_id: number | null
  readonly refusal: "invalid_key" | "insufficient_credits" | "spend_cap_exceeded" | "key_spend_limit_exceeded" | null
  readonly balance: number
  readonly held: number
  readonly month_spend: number
  readonly spend_cap: number | null
  readonly key_month_spend: number | null
  readonly key_held: number | null
  readonly key_limit: number | null
}

interface OrgRow {
  readonly id: string
  readonly name: string
  readonly balance: number
  readonly held: number
  readonly spend_month: number
  readonly month_spend: number
  readonly spend_cap: number | null
  readonly created_at: Date
}

/** `invalid_request` unless `value` is a whole number of credits from `min` to `MAX_CREDITS`. */
export const checkCredits = (name: string, value: number, min = 0): Effect.Effect<void, InvalidRequest> =>
  isCredits(value, min) ? Effect.void : Effect.fail(new InvalidRequest({ message: creditsMessage(name, value, min) }))

// An arbitrary constant: one sweeper at a time across every process that shares the database.
const SWEEP_LOCK = 746_269_001

export const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient

  const toOrg = (row: OrgRow, month: number): Org => {
    const monthSpend = row.spend_month === month ? row.month_spend : 0
    return {
      id: OrgId.make(row.id),
      name: row.name,
      balance: row.balance,
      held: row.held,
      available: row.balance - row.held,
      monthSpend,
      spendCap: row.spend_cap,
      createdAt: row.created_at
    }
  }

  const readOrg = (id: OrgId) =>
    Effect.gen(function* () {
      const now = yield* nowMillis
      const rows = yield* sql<OrgRow>`SELECT * FROM orgs WHERE id = ${id}`
      const row = rows[0]
      if (row === undefined) return yield* new NotFound({ message: `no org with id ${id}` })
      return toOrg(row, monthOf(now))
    })

  const getOrg = (id: OrgId) => readOrg(id).pipe(Effect.catchTag("SqlError", Effect.die))

  const createOrg = (input: { readonly name: string; readonly credits?: number; readonly spendCap?: number | null }) =>
    Effect.gen(function* () {
      yield* checkCredits("credits", input.credits ?? 0)
      if (input.spendCap !== undefined && input.spendCap !== null) yield* checkCredits("spend cap", input.spendCap)
      const now = yield* nowMillis
      const id = OrgId.make(yield* randomId("org"))
      const credits = input.credits ?? 0
      yield* sql.withTransaction(Effect.gen(function* () {
        yield* sql`
          INSERT INTO orgs (id, name, balance, held, spend_month, month_spend, spend_cap, created_at)
          VALUES (${id}, ${input.name}, ${credits}, 0, ${monthOf(now)}, 0, ${input.spendCap ?? null}, ${toDate(now)})`
        if (credits > 0) {
          yield* sql`
            INSERT INTO journal (org_id, kind, amount, note, created_at)
            VALUES (${id}, 'grant', ${credits}, 'initial credits', ${toDate(now)})`
        }
      }))
      return yield* readOrg(id)
    }).pipe(Effect.catchTag("SqlError", "NotFound", Effect.die), traced("Ledger.createOrg"))

  const countOrgs = sql<{ readonly n: number }>`SELECT count(*)::int AS n FROM orgs`.pipe(
    Effect.map((rows) => rows[0]?.n ?? 0),
    Effect.orDie
  )

  const grant = (id: OrgId, amount: number, note?: string) =>
    Effect.gen(function* () {
      yield* checkCredits("amount", amount, 1)
      const now = yield* nowMillis
      const updated = yield* sql.withTransaction(Effect.gen(function* () {
        const rows = yield* sql<{ readonly balance: number }>`
          UPDATE orgs SET balance = balance + ${amount} WHERE id = ${id} AND balance <= ${MAX_CREDITS - amount}
          RETURNING balance`
        if (rows.length === 0) return false
        yield* sql`
          INSERT INTO journal (org_id, kind, amount, note, created_at)
          VALUES (${id}, 'grant', ${amount}, ${note ?? null}, ${toDate(now)})`
        return true
      }))
      if (!updated) {
        const org = yield* readOrg(id)
        return yield* new InvalidRequest({
          message: `Granting ${amount} credits would take the balance of ${org.id} (${org.balance}) past ${MAX_CREDITS}, ` +
            "the largest amount of credits the gateway counts."
        })
      }
      return yield* readOrg(id)
    }).pipe(Effect.catchTag("SqlError", Effect.die), traced("Ledger.grant"))

  const setSpendCap = (id: OrgId, cap: number | null) =>
    Effect.gen(function* () {
      if (cap !== null) yield* checkCredits("spend cap", cap)
      const rows = yield* sql<{ readonly id: string }>`UPDATE orgs SET spend_cap = ${cap} WHERE id = ${id} RETURNING id`
      if (rows.length === 0) return yield* new NotFound({ message: `no org with id ${id}` })
      return yield* readOrg(id)
    }).pipe(Effect.catchTag("SqlError", Effect.die))

  const reserve = (request: ReserveRequest) =>
    Effect.gen(function* () {
      const now = yield* nowMillis
      const amount = request.amount
      const rows = yield* sql<ReserveRow>`
        SELECT * FROM gateway_reserve(${request.orgId}, ${request.keyId}, ${request.tool}, ${request.requestId},
                                      ${amount}, ${toDate(now)}, ${monthOf(now)}, ${toDate(now + request.leaseMs)})`
      const row = rows[0]
      if (row === undefined) return yield* Effect.dieMessage("gateway_reserve answered no row")
      if (row.hold_id !== null) return { id: row.hold_id, orgId: request.orgId, amount }
      const nextMonth = Math.ceil(millisToNextMonth(now) / 1000)
      switch (row.refusal) {
        case "invalid_key":
          // The key was revoked after this process cached it.
          return yield* new InvalidKey({ message: "Missing or invalid API key. Send it in the X-API-Key header." })
        case "insufficient_credits":
          return yield* new InsufficientCredits({
            message: `This call reserves up to ${amount} credits and the org has ${row.balance - row.held} available ` +
              `(balance ${row.balance}, ${row.held} held by calls in flight). Add credits and retry.`
          })
        case "key_spend_limit_exceeded":
          return yield* new KeySpendLimitExceeded({
            message: `This key's monthly spend limit of ${row.key_limit ?? 0} credits would be exceeded ` +
              `(${row.key_month_spend ?? 0} spent this month, ${row.key_held ?? 0} held, this call reserves up to ` +
              `${amount}). Raise the key's limit or wait for the next month.`,
            retryAfter: nextMonth
          })
        default:
          if (row.spend_cap === null) {
            return yield* new SpendCapExceeded({
              message: `This call would take the org's spend this month past ${MAX_CREDITS} credits, the largest ` +
                "amount the gateway counts. Wait for the next month.",
              retryAfter: nextMonth
            })
          }
          return yield* new SpendCapExceeded({
            message: `The org's monthly spend cap of ${row.spend_cap ?? 0} credits would be exceeded ` +
              `(${row.month_spend} spent this month, ${row.held} held, this call reserves up to ${amount}). ` +
              "Raise the cap or wait for the next month.",
            retryAfter: nextMonth
          })
      }
    }).pipe(Effect.catchTag("SqlError", Effect.die), traced("Ledger.reserve"))

  const settle = (hold: Hold, charge: number) =>
    Effect.gen(function* () {
      const now = yield* nowMillis
      const amount = Math.max(0, Math.min(charge, hold.amount))
      const rows = yield* sql<{ readonly settled: boolean }>`
        SELECT gateway_settle(${hold.id}, ${amount}, ${toDate(now)}, ${monthOf(now)}) AS settled`
      return rows[0]?.settled === true
    }).pipe(Effect.catchTag("SqlError", Effect.die), traced("Ledger.settle"))

  const voidHold = (hold: Hold) =>
    Effect.gen(function* () {
      const now = yield* nowMillis
      const rows = yield* sql<{ readonly voided: boolean }>`SELECT gateway_void(${hold.id}, ${toDate(now)}) AS voided`
      return rows[0]?.voided === true
    }).pipe(Effect.catchTag("SqlError", Effect.die), traced("Ledger.void"))

  const voidWhere = (now: number, filter: "expired" | { readonly orgId: OrgId; readonly requestId: string }) =>
    Effect.gen(function* () {
      const candidates = filter === "expired"
        ? sql`SELECT id FROM holds WHERE status = 'pending' AND lease_until < ${toDate(now)}
              ORDER BY id LIMIT 1000 FOR UPDATE SKIP LOCKED`
        : sql`SELECT id FROM holds WHERE status = 'pending' AND org_id = ${filter.orgId}
                AND request_id = ${filter.requestId}`
      const rows = yield* sql<{ readonly n: number }>`
        SELECT count(*) FILTER (WHERE gateway_void(c.id, ${toDate(now)}))::int AS n FROM (${candidates}) c`
      return rows[0]?.n ?? 0
    })

  const voidRequest = (orgId: OrgId, requestId: string) =>
    Effect.flatMap(nowMillis, (now) => voidWhere(now, { orgId, requestId })).pipe(Effect.orDie)

  const sweep = Effect.gen(function* () {
    const now = yield* nowMillis
    return yield* sql.withTransaction(Effect.gen(function* () {
      const locked = yield* sql<{ readonly locked: boolean }>`SELECT pg_try_advisory_xact_lock(${SWEEP_LOCK}) AS locked`
      if (locked[0]?.locked !== true) return 0
      return yield* voidWhere(now, "expired")
    }))
  }).pipe(Effect.orDie, traced("Ledger.sweep"))

  const pendingHolds = sql<{ readonly count: number; readonly amount: number }>`
    SELECT count(*)::int AS count, coalesce(sum(amount), 0)::bigint AS amount FROM holds WHERE status = 'pending'`.pipe(
    Effect.map((rows) => ({ count: rows[0]?.count ?? 0, amount: rows[0]?.amount ?? 0 }))
  )

  return Ledger.of({
    pendingHolds,
    createOrg,
    getOrg,
    countOrgs,
    grant,
    setSpendCap,
    reserve,
    settle,
    void: voidHold,
    voidRequest,
    sweep
  })
})

export const LedgerLive = Layer.effect(Ledger, make)
