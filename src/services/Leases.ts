/**
 * The leases of this process's calls in flight. A hold, and an Idempotency-Key claim, carry a lease: once it
 * has passed, any process takes the call for dead — its sweeper voids the hold, a retry with the key answers
 * `idempotency_replay_unavailable`. So that only a dead process's calls are taken for dead, a live process
 * renews the leases of all its calls in flight with one statement every third of the lease, however many
 * calls there are. A call that outlives its lease while its process lives (a slow provider, a long pause)
 * keeps its hold.
 *
 * A process that stalls (a stopped VM, a debugger, a database that held its statement) can outlive its leases
 * without knowing it: another process may then have voided its hold and abandoned its claim, and a retry been
 * told to use a new key. So the process keeps, for each of its calls, the latest moment its leases are known to
 * hold — from the time read before the statement that wrote them, never later — and a call checks it (`heldUntil`)
 * before each request to its provider (ProviderClient): one whose leases may have run out is not sent.
 *
 * The renewal runs on the real clock (a scheduler, not a rule about time), and writes lease ends read from
 * the service's `Clock`, like every other time the ledger stores.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import type { OrgId } from "../domain/ids.js"
import { LedgerConfig } from "../config.js"
import { lockedInKeyOrder, recordId } from "./recordLocks.js"
import { leaseRenewals } from "./Telemetry.js"
import { toDate } from "./time.js"

/** An Idempotency-Key claim of a call in flight. */
export interface ClaimLease {
  readonly orgId: OrgId
  readonly key: string
  readonly requestId: string
}

export class Leases extends Context.Tag("Leases")<Leases, {
  /** How long a hold or claim stays valid without renewal. */
  readonly leaseMs: number
  /** Keep a hold's lease renewed until `releaseHold`; its lease holds at least until `until` (a Clock reading). */
  readonly holdHeld: (holdId: number, until: number) => Effect.Effect<void>
  readonly releaseHold: (holdId: number) => Effect.Effect<void>
  /** Keep a claim's lease renewed until `releaseClaim`; its lease holds at least until `until`. */
  readonly claimHeld: (claim: ClaimLease, until: number) => Effect.Effect<void>
  readonly releaseClaim: (claim: ClaimLease) => Effect.Effect<void>
  /**
   * Until when the leases of a call in flight — its hold's, and its claim's if it has one — are known to hold
   * (a Clock reading; read synchronously, where the call is about to reach its provider).
   */
  readonly heldUntil: (holdId: number, claim: ClaimLease | undefined) => number
  /** Renew every lease of this process now (the renewal fiber does this every third of the lease). */
  readonly renew: Effect.Effect<void>
}>() {}

const claimId = (claim: ClaimLease) => recordId(claim.orgId, claim.key)

export const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const config = yield* LedgerConfig
  const clock = yield* Effect.clock
  const leaseMs = config.holdLeaseMs
  // what each lease of a call in flight holds until, at least
  const holds = new Map<number, number>()
  const claims = new Map<string, { readonly claim: ClaimLease; until: number }>()
  const Renewed = Schema.Struct({ hold: Schema.NullOr(Schema.String), org_id: Schema.NullOr(Schema.String), key: Schema.NullOr(Schema.String) })
  const decodeRenewed = Schema.decodeUnknown(Schema.Array(Renewed))

  const renew = Effect.suspend(() => {
    if (holds.size === 0 && claims.size === 0) return Effect.void
    const holdIds = [...holds.keys()]
    const claimed = [...claims.values()].map((entry) => entry.claim)
    return Effect.flatMap(clock.currentTimeMillis, (now) => {
      const until = toDate(now + leaseMs)
      // one statement for every hold and claim of this process; a hold that was settled, voided or swept
      // (its status is no longer pending) and a claim that completed are left alone
      return sql`
        WITH h AS (
          -- the hold rows locked in id order, as the ledger's settlement batches lock them: never a cycle
          UPDATE holds SET lease_until = ${until}
           WHERE id IN (SELECT id FROM holds WHERE id = ANY(${holdIds}::bigint[]) AND status = 'pending'
                          AND lease_until < ${until} ORDER BY id FOR UPDATE)
          RETURNING id
        ), c AS (
          -- a running claim's record is kept for the retention after its lease's end (Idempotency.ts)
          UPDATE idempotency SET lease_until = ${until},
                 expires_at = greatest(expires_at, ${toDate(now + leaseMs + config.idempotencyRetentionMs)}::timestamptz)
            FROM unnest(${claimed.map((c) => c.orgId)}::text[], ${claimed.map((c) => c.key)}::text[],
                        ${claimed.map((c) => c.requestId)}::text[]) AS r(org_id, key, request_id)
           WHERE idempotency.org_id = r.org_id AND idempotency.key = r.key
             AND idempotency.request_id = r.request_id AND idempotency.status = 'running'
             AND ${lockedInKeyOrder(sql, "idempotency", claimed, { skipLocked: true })}
          RETURNING idempotency.org_id, idempotency.key
        )
        SELECT id::text AS hold, NULL AS org_id, NULL AS key FROM h
        UNION ALL SELECT NULL, org_id, key FROM c`.pipe(
        Effect.flatMap(decodeRenewed),
        // the leases renewed hold until `until` (one the statement skipped, locked or no longer pending, does not)
        Effect.tap((rows) =>
          Effect.sync(() => {
            const at = until.getTime()
            for (const row of rows) {
              if (row.hold !== null) {
                const id = Number(row.hold)
                const known = holds.get(id)
                if (known !== undefined && known < at) holds.set(id, at)
              } else if (row.org_id !== null && row.key !== null) {
                const entry = claims.get(recordId(row.org_id, row.key))
                if (entry !== undefined && entry.until < at) entry.until = at
              }
            }
          })
        ),
        Effect.zipRight(Metric.increment(leaseRenewals))
      )
    })
  }).pipe(Effect.catchAllCause((cause) => Effect.logWarning("could not renew the leases of the calls in flight", cause)))

  yield* renew.pipe(
    Effect.repeat(Schedule.spaced(Duration.millis(Math.max(1, Math.floor(leaseMs / 3))))),
    Effect.withClock(Clock.make()),
    Effect.forkScoped
  )

  return Leases.of({
    leaseMs,
    holdHeld: (id, until) => Effect.sync(() => void holds.set(id, until)),
    releaseHold: (id) => Effect.sync(() => void holds.delete(id)),
    claimHeld: (claim, until) => Effect.sync(() => void claims.set(claimId(claim), { claim, until })),
    releaseClaim: (claim) => Effect.sync(() => void claims.delete(claimId(claim))),
    heldUntil: (holdId, claim) => {
      const hold = holds.get(holdId) ?? Number.POSITIVE_INFINITY
      const claimed = claim === undefined ? undefined : claims.get(claimId(claim))
      return claimed === undefined ? hold : Math.min(hold, claimed.until)
    },
    renew
  })
})

export const LeasesLive = Layer.scoped(Leases, make)
