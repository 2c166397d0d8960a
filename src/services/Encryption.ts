/**
 * Encryption of connection credentials at rest: AES-256-GCM with a random 96-bit IV per row, and the id
 * of the key stored with each row so that keys can be rotated (the current key writes; older keys still
 * read). The key is `GATEWAY_ENCRYPTION_KEY` (32 bytes, base64 or hex); without it, one is generated once
 * into the data directory (fine for one machine; many processes must share the variable). Rows found by what they
 * hold (delta's sessions) are found by a mac under a secret derived from the current key, not by a plain hash.
 */
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { IdentityConfig, ServerConfig } from "../config.js"

export class EncryptionKeyError extends Data.TaggedError("EncryptionKeyError")<{ readonly message: string }> {}

/** A sealed row that cannot be opened: sealed with a key not configured, or altered since (its tag does not match). */
export class SealBroken extends Data.TaggedError("SealBroken")<{ readonly message: string }> {}

export interface Sealed {
  readonly keyId: string
  readonly iv: Uint8Array
  readonly ciphertext: Uint8Array
  readonly tag: Uint8Array
}

export class Encryption extends Context.Tag("Encryption")<Encryption, {
  readonly seal: (plaintext: string, associatedData: string) => Effect.Effect<Sealed>
  /** Fails when the row's key is unknown or the row was tampered with (each caller decides what that means). */
  readonly open: (sealed: Sealed, associatedData: string) => Effect.Effect<string, SealBroken>
  /** The id of the key new rows are sealed with. */
  readonly currentKeyId: string
  /** Whether a row sealed with this key id can be opened (the current key, or one of the old ones). */
  readonly knows: (keyId: string) => boolean
  /**
   * A keyed hash of `data` (HMAC-SHA256, in hex) under a secret derived from the current key for `purpose` (HKDF;
   * never the key itself): the same data gives the same mac while the key is current, and without the key nobody
   * can compute one, so a row found by its mac does not let a reader of the database check a guess of what it hashes.
   */
  readonly mac: (purpose: string, data: string) => string
}>() {}

const KEY_FILE = "encryption.key"

/** GCM's full tag, as every row is sealed with: a shorter one is refused (checked as far as it went, it is easier to forge). */
const TAG_BYTES = 16

/**
 * A key from its text form: 64 hex characters, or 32 bytes as canonical base64 or base64url (43 characters, then one
 * `=` or none). Node's base64 decoder skips what is not in its alphabet and stops at padding, so the text must be the
 * encoding of the bytes it gives: a text with other characters in it, or another length, is refused, not decoded into
 * some other key.
 */
export const parseKey = (text: string): Buffer | undefined => {
  const trimmed = text.trim()
  if (/^[0-9a-fA-F]{64}$/.test(trimmed)) return Buffer.from(trimmed, "hex")
  if (!/^[A-Za-z0-9+/_-]{43}=?$/.test(trimmed)) return undefined
  const bytes = Buffer.from(trimmed, "base64")
  const unpadded = trimmed.replace(/=$/, "")
  const canonical = bytes.toString("base64").replace(/=$/, "") === unpadded || bytes.toString("base64url") === unpadded
  return bytes.length === 32 && canonical ? bytes : undefined
}

/** A key's id: the first 8 bytes of its SHA-256, in hex. Stored with each row; reveals nothing of the key. */
export const keyIdOf = (key: Buffer): string => Crypto.createHash("sha256").update(key).digest("hex").slice(0, 16)

const loadOrCreateKeyFile = (dataDir: string) =>
  Effect.tryPromise({
    try: async () => {
      const file = Path.join(dataDir, KEY_FILE)
      const existing = await Fs.readFile(file, "utf8").catch(() => undefined)
      if (existing !== undefined) return existing
      await Fs.mkdir(dataDir, { recursive: true })
      const created = Crypto.randomBytes(32).toString("base64")
      // `wx`: if another process created it first, use theirs.
      await Fs.writeFile(file, created + "\n", { mode: 0o600, flag: "wx" }).catch(() => undefined)
      return await Fs.readFile(file, "utf8")
    },
    catch: () => new EncryptionKeyError({ message: `cannot read or create ${Path.join(dataDir, KEY_FILE)}` })
  })

