/**
 * Files in tool answers (a screenshot, a PDF, an image) are kept byte for byte, and the answer carries a
 * reference `{id, content_type, bytes, sha256, url}` instead of inline base64. They belong to the org whose
 * call produced them and expire after `ARTIFACT_RETENTION_SECONDS`. An org keeps at most `ARTIFACT_QUOTA_BYTES` of
 * files that have not expired: a file past it is not kept (`artifact_quota_exceeded`, and its call is not charged).
 *
 * A file is read a chunk at a time (`FILE_CHUNK_BYTES`, a statement each, `FILE_CHUNKS_AT_ONCE` of a process's at
 * once, `FILE_CHUNKS_PER_ORG` of an org's): a download holds no pooled connection while its client reads, at most a
 * chunk of memory, and a range or a conditional request reads only what it answers (the column is stored uncompressed, migration 0022, so a
 * chunk is read without the rest of the file). A key whose tools are limited (`allowed_tools`) reads only the files
 * its own calls kept; a key with every tool reads all of its org's.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as RcMap from "effect/RcMap"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Crypto from "node:crypto"
import { ArtifactQuotaExceeded, NotFound, ProviderResponseTooLarge } from "../domain/errors.js"
import { checkedContentType } from "../domain/contentType.js"
import type { KeyId, OrgId } from "../domain/ids.js"
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

/** Who keeps a file: the org it belongs to and the key whose call kept it. */
export interface ArtifactOwner {
  readonly orgId: OrgId
  readonly keyId: KeyId
}

/** Whose files a reader sees: its org's, all of them (`keyId` null) or only those one key's calls kept. */
export interface ArtifactReader {
  readonly orgId: OrgId
  readonly keyId: KeyId | null
}

/** The files an API key reads: a key limited to some tools (`allowed_tools`) only its own; a key with every tool, its org's. */
export const readerOf = (caller: { readonly orgId: OrgId; readonly keyId: KeyId; readonly allowedTools: ReadonlyArray<string> | null }): ArtifactReader =>
  ({ orgId: caller.orgId, keyId: caller.allowedTools === null ? null : caller.keyId })

/** The bytes of a file read a chunk at a time, and of a range of it: each statement reads this many at most. */
export const FILE_CHUNK_BYTES = 256 * 1024
/**
 * How many chunks of files a process reads at once, whoever asks: files never take more of the pool's connections
 * (20) than this, however many downloads run, so other statements always find one.
 */
export const FILE_CHUNKS_AT_ONCE = 4
/** How many of those one org's downloads take at once: the others' wait only for the chunks being read. */
export const FILE_CHUNKS_PER_ORG = 2


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
  /** Keep a file for its owner's org (its media type as `checkedContentType` reads it). */
  readonly store: (
    owner: ArtifactOwner,
    contentType: string,
    data: Uint8Array
  ) => Effect.Effect<ArtifactRef, ProviderResponseTooLarge | ArtifactQuotaExceeded>
  /** A file the reader sees, if it has not expired: what it is, without its bytes. */
  readonly find: (reader: ArtifactReader, id: string) => Effect.Effect<ArtifactRef, NotFound>
  /**
   * Bytes `start` to `end` (inclusive) of a file `find` answered: the first chunk read now (a database that fails is
   * this effect's defect, before any answer is written), the rest a chunk at a time as the stream is read. A file
   * purged meanwhile fails the stream (a defect: the answer is cut off).
   */
  readonly read: (
    reader: ArtifactReader,
    ref: ArtifactRef,
    range: { readonly start: number; readonly end: number }
  ) => Effect.Effect<Stream.Stream<Uint8Array>>
  /** A whole file the reader sees, if it has not expired, read a chunk at a time. */
  readonly get: (reader: ArtifactReader, id: string) => Effect.Effect<StoredArtifact, NotFound>
  /** The files the reader sees that have not expired, newest first, `limit` at a time (without their bytes). */
  readonly list: (reader: ArtifactReader, options: { readonly limit: number; readonly after?: ArtifactCursor | undefined }) => Effect.Effect<ArtifactPage>
  /**
   * Deletes files an org's call kept that nothing names: its call failed after keeping them (a normalization failure
   * is charged, and its answer carries no file). A database that fails leaves them to expire, said at WARN.
   */
  readonly discard: (orgId: OrgId, ids: ReadonlyArray<string>) => Effect.Effect<void>
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
  sha256: Schema.String
})
const ChunkRequest = Schema.Struct({ id: Schema.String, orgId: Schema.String, from: Schema.Number, length: Schema.Number })
const ChunkRow = Schema.Struct({ data: Schema.Uint8ArrayFromSelf })
/** An org's files against its quota: the bytes it keeps now, and when enough of them will have expired for a file to fit. */
const QuotaUse = Schema.Struct({ used: Schema.Number, fits_at: Schema.NullOr(Schema.DateFromSelf) })
const QuotaRequest = Schema.Struct({ orgId: Schema.String, now: Schema.DateFromSelf, bytes: Schema.Number, quota: Schema.Number })
const ArtifactKey = Schema.Struct({ id: Schema.String, orgId: Schema.String, keyId: Schema.NullOr(Schema.String), now: Schema.DateFromSelf })
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
  keyId: Schema.NullOr(Schema.String),
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

