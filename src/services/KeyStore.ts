/**
 * API keys. The full key exists only in the answer to `create`; the database keeps its SHA-256 and a
 * short display prefix. Verification is one indexed lookup by hash, so a revocation is seen by the very
 * next request on every process.
 *
 * A tool call may skip that lookup (`verify(key, { cached: true })`): a key this process verified before
 * is taken from its cache, and the caller is marked unconfirmed. The reservation statement then confirms
 * the key in the same statement that reserves credits, and every answer that does not pass through it (a
 * refusal before the reservation, a replay) confirms it first with `confirm`. So a revoked key is still
 * refused on its very next request, on every process, and the common call costs one round trip less.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as FiberSet from "effect/FiberSet"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { creditsMessage, isCredits } from "../domain/credits.js"
import { MAX_RATE } from "../domain/dashboard.js"
import { InvalidKey, InvalidRequest, NotFound } from "../domain/errors.js"
import { API_KEY_PATTERN, API_KEY_PREFIX, KeyId, OrgId } from "../domain/ids.js"
import { LedgerConfig } from "../config.js"
import { setBounded } from "./bounded.js"
import { waitAtMost } from "./databaseWait.js"
import { base62, randomId, sha256 } from "./random.js"
import { monthOf, nowMillis, toDate } from "./time.js"
import { traced } from "./tracing.js"

/** The mark of a caller: only this module has it, so only `KeyStore` (verifying a key) makes callers. */
const minted: unique symbol = Symbol("tool-gateway/Caller")

/** The authenticated caller of a tool: the key, the org it belongs to, and the key's tool allow-list. */
export interface Caller {
  readonly [minted]: true
  readonly keyId: KeyId
  readonly orgId: OrgId
  /** The only tools this key may call; null: every tool. */
  readonly allowedTools: ReadonlyArray<string> | null
  /** Whether the key was found valid in the database for this request (else it came from the cache). */
  readonly confirmed: boolean
  /** The key's own request rate; null: the gateway's default. */
  readonly rateLimit: KeyRateLimit | null
}

/** Requests per second, sustained, and the burst a key may send at once. */
export interface KeyRateLimit {
  readonly perSecond: number
  readonly burst: number
}

export interface KeyInfo {
  readonly id: KeyId
  readonly orgId: OrgId
  readonly name: string
  /** The first characters of the key, for recognising it in a list. */
  readonly prefix: string
  readonly createdAt: Date
  readonly revokedAt: Date | null
  readonly lastUsedAt: Date | null
  /** The key's monthly spend limit in credits; null: none (the org's cap still applies). */
  readonly spendLimit: number | null
  readonly allowedTools: ReadonlyArray<string> | null
  /** Charged through this key in the current UTC month. */
  readonly monthSpend: number
  /** The key's own request rate; null: the gateway's default. */
  readonly rateLimit: KeyRateLimit | null
  /** From this instant on the key is refused as `invalid_key`; null: it never expires. */
  readonly expiresAt: Date | null
}

export interface KeyOptions {
  readonly name: string
  readonly spendLimit?: number | null | undefined
  readonly allowedTools?: ReadonlyArray<string> | null | undefined
  readonly rateLimit?: KeyRateLimit | null | undefined
  readonly expiresAt?: Date | null | undefined
}

/** What to change on a key: each field left undefined stays as it is; null removes a limit (or the expiry). */
export interface KeyChanges {
  readonly name?: string | undefined
  readonly spendLimit?: number | null | undefined
  readonly allowedTools?: ReadonlyArray<string> | null | undefined
  readonly rateLimit?: KeyRateLimit | null | undefined
  readonly expiresAt?: Date | null | undefined
}

export interface CreatedKey extends KeyInfo {
  /** The full key. Shown once; only its hash is stored. */
  readonly key: Redacted.Redacted<string>
}

