/**
 * The per-call log an org reads in the dashboard: time, key, tool, outcome code, credits, latency and
 * request id of every authenticated tool call.
 *
 * Records are written off the caller's path, in batches: `record` appends to an in-memory buffer that is
 * written with one multi-row INSERT at most `FLUSH_INTERVAL` after the first of them arrived (or as soon as
 * `FLUSH_SIZE` records wait), and on shutdown; nothing runs while no call comes. A page read flushes first,
 * so a process sees its own calls at once; other processes' calls appear within the interval. The usage log
 * is an activity record, not the ledger: a process that is killed can lose its last interval of records,
 * never a credit (the journal is the ledger).
 *
 * A batch the database did not take (an error, a lost connection) goes back to the front of the buffer and is
 * written by the next flush, which a failure schedules `RETRY_INTERVAL` later; the last flush, as the process stops,
 * tries again every `LAST_FLUSH_RETRY_INTERVAL` for `LAST_FLUSH_TRIES_FOR`, then says at ERROR how many are lost. A batch is written once: each is
 * one transaction whose id is read before its INSERT, and a batch whose answer was lost is written again only if
 * the database says that transaction did not commit (one it cannot yet tell about waits, unwritten, until it
 * can). While the database fails, at most `MAX_PENDING` records wait: past that the oldest are dropped, counted
 * in a log line at ERROR.
 *
 * A record's id, and a page's cursor, are its row id as `usageIds` shows it: the row ids are one sequence for
 * every org, and the shown ids do not count other orgs' calls (src/services/usageIds.ts).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberSet from "effect/FiberSet"
import * as Layer from "effect/Layer"
import * as Chunk from "effect/Chunk"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { InvalidRequest } from "../domain/errors.js"
import type { KeyId, OrgId } from "../domain/ids.js"
import { makeUsageIds } from "./usageIds.js"
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
  /** When the call was answered and charged (epoch ms). */
  readonly at: number
}

