/**
 * The rate limiter's Redis store (`REDIS_URL`): `@effect/experimental`'s (0.61, `RateLimiter/Redis`), its token
 * bucket script mended. That script writes a bucket's two keys (its tokens and its last refill) without an expiry, so
 * every key and policy ever used stays in Redis; and a bucket one of whose keys is gone (a Redis that evicts keys
 * under memory pressure takes one and not the other) fails the script on every call after — which the gateway,
 * letting calls through while its store fails, took as no limit at all for that key, for good. Here a bucket missing
 * either key starts full, and both keys expire once the bucket would be full again (a missing bucket is a full one).
 * The same mend is in the 4.x line's store (Effect-TS/effect-smol#2352). And a full bucket kept the time it had been
 * full as refills owed (a key of 1 a second with a burst of 1, idle a while, passed two calls 200 ms apart): a bucket
 * that fills up counts its next refill from then, as the memory store does (MemoryRateLimitStore.ts). Only the token
 * bucket is kept here, the one algorithm the gateway uses; the rest is the library's store as it is.
 */
import { RateLimiterStore, RateLimitStoreError } from "@effect/experimental/RateLimiter"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { Redis, type RedisOptions, type Result } from "ioredis"

// the scripts' commands, as ioredis types a command defined by a script (its README: "Lua Scripting")
declare module "ioredis" {
  interface RedisCommander<Context> {
    gatewayTokenBucket(key: string, tokens: number, refillMillis: number, limit: number, now: number, overflow: 0 | 1): Result<number, Context>
  }
}

/**
 * A bucket of `limit` tokens, one more every `refill_ms`; `tokens` taken now, or refused (a negative answer: how many
 * were missing) unless `overflow`. Both keys are written on every call, with the time until the bucket is full again.
 */
const TOKEN_BUCKET = `
local key = KEYS[1]
local last_refill_key = key .. ":refill"
local tokens = tonumber(ARGV[1])
local refill_ms = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local now = tonumber(ARGV[4])
local overflow = ARGV[5] == "1"
local current = tonumber(redis.call("GET", key))
local last_refill = tonumber(redis.call("GET", last_refill_key))

if not current or not last_refill then
  current = limit
  last_refill = now
end
-- no more than the policy it is used with now allows (a key's lowered burst holds at once)
current = math.min(current, limit)

-- a bucket that fills up counts its next refill from now: the time it spent full is no refill owed
local elapsed = now - last_refill
local refill_amount = math.floor(elapsed / refill_ms)
if refill_amount > 0 then
  if current + refill_amount >= limit then
    current = limit
    last_refill = now
  else
    current = current + refill_amount
    last_refill = last_refill + (refill_amount * refill_ms)
  end
end

local next = current - tokens
local kept = next
if next < 0 and not overflow then
  kept = current
end

-- in whole milliseconds (PX takes no other), rounded up: a refill is 1000 / 3 ms at 3 a second
local ttl = math.max(1, math.ceil((limit - kept + 1) * refill_ms))
redis.call("SET", key, kept, "PX", ttl)
redis.call("SET", last_refill_key, last_refill, "PX", ttl)
return next
`

export const make = Effect.fnUntraced(function* (options: RedisOptions & { readonly prefix?: string | undefined }) {
  const prefix = options.prefix ?? "ratelimiter:"
  const redis = yield* Effect.acquireRelease(
    Effect.sync(() =>
      new Redis({
        ...options,
        scripts: {
          gatewayTokenBucket: { lua: TOKEN_BUCKET, numberOfKeys: 1, readOnly: false }
        }
      })
    ),
    (redis) => Effect.promise(() => redis.quit())
  )
  // The client's own connection errors: each call that finds the store away says so (the rate limiter's WARN line),
  // and without a listener the client wrote every reconnection's failure, stack and all, to stderr.
  redis.on("error", () => undefined)
  return RateLimiterStore.of({
    // the gateway's limits are token buckets (src/services/RateLimit.ts): a fixed window asked of this store is a bug
    fixedWindow: () => Effect.dieMessage("the gateway's Redis rate-limit store keeps token buckets only"),
    tokenBucket: (options) =>
      Effect.clockWith((clock) =>
        Effect.tryPromise({
          try: () =>
            redis.gatewayTokenBucket(
              `${prefix}${options.key}`,
              options.tokens,
              Duration.toMillis(options.refillRate),
              options.limit,
              clock.unsafeCurrentTimeMillis(),
              options.allowOverflow ? 1 : 0
            ),
          catch: (cause) => new RateLimitStoreError({ message: "Failed to execute tokenBucket rate limiting command", cause })
        })
      )
  })
})

export const layerStore = (options: RedisOptions & { readonly prefix?: string | undefined }): Layer.Layer<RateLimiterStore> =>
  Layer.scoped(RateLimiterStore, make(options))
