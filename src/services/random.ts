/**
 * Unpredictable identifiers and secrets from the operating system's CSPRNG.
 */
import * as Effect from "effect/Effect"
import * as Crypto from "node:crypto"

const ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

/** `length` base62 characters, uniformly drawn (rejection sampling, no modulo bias). */
export const base62 = (length: number): string => {
  let out = ""
  while (out.length < length) {
    const bytes = Crypto.randomBytes(length * 2)
    for (const byte of bytes) {
      if (byte < 248) out += ALPHABET.charAt(byte % 62)
      if (out.length === length) break
    }
  }
  return out
}

export const randomId = (prefix: string, length = 16): Effect.Effect<string> =>
  Effect.sync(() => `${prefix}_${base62(length)}`)

export const sha256 = (value: string): Buffer => Crypto.createHash("sha256").update(value).digest()

export const sha256Hex = (value: string): string => Crypto.createHash("sha256").update(value).digest("hex")
