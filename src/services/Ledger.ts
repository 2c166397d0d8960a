/**
 * Credits, in two phases like a pending transfer: a call reserves its maximum price as a hold, then the
 * actual charge is posted (never more than the hold) or the hold is voided. Each phase is one statement,
 * so the check and the write cannot be separated by another process. Balance changes are appended to a
 * journal whose sum is the balance. Org administration (creating orgs, grants, spend caps) is `Orgs`'.
 *
 * Group commit: the reservations of calls that arrive together go to the database as one statement, and so
 * do their settlements and voids (`batching.ts`; src/db/functions/gateway_*_batch.ts), each call still
 * getting its own answer. A call alone is sent at once. A settlement also keeps the call's answer under its
 * `Idempotency-Key`, when it has one, in the same statement.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import type { SqlError } from "@effect/sql/SqlError"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { MAX_CREDITS } from "../domain/credits.js"
import { InsufficientCredits, InvalidKey, KeySpendLimitExceeded, SpendCapExceeded } from "../domain/errors.js"
import { type KeyId, OrgId } from "../domain/ids.js"
import { LedgerConfig } from "../config.js"
import { retriedAfterCall } from "./afterCall.js"
import { batched } from "./batching.js"
import { waitAtMost } from "./databaseWait.js"
import { recordId, releaseClaim } from "./recordLocks.js"
import { millisToNextMonth, monthOf, nowMillis, toDate } from "./time.js"
import { traced } from "./tracing.js"

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

/**
 * A call's answer to keep under its `Idempotency-Key` — a 200, or the 502 of a normalization failure —, written
 * by the statement that settles the call: the answer and the charge commit together, and its `charged` is what
 * the settlement posted (0 when the hold was no longer pending).
 */
export interface KeptAnswer {
  readonly orgId: OrgId
  readonly key: string
  /** The request whose claim it is kept under: not kept once another took the key, or a retry abandoned it. */
  readonly requestId: string
  readonly status: number
  readonly body: string
}

/**
 * A call's `Idempotency-Key`, claimed by the statement that makes its reservation: a `running` record under the
 * key with the hold's lease, unless the org has a record under it already.
 */
export interface ReservationClaim {
  readonly key: string
  /** The request's fingerprint (`Idempotency.fingerprint`). */
  readonly fingerprint: string
}

export type ReserveError = InvalidKey | InsufficientCredits | SpendCapExceeded | KeySpendLimitExceeded

export class Ledger extends Context.Tag("Ledger")<Ledger, {
  readonly reserve: (request: ReserveRequest) => Effect.Effect<Hold, ReserveError>
  /**
   * As `reserve`, claiming `claim.key` in the same statement (one commit, durable as a claim is): the
   * reservation is made only if the key was new; `None` if it was not (nothing was reserved: see
   * `Idempotency.claimTaken`). A refusal means the key was claimed.
   */
  readonly claimAndReserve: (request: ReserveRequest, claim: ReservationClaim) => Effect.Effect<Option.Option<Hold>, ReserveError>
  readonly settle: (hold: Hold, charge: number, keep?: KeptAnswer) => Effect.Effect<boolean>
  readonly void: (hold: Hold) => Effect.Effect<boolean>
  /** Void the pending hold of a request (one whose process died), if it is still pending. */
  readonly voidRequest: (orgId: OrgId, requestId: string) => Effect.Effect<number>
  /** Void every pending hold whose lease has expired; returns how many. */
  readonly sweep: Effect.Effect<number>
  /** Pending holds across every process: how many, and the credits they reserve. */
  readonly pendingHolds: Effect.Effect<{ readonly count: number; readonly amount: number }, SqlError>
}>() {}

const ReserveRow = Schema.Struct({
  hold_id: Schema.NullOr(Schema.Number),
  refusal: Schema.NullOr(
    Schema.Literal("invalid_key", "insufficient_credits", "spend_cap_exceeded", "key_spend_limit_exceeded")
  ),
  // null when the key is refused before the org's row is read
  balance: Schema.NullOr(Schema.Number),
  held: Schema.NullOr(Schema.Number),
  month_spend: Schema.NullOr(Schema.Number),
  spend_cap: Schema.NullOr(Schema.Number),
  key_month_spend: Schema.NullOr(Schema.Number),
  key_held: Schema.NullOr(Schema.Number),
  key_limit: Schema.NullOr(Schema.Number)
})

const ReserveBatchRow = Schema.extend(ReserveRow, Schema.Struct({ ord: Schema.Number }))

