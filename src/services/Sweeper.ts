/**
 * Housekeeping for the life of the server: every `SWEEP_INTERVAL_MS`, void the holds whose request died
 * (their lease expired) and delete Idempotency-Key records and artifacts past their retention, and Bluesky
 * sessions that can no longer be renewed. Safe on many processes:
 * one sweep at a time takes the lock, the others skip; a sweep is one statement, so a stopped process holds no lock. A failed sweep is logged and tried again next time.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import { Artifacts } from "./Artifacts.js"
import { DeltaSessions } from "./DeltaSessions.js"
import { LedgerConfig } from "../config.js"
import { Idempotency } from "./Idempotency.js"
import { Ledger } from "./Ledger.js"

export const sweepOnce = Effect.gen(function* () {
  const ledger = yield* Ledger
  const idempotency = yield* Idempotency
  const artifacts = yield* Artifacts
  const deltaSessions = yield* DeltaSessions
  const voided = yield* ledger.sweep
  if (voided > 0) yield* Effect.logInfo(`voided ${voided} holds whose request died`)
  yield* idempotency.purgeExpired
  yield* artifacts.purgeExpired
  yield* deltaSessions.purgeExpired
})

export const SweeperLive = Layer.scopedDiscard(
  Effect.gen(function* () {
    const config = yield* LedgerConfig
    if (config.sweepIntervalMs <= 0) return
    yield* sweepOnce.pipe(
      Effect.catchAllCause((cause) => Effect.logWarning("sweep failed", cause)),
      Effect.repeat(Schedule.spaced(Duration.millis(config.sweepIntervalMs))),
      Effect.forkScoped
    )
  })
)
