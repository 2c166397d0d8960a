/**
 * Files in tool answers (a screenshot, a PDF, an image) are kept byte for byte, and the answer carries a
 * reference `{id, content_type, bytes, sha256, url}` instead of inline base64. They belong to the org whose
 * call produced them and expire after `ARTIFACT_RETENTION_SECONDS`. An org keeps at most `ARTIFACT_QUOTA_BYTES` of
 * files that have not expired: a file past it is not kept (`artifact_quota_exceeded`, and its call is not charged).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as RcMap from "effect/RcMap"
import * as Schema from "effect/Schema"
import * as Crypto from "node:crypto"
import { ArtifactQuotaExceeded, NotFound, ProviderResponseTooLarge } from "../domain/errors.js"
import type { OrgId } from "../domain/ids.js"
import { ProvidersConfig, ServerConfig } from "../config.js"
import { randomId } from "./random.js"
import * as retention from "./retention.js"
import { nowMillis, toDate } from "./time.js"
import { traced } from "./tracing.js"

export interface ArtifactRef {
  readonly id: string
  readonly content_type: string
  readonly bytes: number
  /** Hex SHA-256 of the bytes; also the ETag. */
  readonly sha256: string
  readonly url: string
}

export interface StoredArtifact {
  readonly ref: ArtifactRef
  readonly data: Uint8Array
}

/** A kept file in a list: its reference, when it was kept and when it expires. */
export interface ListedArtifact {
  readonly ref: ArtifactRef
  readonly createdAt: Date
  readonly expiresAt: Date
}

/** A page of an org's files, newest first; `next` continues after its last one (null: no more). */
export interface ArtifactPage {
  readonly artifacts: ReadonlyArray<ListedArtifact>
  readonly next: ArtifactCursor | null
}

/** Where a page ends: the last file's keeping time and id (files kept at the same instant are ordered by id). */
export interface ArtifactCursor {
  readonly createdAt: Date
  readonly id: string
}

export class Artifacts extends Context.Tag("Artifacts")<Artifacts, {
  readonly store: (
    orgId: OrgId,
    contentType: string,
    data: Uint8Array
  ) => Effect.Effect<ArtifactRef, ProviderResponseTooLarge | ArtifactQuotaExceeded>
  /** The org's artifact, if it has not expired. */
  readonly get: (orgId: OrgId, id: string) => Effect.Effect<StoredArtifact, NotFound>
  /** The org's files that have not expired, newest first, `limit` at a time (without their bytes). */
  readonly list: (orgId: OrgId, options: { readonly limit: number; readonly after?: ArtifactCursor | undefined }) => Effect.Effect<ArtifactPage>
  readonly purgeExpired: Effect.Effect<number>
}>() {}

/** Keeps a file of the current call for its org: what providers get to store files with. */
export class ArtifactSink extends Context.Tag("ArtifactSink")<ArtifactSink, {
  readonly store: (contentType: string, data: Uint8Array) => Effect.Effect<ArtifactRef, ProviderResponseTooLarge | ArtifactQuotaExceeded>
  readonly maxBytes: number
}>() {}

const ArtifactRow = Schema.Struct({
  id: Schema.String,
  content_type: Schema.String,
  bytes: Schema.Number,
  sha256: Schema.String,
  data: Schema.Uint8ArrayFromSelf
})
/** An org's files against its quota: the bytes it keeps now, and when enough of them will have expired for a file to fit. */
const QuotaUse = Schema.Struct({ used: Schema.Number, fits_at: Schema.NullOr(Schema.DateFromSelf) })
const QuotaRequest = Schema.Struct({ orgId: Schema.String, now: Schema.DateFromSelf, bytes: Schema.Number, quota: Schema.Number })
const ArtifactKey = Schema.Struct({ id: Schema.String, orgId: Schema.String, now: Schema.DateFromSelf })
const ListedRow = Schema.Struct({
  id: Schema.String,
  content_type: Schema.String,
  bytes: Schema.Number,
  sha256: Schema.String,
  created_at: Schema.DateFromSelf,
  expires_at: Schema.DateFromSelf
})
const ListRequest = Schema.Struct({
  orgId: Schema.String,
  now: Schema.DateFromSelf,
  limit: Schema.Number,
  after: Schema.NullOr(Schema.Struct({ createdAt: Schema.DateFromSelf, id: Schema.String }))
})