export interface UsageRecord {
  /** Unique; not in any order (a page's order is the records'). */
  readonly id: string
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

/** Which records a page (or an export) holds: all the org's, or those matching every filter given. */
export interface UsageFilter {
  readonly keyId?: string | undefined
  readonly tool?: string | undefined
  /** `ok`: answered 2xx (replays included); `error`: any error answer. */
  readonly status?: "ok" | "error" | undefined
  /** Inclusive. */
  readonly from?: Date | undefined
  /** Exclusive. */
  readonly to?: Date | undefined
}

export interface PageOptions extends UsageFilter {
  readonly limit: number
  /** The `nextCursor` of the previous page. */
  readonly cursor?: string | undefined
}

export interface ExportOptions extends UsageFilter {
  /** The most records the export holds; `nextCursor` says where the rest starts. */
  readonly max: number
  /** The `nextCursor` of a page or of the previous export. */
  readonly cursor?: string | undefined
}

/** An export: its records, read a chunk at a time as they are consumed, and the cursor of the rest. */
export interface UsageExport {
  readonly records: Stream.Stream<UsageRecord>
  readonly nextCursor: string | null
}

/** Calls, errors and credits of one group (a UTC day, `YYYY-MM-DD`, or a tool). */
export interface UsageGroup {
  readonly key: string
  readonly calls: number
  readonly errors: number
  readonly credits: number
}

export class Usage extends Context.Tag("Usage")<Usage, {
  /** Log a call without making the caller wait for the write. */
  readonly record: (entry: UsageEntry) => Effect.Effect<void>
  /** Write the records that are waiting. */
  readonly flush: Effect.Effect<void>
  /** Newest first; a cursor that is not a shown id (digits, below 2^52) is `InvalidRequest`. */
  readonly page: (orgId: OrgId, options: PageOptions) => Effect.Effect<UsagePage, InvalidRequest>
  /** Up to `max` records, newest first, streamed (a CSV download); what it holds is fixed when it is asked for. */
  readonly export: (orgId: OrgId, options: ExportOptions) => Effect.Effect<UsageExport, InvalidRequest>
  /** Totals over `[from, to)` per UTC day (every day of the range, empty ones included) or per tool (most credits first). */
  readonly summary: (
    orgId: OrgId,
    options: { readonly from: Date; readonly to: Date; readonly groupBy: "day" | "tool" }
  ) => Effect.Effect<ReadonlyArray<UsageGroup>>
}>() {}

const UsageRow = Schema.Struct({
  id: Schema.Number,
  created_at: Schema.DateFromSelf,
  key_id: Schema.String,
  tool: Schema.String,
  status: Schema.Number,
  code: Schema.String,
  credits: Schema.Number,
  latency_ms: Schema.Number,
  provider: Schema.NullOr(Schema.String),
  request_id: Schema.String
})

const PageQuery = Schema.Struct({
  orgId: Schema.String,
  limit: Schema.Number,
  /** Row ids below this one. */
  cursor: Schema.optional(Schema.Number),
  /** Row ids from this one on (an export's last). */
  downTo: Schema.optional(Schema.Number),
  keyId: Schema.optional(Schema.String),
  tool: Schema.optional(Schema.String),
  status: Schema.optional(Schema.Literal("ok", "error")),
  from: Schema.optional(Schema.DateFromSelf),
  to: Schema.optional(Schema.DateFromSelf)
})

/** The row ids of a filter's matches, newest first, from the `offset`th on. */
const IdsQuery = Schema.Struct({ ...PageQuery.fields, offset: Schema.Number })
const RowId = Schema.Struct({ id: Schema.Number })

const SummaryQuery = Schema.Struct({
  orgId: Schema.String,
  from: Schema.DateFromSelf,
  to: Schema.DateFromSelf,
  groupBy: Schema.Literal("day", "tool")
})

// sums come back as numeric strings (bigint); a group never sums past what a number carries exactly
const GroupRow = Schema.Struct({
  key: Schema.String,
  calls: Schema.NumberFromString,
  errors: Schema.NumberFromString,
  credits: Schema.NumberFromString
})

/** Records an export reads a statement (about 10 ms of the event loop each, decoded and formatted). */
const EXPORT_CHUNK = 1_000
/** Export chunks a process reads at once; more wait their turn (each keeps the event loop busy for its chunk). */
const EXPORT_CHUNKS_AT_ONCE = 2

const FLUSH_INTERVAL = Duration.millis(100)
const FLUSH_SIZE = 500
/** The wait before a flush that failed is tried again (while records wait, there is always a next flush). */
const RETRY_INTERVAL = Duration.seconds(1)
/** How long the last flush, as the process stops, tries again while the database does not take its records. */
const LAST_FLUSH_TRIES_FOR = Duration.seconds(5)
const LAST_FLUSH_RETRY_INTERVAL = Duration.millis(500)
/** Records per INSERT: ten parameters each, well within PostgreSQL's 65,535 a statement. */
const WRITE_SIZE = 1_000
/** Records kept waiting while the database fails (about 10 MB); past it the oldest are dropped. */
const MAX_PENDING = 50_000

const TransactionId = Schema.Struct({ xid: Schema.String })
const TransactionStatus = Schema.Struct({ status: Schema.NullOr(Schema.Literal("committed", "aborted", "in progress")) })

/** A batch whose INSERT may have committed (its answer was lost), and the id of its transaction. */
interface Unconfirmed {
  readonly batch: ReadonlyArray<UsageEntry>
  readonly xid: string
}

const IdKey = Schema.Struct({ value: Schema.Uint8ArrayFromSelf })

/**
 * The transaction-level advisory lock each flush of usage records takes before its insert (an arbitrary constant,
 * beside the ledger sweeper's). A record's id is drawn from a sequence when it is inserted, and pages walk down
 * by id: had two processes' flushes committed out of their ids' order, a page read between the two commits would
 * have passed below records that appeared after it — never seen by a walk down the pages, nor by reading from the
 * newest again down to the newest id seen. Taken by every flush, the ids commit in order: a record that appears
 * after a page was read is newer than everything on it.
 */
export const USAGE_WRITE_LOCK = 746_269_003

export const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const ids = makeUsageIds(yield* SqlSchema.single({
    Request: Schema.Void,
    Result: IdKey,
    execute: () => sql`SELECT value FROM gateway_secrets WHERE name = 'usage_ids'`
  })(undefined).pipe(Effect.map((row) => row.value), Effect.orDie))
  let pending: Array<UsageEntry> = []
  // batches written, as far as this process knows, neither once nor not at all
  let unconfirmed: Array<Unconfirmed> = []
  // records dropped past MAX_PENDING since the last line that said so
  let dropped = 0
  // the process is stopping: the last flush is the one running
  let closing = false

