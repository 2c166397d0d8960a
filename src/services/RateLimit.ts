/**
 * Per-key request rate: a token bucket (sustained rate plus burst) on `@effect/experimental`'s
 * RateLimiter, in memory by default.
 */
import * as RateLimiter from "@effect/experimental/RateLimiter"
import { Context, Duration, Effect, Layer } from "effect"
import { RateLimitExceeded } from "../domain/errors.js"
import type { KeyId } from "../domain/ids.js"
import { GatewayConfig } from "./GatewayConfig.js"

export interface RateLimitState {
  readonly limit: number
  readonly remaining: number
  /** Seconds until the bucket is full again. */
  readonly resetSeconds: number
}

export class RateLimit extends Context.Tag("RateLimit")<RateLimit, {
  /** Take one request from the key's bucket. */
  readonly consume: (keyId: KeyId) => Effect.Effect<RateLimitState | undefined, RateLimitExceeded>
}>() {}

export const make = Effect.gen(function* () {
  const config = yield* GatewayConfig
  const limiter = yield* RateLimiter.RateLimiter
  const perSecond = config.rateLimitPerSecond
  const burst = Math.max(config.rateLimitBurst, perSecond, 1)
  if (perSecond <= 0) return RateLimit.of({ consume: () => Effect.succeed(undefined) })
  // A bucket of `burst` tokens refilled at `perSecond`: the window is the time to refill it entirely.
  const window = Duration.millis((burst / perSecond) * 1000)

  const consume = (keyId: KeyId) =>
    limiter.consume({ algorithm: "token-bucket", onExceeded: "fail", key: `rate:${keyId}`, limit: burst, window })
      .pipe(
        Effect.map((result): RateLimitState => ({
          limit: burst,
          remaining: result.remaining,
          resetSeconds: Math.ceil(Duration.toSeconds(result.resetAfter))
        })),
        Effect.catchAll((e) =>
          e.reason === "Exceeded"
            ? Effect.fail(
              new RateLimitExceeded({
                message: `Rate limit exceeded: ${perSecond} requests per second with bursts of ${burst} per key. ` +
                  "Retry after the time in Retry-After.",
                retryAfter: Math.max(1, Math.ceil(Duration.toSeconds(e.retryAfter)))
              })
            )
            : Effect.die(e)
        )
      )

  return RateLimit.of({ consume })
})

export const RateLimitLive = Layer.effect(RateLimit, make).pipe(
  Layer.provide(RateLimiter.layer),
  Layer.provide(RateLimiter.layerStoreMemory)
)