/**
 * The first key of the transaction-level advisory lock that keeps one org's files one at a time (the second is a
 * hash of the org's id): an arbitrary constant. The two-key locks are a key space of their own, apart from the
 * ledger sweeper's one-key lock.
 */
export const QUOTA_LOCK = 746_269_002

export const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const config = yield* ProvidersConfig
  const { publicUrl } = yield* ServerConfig
  const urlOf = (id: string) => `${Option.getOrElse(publicUrl, () => "")}/v1/artifacts/${id}`

  const findArtifact = SqlSchema.findOne({
    Request: ArtifactKey,
    Result: ArtifactRow,
    execute: (key) => sql`
      SELECT id, content_type, bytes, sha256, data FROM artifacts
       WHERE id = ${key.id} AND org_id = ${key.orgId} AND expires_at > ${key.now}`
  })
  // newest first; (created_at, id) keeps the order total, so that a page starts exactly where the last one ended
  const listArtifacts = SqlSchema.findAll({
    Request: ListRequest,
    Result: ListedRow,
    execute: (r) => sql`
      SELECT id, content_type, bytes, sha256, created_at, expires_at FROM artifacts
       WHERE org_id = ${r.orgId} AND expires_at > ${r.now}
         ${r.after === null ? sql`` : sql`AND (created_at, id) < (${r.after.createdAt}, ${r.after.id})`}
       ORDER BY created_at DESC, id DESC
       LIMIT ${r.limit}`
  })

  // on a refusal only: what the org keeps, and the first expiry after which the file fits (none: it is larger than the quota)
  const quotaUse = SqlSchema.single({
    Request: QuotaRequest,
    Result: QuotaUse,
    execute: (r) => sql`
      WITH kept AS (SELECT id, bytes, expires_at FROM artifacts WHERE org_id = ${r.orgId} AND expires_at > ${r.now}),
           total AS (SELECT coalesce(sum(bytes), 0)::bigint AS used FROM kept)
      SELECT total.used,
             (SELECT min(freed.expires_at)
                FROM (SELECT expires_at, sum(bytes) OVER (ORDER BY expires_at, id) AS bytes FROM kept) freed
               WHERE total.used - freed.bytes + ${r.bytes}::bigint <= ${r.quota}::bigint) AS fits_at
        FROM total`
  })

  // The org's kept files, not expired, are counted by the statement that keeps the new one, which runs after the
  // org's lock is taken: a file kept by another process (that held the lock before) has been committed, and is
  // counted, so two files kept at once cannot both pass the quota. Expired files count for nothing, purged or not.
  const keep = (row: {
    readonly id: string
    readonly orgId: OrgId
    readonly contentType: string
    readonly data: Uint8Array
    readonly sha256: string
  }) =>
    sql.withTransaction(Effect.gen(function* () {
      yield* sql`SELECT pg_advisory_xact_lock(${QUOTA_LOCK}, hashtext(${row.orgId}))`
      // the time once the lock is held, not before waiting for it (files that expired meanwhile count for nothing)
      const now = yield* nowMillis
      const kept = yield* sql`
        INSERT INTO artifacts (id, org_id, content_type, bytes, sha256, data, created_at, expires_at)
        SELECT ${row.id}, ${row.orgId}, ${row.contentType}, ${row.data.length}::bigint, ${row.sha256}, ${row.data}::bytea,
               ${toDate(now)}::timestamptz, ${toDate(now + config.artifactRetentionMs)}::timestamptz
         WHERE (SELECT coalesce(sum(bytes), 0) FROM artifacts WHERE org_id = ${row.orgId} AND expires_at > ${toDate(now)})
               + ${row.data.length}::bigint <= ${config.artifactQuotaBytes}::bigint
        RETURNING id`
      if (kept.length > 0) return { now, refused: Option.none() }
      const use = yield* quotaUse({ orgId: row.orgId, now: toDate(now), bytes: row.data.length, quota: config.artifactQuotaBytes })
      return { now, refused: Option.some(use) }
    }))

  // One file of an org kept at a time in this process. A keep waiting for the org's lock holds a pooled connection
  // all the while, so many of one org's files at once (30 PDF reads) would take every connection of the pool, and
  // every other org's statements would wait for one and fail after the pool's 5 s. Here they wait their turn
  // without a connection: an org holds at most one of each process's connections for its files. The lock still
  // orders them across processes. An org's turn is dropped once nobody waits for it.
  const turns = yield* RcMap.make({ lookup: (_: OrgId) => Effect.makeSemaphore(1) })
  const keepInTurn = (row: Parameters<typeof keep>[0]) =>
    Effect.scoped(Effect.flatMap(RcMap.get(turns, row.orgId), (turn) => turn.withPermits(1)(keep(row))))

  const store = (orgId: OrgId, contentType: string, data: Uint8Array) =>
    Effect.gen(function* () {
      if (data.length > config.artifactMaxBytes) {
        return yield* new ProviderResponseTooLarge({ message: `The file is larger than the ${config.artifactMaxBytes}-byte limit.` })
      }
      // a file the quota could never hold is too large, as one past the limit above: no time would let it in
      if (data.length > config.artifactQuotaBytes) {
        return yield* new ProviderResponseTooLarge({
          message: `The file (${data.length} bytes) is larger than the org's whole ${config.artifactQuotaBytes}-byte quota for ` +
            "kept files (ARTIFACT_QUOTA_BYTES): it cannot be kept, and the call was not charged."
        })
      }
      const id = yield* randomId("art", 24)
      const sha256 = Crypto.createHash("sha256").update(data).digest("hex")
      const { now, refused } = yield* keepInTurn({ id, orgId, contentType, data, sha256 }).pipe(Effect.orDie)
      if (Option.isSome(refused)) {
        const { used, fits_at } = refused.value
        const quota = config.artifactQuotaBytes
        return yield* new ArtifactQuotaExceeded({
          // (the file is no larger than the quota, so once every kept file has expired it fits: `fits_at` is a time)
          message: `The file (${data.length} bytes) was not kept: the org's files take ${used} of its ${quota}-byte quota until ` +
            `some expire${fits_at === null ? "" : ` (enough of them by ${fits_at.toISOString()})`}. The call was not charged.`,
          ...(fits_at === null ? {} : { retryAfter: Math.max(1, Math.ceil((fits_at.getTime() - now) / 1000)) })
        })
      }
      return { id, content_type: contentType, bytes: data.length, sha256, url: urlOf(id) }
    }).pipe(traced("Artifacts.store"))

  const get = (orgId: OrgId, id: string) =>
    Effect.gen(function* () {
      const now = yield* nowMillis
      const found = yield* findArtifact({ id, orgId, now: toDate(now) }).pipe(Effect.orDie)
      // Another org's artifact is "not found": its existence is not disclosed.
      if (Option.isNone(found)) return yield* new NotFound({ message: `No artifact ${id.slice(0, 60)} (it may have expired).` })
      const row = found.value
      return {
        ref: { id: row.id, content_type: row.content_type, bytes: row.bytes, sha256: row.sha256, url: urlOf(row.id) },
        data: row.data
      }
    })

  const list = (orgId: OrgId, options: { readonly limit: number; readonly after?: ArtifactCursor | undefined }) =>
    Effect.gen(function* () {
      const now = yield* nowMillis
      // one more than asked for: whether there is a next page
      const rows = yield* listArtifacts({ orgId, now: toDate(now), limit: options.limit + 1, after: options.after ?? null }).pipe(Effect.orDie)
      const page = rows.slice(0, options.limit)
      const last = page[page.length - 1]
      return {
        artifacts: page.map((row) => ({
          ref: { id: row.id, content_type: row.content_type, bytes: row.bytes, sha256: row.sha256, url: urlOf(row.id) },
          createdAt: row.created_at,
          expiresAt: row.expires_at
        })),
        next: rows.length > options.limit && last !== undefined ? { createdAt: last.created_at, id: last.id } : null
      }
    }).pipe(traced("Artifacts.list"))

  const purgeExpired = retention.purgeExpired(sql, "artifacts")

  return Artifacts.of({ store, get, list, purgeExpired })
})

export const ArtifactsLive = Layer.scoped(Artifacts, make)