/**
 * The current key's text: `GATEWAY_ENCRYPTION_KEY`, or on the embedded database the one generated into the
 * data dir. A key generated into one host's data dir is only for the embedded database: processes that share
 * a PostgreSQL must share the key, so with `DATABASE_URL` it must be given.
 */
export const currentKeyText = (
  identity: typeof IdentityConfig.Service,
  server: typeof ServerConfig.Service
): Effect.Effect<string, EncryptionKeyError> => {
  if (Option.isSome(identity.encryptionKey)) return Effect.succeed(Redacted.value(identity.encryptionKey.value))
  if (Option.isSome(server.databaseUrl)) {
    return Effect.fail(new EncryptionKeyError({
      message: "GATEWAY_ENCRYPTION_KEY is required with DATABASE_URL (32 bytes, base64 or hex: every process on that " +
        "database must seal connections with the same key); e.g. node -e \"console.log(require('crypto').randomBytes(32).toString('base64'))\""
    }))
  }
  return Effect.map(loadOrCreateKeyFile(server.dataDir), (text) => text.trim())
}

export const make = Effect.gen(function* () {
  const config = yield* IdentityConfig
  const currentText = yield* currentKeyText(config, yield* ServerConfig)
  const current = parseKey(currentText)
  if (current === undefined) {
    return yield* new EncryptionKeyError({ message: "GATEWAY_ENCRYPTION_KEY must be 32 bytes, as base64 or 64 hex characters" })
  }
  const keys = new Map<string, Buffer>([[keyIdOf(current), current]])
  for (const old of config.encryptionOldKeys) {
    const key = parseKey(Redacted.value(old))
    if (key === undefined) {
      return yield* new EncryptionKeyError({ message: "each of GATEWAY_ENCRYPTION_OLD_KEYS must be 32 bytes (base64 or hex)" })
    }
    keys.set(keyIdOf(key), key)
  }
  const currentId = keyIdOf(current)

  const seal = (plaintext: string, associatedData: string) =>
    Effect.sync((): Sealed => {
      const iv = Crypto.randomBytes(12)
      const cipher = Crypto.createCipheriv("aes-256-gcm", current, iv, { authTagLength: TAG_BYTES })
      cipher.setAAD(Buffer.from(associatedData, "utf8"))
      const ciphertext = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()])
      return { keyId: currentId, iv, ciphertext, tag: cipher.getAuthTag() }
    })

  const open = (sealed: Sealed, associatedData: string) =>
    Effect.suspend(() => {
      const key = keys.get(sealed.keyId)
      if (key === undefined) {
        return Effect.fail(new SealBroken({ message: `a connection was sealed with key ${sealed.keyId}, which is not configured` }))
      }
      if (sealed.tag.length !== TAG_BYTES) {
        return Effect.fail(new SealBroken({ message: `a connection's credentials failed authentication (a ${sealed.tag.length}-byte tag, not ${TAG_BYTES})` }))
      }
      return Effect.try({
        try: () => {
          // without authTagLength, Node checks a shortened tag as far as it goes
          const decipher = Crypto.createDecipheriv("aes-256-gcm", key, sealed.iv, { authTagLength: TAG_BYTES })
          decipher.setAAD(Buffer.from(associatedData, "utf8"))
          decipher.setAuthTag(Buffer.from(sealed.tag))
          return Buffer.concat([decipher.update(sealed.ciphertext), decipher.final()]).toString("utf8")
        },
        catch: () => new SealBroken({ message: "a connection's credentials failed authentication" })
      })
    })

  // one secret a purpose (the code's few labels), derived from the current key when first used
  const macSecrets = new Map<string, Buffer>()
  const mac = (purpose: string, data: string) => {
    let secret = macSecrets.get(purpose)
    if (secret === undefined) {
      secret = Buffer.from(Crypto.hkdfSync("sha256", current, Buffer.alloc(0), `tool-gateway mac: ${purpose}`, 32))
      macSecrets.set(purpose, secret)
    }
    return Crypto.createHmac("sha256", secret).update(data, "utf8").digest("hex")
  }

  return Encryption.of({ seal, open, currentKeyId: currentId, knows: (keyId) => keys.has(keyId), mac })
})

export const EncryptionLive = Layer.effect(Encryption, make)
