/**
 * The leases of this process's calls in flight. A hold, and an Idempotency-Key claim, carry a lease: once it
 * has passed, any process takes the call for dead — its sweeper voids the hold, a retry with the key answers
 * `idempotency_replay_unavailable`. So that only a dead process's calls are taken for dead, a live process
 * renews the leases of all its calls in flight with one statement every third of the lease, however many
 * calls there are. A call that outlives its lease while its process lives (a slow provider, a long pause)
 * keeps its hold.
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
  /** Keep a hold's lease renewed until `releaseHold`. */
  readonly holdHeld: (holdId: number) => Effect.Effect<void>
  readonly releaseHold: (holdId: number) => Effect.Effect<void>
  /** Keep a claim's lease renewed until `releaseClaim`. */
  readonly claimHeld: (claim: ClaimLease) => Effect.Effect<void>
  readonly releaseClaim: (claim: ClaimLease) => Effect.Effect<void>
  /** Renew every lease of this process now (the renewal fiber does this every third of the lease). */
  readonly renew: Effect.Effect<void>
}>() {}

const claimId = (claim: ClaimLease) => recordId(claim.orgId, claim.key)

export const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const config = yield* LedgerConfig
  const clock = yield* Effect.clock
  const leaseMs = config.holdLeaseMs
  const holds = new Set<number>()
  const claims = new Map<string, ClaimLease>()

  const renew = Effect.suspend(() => {
    if (holds.size === 0 && claims.size === 0) return Effect.void
    const holdIds = [...holds]
    const claimed = [...claims.values()]
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
          RETURNING 1
        ), c AS (
          UPDATE idempotency SET lease_until = ${until}
            FROM unnest(${claimed.map((c) => c.orgId)}::text[], ${claimed.map((c) => c.key)}::text[],
                        ${claimed.map((c) => c.requestId)}::text[]) AS r(org_id, key, request_id)
           WHERE idempotency.org_id = r.org_id AND idempotency.key = r.key
             AND idempotency.request_id = r.request_id AND idempotency.status = 'running'
             AND ${lockedInKeyOrder(sql, "idempotency", claimed, { skipLocked: true })}
          RETURNING 1
        )
        SELECT (SELECT count(*) FROM h) AS holds, (SELECT count(*) FROM c) AS claims`.pipe(
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
    holdHeld: (id) => Effect.sync(() => void holds.add(id)),
    releaseHold: (id) => Effect.sync(() => void holds.delete(id)),
    claimHeld: (claim) => Effect.sync(() => void claims.set(claimId(claim), claim)),
    releaseClaim: (claim) => Effect.sync(() => void claims.delete(claimId(claim))),
    renew
  })
})

export const LeasesLive = Layer.scoped(Leases, make)
