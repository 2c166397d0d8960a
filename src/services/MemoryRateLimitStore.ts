/**
 * The rate limiter's store in this process's memory: token buckets as `@effect/experimental`'s memory store keeps
 * them (0.61, `RateLimiter.layerStoreMemory`), with two mends. Its buckets were never dropped — one per key and
 * policy ever used, revoked keys included, so a member who made keys or changed a key's limit again and again grew
 * the process without bound —: here at most `MAX_BUCKETS` are kept, the least recently used dropped first (a
 * dropped bucket starts full again, as one that was never used). And a full bucket kept the time it had been full
 * as refills owed: a key of 1 a second with a burst of 1, idle a while, passed two calls 200 ms apart; here a bucket
 * that fills up starts its next refill from then (the Redis store's script the same, RedisRateLimitStore.ts). A bucket
 * holds no more than the policy it is used with now allows: a key's lowered burst holds at once.
 */
import { RateLimiterStore } from "@effect/experimental/RateLimiter"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

/** The most buckets a process keeps: about 100 bytes each beside its key's name (a few MB at most). */
export const MAX_BUCKETS = 20_000

interface Bucket {
  tokens: number
  lastRefill: number
}

/**
 * The bucket's tokens at `now`, one more every `refillMillis` up to `limit`; a bucket that is full again counts its
 * next refill from `now` (the time spent full is no refill owed).
 */
export const refill = (bucket: Bucket, limit: number, refillMillis: number, now: number): void => {
  bucket.tokens = Math.min(bucket.tokens, limit)
  const due = Math.floor((now - bucket.lastRefill) / refillMillis)
  if (due <= 0) return
  if (bucket.tokens + due >= limit) {
    bucket.tokens = limit
    bucket.lastRefill = now
  } else {
    bucket.tokens += due
    bucket.lastRefill += due * refillMillis
  }
}

export const make = (maxBuckets = MAX_BUCKETS) =>
  Effect.sync(() => {
    // a Map keeps the order its keys were set in: a bucket used is set again, so the first is the least recently used
    const buckets = new Map<string, Bucket>()
    return RateLimiterStore.of({
      // the gateway's limits are token buckets (src/services/RateLimit.ts): a fixed window asked of this store is a bug
      fixedWindow: () => Effect.dieMessage("the gateway's rate-limit store keeps token buckets only"),
      tokenBucket: (options) =>
        Effect.clockWith((clock) =>
          Effect.sync(() => {
            const now = clock.unsafeCurrentTimeMillis()
            const bucket = buckets.get(options.key) ?? { tokens: options.limit, lastRefill: now }
            buckets.delete(options.key)
            refill(bucket, options.limit, Duration.toMillis(options.refillRate), now)
            const left = bucket.tokens - options.tokens
            if (left >= 0 || options.allowOverflow) bucket.tokens = left
            buckets.set(options.key, bucket)
            if (buckets.size > maxBuckets) {
              const oldest = buckets.keys().next()
              if (oldest.done !== true) buckets.delete(oldest.value)
            }
            return left
          })
        )
    })
  })

export const layerStore = (maxBuckets = MAX_BUCKETS): Layer.Layer<RateLimiterStore> =>
  Layer.effect(RateLimiterStore, make(maxBuckets))
