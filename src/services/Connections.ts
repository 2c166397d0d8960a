/**
 * An org's connections to its own provider accounts. Credentials are validated per provider, sealed with
 * AES-256-GCM (bound to the org and provider), never returned, and opened only for the call that uses them.
 * What a provider keeps from them (delta's sessions) goes when the connection is removed or replaced.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import {
  type AccountProvider,
  credentialSchemas,
  type Credentials,
  type CredentialsEncoded,
  isAccountProvider
} from "../domain/connections.js"
import { CredentialRequired, InvalidRequest, NotFound, UrlNotAllowed } from "../domain/errors.js"
import { OrgId } from "../domain/ids.js"
import { describeParseError } from "../domain/parse.js"
import { DeltaSessions } from "./DeltaSessions.js"
import { Encryption } from "./Encryption.js"
import { ProvidersConfig } from "../config.js"
import { makePolicy, refusedDestination } from "./Ssrf.js"
import { randomId } from "./random.js"
import { nowMillis, toDate } from "./time.js"
import { traced } from "./tracing.js"

export interface Connection {
  readonly id: string
  readonly provider: AccountProvider
  readonly label: string | null
  /** `rejected` once the provider refused the credentials (reconnect to fix). */
  readonly status: "active" | "rejected"
  readonly createdAt: Date
  readonly updatedAt: Date
}

export class Connections extends Context.Tag("Connections")<Connections, {
  /** Create or replace the org's connection to a provider (a delta connection's sessions are deleted with it). */
  readonly connect: (
    orgId: OrgId,
    provider: AccountProvider,
    credentials: unknown,
    label: string | null
  ) => Effect.Effect<Connection, InvalidRequest | UrlNotAllowed>
  readonly list: (orgId: OrgId) => Effect.Effect<ReadonlyArray<Connection>>
  /** Remove the org's connection to a provider, and a delta connection's sessions with it. */
  readonly disconnect: (orgId: OrgId, provider: AccountProvider) => Effect.Effect<Connection, NotFound>
  /** The decrypted credentials for one call, or `credential_required`. */
  readonly credentials: <P extends AccountProvider>(
    orgId: OrgId,
    provider: P,
    tool: string
  ) => Effect.Effect<Credentials[P], CredentialRequired>
  /**
   * The provider refused the credentials a call was given (`used`): shown on the connection if it still holds
   * them. A call that began before the connection was replaced, or deleted and made again, and is refused after,
   * leaves the new credentials as they are.
   */
  readonly markRejected: (orgId: OrgId, provider: AccountProvider, used: unknown) => Effect.Effect<void>
  /**
   * The provider accepted the credentials a call was given (`used`): a connection shown `rejected` that still holds
   * them is `active` again (a refusal it was marked for has passed). One read, which finds nothing unless the
   * connection is `rejected`.
   */
  readonly markAccepted: (orgId: OrgId, provider: AccountProvider, used: unknown) => Effect.Effect<void>
  /**
   * Seal again, with the current key, every row sealed with an older one, so that the old key can then be
   * dropped from `GATEWAY_ENCRYPTION_OLD_KEYS`. `unreadable` rows are sealed with a key that is not configured, or do
   * not open with the key they name (each named at WARN).
   * delta's sessions sealed with another key are deleted (`sessionsDeleted`): found by a mac under that key, no call
   * would find them again (their orgs' next delta calls log in anew).
   */
  readonly reseal: Effect.Effect<{ readonly resealed: number; readonly unreadable: number; readonly sessionsDeleted: number }>
}>() {}

const ConnectionRow = Schema.Struct({
  id: Schema.String,
  provider: Schema.String,
  label: Schema.NullOr(Schema.String),
  status: Schema.Literal("active", "rejected"),
  created_at: Schema.DateFromSelf,
  updated_at: Schema.DateFromSelf
})
type ConnectionRow = typeof ConnectionRow.Type

const SealedRow = Schema.Struct({
  key_id: Schema.String,
  iv: Schema.Uint8ArrayFromSelf,
  ciphertext: Schema.Uint8ArrayFromSelf,
  tag: Schema.Uint8ArrayFromSelf
})
const StaleRow = Schema.Struct({ ...SealedRow.fields, id: Schema.String, org_id: OrgId, provider: Schema.String })

