/**
 * Per-key request rate: a token bucket (sustained rate plus burst) on `@effect/experimental`'s
 * RateLimiter. A key may have its own rate (`KeyRateLimit`); otherwise the gateway's default applies.
 * The buckets live in memory (one per process), or in Redis when `REDIS_URL` is set, so that every
 * process sharing the Redis shares each key's limit. A call Redis does not decide in time (Redis away, or this
 * process too busy to read its answer within 200 ms) is decided by the process's own buckets of the same policy: a
 * limit per process meanwhile, never none (it was none: a client hammering a busy process went through unlimited).
 */
import * as RateLimiter from "@effect/experimental/RateLimiter"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Scope from "effect/Scope"
import { RateLimitExceeded, type RateLimitState } from "../domain/errors.js"
import { ServerConfig } from "../config.js"
import type { Caller, KeyRateLimit } from "./KeyStore.js"
import * as MemoryRateLimitStore from "./MemoryRateLimitStore.js"
import { rateLimitStoreFailures } from "./Telemetry.js"
import { nowMillis } from "./time.js"

/** A key's policy and where its bucket stands, for the `RateLimit-Policy` and `RateLimit` headers. */
export type { RateLimitState }

export class RateLimit extends Context.Tag("RateLimit")<RateLimit, {
  /** Take one request from the caller's bucket; `undefined` when rate limiting is off. */
  readonly consume: (caller: Caller) => Effect.Effect<RateLimitState | undefined, RateLimitExceeded>
}>() {}

const STORE_WARNING_INTERVAL_MS = 10_000

/**
 * A refusal past a key's bucket; the seconds are in the message too: a client that sees no headers (an MCP SDK's
 * error) can still wait them.
 */
const exceeded = (perSecond: number, burst: number, quota: number, windowSeconds: number, retryAfter: number) =>
  new RateLimitExceeded({
    message: `Rate limit exceeded: ${perSecond} requests per second with bursts of ${burst} for this key. ` +
      `Retry after ${retryAfter} s (Retry-After).`,
    retryAfter,
    limit: quota,
    windowSeconds
  })

/** What a consumption of the shared store asks, and what the process's own buckets are asked the same. */
type ConsumeOptions = Parameters<RateLimiter.RateLimiter["consume"]>[0]

/**
 * The most a key's own rate limit may be: `RATE_LIMIT_MAX_PER_SECOND` and `RATE_LIMIT_MAX_BURST`, never below the
 * gateway's default rate and burst. A member of an org sets a key's rate within it (a shared gateway's limit is the
 * operator's, not the tenant's); the limiter holds every key to it.
 */
export const keyRateCap = (config: {
  readonly rateLimitPerSecond: number
  readonly rateLimitBurst: number
  readonly rateLimitMaxPerSecond: number
  readonly rateLimitMaxBurst: number
}): KeyRateLimit => ({
  perSecond: Math.max(config.rateLimitMaxPerSecond, config.rateLimitPerSecond),
  burst: Math.max(config.rateLimitMaxBurst, config.rateLimitBurst, config.rateLimitPerSecond)
})

