/**
 * The ids usage records are shown by. A record's row id comes from one sequence shared by every org, so the gaps
 * between an org's own ids would tell it how many calls all the others make. The id shown (and the cursor,
 * which is the id shown of a page's last record) is the row id through a keyed permutation of [0, 2^52): a
 * four-round Feistel network over two 26-bit halves whose round function is AES-128 (Luby–Rackoff: with a
 * pseudorandom round function, four rounds make a strong pseudorandom permutation). Its key is made at random by
 * migration 0017 and kept in the database, so every process shows the same ids. Shown ids are decimal strings of
 * at most 16 digits; reading one back gives its row id.
 */
import * as Crypto from "node:crypto"

const HALF = 2 ** 26
/** Row ids below this are shown (2^52, about 4.5 × 10^15 records). */
export const USAGE_ID_LIMIT = HALF * HALF
const ROUNDS = 4

export interface UsageIds {
  /** The id shown for a row id. */
  readonly show: (rowId: number) => string
  /** The row id a shown id (a cursor) stands for; undefined when it is not one (not a number below 2^52). */
  readonly read: (shown: string) => number | undefined
}

export const makeUsageIds = (key: Uint8Array): UsageIds => {
  const cipher = Crypto.createCipheriv("aes-128-ecb", key, null)
  cipher.setAutoPadding(false)
  const block = Buffer.alloc(16)
  // one block a round, ECB: each update enciphers exactly the block it is given
  const round = (i: number, half: number): number => {
    block.writeUInt32BE(i, 0)
    block.writeUInt32BE(half, 4)
    return cipher.update(block).readUInt32BE(0) % HALF
  }
  const forward = (x: number): number => {
    let left = Math.floor(x / HALF)
    let right = x % HALF
    for (let i = 0; i < ROUNDS; i++) [left, right] = [right, (left ^ round(i, right)) >>> 0]
    return left * HALF + right
  }
  const backward = (y: number): number => {
    let left = Math.floor(y / HALF)
    let right = y % HALF
    for (let i = ROUNDS - 1; i >= 0; i--) [left, right] = [(right ^ round(i, left)) >>> 0, left]
    return left * HALF + right
  }
  return {
    show: (rowId) => {
      // a defect, not a caller's mistake: row ids are positive and this many rows are not expected
      if (!Number.isSafeInteger(rowId) || rowId < 0 || rowId >= USAGE_ID_LIMIT) throw new RangeError(`usage row id out of range: ${rowId}`)
      return String(forward(rowId))
    },
    read: (shown) => {
      if (!/^\d{1,16}$/.test(shown)) return undefined
      const y = Number(shown)
      return y < USAGE_ID_LIMIT ? backward(y) : undefined
    }
  }
}