const ReserveCall = Schema.Struct({
  orgId: Schema.String,
  keyId: Schema.String,
  tool: Schema.String,
  requestId: Schema.String,
  amount: Schema.Number,
  leaseMs: Schema.Number,
  /** The caller's `Clock`, when it asked. */
  now: Schema.Number,
  claim: Schema.NullOr(Schema.Struct({ key: Schema.String, fingerprint: Schema.String }))
})
type ReserveCall = typeof ReserveCall.Type

/** A settlement (`charge` a number) or a void (`charge` null). */
const ResolveCall = Schema.Struct({
  holdId: Schema.Number,
  charge: Schema.NullOr(Schema.Number),
  now: Schema.Number,
  keep: Schema.NullOr(
    Schema.Struct({ orgId: Schema.String, key: Schema.String, requestId: Schema.String, status: Schema.Number, body: Schema.String })
  )
})
type ResolveCall = typeof ResolveCall.Type
const Resolved = Schema.Struct({ ord: Schema.Number, done: Schema.Boolean })
const HoldStatus = Schema.Struct({ id: Schema.Number, status: Schema.Literal("pending", "settled", "voided") })
const Count = Schema.Struct({ n: Schema.Number })
const Pending = Schema.Struct({ count: Schema.Number, amount: Schema.Number })


// An arbitrary constant: one sweeper at a time across every process that shares the database.
const SWEEP_LOCK = 746_269_001


/** The rows in the items' order, by their `ord` (1-based); one missing is a defect. */
const inOrder = <R extends { readonly ord: number }>(rows: ReadonlyArray<R>, count: number): ReadonlyArray<R> => {
  const ordered = new Array<R>(count)
  for (const row of rows) ordered[row.ord - 1] = row
  return ordered
}

/**
 * Why a call fits under a monthly `bound` in no month: it reserves more than the whole of it (a bound of 0 lets no
 * call that costs credits through). Where the input sets a call's maximum, asking for less may fit.
 */
const neverFits = (amount: number, bound: number, what: string, raise: string) =>
  bound === 0
    ? `${what.charAt(0).toUpperCase()}${what.slice(1)} is 0 credits: no call that reserves credits runs under it, in any month. ${raise}.`
    : `This call reserves up to ${amount} credits, more than ${what} of ${bound} in all: it cannot run under it in any month. ` +
      `${raise}, or, where the input sets the call's maximum (max_chars, max_results, limit…), ask for less.`

