/**
 * Unpredictable identifiers and secrets from the operating system's CSPRNG.
 */
import * as Effect from "effect/Effect"
import * as Crypto from "node:crypto"

const ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

/**
 * The CSPRNG's bytes, drawn 4 KiB at a time and each used once (as `crypto.randomUUID` does): one system
 * call per couple of hundred identifiers instead of one each — a request id is made on every request.
 */
const pool = Buffer.alloc(4096)
let poolAt = pool.length

const randomByte = (): number => {
  if (poolAt === pool.length) {
    Crypto.randomFillSync(pool)
    poolAt = 0
  }
  const byte = pool[poolAt] ?? 0
  pool[poolAt++] = 0
  return byte
}

/** `length` base62 characters, uniformly drawn (rejection sampling, no modulo bias). */
export const base62 = (length: number): string => {
  let out = ""
  while (out.length < length) {
    const byte = randomByte()
    if (byte < 248) out += ALPHABET.charAt(byte % 62)
  }
  return out
}

export const randomId = (prefix: string, length = 16): Effect.Effect<string> =>
  Effect.sync(() => `${prefix}_${base62(length)}`)

export const sha256 = (value: string): Buffer => Crypto.createHash("sha256").update(value).digest()

export const sha256Hex = (value: string): string => Crypto.createHash("sha256").update(value).digest("hex")