export class KeyStore extends Context.Tag("KeyStore")<KeyStore, {
  /** A spend limit is a whole number of credits; a rate limit, 1 to `MAX_RATE` per second (else `invalid_request`). */
  readonly create: (orgId: OrgId, options: KeyOptions) => Effect.Effect<CreatedKey, NotFound | InvalidRequest>
  readonly verify: (key: string, options?: { readonly cached?: boolean }) => Effect.Effect<Caller, InvalidKey>
  /** For an unconfirmed caller: the key is still valid in the database (else `invalid_key`). */
  readonly confirm: (caller: Caller) => Effect.Effect<Caller, InvalidKey>
  /** Drop a key from this process's cache (it was found revoked). */
  readonly forget: (keyId: KeyId) => Effect.Effect<void>
  readonly list: (orgId: OrgId) => Effect.Effect<ReadonlyArray<KeyInfo>>
  /** Revoke a key; with `orgId`, only a key of that org (another org's key is not found). */
  readonly revoke: (keyId: KeyId, orgId?: OrgId) => Effect.Effect<KeyInfo, NotFound>
  /**
   * Change a key's name, limits, tools or expiry (a revoked key cannot be changed: `invalid_request`). The
   * spend limit applies at once everywhere; the other changes at once on this process, and on the others
   * when their cache of the key expires (`CACHE_TTL_MS`). Revoke a key to stop it everywhere at once.
   */
  readonly update: (keyId: KeyId, orgId: OrgId, changes: KeyChanges) => Effect.Effect<KeyInfo, NotFound | InvalidRequest>
}>() {}

const KeyRow = Schema.Struct({
  id: KeyId,
  org_id: OrgId,
  name: Schema.String,
  prefix: Schema.String,
  created_at: Schema.DateFromSelf,
  revoked_at: Schema.NullOr(Schema.DateFromSelf),
  last_used_at: Schema.NullOr(Schema.DateFromSelf),
  spend_limit: Schema.NullOr(Schema.Number),
  allowed_tools: Schema.NullOr(Schema.Array(Schema.String)),
  spend_month: Schema.Number,
  month_spend: Schema.Number,
  rate_limit_per_second: Schema.NullOr(Schema.Number),
  rate_limit_burst: Schema.NullOr(Schema.Number),
  expires_at: Schema.NullOr(Schema.DateFromSelf)
})
type KeyRow = typeof KeyRow.Type

const COLUMNS = "id, org_id, name, prefix, created_at, revoked_at, last_used_at, spend_limit, allowed_tools, spend_month, " +
  "month_spend, rate_limit_per_second, rate_limit_burst, expires_at"

const rateLimitOf = (row: { readonly rate_limit_per_second: number | null; readonly rate_limit_burst: number | null }) =>
  row.rate_limit_per_second === null
    ? null
    : { perSecond: row.rate_limit_per_second, burst: row.rate_limit_burst ?? row.rate_limit_per_second }

const toInfo = (row: KeyRow, month: number): KeyInfo => ({
  id: row.id,
  orgId: row.org_id,
  name: row.name,
  prefix: row.prefix,
  createdAt: row.created_at,
  revokedAt: row.revoked_at,
  lastUsedAt: row.last_used_at,
  spendLimit: row.spend_limit,
  allowedTools: row.allowed_tools,
  monthSpend: row.spend_month >= month ? row.month_spend : 0,
  rateLimit: rateLimitOf(row),
  expiresAt: row.expires_at
})

const NewKey = Schema.Struct({
  id: Schema.String,
  orgId: Schema.String,
  name: Schema.String,
  hash: Schema.Uint8ArrayFromSelf,
  prefix: Schema.String,
  now: Schema.DateFromSelf,
  spendLimit: Schema.NullOr(Schema.Number),
  tools: Schema.NullOr(Schema.Array(Schema.String)),
  perSecond: Schema.NullOr(Schema.Number),
  burst: Schema.NullOr(Schema.Number),
  expiresAt: Schema.NullOr(Schema.DateFromSelf)
})

/** What a tool call needs of its key. */
const CallerRow = Schema.Struct({
  id: KeyId,
  org_id: OrgId,
  allowed_tools: Schema.NullOr(Schema.Array(Schema.String)),
  rate_limit_per_second: Schema.NullOr(Schema.Number),
  rate_limit_burst: Schema.NullOr(Schema.Number),
  expires_at: Schema.NullOr(Schema.DateFromSelf)
})

