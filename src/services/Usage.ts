/**
 * The per-call log an org reads in the dashboard: time, key, tool, outcome code, credits, latency and
 * request id of every authenticated tool call.
 *
 * Records are written off the caller's path, in batches: `record` appends to an in-memory buffer that is
 * written with one multi-row INSERT every `FLUSH_INTERVAL` (or as soon as `FLUSH_SIZE` records wait), and
 * on shutdown. A page read flushes first, so a process sees its own calls at once; other processes' calls
 * appear within the interval. The usage log is an activity record, not the ledger: a process that is
 * killed can lose its last interval of records, never a credit (the journal is the ledger).
 */
import { SqlClient } from "@effect/sql"
import { Clock, Context, Duration, Effect, FiberSet, Layer, Schedule } from "effect"
import type { KeyId, OrgId } from "../domain/ids.js"
import { toDate } from "./time.js"

export interface UsageEntry {
  readonly orgId: OrgId
  readonly keyId: KeyId
  readonly tool: string
  readonly requestId: string
  readonly status: number
  /** `ok`, or the envelope's code. */
  readonly code: string
  readonly credits: number
  readonly latencyMs: number
  readonly provider: string | null
  readonly at: number
}

export interface UsageRecord {
  readonly id: number
  readonly time: Date
  readonly keyId: string
  readonly tool: string
  readonly status: number
  readonly code: string
  readonly credits: number
  readonly latencyMs: number
  readonly provider: string | null
  readonly requestId: string
}

export interface UsagePage {
  readonly records: ReadonlyArray<UsageRecord>
  /** Pass as `cursor` for the next (older) page; null at the end. */
  readonly nextCursor: string | null
}

export class Usage extends Context.Tag("Usage")<Usage, {
  /** Log a call without making the caller wait for the write. */
  readonly record: (entry: UsageEntry) => Effect.Effect<void>
  /** Write the records that are waiting. */
  readonly flush: Effect.Effect<void>
  /** Newest first. */
  readonly page: (
    orgId: OrgId,
    options: { readonly limit: number; readonly cursor?: number | undefined; readonly keyId?: string | undefined; readonly tool?: string | undefined }
  ) => Effect.Effect<UsagePage>
}>() {}

interface UsageRow {
  readonly id: number
  readonly created_at: Date
  readonly key_id: string
  readonly tool: string
  readonly status: number
  readonly code: string
  readonly credits: number
  readonly latency_ms: number
  readonly provider: string | null
  readonly request_id: string
}

const FLUSH_INTERVAL = Duration.millis(100)
const FLUSH_SIZE = 500

export const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  let pending: Array<UsageEntry> = []

  const write = (batch: ReadonlyArray<UsageEntry>) =>
    sql`INSERT INTO usage ${
      sql.insert(batch.map((e) => ({
        org_id: e.orgId,
        key_id: e.keyId,
        tool: e.tool,
        request_id: e.requestId,
        status: e.status,
        code: e.code,
        credits: e.credits,
        latency_ms: Math.round(e.latencyMs),
        provider: e.provider,
        created_at: toDate(e.at)
      })))
    }`.pipe(
      Effect.catchAllCause((cause) => Effect.logWarning(`could not write ${batch.length} usage records`, cause)),
      Effect.asVoid
    )

  // One writer at a time, so that batches land in the order they were taken.
  const lock = yield* Effect.makeSemaphore(1)
  // Uninterruptible: a batch taken out of `pending` is written even when shutdown interrupts the writer.
  const flush = lock.withPermits(1)(Effect.uninterruptible(Effect.suspend(() => {
    if (pending.length === 0) return Effect.void
    const batch = pending
    pending = []
    return write(batch)
  })))

  yield* Effect.addFinalizer(() => flush)
  // Batching is not a rule that depends on time: the writer runs on the real clock even under TestClock,
  // whose jumps of hours would otherwise replay one flush per interval.
  yield* flush.pipe(Effect.repeat(Schedule.spaced(FLUSH_INTERVAL)), Effect.withClock(Clock.make()), Effect.forkScoped)

  // owned by the layer: closing it waits for nothing that was forgotten (the final flush writes what is left)
  const earlyFlushes = yield* FiberSet.make()
  // One early flush at a time when the buffer fills (say, while the database is slow): not one per record.
  let flushQueued = false
  const record = (e: UsageEntry) =>
    Effect.suspend(() => {
      pending.push(e)
      if (pending.length < FLUSH_SIZE || flushQueued) return Effect.void
      flushQueued = true
      return Effect.asVoid(FiberSet.run(earlyFlushes, Effect.ensuring(flush, Effect.sync(() => (flushQueued = false)))))
    })

  const page = (
    orgId: OrgId,
    options: { readonly limit: number; readonly cursor?: number | undefined; readonly keyId?: string | undefined; readonly tool?: string | undefined }
  ) =>
    Effect.gen(function* () {
      yield* flush
      const rows = yield* sql<UsageRow>`
        SELECT id, created_at, key_id, tool, status, code, credits, latency_ms, provider, request_id
          FROM usage
         WHERE org_id = ${orgId}
           ${options.cursor !== undefined ? sql`AND id < ${options.cursor}` : sql``}
           ${options.keyId !== undefined ? sql`AND key_id = ${options.keyId}` : sql``}
           ${options.tool !== undefined ? sql`AND tool = ${options.tool}` : sql``}
         ORDER BY id DESC
         LIMIT ${options.limit + 1}`
      const records = rows.slice(0, options.limit).map((r): UsageRecord => ({
        id: r.id,
        time: r.created_at,
        keyId: r.key_id,
        tool: r.tool,
        status: r.status,
        code: r.code,
        credits: r.credits,
        latencyMs: r.latency_ms,
        provider: r.provider,
        requestId: r.request_id
      }))
      const last = records[records.length - 1]
      return { records, nextCursor: rows.length > options.limit && last !== undefined ? String(last.id) : null }
    }).pipe(Effect.orDie)

  return Usage.of({ record, flush, page })
})

export const UsageLive = Layer.scoped(Usage, make)