  const matching = (q: typeof PageQuery.Type) => sql`
       WHERE org_id = ${q.orgId}
         ${q.cursor !== undefined ? sql`AND id < ${q.cursor}` : sql``}
         ${q.downTo !== undefined ? sql`AND id >= ${q.downTo}` : sql``}
         ${q.keyId !== undefined ? sql`AND key_id = ${q.keyId}` : sql``}
         ${q.tool !== undefined ? sql`AND tool = ${q.tool}` : sql``}
         ${q.status === "ok" ? sql`AND status < 400` : q.status === "error" ? sql`AND status >= 400` : sql``}
         ${q.from !== undefined ? sql`AND created_at >= ${q.from}` : sql``}
         ${q.to !== undefined ? sql`AND created_at < ${q.to}` : sql``}`

  // One row more than the page: whether there is a next page.
  const findPage = SqlSchema.findAll({
    Request: PageQuery,
    Result: UsageRow,
    execute: (q) => sql`
      SELECT id, created_at, key_id, tool, status, code, credits, latency_ms, provider, request_id
        FROM usage ${matching(q)}
       ORDER BY id DESC
       LIMIT ${q.limit + 1}`
  })

  const findIds = SqlSchema.findAll({
    Request: IdsQuery,
    Result: RowId,
    execute: (q) => sql`SELECT id FROM usage ${matching(q)} ORDER BY id DESC OFFSET ${q.offset} LIMIT ${q.limit}`
  })

  const recordOf = (r: typeof UsageRow.Type): UsageRecord => ({
    id: ids.show(r.id),
    time: r.created_at,
    keyId: r.key_id,
    tool: r.tool,
    status: r.status,
    code: r.code,
    credits: r.credits,
    latencyMs: r.latency_ms,
    provider: r.provider,
    requestId: r.request_id
  })

  const cursorOf = (cursor: string | undefined) =>
    Effect.suspend(() => {
      const rowId = cursor === undefined ? undefined : ids.read(cursor)
      return cursor !== undefined && rowId === undefined
        ? Effect.fail(new InvalidRequest({ message: "Invalid request: cursor: must be a next_cursor from a previous page" }))
        : Effect.succeed(rowId)
    })

  const exports = yield* Effect.makeSemaphore(EXPORT_CHUNKS_AT_ONCE)

  const findGroups = SqlSchema.findAll({
    Request: SummaryQuery,
    Result: GroupRow,
    execute: (q) => {
      const key = q.groupBy === "day" ? sql`to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')` : sql`tool`
      return sql`
        SELECT ${key} AS key, count(*)::text AS calls, count(*) FILTER (WHERE status >= 400)::text AS errors,
               coalesce(sum(credits), 0)::text AS credits
          FROM usage
         WHERE org_id = ${q.orgId} AND created_at >= ${q.from} AND created_at < ${q.to}
         GROUP BY 1
         ORDER BY ${q.groupBy === "day" ? sql`1` : sql`sum(credits) DESC, count(*) DESC, 1`}`
    }
  })