export const make = Effect.gen(function* () {
  const config = yield* ServerConfig
  const limiter = yield* RateLimiter.RateLimiter
  // the process's own buckets, for the calls a shared store (Redis) could not decide
  const local = Option.isSome(config.redisUrl) ? yield* Effect.provide(RateLimiter.make, MemoryRateLimitStore.layerStore()) : limiter
  const defaults: KeyRateLimit | null = config.rateLimitPerSecond > 0
    ? { perSecond: config.rateLimitPerSecond, burst: Math.max(config.rateLimitBurst, config.rateLimitPerSecond, 1) }
    : null

  // a key's own rate, held to the operator's maximum (a key set above it before the maximum was lowered, or by the CLI)
  const cap = keyRateCap(config)
  const capped = (own: KeyRateLimit): KeyRateLimit =>
    own.perSecond <= cap.perSecond && own.burst <= cap.burst
      ? own
      : { perSecond: Math.min(own.perSecond, cap.perSecond), burst: Math.min(own.burst, cap.burst) }

  let lastWarned = Number.NEGATIVE_INFINITY
  const consume = (caller: Caller) => {
    const policy = caller.rateLimit === null ? defaults : capped(caller.rateLimit)
    if (policy === null) return Effect.succeed(undefined)
    const burst = Math.max(policy.burst, 1)
    // A bucket of `burst` tokens refilled at `perSecond`: the window is the time to refill it entirely.
    const windowMs = (burst / policy.perSecond) * 1000
    const windowSeconds = Math.max(1, Math.ceil(windowMs / 1000))
    // What `RateLimit-Policy` says: `q` requests per `w` seconds. The window, in whole seconds, may be longer than the
    // bucket's refill (2.5 s is said as 4; a burst below the rate refills in under a second, said as 1), and the
    // rate refills it meanwhile: `q` is the burst or what the rate gives in the window, the larger (a key of 100 a
    // second with a burst of 1 was said to allow 1 a second).
    const quota = Math.max(burst, policy.perSecond * windowSeconds)
    const options: ConsumeOptions = {
      algorithm: "token-bucket",
      onExceeded: "fail",
      // the key's one bucket, whatever its policy: a limit lowered holds at once, with no new, full bucket to spend
      // (the policy was part of the name, and an abusive key's lowered limit handed it a fresh burst)
      key: `rate:${caller.keyId}`,
      limit: burst,
      window: Duration.millis(windowMs)
    }
    const decided = (from: RateLimiter.RateLimiter) =>
      from.consume(options).pipe(
        Effect.map((result): RateLimitState => ({
          limit: quota,
          windowSeconds,
          remaining: result.remaining,
          resetSeconds: Math.ceil(Duration.toSeconds(result.resetAfter))
        })),
        Effect.catchAll((e): Effect.Effect<never, RateLimitExceeded | RateLimiter.RateLimitStoreError> =>
          e.reason === "Exceeded"
            ? Effect.fail(exceeded(policy.perSecond, burst, quota, windowSeconds, Math.max(1, Math.ceil(Duration.toSeconds(e.retryAfter)))))
            : Effect.fail(e))
      )
    return decided(limiter).pipe(
      // the shared store did not answer in time (Redis away, or this process too busy to read its answer): the
      // process's own bucket decides, and the log says so at most once every 10 s, not once per request
      Effect.catchTag("RateLimiterError", (e) =>
        Metric.increment(rateLimitStoreFailures).pipe(
          Effect.zipRight(nowMillis),
          Effect.flatMap((now) => {
            if (now - lastWarned < STORE_WARNING_INTERVAL_MS) return Effect.void
            lastWarned = now
            // one line, its reason in it (the error as a second argument made the message an array, its cause `{}`)
            const why = e.cause instanceof Error ? `${e.message}: ${e.cause.message}` : e.message
            return Effect.logWarning(`rate limit store unavailable (${why}); each process limits its keys on its own meanwhile`)
          }),
          // the process's memory does not fail: a failure there is a bug
          Effect.zipRight(Effect.catchTag(decided(local), "RateLimiterError", Effect.die))
        ))
    )
  }

  return RateLimit.of({ consume })
})

/** Redis when `REDIS_URL` is set, else memory. */
const StoreLive = Layer.unwrapEffect(
  Effect.map(ServerConfig, (config) =>
    Option.match(config.redisUrl, {
      onNone: () => MemoryRateLimitStore.layerStore(),
      // the Redis store and its client (ioredis) are loaded only when REDIS_URL is set
      onSome: (url) => Layer.unwrapScoped(Effect.gen(function* () {
        const RateLimiterRedis = yield* Effect.promise(() => import("./RedisRateLimitStore.js"))
        const parsed = new URL(Redacted.value(url))
        const store = RateLimiterRedis.layerStore({
          host: parsed.hostname.replace(/^\[(.*)\]$/, "$1"),
          port: parsed.port === "" ? 6379 : Number(parsed.port),
          ...(parsed.username !== "" ? { username: decodeURIComponent(parsed.username) } : {}),
          ...(parsed.password !== "" ? { password: decodeURIComponent(parsed.password) } : {}),
          ...(parsed.pathname.length > 1 ? { db: Number(parsed.pathname.slice(1)) } : {}),
          ...(parsed.protocol === "rediss:" ? { tls: {} } : {}),
          prefix: "tool-gateway:",
          // fail fast instead of queueing commands while Redis is away
          maxRetriesPerRequest: 1,
          enableOfflineQueue: false,
          // a Redis that accepts connections but does not answer must not stall every request
          commandTimeout: 200
        })
        // the store's client says goodbye to Redis when it closes, and that fails when Redis is away: a process that
        // stops then must not fail for it (the client is gone either way)
        const scope = yield* Scope.make()
        yield* Effect.addFinalizer(() =>
          Scope.close(scope, Exit.void).pipe(
            Effect.catchAllCause((cause) => Effect.logDebug("the Redis client closed with an error (Redis away)", cause))
          ))
        return Layer.succeedContext(yield* Layer.buildWithScope(store, scope))
      }))
    })
  )
)

export const RateLimitLive = Layer.effect(RateLimit, make).pipe(
  Layer.provide(RateLimiter.layer),
  Layer.provide(StoreLive)
)
