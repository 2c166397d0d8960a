/**
 * The per-call log an org reads in the dashboard: time, key, tool, outcome code, credits, latency and
 * request id of every authenticated tool call. Written after the answer is decided, off the caller's path.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
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

export const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient

  const record = (e: UsageEntry) =>
    sql`
      INSERT INTO usage (org_id, key_id, tool, request_id, status, code, credits, latency_ms, provider, created_at)
      VALUES (${e.orgId}, ${e.keyId}, ${e.tool}, ${e.requestId}, ${e.status}, ${e.code}, ${e.credits},
              ${Math.round(e.latencyMs)}, ${e.provider}, ${toDate(e.at)})`.pipe(
      Effect.catchAllCause((cause) => Effect.logWarning("could not write a usage record", cause)),
      Effect.forkDaemon,
      Effect.asVoid
    )

  const page = (
    orgId: OrgId,
    options: { readonly limit: number; readonly cursor?: number | undefined; readonly keyId?: string | undefined; readonly tool?: string | undefined }
  ) =>
    Effect.gen(function* () {
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

  return Usage.of({ record, page })
})

export const UsageLive = Layer.effect(Usage, make)
