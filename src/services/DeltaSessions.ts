/**
 * delta's (Bluesky's) sessions, kept between calls and shared by every process: `createSession` is limited
 * per account (30 in 5 minutes, 300 a day), far below what an agent posts, so a session is reused until its
 * access token expires and then renewed with `refreshSession` (its refresh token lives for months); a new
 * `createSession` only when the refresh token is refused or expired. The tokens are sealed in the database
 * like connections, one row per org and account: its key is a mac of the org, the service, the identifier and the
 * app password under a secret derived from the current encryption key (`Encryption.mac`), so that the table lets
 * nobody without the key check a guessed password. Each process keeps the sessions it used in a bounded map in front
 * of the table, and reads the table again when its copy's access token has expired (another process may have
 * renewed it). A row sealed with a key this process does not know is treated as no session.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type { OrgId } from "../domain/ids.js"
import { setBounded } from "./bounded.js"
import { Encryption } from "./Encryption.js"
import { nowMillis, toDate } from "./time.js"

/** A session: its tokens, the account's DID, the PDS its DID document names, and when each token expires. */
export interface DeltaSession {
  readonly accessJwt: string
  readonly refreshJwt: string
  readonly did: string
  /** The account's PDS (from the session's `didDoc`), where writes go; none: the configured service. */
  readonly pds: string | null
  /** Clock readings (ms) after which the access and refresh tokens are no longer used. */
  readonly accessUntil: number
  readonly refreshUntil: number
}

/** Whose session: the org that calls, and the account it logs in to (the service, and the connection's credentials). */
export interface DeltaAccount {
  readonly orgId: OrgId
  readonly service: string
  readonly identifier: string
  readonly appPassword: string
}

export class DeltaSessions extends Context.Tag("DeltaSessions")<DeltaSessions, {
  readonly get: (account: DeltaAccount) => Effect.Effect<DeltaSession | undefined>
  /** Keep the session, while the org has a delta connection (a call that ends after its disconnect keeps nothing). */
  readonly set: (account: DeltaAccount, session: DeltaSession) => Effect.Effect<void>
  /**
   * Delete the org's sessions and this process's copies of them: its delta connection is removed or replaced (in
   * the same transaction, when run in one), so its tokens are not kept past the credentials they came from.
   */
  readonly forget: (orgId: OrgId) => Effect.Effect<void>
  /** Delete the sessions whose refresh token has expired (run by the sweeper). */
  readonly purgeExpired: Effect.Effect<void>
  /**
   * Delete the sessions sealed with a key other than the current one (after a rotation, by `connections reseal`):
   * their rows are found by a mac under that key's secret, which no call computes any more. How many.
   */
  readonly purgeOtherKeys: Effect.Effect<number>
}>() {}

const MAX_KEPT = 10_000

const Stored = Schema.parseJson(Schema.Struct({
  accessJwt: Schema.String,
  refreshJwt: Schema.String,
  did: Schema.String,
  pds: Schema.NullOr(Schema.String),
  accessUntil: Schema.Number,
  refreshUntil: Schema.Number
}))
const encodeStored = Schema.encode(Stored)
const decodeStored = Schema.decodeUnknown(Stored)

const SealedRow = Schema.Struct({
  key_id: Schema.String,
  iv: Schema.Uint8ArrayFromSelf,
  ciphertext: Schema.Uint8ArrayFromSelf,
  tag: Schema.Uint8ArrayFromSelf
})

const RowKey = Schema.Struct({ orgId: Schema.String, key: Schema.String })

const associatedData = (key: string) => `delta_session\0${key}`

/** What a session's row key is a mac of: the whole account, the org first (one org's row is no other's). */
const keyData = (account: DeltaAccount) =>
  JSON.stringify([account.orgId, account.service, account.identifier, account.appPassword])