  const insert = (batch: ReadonlyArray<UsageEntry>) =>
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
    }`
  const currentTransaction = SqlSchema.single({
    Request: Schema.Void,
    Result: TransactionId,
    // the flushes of every process one at a time (the lock is the transaction's), so that records commit in the
    // order of their ids
    execute: () => sql`SELECT pg_advisory_xact_lock(${USAGE_WRITE_LOCK}), pg_current_xact_id()::text AS xid`
  })
  const transactionStatus = SqlSchema.single({
    Request: Schema.String,
    Result: TransactionStatus,
    execute: (xid) => sql`SELECT pg_xact_status(${xid}::xid8) AS status`
  })

  /** Whether a batch's transaction committed: `undefined` while the database cannot tell (or cannot be asked). */
  const committed = (xid: string) =>
    transactionStatus(xid).pipe(
      Effect.map(({ status }) => (status === "committed" ? true : status === "aborted" ? false : undefined)),
      Effect.orElseSucceed(() => undefined)
    )

  /** Keep at most MAX_PENDING records waiting, dropping the oldest. */
  const bound = () => {
    const over = pending.length - MAX_PENDING
    if (over > 0) {
      pending.splice(0, over)
      dropped += over
    }
  }

  /** Write one batch: whether it is written (or will be known to be: see `unconfirmed`). */
  const write = (batch: ReadonlyArray<UsageEntry>) =>
    Effect.gen(function* () {
      let xid: string | undefined
      const exit = yield* Effect.exit(sql.withTransaction(Effect.gen(function* () {
        xid = (yield* currentTransaction(undefined)).xid
        yield* insert(batch)
      })))
      if (exit._tag === "Success") return true
      yield* Effect.logWarning(
        `could not write ${batch.length} usage records; ${closing ? "trying again before the process stops" : "they wait for the next flush"}`,
        exit.cause
      )
      if (xid === undefined) return false
      // the INSERT was sent: it may have committed though its answer was lost
      const done = yield* committed(xid)
      if (done === undefined) unconfirmed.push({ batch, xid })
      return done !== false
    })

  /** The batches whose outcome was unknown: forgotten once committed, waiting again once known not to be. */
  const confirm = Effect.gen(function* () {
    const left: Array<Unconfirmed> = []
    const again: Array<UsageEntry> = []
    for (const u of unconfirmed) {
      const done = yield* committed(u.xid)
      if (done === undefined) left.push(u)
      else if (!done) again.push(...u.batch)
    }
    unconfirmed = left
    if (again.length > 0) pending = [...again, ...pending]
  })

  // One writer at a time, so that batches land in the order they were taken.
  const lock = yield* Effect.makeSemaphore(1)
  // Uninterruptible: a batch taken out of `pending` is written, or put back, even when shutdown interrupts the writer.
  const flush: Effect.Effect<void> = lock.withPermits(1)(Effect.uninterruptible(Effect.gen(function* () {
    if (unconfirmed.length > 0) yield* confirm
    while (pending.length > 0) {
      const batch = pending.splice(0, WRITE_SIZE)
      if (!(yield* write(batch))) {
        pending = [...batch, ...pending]
        bound()
        yield* retryLater
        break
      }
    }
    if (unconfirmed.length > 0) yield* retryLater
    if (dropped > 0) {
      yield* Effect.logError(`${dropped} usage records dropped: more than ${MAX_PENDING} waited for the database`)
      dropped = 0
    }
  })))

  // The last flush, as the process stops: no flush comes after it, so it tries again for a few seconds (a blip of
  // the database, a restart of it) and then says how many records are lost rather than that they wait.
  const lastFlush = Effect.gen(function* () {
    closing = true
    const started = yield* Clock.currentTimeMillis
    yield* flush
    while (waiting() > 0 && (yield* Clock.currentTimeMillis) - started < Duration.toMillis(LAST_FLUSH_TRIES_FOR)) {
      yield* Effect.sleep(LAST_FLUSH_RETRY_INTERVAL)
      yield* flush
    }
    const lost = pending.length
    const unknown = unconfirmed.reduce((n, u) => n + u.batch.length, 0)
    if (lost > 0) {
      yield* Effect.logError(
        `${lost} usage records could not be written before the process stopped (the database did not take them): they are lost`
      )
    }
    if (unknown > 0) {
      yield* Effect.logError(
        `${unknown} usage records may not have been written before the process stopped (the database could not say whether their batch committed)`
      )
    }
  }).pipe(Effect.withClock(Clock.make()))
  const waiting = () => pending.length + unconfirmed.length

  yield* Effect.addFinalizer(() => lastFlush)

  // Owned by the layer: closing it (before the final flush above, finalizers run in reverse) interrupts a
  // flush still waiting for its time; the final flush writes what is left.
  const flushes = yield* FiberSet.make()
  // A record that finds the buffer empty starts the next flush, FLUSH_INTERVAL later: records are written
  // within that interval, and an idle process does nothing at all (a writer polling every 100 ms cost an idle
  // process about 0.4 MB of allocation a second). Batching is not a rule that depends on time: the wait runs
  // on the real clock even under TestClock, whose jumps of hours would otherwise hold records back.
  let flushScheduled = false
  const flushAfter = (wait: Duration.Duration) =>
    Effect.sleep(wait).pipe(
      Effect.withClock(Clock.make()),
      Effect.zipRight(Effect.suspend(() => {
        // records that arrive while this flush writes start the next one
        flushScheduled = false
        return flush
      }))
    )
  const flushLater = flushAfter(FLUSH_INTERVAL)
  // after a failed write, unless a flush is due anyway (when the layer is closing, the fiber is not started)
  const retryLater: Effect.Effect<void> = Effect.suspend(() => {
    if (flushScheduled) return Effect.void
    flushScheduled = true
    return Effect.asVoid(FiberSet.run(flushes, flushAfter(RETRY_INTERVAL)))
  })
  // One early flush at a time when the buffer fills (say, while the database is slow): not one per record.
  let flushQueued = false
  const record = (e: UsageEntry) =>
    Effect.suspend(() => {
      pending.push(e)
      bound()
      if (!flushScheduled) {
        flushScheduled = true
        return Effect.asVoid(FiberSet.run(flushes, flushLater))
      }
      if (pending.length < FLUSH_SIZE || flushQueued) return Effect.void
      flushQueued = true
      return Effect.asVoid(FiberSet.run(flushes, Effect.ensuring(flush, Effect.sync(() => (flushQueued = false)))))
    })

  const page = (orgId: OrgId, options: PageOptions) =>
    Effect.gen(function* () {
      const cursor = yield* cursorOf(options.cursor)
      yield* flush
      const rows = yield* findPage({ orgId, ...options, cursor }).pipe(Effect.orDie)
      const records = rows.slice(0, options.limit).map(recordOf)
      const last = records[records.length - 1]
      return { records, nextCursor: rows.length > options.limit && last !== undefined ? last.id : null }
    })

  const exportRecords = (orgId: OrgId, options: ExportOptions) =>
    Effect.gen(function* () {
      const cursor = yield* cursorOf(options.cursor)
      yield* flush
      const query = { orgId, ...options, cursor, limit: EXPORT_CHUNK }
      // what the export holds is fixed now: from the newest match (records written meanwhile are not in it) down
      // to the `max`th, and where the rest starts when more match
      const [newest] = yield* findIds({ ...query, offset: 0, limit: 1 }).pipe(Effect.orDie)
      if (newest === undefined) return { records: Stream.empty, nextCursor: null }
      const edge = yield* findIds({ ...query, offset: options.max - 1, limit: 2 }).pipe(Effect.orDie)
      const last = edge.length === 2 ? edge[0]?.id : undefined
      // a chunk at a time, each its own statement: the event loop serves other requests between them, and no
      // more than a chunk of rows is held at once. EXPORT_CHUNKS_AT_ONCE chunks of a process's exports are read at a time,
      // the rest wait their turn: a permit a chunk, not an export, so a client that stops reading (or reads slowly)
      // holds none while its answer waits on its socket. A chunk's statement is not interrupted when its client
      // hangs up: it ends within a chunk's time, and its permit is held until then (an interrupted statement would
      // run to its end anyway, its permit given to another chunk beside it: src/db/Database.ts).
      const records = Stream.paginateChunkEffect(newest.id + 1, (below) =>
        exports.withPermits(1)(Effect.map(Effect.uninterruptible(findPage({ ...query, cursor: below, downTo: last })), (rows) => {
          const chunk = rows.slice(0, EXPORT_CHUNK)
          const end = chunk[chunk.length - 1]
          return [Chunk.unsafeFromArray(chunk.map(recordOf)), rows.length > EXPORT_CHUNK && end !== undefined ? Option.some(end.id) : Option.none()] as const
        }))).pipe(Stream.orDie)
      return { records, nextCursor: last === undefined ? null : ids.show(last) }
    })

  const summary = (orgId: OrgId, options: { readonly from: Date; readonly to: Date; readonly groupBy: "day" | "tool" }) =>
    Effect.gen(function* () {
      yield* flush
      const rows = yield* findGroups({ orgId, ...options })
      if (options.groupBy === "tool") return rows
      // every day of the range, so that a chart has no gaps
      const byDay = new Map(rows.map((r) => [r.key, r]))
      const days: Array<UsageGroup> = []
      // the UTC day `from` falls in (epoch time has no leap seconds: a UTC day is a multiple of 86,400,000 ms)
      const first = Math.floor(options.from.getTime() / 86_400_000) * 86_400_000
      for (let day = first; day < options.to.getTime(); day += 86_400_000) {
        const key = toDate(day).toISOString().slice(0, 10)
        days.push(byDay.get(key) ?? { key, calls: 0, errors: 0, credits: 0 })
      }
      return days
    }).pipe(Effect.orDie)

  return Usage.of({ record, flush, page, export: exportRecords, summary })
})

export const UsageLive = Layer.scoped(Usage, make)
