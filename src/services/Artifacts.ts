/**
 * Files in tool answers (a screenshot, a PDF, an image) are kept byte for byte, and the answer carries a
 * reference `{id, content_type, bytes, sha256, url}` instead of inline base64. They belong to the org whose
 * call produced them and expire after `ARTIFACT_RETENTION_SECONDS`.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, Option } from "effect"
import * as Crypto from "node:crypto"
import { NotFound, ProviderResponseTooLarge } from "../domain/errors.js"
import type { OrgId } from "../domain/ids.js"
import { ProvidersConfig, ServerConfig } from "../config.js"
import { randomId } from "./random.js"
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

export class Artifacts extends Context.Tag("Artifacts")<Artifacts, {
  readonly store: (orgId: OrgId, contentType: string, data: Uint8Array) => Effect.Effect<ArtifactRef, ProviderResponseTooLarge>
  /** The org's artifact, if it has not expired. */
  readonly get: (orgId: OrgId, id: string) => Effect.Effect<StoredArtifact, NotFound>
  readonly purgeExpired: Effect.Effect<number>
}>() {}

/** Keeps a file of the current call for its org: what providers get to store files with. */
export class ArtifactSink extends Context.Tag("ArtifactSink")<ArtifactSink, {
  readonly store: (contentType: string, data: Uint8Array) => Effect.Effect<ArtifactRef, ProviderResponseTooLarge>
  readonly maxBytes: number
}>() {}

interface ArtifactRow {
  readonly id: string
  readonly content_type: string
  readonly bytes: number
  readonly sha256: string
  readonly data: Uint8Array
}

export const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const config = yield* ProvidersConfig
  const { publicUrl } = yield* ServerConfig
  const urlOf = (id: string) => `${Option.getOrElse(publicUrl, () => "")}/v1/artifacts/${id}`

  const store = (orgId: OrgId, contentType: string, data: Uint8Array) =>
    Effect.gen(function* () {
      if (data.length > config.artifactMaxBytes) {
        return yield* new ProviderResponseTooLarge({ message: `The file is larger than the ${config.artifactMaxBytes}-byte limit.` })
      }
      const now = yield* nowMillis
      const id = yield* randomId("art", 24)
      const sha256 = Crypto.createHash("sha256").update(data).digest("hex")
      yield* sql`
        INSERT INTO artifacts (id, org_id, content_type, bytes, sha256, data, created_at, expires_at)
        VALUES (${id}, ${orgId}, ${contentType}, ${data.length}, ${sha256}, ${data}, ${toDate(now)},
                ${toDate(now + config.artifactRetentionMs)})`.pipe(Effect.orDie)
      return { id, content_type: contentType, bytes: data.length, sha256, url: urlOf(id) }
    }).pipe(traced("Artifacts.store"))

  const get = (orgId: OrgId, id: string) =>
    Effect.gen(function* () {
      const now = yield* nowMillis
      const rows = yield* sql<ArtifactRow>`
        SELECT id, content_type, bytes, sha256, data FROM artifacts
         WHERE id = ${id} AND org_id = ${orgId} AND expires_at > ${toDate(now)}`.pipe(Effect.orDie)
      const row = rows[0]
      // Another org's artifact is "not found": its existence is not disclosed.
      if (row === undefined) return yield* new NotFound({ message: `No artifact ${id.slice(0, 60)} (it may have expired).` })
      return {
        ref: { id: row.id, content_type: row.content_type, bytes: row.bytes, sha256: row.sha256, url: urlOf(row.id) },
        data: row.data
      }
    })

  const purgeExpired = Effect.flatMap(nowMillis, (now) =>
    sql<{ readonly n: number }>`
      WITH d AS (DELETE FROM artifacts WHERE expires_at <= ${toDate(now)} RETURNING 1)
      SELECT count(*)::int AS n FROM d`).pipe(Effect.map((rows) => rows[0]?.n ?? 0), Effect.orDie)

  return Artifacts.of({ store, get, purgeExpired })
})

export const ArtifactsLive = Layer.effect(Artifacts, make)