export const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const encryption = yield* Encryption
  const kept = new Map<string, { readonly orgId: OrgId; readonly session: DeltaSession }>()

  const keep = (orgId: OrgId, key: string, session: DeltaSession) => setBounded(kept, key, { orgId, session }, MAX_KEPT)
  const keyOf = (account: DeltaAccount) => encryption.mac("delta_session", keyData(account))

  const findSealed = SqlSchema.findOne({
    Request: RowKey,
    Result: SealedRow,
    execute: (r) => sql`SELECT key_id, iv, ciphertext, tag FROM delta_sessions WHERE org_id = ${r.orgId} AND key = ${r.key}`
  })

  const read = (orgId: OrgId, key: string) =>
    Effect.gen(function* () {
      const row = yield* findSealed({ orgId, key })
      if (Option.isNone(row) || !encryption.knows(row.value.key_id)) return undefined
      const { ciphertext, iv, key_id, tag } = row.value
      // a session that does not open (altered) is as none: the account logs in anew
      const plaintext = yield* Effect.option(encryption.open({ keyId: key_id, iv, ciphertext, tag }, associatedData(key)))
      return Option.isNone(plaintext) ? undefined : yield* decodeStored(plaintext.value)
    })

  const get = (account: DeltaAccount) =>
    Effect.gen(function* () {
      const key = keyOf(account)
      const now = yield* nowMillis
      const local = kept.get(key)?.session
      if (local !== undefined && local.accessUntil > now) return local
      const stored = yield* read(account.orgId, key)
      if (stored === undefined) {
        kept.delete(key)
        return undefined
      }
      keep(account.orgId, key, stored)
      return stored
    }).pipe(Effect.orDie)

  const set = (account: DeltaAccount, session: DeltaSession) =>
    Effect.gen(function* () {
      const key = keyOf(account)
      const now = yield* nowMillis
      const sealed = yield* encryption.seal(yield* encodeStored(session), associatedData(key))
      const inserted = yield* sql`
        INSERT INTO delta_sessions (org_id, key, key_id, iv, ciphertext, tag, refresh_until, updated_at)
        SELECT ${account.orgId}, ${key}, ${sealed.keyId}, ${sealed.iv}::bytea, ${sealed.ciphertext}::bytea, ${sealed.tag}::bytea,
               ${toDate(session.refreshUntil)}::timestamptz, ${toDate(now)}::timestamptz
         WHERE EXISTS (SELECT 1 FROM connections WHERE org_id = ${account.orgId} AND provider = 'delta')
        ON CONFLICT (key) DO UPDATE SET key_id = EXCLUDED.key_id, iv = EXCLUDED.iv, ciphertext = EXCLUDED.ciphertext,
          tag = EXCLUDED.tag, refresh_until = EXCLUDED.refresh_until, updated_at = EXCLUDED.updated_at
        RETURNING key`
      if (inserted.length > 0) keep(account.orgId, key, session)
      else kept.delete(key)
    }).pipe(Effect.orDie)

  const forget = (orgId: OrgId) =>
    Effect.gen(function* () {
      for (const [key, local] of kept) if (local.orgId === orgId) kept.delete(key)
      yield* sql`DELETE FROM delta_sessions WHERE org_id = ${orgId}`
    }).pipe(Effect.orDie)

  // sessions nobody can renew any more (the sweeper's work, not a tool call's)
  const purgeExpired = Effect.flatMap(nowMillis, (now) =>
    sql`DELETE FROM delta_sessions WHERE refresh_until < ${toDate(now)}`).pipe(Effect.asVoid, Effect.orDie)

  const purgeOtherKeys = sql<{ readonly key: string }>`
    DELETE FROM delta_sessions WHERE key_id <> ${encryption.currentKeyId} RETURNING key`.pipe(
    Effect.map((rows) => rows.length),
    Effect.orDie
  )

  return DeltaSessions.of({ get, set, forget, purgeExpired, purgeOtherKeys })
})

export const DeltaSessionsLive = Layer.effect(DeltaSessions, make)