/**
 * Each org's turn: at most `permits` of its effects at once in this process, the rest waiting (without a connection);
 * an org's turn is dropped once nobody waits for it. With `atOnce`, its effects then wait for one of the process's
 * `atOnce` places too (an org's turn first, so that one org's many wait behind each other, not in front of others).
 */
export const orgTurns = (permits: number, atOnce?: number) =>
  Effect.gen(function* () {
    const turns = yield* RcMap.make({ lookup: (_: OrgId) => Effect.makeSemaphore(permits) })
    const places = atOnce === undefined ? undefined : yield* Effect.makeSemaphore(atOnce)
    return <A, E>(orgId: OrgId, effect: Effect.Effect<A, E>) =>
      Effect.scoped(Effect.flatMap(RcMap.get(turns, orgId), (turn) =>
        turn.withPermits(1)(places === undefined ? effect : places.withPermits(1)(effect))))
  })

export const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const config = yield* ProvidersConfig
  const { publicUrl } = yield* ServerConfig
  const urlOf = (id: string) => `${Option.getOrElse(publicUrl, () => "")}/v1/artifacts/${id}`

  const findArtifact = SqlSchema.findOne({
    Request: ArtifactKey,
    Result: ArtifactRow,
    execute: (key) => sql`
      SELECT id, content_type, bytes, sha256 FROM artifacts
       WHERE id = ${key.id} AND org_id = ${key.orgId} AND expires_at > ${key.now}
         ${key.keyId === null ? sql`` : sql`AND key_id = ${key.keyId}`}`
  })
  // bytes `from` (0-based) on, `length` of them: `substring` of a column stored uncompressed reads only their chunks
  const findChunk = SqlSchema.findOne({
    Request: ChunkRequest,
    Result: ChunkRow,
    execute: (c) => sql`
      SELECT substring(data FROM ${c.from + 1}::integer FOR ${c.length}::integer) AS data FROM artifacts
       WHERE id = ${c.id} AND org_id = ${c.orgId}`
  })
  // newest first; (created_at, id) keeps the order total, so that a page starts exactly where the last one ended
  const listArtifacts = SqlSchema.findAll({
    Request: ListRequest,
    Result: ListedRow,
    execute: (r) => sql`
      SELECT id, content_type, bytes, sha256, created_at, expires_at FROM artifacts
       WHERE org_id = ${r.orgId} AND expires_at > ${r.now}
         ${r.keyId === null ? sql`` : sql`AND key_id = ${r.keyId}`}
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
    readonly keyId: KeyId
    readonly contentType: string
    readonly data: Uint8Array
    readonly sha256: string
  }) =>
    sql.withTransaction(Effect.gen(function* () {
      yield* sql`SELECT pg_advisory_xact_lock(${QUOTA_LOCK}, hashtext(${row.orgId}))`
      // the time once the lock is held, not before waiting for it (files that expired meanwhile count for nothing)
      const now = yield* nowMillis
      const kept = yield* sql`
        INSERT INTO artifacts (id, org_id, key_id, content_type, bytes, sha256, data, created_at, expires_at)
        SELECT ${row.id}, ${row.orgId}, ${row.keyId}, ${row.contentType}, ${row.data.length}::bigint, ${row.sha256}, ${row.data}::bytea,
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
  const keepTurn = yield* orgTurns(1)
  const keepInTurn = (row: Parameters<typeof keep>[0]) =>
    keepTurn(row.orgId, keep(row))

  const store = (owner: ArtifactOwner, given: string, data: Uint8Array) =>
    Effect.gen(function* () {
      const { orgId, keyId } = owner
      const contentType = checkedContentType(given)
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
      const { now, refused } = yield* keepInTurn({ id, orgId, keyId, contentType, data, sha256 }).pipe(Effect.orDie)
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

  const refOf = (row: typeof ArtifactRow.Type): ArtifactRef =>
    // a type kept by an earlier build is checked as it is served
    ({ id: row.id, content_type: checkedContentType(row.content_type), bytes: row.bytes, sha256: row.sha256, url: urlOf(row.id) })

  const find = (reader: ArtifactReader, id: string) =>
    Effect.gen(function* () {
      const now = yield* nowMillis
      const found = yield* findArtifact({ id, orgId: reader.orgId, keyId: reader.keyId, now: toDate(now) }).pipe(Effect.orDie)
      // Another org's artifact (or, to a key limited to some tools, another key's) is "not found": its existence is
      // not disclosed.
      if (Option.isNone(found)) return yield* new NotFound({ message: `No artifact ${id.slice(0, 60)} (it may have expired).` })
      return refOf(found.value)
    })

  // A chunk's statement is not interrupted when its client hangs up: it ends within a chunk's time, and its permit
  // is held until then (an interrupted statement would run to its end anyway, its permit given to another chunk
  // beside it: src/db/Database.ts). A permit a chunk, not a download: a client that stops reading holds none.
  //
  // An org's chunks wait their own turn first (`FILE_CHUNKS_PER_ORG` at once): one org's many downloads queued every
  // other org's behind theirs in the process's one queue, and now take at most that many of its readers.
  const inTurn = yield* orgTurns(FILE_CHUNKS_PER_ORG, FILE_CHUNKS_AT_ONCE)
  const chunk = (reader: ArtifactReader, ref: ArtifactRef, from: number, length: number) =>
    inTurn(reader.orgId, Effect.uninterruptible(findChunk({ id: ref.id, orgId: reader.orgId, from, length }))).pipe(
      Effect.orDie,
      Effect.flatMap(Option.match({
        onNone: () => Effect.dieMessage(`artifact ${ref.id} was purged while it was read`),
        onSome: (row) => Effect.succeed(row.data)
      }))
    )

  const read = (reader: ArtifactReader, ref: ArtifactRef, range: { readonly start: number; readonly end: number }) => {
    const lengthFrom = (from: number) => Math.min(FILE_CHUNK_BYTES, range.end + 1 - from)
    const after = range.start + lengthFrom(range.start)
    const rest = after > range.end ? Stream.empty : Stream.paginateEffect(after, (from) => {
      const next = from + lengthFrom(from)
      return Effect.map(chunk(reader, ref, from, lengthFrom(from)), (data) => [data, next <= range.end ? Option.some(next) : Option.none()] as const)
    })
    return Effect.map(chunk(reader, ref, range.start, lengthFrom(range.start)), (first) =>
      Stream.concat(Stream.make(first), rest).pipe(Stream.filter((data) => data.length > 0)))
  }

  const get = (reader: ArtifactReader, id: string) =>
    Effect.gen(function* () {
      const ref = yield* find(reader, id)
      const data = new Uint8Array(ref.bytes)
      for (let from = 0; from < ref.bytes; from += FILE_CHUNK_BYTES) {
        data.set(yield* chunk(reader, ref, from, Math.min(FILE_CHUNK_BYTES, ref.bytes - from)), from)
      }
      return { ref, data }
    })

  const list = (reader: ArtifactReader, options: { readonly limit: number; readonly after?: ArtifactCursor | undefined }) =>
    Effect.gen(function* () {
      const now = yield* nowMillis
      // one more than asked for: whether there is a next page
      const rows = yield* listArtifacts({ orgId: reader.orgId, keyId: reader.keyId, now: toDate(now), limit: options.limit + 1, after: options.after ?? null }).pipe(Effect.orDie)
      const page = rows.slice(0, options.limit)
      const last = page[page.length - 1]
      return {
        artifacts: page.map((row) => ({
          ref: refOf(row),
          createdAt: row.created_at,
          expiresAt: row.expires_at
        })),
        next: rows.length > options.limit && last !== undefined ? { createdAt: last.created_at, id: last.id } : null
      }
    }).pipe(traced("Artifacts.list"))

  const purgeExpired = retention.purgeExpired(sql, "artifacts")

  const discard = (orgId: OrgId, ids: ReadonlyArray<string>) =>
    ids.length === 0 ? Effect.void : sql`DELETE FROM artifacts WHERE org_id = ${orgId} AND id IN ${sql.in(ids)}`.pipe(
      Effect.asVoid,
      Effect.catchAll((error) =>
        Effect.logWarning(`could not delete the files of a failed call (they expire with ARTIFACT_RETENTION_SECONDS): ${error.message}`)),
      Effect.uninterruptible
    )

  return Artifacts.of({ store, find, read, get, list, discard, purgeExpired })
})

export const ArtifactsLive = Layer.scoped(Artifacts, make)