const IdRow = Schema.Struct({ id: Schema.String })

/** A key (by hash or by id) as of an instant: valid means neither revoked nor expired then. */
const ByHash = Schema.Struct({ hash: Schema.Uint8ArrayFromSelf, now: Schema.DateFromSelf })
const ById = Schema.Struct({ keyId: Schema.String, now: Schema.DateFromSelf })
const OwnedKey = Schema.Struct({ keyId: Schema.String, orgId: Schema.String })

const Revocation = Schema.Struct({ keyId: Schema.String, orgId: Schema.NullOr(Schema.String), now: Schema.DateFromSelf })

const checkKeyOptions = (options: KeyChanges, now: number): Effect.Effect<void, InvalidRequest> => {
  if (options.expiresAt !== undefined && options.expiresAt !== null && options.expiresAt.getTime() <= now) {
    return Effect.fail(new InvalidRequest({ message: "expires_at must be in the future (an ISO 8601 time, e.g. 2030-01-31T00:00:00Z)." }))
  }
  const limit = options.spendLimit
  if (limit !== undefined && limit !== null && !isCredits(limit)) {
    return Effect.fail(new InvalidRequest({ message: creditsMessage("the monthly spend limit", limit) }))
  }
  const rate = options.rateLimit
  const inRange = (n: number) => Number.isSafeInteger(n) && n >= 1 && n <= MAX_RATE
  if (rate !== undefined && rate !== null && (!inRange(rate.perSecond) || !inRange(rate.burst))) {
    return Effect.fail(new InvalidRequest({ message: `A key's rate limit and burst must be whole numbers from 1 to ${MAX_RATE}.` }))
  }
  return Effect.void
}

// `last_used_at` is written at most this often per key and process: a write per call would make every
// call on one key contend for one row.
const LAST_USED_RESOLUTION_MS = 60_000

const INVALID = "Missing or invalid API key. Send it in the X-API-Key header."

// How long, and how many, verified keys a process remembers. Validity is confirmed in the database on
// every request anyway (see above); the cache only saves the lookup of the key's id, org and tools.
const CACHE_TTL_MS = 5 * 60_000
const CACHE_SIZE = 10_000

interface CachedKey {
  readonly keyId: KeyId
  readonly orgId: OrgId
  readonly allowedTools: ReadonlyArray<string> | null
  readonly rateLimit: KeyRateLimit | null
  /** The key's expiry (epoch ms) when it was read; null: none. */
  readonly expiresAt: number | null
  readonly at: number
}