const NewConnection = Schema.Struct({
  id: Schema.String,
  orgId: Schema.String,
  provider: Schema.String,
  label: Schema.NullOr(Schema.String),
  keyId: Schema.String,
  iv: Schema.Uint8ArrayFromSelf,
  ciphertext: Schema.Uint8ArrayFromSelf,
  tag: Schema.Uint8ArrayFromSelf,
  now: Schema.DateFromSelf
})
const OrgProvider = Schema.Struct({ orgId: Schema.String, provider: Schema.String })

const associatedData = (orgId: OrgId, provider: AccountProvider) => `connection:${orgId}:${provider}`

export const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const encryption = yield* Encryption
  const deltaSessions = yield* DeltaSessions

  // Connections sealed with a key this process lacks fail every call that needs them (500 internal_error): say so
  // at start, where the operator looks after a rotation, not only on the calls
  const byKey = yield* sql<{ readonly key_id: string; readonly n: number }>`
    SELECT key_id, count(*)::int AS n FROM connections GROUP BY key_id`.pipe(
    Effect.catchAll(() => Effect.succeed([]))
  )
  const unreadable = byKey.filter((k) => !encryption.knows(k.key_id)).reduce((sum, k) => sum + k.n, 0)
  if (unreadable > 0) {
    yield* Effect.logWarning(
      `${unreadable} connection(s) are sealed with a key this process does not have: the calls that need them fail ` +
        "(500 internal_error) until GATEWAY_ENCRYPTION_OLD_KEYS names that key (then run tool-gateway connections reseal)"
    )
  }
  const policy = makePolicy((yield* ProvidersConfig).ssrfAllow)

  const upsertConnection = SqlSchema.findOne({
    Request: NewConnection,
    Result: ConnectionRow,
    execute: (c) => sql`
      INSERT INTO connections (id, org_id, provider, label, status, key_id, iv, ciphertext, tag, created_at, updated_at)
      VALUES (${c.id}, ${c.orgId}, ${c.provider}, ${c.label}, 'active', ${c.keyId}, ${c.iv}, ${c.ciphertext},
              ${c.tag}, ${c.now}, ${c.now})
      ON CONFLICT (org_id, provider) DO UPDATE
         SET label = EXCLUDED.label, status = 'active', key_id = EXCLUDED.key_id, iv = EXCLUDED.iv,
             ciphertext = EXCLUDED.ciphertext, tag = EXCLUDED.tag, updated_at = EXCLUDED.updated_at
      RETURNING id, provider, label, status, created_at, updated_at`
  })
  const findConnections = SqlSchema.findAll({
    Request: Schema.String,
    Result: ConnectionRow,
    execute: (orgId) => sql`
      SELECT id, provider, label, status, created_at, updated_at FROM connections
       WHERE org_id = ${orgId} ORDER BY provider`
  })
  const deleteConnection = SqlSchema.findOne({
    Request: OrgProvider,
    Result: ConnectionRow,
    execute: (r) => sql`
      DELETE FROM connections WHERE org_id = ${r.orgId} AND provider = ${r.provider}
      RETURNING id, provider, label, status, created_at, updated_at`
  })
  const findSealed = SqlSchema.findOne({
    Request: OrgProvider,
    Result: SealedRow,
    execute: (r) => sql`
      SELECT key_id, iv, ciphertext, tag FROM connections WHERE org_id = ${r.orgId} AND provider = ${r.provider}`
  })
  const findRejected = SqlSchema.findOne({
    Request: OrgProvider,
    Result: SealedRow,
    execute: (r) => sql`
      SELECT key_id, iv, ciphertext, tag FROM connections
       WHERE org_id = ${r.orgId} AND provider = ${r.provider} AND status = 'rejected'`
  })
  const findStale = SqlSchema.findAll({
    Request: Schema.String,
    Result: StaleRow,
    execute: (currentKeyId) => sql`
      SELECT id, org_id, provider, key_id, iv, ciphertext, tag FROM connections WHERE key_id <> ${currentKeyId} ORDER BY id`
  })

  /**
   * The URL a connection names (epsilon's API, delta's PDS) passes the SSRF guard when it is saved, not only
   * when it is called. The message does not repeat the URL: a connection's body is never echoed.
   */
  const checkDestination = (field: string, url: string | undefined) =>
    url === undefined || !URL.canParse(url)
      ? Effect.void
      : Effect.promise(() => refusedDestination(policy, new URL(url))).pipe(
        Effect.timeoutOption(Duration.seconds(3)),
        Effect.flatMap((reason) =>
          Option.isSome(reason) && reason.value !== undefined
            ? Effect.fail(new UrlNotAllowed({
              message: `credentials.${field} is not allowed: it points to a private, loopback, link-local or reserved address, ` +
                "or a scheme other than http(s). Set SSRF_ALLOW for an address the operator trusts."
            }))
            : Effect.void
        )
      )

  /**
   * A change to the org's connection, and, for delta, the deletion of the sessions the old credentials opened: in one
   * transaction, so that neither is done without the other.
   */
  const withProviderState = <A, E, R>(orgId: OrgId, provider: AccountProvider, change: Effect.Effect<A, E, R>) =>
    provider === "delta"
      ? sql.withTransaction(Effect.zipLeft(change, deltaSessions.forget(orgId)))
      : change

  const toConnection = (row: ConnectionRow, provider: AccountProvider): Connection => ({
    id: row.id,
    provider,
    label: row.label,
    status: row.status,
    createdAt: row.created_at,
    updatedAt: row.updated_at
  })

  const connect = <P extends AccountProvider>(orgId: OrgId, provider: P, credentials: unknown, label: string | null) =>
    Effect.gen(function* () {
      const schema: Schema.Schema<Credentials[P], CredentialsEncoded[P]> = credentialSchemas[provider]
      const decoded = yield* Schema.decodeUnknown(schema, { errors: "all" })(credentials).pipe(
        Effect.mapError((error) =>
          new InvalidRequest({ message: `Invalid ${provider} credentials: credentials.${describeParseError(error, { secret: true })}` })
        )
      )
      const destination: unknown = "base_url" in decoded ? decoded.base_url : "service" in decoded ? decoded.service : undefined
      if (typeof destination === "string") yield* checkDestination("base_url" in decoded ? "base_url" : "service", destination)
      const sealed = yield* encryption.seal(JSON.stringify(decoded), associatedData(orgId, provider))
      const now = toDate(yield* nowMillis)
      const id = yield* randomId("conn")
      const row = yield* withProviderState(orgId, provider, upsertConnection({
        id,
        orgId,
        provider,
        label,
        keyId: sealed.keyId,
        iv: sealed.iv,
        ciphertext: sealed.ciphertext,
        tag: sealed.tag,
        now
      }))
      if (Option.isNone(row)) return yield* Effect.dieMessage("connection upsert returned no row")
      return toConnection(row.value, provider)
    }).pipe(
      Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die }),
      traced("Connections.connect", { attributes: { provider } })
    )

  const list = (orgId: OrgId) =>
    findConnections(orgId).pipe(
      Effect.map((rows) => rows.flatMap((row) => (isAccountProvider(row.provider) ? [toConnection(row, row.provider)] : []))),
      Effect.orDie
    )

  const disconnect = (orgId: OrgId, provider: AccountProvider) =>
    Effect.gen(function* () {
      const row = yield* withProviderState(orgId, provider, deleteConnection({ orgId, provider }))
      if (Option.isNone(row)) return yield* new NotFound({ message: `There is no ${provider} connection.` })
      return toConnection(row.value, provider)
    }).pipe(Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die }))

  const credentials = <P extends AccountProvider>(orgId: OrgId, provider: P, tool: string) =>
    Effect.gen(function* () {
      const found = yield* findSealed({ orgId, provider })
      if (Option.isNone(found)) {
        return yield* new CredentialRequired({
          message: `${tool} runs on your own ${provider} account: connect it first with POST /v1/connections.`
        })
      }
      const row = found.value
      const plaintext = yield* encryption.open(
        { keyId: row.key_id, iv: row.iv, ciphertext: row.ciphertext, tag: row.tag },
        associatedData(orgId, provider)
      )
      const schema: Schema.Schema<Credentials[P], CredentialsEncoded[P]> = credentialSchemas[provider]
      // credentials stored before a stricter rule (a token with a control character, a header the request's
      // framing uses) no longer decode: the account must be connected again, as for no connection at all
      return yield* Schema.decodeUnknown(Schema.parseJson(schema))(plaintext).pipe(
        Effect.mapError(() =>
          new CredentialRequired({
            message: `${tool} runs on your own ${provider} account, and the stored connection's credentials are no longer accepted: connect it again with POST /v1/connections.`
          })
        )
      )
    }).pipe(Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die, SealBroken: Effect.die }), traced("Connections.credentials", { attributes: { provider } }))

  /**
   * Set the connection's `status` if the row `find` reads holds the credentials a call used: the row as it was
   * read (a replacement meanwhile seals with a new IV, and is left as it is).
   */
  const markIfHeld = <P extends AccountProvider>(
    find: typeof findSealed,
    status: "active" | "rejected",
    orgId: OrgId,
    provider: P,
    used: unknown
  ) =>
    Effect.gen(function* () {
      const found = yield* find({ orgId, provider })
      if (Option.isNone(found) || !encryption.knows(found.value.key_id)) return
      const row = found.value
      const plaintext = yield* encryption.open(
        { keyId: row.key_id, iv: row.iv, ciphertext: row.ciphertext, tag: row.tag },
        associatedData(orgId, provider)
      )
      const schema: Schema.Schema<Credentials[P], CredentialsEncoded[P]> = credentialSchemas[provider]
      const stored = Schema.decodeUnknownOption(Schema.parseJson(schema))(plaintext)
      if (Option.isNone(stored) || !Schema.is(schema)(used) || !Schema.equivalence(schema)(stored.value, used)) return
      const now = yield* nowMillis
      yield* sql`UPDATE connections SET status = ${status}, updated_at = ${toDate(now)}
                  WHERE org_id = ${orgId} AND provider = ${provider} AND iv = ${row.iv}`
    }).pipe(
      Effect.asVoid,
      Effect.catchTag("SealBroken", () => Effect.void),
      // what is shown on the connection: the call it follows (charged, perhaps a write done) is answered as it is,
      // whatever happens here
      Effect.catchAllCause((cause) => Effect.logWarning(`the ${provider} connection could not be marked ${status}`, cause))
    )

  const markRejected = (orgId: OrgId, provider: AccountProvider, used: unknown) =>
    markIfHeld(findSealed, "rejected", orgId, provider, used)

  const markAccepted = (orgId: OrgId, provider: AccountProvider, used: unknown) =>
    markIfHeld(findRejected, "active", orgId, provider, used)

  const reseal = Effect.gen(function* () {
    const rows = yield* findStale(encryption.currentKeyId)
    let resealed = 0
    let unreadable = 0
    for (const row of rows) {
      if (!encryption.knows(row.key_id) || !isAccountProvider(row.provider)) {
        unreadable += 1
        continue
      }
      const aad = associatedData(row.org_id, row.provider)
      const opened = yield* Effect.either(encryption.open({ keyId: row.key_id, iv: row.iv, ciphertext: row.ciphertext, tag: row.tag }, aad))
      // a row the key it names does not open (altered, or sealed by another key of the same id): counted and named,
      // and the others resealed all the same
      if (Either.isLeft(opened)) {
        unreadable += 1
        yield* Effect.logWarning(
          `connection ${row.id} (org ${row.org_id}, ${row.provider}) does not open with the key it names: left as it is, ` +
            "its calls fail until the org connects the account again"
        )
        continue
      }
      const sealed = yield* encryption.seal(opened.right, aad)
      // only if nobody replaced the row meanwhile
      const updated = yield* sql`
        UPDATE connections SET key_id = ${sealed.keyId}, iv = ${sealed.iv}, ciphertext = ${sealed.ciphertext}, tag = ${sealed.tag}
         WHERE id = ${row.id} AND key_id = ${row.key_id} RETURNING id`
      resealed += updated.length
    }
    const sessionsDeleted = yield* deltaSessions.purgeOtherKeys
    return { resealed, unreadable, sessionsDeleted }
  }).pipe(Effect.orDie, traced("Connections.reseal"))

  return Connections.of({ connect, list, disconnect, credentials, markRejected, markAccepted, reseal })
})

export const ConnectionsLive = Layer.effect(Connections, make)