export const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const config = yield* LedgerConfig
  const relaxed = config.ledgerSync === "relaxed"

  // A batch's time is its latest call's (each reads the caller's `Clock`): a call that waited for its batch
  // does not get a lease already partly spent.
  const BatchTime = Schema.Struct({ at: Schema.DateFromSelf, month: Schema.Number })
  // The calls that claim an Idempotency-Key go through gateway_claim_reserve_batch, which claims the keys
  // first; a batch without one, through gateway_reserve_batch.
  const reserveRows = SqlSchema.findAll({
    Request: Schema.Struct({ calls: Schema.Array(ReserveCall), time: BatchTime }),
    Result: ReserveBatchRow,
    execute: ({ calls, time }) => {
      const reservations = sql`
            ${calls.map((c) => c.orgId)}::text[], ${calls.map((c) => c.keyId)}::text[],
            ${calls.map((c) => c.tool)}::text[], ${calls.map((c) => c.requestId)}::text[],
            ${calls.map((c) => c.amount)}::bigint[], ${calls.map(() => time.at)}::timestamptz[],
            ${calls.map(() => time.month)}::integer[],
            ${calls.map((c) => toDate(time.at.getTime() + c.leaseMs))}::timestamptz[]`
      if (calls.every((c) => c.claim === null)) return sql`SELECT * FROM gateway_reserve_batch(${reservations})`
      // a claim's record is kept for the retention after its call's last sign of life (`Idempotency.ts`)
      return sql`SELECT * FROM gateway_claim_reserve_batch(${reservations},
            ${calls.map((c) => c.claim?.key ?? null)}::text[], ${calls.map((c) => c.claim?.fingerprint ?? null)}::text[],
            ${calls.map((c) => toDate(time.at.getTime() + c.leaseMs + config.idempotencyRetentionMs))}::timestamptz[])`
    }
  })
  const resolveRows = SqlSchema.findAll({
    Request: Schema.Struct({ calls: Schema.Array(ResolveCall), time: BatchTime }),
    Result: Resolved,
    execute: ({ calls, time }) => {
      const resolve = sql`SELECT * FROM gateway_resolve_batch(
            ${calls.map((c) => c.holdId)}::bigint[], ${calls.map((c) => c.charge)}::bigint[],
            ${calls.map(() => time.at)}::timestamptz[], ${calls.map(() => time.month)}::integer[], ${relaxed})`
      const kept = calls.flatMap((c, i) => (c.keep === null ? [] : [{ ...c.keep, ord: i + 1, charge: c.charge ?? 0 }]))
      if (kept.length === 0) return resolve
      // the answers kept in the same transaction, after the settlements (they read whether each was posted);
      // their records are locked last, after the holds and orgs (see recordLocks.ts)
      return sql`
        WITH r AS (${resolve}), kept AS (
          UPDATE idempotency AS i
             SET status = 'completed', response_status = a.status, response_body = a.body,
                 charged = CASE WHEN r.done THEN a.charge ELSE 0 END,
                 expires_at = ${toDate(time.at.getTime() + config.idempotencyRetentionMs)}::timestamptz
            FROM unnest(${kept.map((k) => k.ord)}::integer[], ${kept.map((k) => k.orgId)}::text[],
                        ${kept.map((k) => k.key)}::text[], ${kept.map((k) => k.status)}::integer[],
                        ${kept.map((k) => k.body)}::text[], ${kept.map((k) => k.charge)}::bigint[],
                        ${kept.map((k) => k.requestId)}::text[])
                   AS a (ord, org_id, key, status, body, charge, request_id)
            JOIN r ON r.ord = a.ord
           WHERE i.org_id = a.org_id AND i.key = a.key AND i.status = 'running' AND i.request_id = a.request_id
        )
        SELECT ord, done FROM r`
    }
  })
  const batchTime = (calls: ReadonlyArray<{ readonly now: number }>) => {
    const now = calls.reduce((latest, c) => Math.max(latest, c.now), 0)
    return { at: toDate(now), month: monthOf(now) }
  }

  /**
   * What a reservation statement did for calls that were answered as failed before it ended (see
   * `databaseTimeoutMs`): their holds voided, their claims of Idempotency-Keys taken back, since none of the calls
   * went on to its provider. If this fails (the database failing again, the process stopping), a hold is voided
   * by a sweeper when its lease runs out, but a claimed key stays `running` and then answers
   * `idempotency_replay_unavailable` until its retention ends: the ERROR line names the calls' request ids.
   */
  const undoReservations = (calls: ReadonlyArray<ReserveCall>, rows: ReadonlyArray<typeof ReserveBatchRow.Type>) =>
    Effect.gen(function* () {
      // the calls that got a hold (a row's `ord` is its call's place in the batch), voided as a sweep voids them;
      // then their claims freed, as a release frees one
      const held = rows.flatMap((row) => {
        const call = calls[row.ord - 1]
        return row.hold_id === null || call === undefined ? [] : [call]
      })
      const now = yield* nowMillis
      const voided = yield* Effect.forEach(held, (c) => voidWhere(now, { orgId: OrgId.make(c.orgId), requestId: c.requestId }))
      const claims = calls.flatMap((c) => (c.claim === null ? [] : [{ orgId: c.orgId, key: c.claim.key, requestId: c.requestId }]))
      yield* Effect.forEach(claims, (claim) => releaseClaim(sql, claim), { discard: true })
      yield* Effect.logWarning(
        `a reservation the database took after its calls were answered as failed was undone (${voided.reduce((n, v) => n + v, 0)} ` +
          `holds voided, ${claims.length} Idempotency-Key claims taken back)`
      )
    }).pipe(
      Effect.catchAllCause((cause) =>
        Effect.logError(
          "a late reservation could not be undone: its holds are voided when their leases run out; its Idempotency-Key " +
            "claims stay until their retention (requests " + calls.map((c) => c.requestId).join(", ") + ")",
          cause
        ))
    )

  // A call gets its row, or `None` when it claimed a key that was not new (no row: nothing was reserved). A key
  // claimed twice in one batch goes in once: the other calls are not sent, and answered `None`.
  const reservations = yield* batched({
    execute: (calls: ReadonlyArray<ReserveCall>) => {
      const claimants = new Set<string>()
      const sent = calls.filter((c) => {
        if (c.claim === null) return true
        const id = recordId(c.orgId, c.claim.key)
        if (claimants.has(id)) return false
        claimants.add(id)
        return true
      })
      // the calls run uninterruptibly: only their wait for the statement is cut short, and what a statement that
      // answers too late did for them is undone
      return waitAtMost(reserveRows({ calls: sent, time: batchTime(sent) }), {
        ms: config.databaseTimeoutMs,
        what: "the reservation",
        onLate: (rows) => undoReservations(sent, rows)
      }).pipe(
        Effect.map((rows) => {
          const bySent = new Map<ReserveCall, typeof ReserveBatchRow.Type>()
          for (const row of rows) {
            const call = sent[row.ord - 1]
            if (call !== undefined) bySent.set(call, row)
          }
          return calls.map((call) => Option.fromNullable(bySent.get(call)))
        }),
        Effect.orDie
      )
    },
    kind: "reserve"
  })
  const holdStatuses = SqlSchema.findAll({
    Request: Schema.Array(Schema.Number),
    Result: HoldStatus,
    execute: (ids) => sql`SELECT id, status FROM holds WHERE id = ANY(${ids}::bigint[])`
  })
  const statusesOf = (ids: ReadonlyArray<number>) =>
    Effect.map(holdStatuses(ids), (rows) => new Map(rows.map((row) => [row.id, row.status])))
  /**
   * A batch whose statement failed: it may have committed and lost its answer with the connection. The holds say
   * which. Nothing but this batch settles its holds, and the statement is one transaction: one of them settled
   * means all of it committed. Otherwise it is sent again — a void of a voided hold, or a settlement of a hold a
   * sweeper voided meanwhile, changes nothing. Each call is then answered by what its hold is.
   */
  const resolvedAfterError = (calls: ReadonlyArray<ResolveCall>, time: typeof BatchTime.Type) =>
    Effect.gen(function* () {
      const ids = calls.map((c) => c.holdId)
      const before = yield* statusesOf(ids)
      const committed = calls.some((c) => c.charge !== null && before.get(c.holdId) === "settled")
      const after = committed ? before : yield* Effect.zipRight(resolveRows({ calls, time }), statusesOf(ids))
      return calls.map((c) => after.get(c.holdId) === (c.charge === null ? "voided" : "settled"))
    })
  const resolutions = yield* batched({
    execute: (calls: ReadonlyArray<ResolveCall>) => {
      const time = batchTime(calls)
      return resolveRows({ calls, time }).pipe(
        Effect.map((rows) => inOrder(rows, calls.length).map((row) => row.done)),
        // the provider has answered these calls: a brief database error does not leave them uncharged
        Effect.catchTag("SqlError", () => retriedAfterCall(resolvedAfterError(calls, time))),
        // a database that kept failing: nothing posted, as far as this process can tell — each call is answered as
        // charged 0 (a write the provider carried out is not answered 500 to be retried), and each hold, its lease
        // no longer renewed, is voided by a sweeper
        Effect.catchTag("SqlError", (error) =>
          Effect.as(
            Effect.logError(`settlements and voids not written (${calls.length}): the database kept failing`, Cause.fail(error)).pipe(
              Effect.annotateLogs({ hold_ids: calls.map((c) => c.holdId).join(",") })
            ),
            calls.map(() => false)
          )),
        Effect.orDie
      )
    },
    kind: "resolve"
  })

  const reserveClaiming = (request: ReserveRequest, claim: ReservationClaim | null) =>
    Effect.gen(function* () {
      const now = yield* nowMillis
      const reserved = yield* reservations.run({
        orgId: request.orgId,
        keyId: request.keyId,
        tool: request.tool,
        requestId: request.requestId,
        amount: request.amount,
        leaseMs: request.leaseMs,
        now,
        claim
      })
      if (Option.isNone(reserved)) {
        // only a call whose key was not new goes without its reservation
        return claim === null ? yield* Effect.dieMessage("a reservation without a claim got no row") : Option.none<Hold>()
      }
      return Option.some(yield* held(request, reserved.value, now))
    })

  /** The hold the statement made, or the refusal it answered, as the call's error. */
  const held = (request: ReserveRequest, row: typeof ReserveRow.Type, now: number) =>
    Effect.gen(function* () {
      const amount = request.amount
      if (row.hold_id !== null) return { id: row.hold_id, orgId: request.orgId, amount }
      const nextMonth = Math.ceil(millisToNextMonth(now) / 1000)
      const balance = row.balance ?? 0
      const held = row.held ?? 0
      switch (row.refusal) {
        case "invalid_key":
          // The key was revoked after this process cached it.
          return yield* new InvalidKey({ message: "Missing or invalid API key. Send it in the X-API-Key header." })
        case "insufficient_credits":
          return yield* new InsufficientCredits({
            message: `This call reserves up to ${amount} credits and the org has ${balance - held} available ` +
              `(balance ${balance}, ${held} held by calls in flight). Add credits and retry.`
          })
        case "key_spend_limit_exceeded":
          // a call that reserves more than the whole limit fits in no month: the message says so (every 429 carries
          // Retry-After, here the month's end, when the limit's count starts again; it is not when this call fits)
          if ((row.key_limit ?? 0) < amount) {
            return yield* new KeySpendLimitExceeded({
              message: neverFits(amount, row.key_limit ?? 0, "this key's monthly spend limit", "Raise the key's limit"),
              retryAfter: nextMonth
            })
          }
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
          if (row.spend_cap < amount) {
            return yield* new SpendCapExceeded({
              message: neverFits(amount, row.spend_cap, "the org's monthly spend cap", "Raise the cap"),
              retryAfter: nextMonth
            })
          }
          return yield* new SpendCapExceeded({
            message: `The org's monthly spend cap of ${row.spend_cap ?? 0} credits would be exceeded ` +
              `(${row.month_spend ?? 0} spent this month, ${held} held, this call reserves up to ${amount}). ` +
              "Raise the cap or wait for the next month.",
            retryAfter: nextMonth
          })
      }
    })

  const reserve = (request: ReserveRequest) =>
    reserveClaiming(request, null).pipe(
      Effect.flatMap(Option.match({ onNone: () => Effect.dieMessage("an unclaimed reservation got no row"), onSome: Effect.succeed })),
      traced("Ledger.reserve")
    )

  const claimAndReserve = (request: ReserveRequest, claim: ReservationClaim) =>
    reserveClaiming(request, claim).pipe(traced("Ledger.claimAndReserve"))

  const settle = (hold: Hold, charge: number, keep?: KeptAnswer) =>
    Effect.gen(function* () {
      const now = yield* nowMillis
      const amount = Math.max(0, Math.min(charge, hold.amount))
      return yield* resolutions.run({ holdId: hold.id, charge: amount, now, keep: keep ?? null })
    }).pipe(traced("Ledger.settle"))

  const voidHold = (hold: Hold) =>
    Effect.gen(function* () {
      const now = yield* nowMillis
      return yield* resolutions.run({ holdId: hold.id, charge: null, now, keep: null })
    }).pipe(traced("Ledger.void"))

  const voidWhere = (now: number, filter: "expired" | { readonly orgId: OrgId; readonly requestId: string }) =>
    Effect.gen(function* () {
      // In the ledger's one lock order (org, then key), skipping holds a batch has locked (it resolves them):
      // so a sweep never waits for a batch that waits for it.
      // A sweep is one statement: the lock that keeps sweepers from doing the same work twice is taken and
      // let go inside it, so a process stopped between statements (a debugger, a stalled VM) holds nothing.
      const candidates = filter === "expired"
        ? sql`SELECT id FROM holds WHERE (SELECT pg_try_advisory_xact_lock(${SWEEP_LOCK}))
                AND status = 'pending' AND lease_until < ${toDate(now)}
              ORDER BY org_id, key_id, id LIMIT 1000 FOR UPDATE SKIP LOCKED`
        : sql`SELECT id FROM holds WHERE status = 'pending' AND org_id = ${filter.orgId}
                AND request_id = ${filter.requestId} ORDER BY key_id, id FOR UPDATE SKIP LOCKED`
      const voided = SqlSchema.single({
        Request: Schema.DateFromSelf,
        Result: Count,
        execute: (at) => sql`SELECT count(*) FILTER (WHERE gateway_void(c.id, ${at}))::int AS n FROM (${candidates}) c`
      })
      return (yield* voided(toDate(now))).n
    })

  const voidRequest = (orgId: OrgId, requestId: string) =>
    Effect.flatMap(nowMillis, (now) => voidWhere(now, { orgId, requestId })).pipe(Effect.orDie)

  const sweep = Effect.gen(function* () {
    const now = yield* nowMillis
    return yield* voidWhere(now, "expired")
  }).pipe(Effect.orDie, traced("Ledger.sweep"))

  const pendingHolds = SqlSchema.single({
    Request: Schema.Void,
    Result: Pending,
    execute: () =>
      sql`SELECT count(*)::int AS count, coalesce(sum(amount), 0)::bigint AS amount FROM holds WHERE status = 'pending'`
  })(undefined).pipe(Effect.catchTags({ ParseError: Effect.die, NoSuchElementException: Effect.die }))

  return Ledger.of({
    pendingHolds,
    reserve,
    claimAndReserve,
    settle,
    void: voidHold,
    voidRequest,
    sweep
  })
})

export const LedgerLive = Layer.scoped(Ledger, make)