export const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const ledger = yield* LedgerConfig
  const lastUsedWritten = new Map<string, number>()
  const background = yield* FiberSet.make()
  const cache = new Map<string, CachedKey>()

  const insertKey = SqlSchema.findOne({
    Request: NewKey,
    Result: KeyRow,
    execute: (k) => sql`
      INSERT INTO api_keys (id, org_id, name, key_hash, prefix, created_at, spend_limit, allowed_tools,
                            rate_limit_per_second, rate_limit_burst, expires_at)
      SELECT ${k.id}, id, ${k.name}, ${k.hash}, ${k.prefix}, ${k.now}, ${k.spendLimit}, ${k.tools}::text[],
             ${k.perSecond}, ${k.burst}, ${k.expiresAt}
        FROM orgs WHERE id = ${k.orgId}
      RETURNING ${sql.unsafe(COLUMNS)}`
  })
  const findCaller = SqlSchema.findOne({
    Request: ByHash,
    Result: CallerRow,
    execute: (k) => sql`
      SELECT id, org_id, allowed_tools, rate_limit_per_second, rate_limit_burst, expires_at
        FROM api_keys
       WHERE key_hash = ${k.hash} AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ${k.now})`
  })
  const findValid = SqlSchema.findOne({
    Request: ById,
    Result: IdRow,
    execute: (k) => sql`
      SELECT id FROM api_keys
       WHERE id = ${k.keyId} AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ${k.now})`
  })
  const findOwned = SqlSchema.findOne({
    Request: OwnedKey,
    Result: KeyRow,
    execute: (k) => sql`SELECT ${sql.unsafe(COLUMNS)} FROM api_keys WHERE id = ${k.keyId} AND org_id = ${k.orgId}`
  })
  const findKeys = SqlSchema.findAll({
    Request: Schema.String,
    Result: KeyRow,
    execute: (orgId) => sql`SELECT ${sql.unsafe(COLUMNS)} FROM api_keys WHERE org_id = ${orgId} ORDER BY created_at, id`
  })
  const revokeKey = SqlSchema.findOne({
    Request: Revocation,
    Result: KeyRow,
    execute: (r) => sql`
      UPDATE api_keys SET revoked_at = coalesce(revoked_at, ${r.now})
       WHERE id = ${r.keyId} ${r.orgId === null ? sql`` : sql`AND org_id = ${r.orgId}`}
      RETURNING ${sql.unsafe(COLUMNS)}`
  })

  const remember = (hash: string, entry: CachedKey) => setBounded(cache, hash, entry, CACHE_SIZE)

  const forget = (keyId: KeyId) =>
    Effect.sync(() => {
      for (const [hash, entry] of cache) if (entry.keyId === keyId) cache.delete(hash)
    })

  const create = (orgId: OrgId, options: KeyOptions) =>
    Effect.gen(function* () {
      const now = yield* nowMillis
      yield* checkKeyOptions(options, now)
      const id = KeyId.make(yield* randomId("key"))
      const key = API_KEY_PREFIX + base62(32)
      const prefix = key.slice(0, API_KEY_PREFIX.length + 4)
      const row = yield* insertKey({
        id,
        orgId,
        name: options.name,
        hash: sha256(key),
        prefix,
        now: toDate(now),
        spendLimit: options.spendLimit ?? null,
        tools: options.allowedTools ?? null,
        perSecond: options.rateLimit?.perSecond ?? null,
        burst: options.rateLimit?.burst ?? null,
        expiresAt: options.expiresAt ?? null
      })
      if (Option.isNone(row)) return yield* new NotFound({ message: `no org with id ${orgId}` })
      return { ...toInfo(row.value, monthOf(now)), key: Redacted.make(key) }
    }).pipe(Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die }), traced("KeyStore.create"))

  const touch = (id: string, now: number) => {
    const last = lastUsedWritten.get(id)
    if (last !== undefined && now - last < LAST_USED_RESOLUTION_MS) return Effect.void
    // at most CACHE_SIZE keys remembered, the least recently written first out (forgetting one costs one
    // more UPDATE, never a wrong answer)
    setBounded(lastUsedWritten, id, now, CACHE_SIZE)
    return sql`UPDATE api_keys SET last_used_at = ${toDate(now)} WHERE id = ${id}`.pipe(
      Effect.catchAllCause((cause) => Effect.logDebug("last_used_at update failed", cause)),
      // off the caller's path, in a fiber the layer owns: closing the layer ends it
      FiberSet.run(background),
      Effect.asVoid
    )
  }

  const verify = (key: string, options: { readonly cached?: boolean } = {}) =>
    Effect.gen(function* () {
      if (!API_KEY_PATTERN.test(key)) return yield* new InvalidKey({ message: INVALID })
      const hash = sha256(key)
      const cacheKey = hash.toString("base64")
      const now = yield* nowMillis
      if (options.cached === true) {
        const hit = cache.get(cacheKey)
        if (hit !== undefined && now - hit.at < CACHE_TTL_MS && (hit.expiresAt === null || now < hit.expiresAt)) {
          yield* touch(hit.keyId, now)
          return { [minted]: true, keyId: hit.keyId, orgId: hit.orgId, allowedTools: hit.allowedTools, rateLimit: hit.rateLimit, confirmed: false } as const
        }
      }
      // a key not cached is looked up before anything else of the call: a database that does not answer fails it
      // here (500, retryable) rather than holding it until the database is back
      const found = yield* waitAtMost(findCaller({ hash, now: toDate(now) }), { ms: ledger.databaseTimeoutMs, what: "the key's lookup" })
      if (Option.isNone(found)) {
        cache.delete(cacheKey)
        return yield* new InvalidKey({ message: INVALID })
      }
      const row = found.value
      const caller = {
        keyId: row.id,
        orgId: row.org_id,
        allowedTools: row.allowed_tools,
        rateLimit: rateLimitOf(row)
      }
      remember(cacheKey, { ...caller, expiresAt: row.expires_at === null ? null : row.expires_at.getTime(), at: now })
      yield* touch(row.id, now)
      return { [minted]: true, ...caller, confirmed: true } as const
    }).pipe(Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die }), traced("KeyStore.verify"))

  const confirm = (caller: Caller) =>
    Effect.gen(function* () {
      if (caller.confirmed) return caller
      if (Option.isNone(yield* findValid({ keyId: caller.keyId, now: toDate(yield* nowMillis) }))) {
        yield* forget(caller.keyId)
        return yield* new InvalidKey({ message: INVALID })
      }
      return { ...caller, confirmed: true }
    }).pipe(Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die }), traced("KeyStore.confirm"))

  const list = (orgId: OrgId) =>
    Effect.gen(function* () {
      const month = monthOf(yield* nowMillis)
      const rows = yield* findKeys(orgId)
      return rows.map((row) => toInfo(row, month))
    }).pipe(Effect.orDie)

  const revoke = (keyId: KeyId, orgId?: OrgId) =>
    Effect.gen(function* () {
      const now = yield* nowMillis
      const row = yield* revokeKey({ keyId, orgId: orgId ?? null, now: toDate(now) })
      if (Option.isNone(row)) return yield* new NotFound({ message: `no key with id ${keyId}` })
      yield* forget(keyId)
      return toInfo(row.value, monthOf(now))
    }).pipe(Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die }), traced("KeyStore.revoke"))

  const update = (keyId: KeyId, orgId: OrgId, changes: KeyChanges) =>
    Effect.gen(function* () {
      const now = yield* nowMillis
      yield* checkKeyOptions(changes, now)
      // only the columns named change; the row is the org's own key that is not revoked
      const set: Record<string, unknown> = {}
      if (changes.name !== undefined) set["name"] = changes.name
      if (changes.spendLimit !== undefined) set["spend_limit"] = changes.spendLimit
      if (changes.allowedTools !== undefined) set["allowed_tools"] = changes.allowedTools === null ? null : [...changes.allowedTools]
      if (changes.rateLimit !== undefined) {
        set["rate_limit_per_second"] = changes.rateLimit?.perSecond ?? null
        set["rate_limit_burst"] = changes.rateLimit?.burst ?? null
      }
      if (changes.expiresAt !== undefined) set["expires_at"] = changes.expiresAt
      if (Object.keys(set).length === 0) {
        return yield* new InvalidRequest({
          message: "Nothing to change: send name, monthly_spend_limit, allowed_tools, rate_limit or expires_at."
        })
      }
      const rows = yield* sql`
        UPDATE api_keys SET ${sql.update(set)}
         WHERE id = ${keyId} AND org_id = ${orgId} AND revoked_at IS NULL
        RETURNING ${sql.unsafe(COLUMNS)}`
      const row = yield* Schema.decodeUnknown(Schema.Array(KeyRow))(rows)
      const updated = row[0]
      if (updated === undefined) {
        const existing = yield* findOwned({ keyId, orgId })
        if (Option.isNone(existing)) return yield* new NotFound({ message: `no key with id ${keyId}` })
        return yield* new InvalidRequest({ message: "The key is revoked: it cannot be changed. Create a new one." })
      }
      yield* forget(keyId)
      return toInfo(updated, monthOf(now))
    }).pipe(Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die }), traced("KeyStore.update"))

  return KeyStore.of({ create, verify, confirm, forget, list, revoke, update })
})

export const KeyStoreLive = Layer.scoped(KeyStore, make)
