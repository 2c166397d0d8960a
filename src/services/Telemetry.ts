/**
 * What the gateway reports about itself: Effect `Metric` instruments (exported in Prometheus text at
 * `GET /metrics`), and the per-call facts the request log line carries. Updating a metric is an
 * in-memory operation; nothing is exported on the request path.
 */
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as Metric from "effect/Metric"
import * as MetricBoundaries from "effect/MetricBoundaries"
import * as MetricLabel from "effect/MetricLabel"
import type { Caller } from "./KeyStore.js"

/** Seconds, from 0.5 ms to about 33 s: covers the gateway's own overhead and slow providers alike. */
const latencyBoundaries = MetricBoundaries.exponential({ start: 0.0005, factor: 2, count: 17 })

export const toolCalls = Metric.counter("tool_gateway_tool_calls_total", {
  description: "Tool calls that reached the pipeline, by tool and outcome code (ok, replayed, or the error code)",
  incremental: true
})

export const toolCallDuration = Metric.histogram(
  "tool_gateway_tool_call_duration_seconds",
  latencyBoundaries,
  "Time from authentication to the answer of a tool call, by tool"
)

export const providerDuration = Metric.histogram(
  "tool_gateway_provider_duration_seconds",
  latencyBoundaries,
  "Time spent in the provider call (fallbacks included), by tool"
)

export const creditsCharged = Metric.counter("tool_gateway_credits_charged_total", {
  description: "Credits charged, by tool",
  incremental: true
})

export const idempotencyReplays = Metric.counter("tool_gateway_idempotency_replays_total", {
  description: "Answers replayed from an earlier call with the same Idempotency-Key",
  incremental: true
})

export const rateLimitRejections = Metric.counter("tool_gateway_rate_limit_rejections_total", {
  description: "Requests refused by a key's rate limit",
  incremental: true
})

export const rateLimitStoreFailures = Metric.counter("tool_gateway_rate_limit_store_failures_total", {
  description: "Calls the shared rate-limit store (Redis) did not decide in time, decided by the process's own buckets",
  incremental: true
})

export const httpRequests = Metric.counter("tool_gateway_http_requests_total", {
  description: "HTTP requests answered, by status class (2xx, 3xx, 4xx, 5xx)",
  incremental: true
})

export const settlementsLost = Metric.counter("tool_gateway_settlements_lost_total", {
  description: "Settlements not posted — their hold no longer pending (voided by a sweeper), or the database kept failing: the call was answered as charged 0",
  incremental: true
})

export const ledgerBatchSize = Metric.histogram(
  "tool_gateway_ledger_batch_size",
  MetricBoundaries.exponential({ start: 1, factor: 2, count: 8 }),
  "Calls per statement (group commit), by kind (reserve, resolve; Idempotency-Key claim, complete)"
)

export const leaseRenewals = Metric.counter("tool_gateway_lease_renewals_total", {
  description: "Statements that renewed the leases of this process's calls in flight",
  incremental: true
})

/**
 * The counters without labels, shown at 0 from the first scrape: an alert on one (a lost settlement, say) must
 * see it go from 0 to 1, and a series that appears only at its first increment has nothing to compare it with.
 */
export const unlabelledCounters = [idempotencyReplays, rateLimitRejections, rateLimitStoreFailures, settlementsLost, leaseRenewals] as const

export const holdsOutstanding = Metric.gauge("tool_gateway_holds_outstanding", {
  description: "Pending credit holds (calls in flight) across every process sharing the database"
})

export const creditsHeld = Metric.gauge("tool_gateway_credits_held", {
  description: "Credits reserved by pending holds across every process sharing the database"
})

/** Read when scraped: `process.memoryUsage()` in bytes, by kind (rss, heap_total, heap_used, external). */
export const processMemory = Metric.gauge("tool_gateway_process_memory_bytes", {
  description: "This process's memory in bytes, by kind: rss, heap_total, heap_used, external (V8's view and the OS's)"
})

export const poolConnections = Metric.gauge("tool_gateway_db_pool_connections", {
  description: "This process's database connections, by state (total, idle, waiting requests)"
})

/** A metric tagged once per distinct label value: tagging allocates, so each combination is kept. */
const tagCache = <M>(tag: (labels: string) => M) => {
  const cache = new Map<string, M>()
  return (labels: string): M => {
    let metric = cache.get(labels)
    if (metric === undefined) {
      metric = tag(labels)
      cache.set(labels, metric)
    }
    return metric
  }
}

// Both labels in one `taggedWithLabels`: two nested `Metric.tagged` join their labels into a new array on every
// update, which misses the metric's cache of hooks (kept by that array) and looks the key up in the registry
// again — about 3 µs and a new key per update, against about 20 ns.
const callsBy = tagCache((labels) => {
  const [tool = "", code = ""] = labels.split("\u0000")
  return Metric.taggedWithLabels(toolCalls, [MetricLabel.make("tool", tool), MetricLabel.make("code", code)])
})
const durationBy = tagCache((tool) => Metric.tagged(toolCallDuration, "tool", tool))
const providerBy = tagCache((tool) => Metric.tagged(providerDuration, "tool", tool))
const creditsBy = tagCache((tool) => Metric.tagged(creditsCharged, "tool", tool))
const statusBy = tagCache((status) => Metric.tagged(httpRequests, "status", status))

/**
 * A step's metric updates as one Effect step. `Metric.update` is three steps per metric (read the fiber's
 * metric labels, then update), and `Effect.all` over several adds a loop of its own: a tool call made 15–20
 * steps of its metrics. Here the labels are read once and each metric updated with them, as `Metric.update`
 * does.
 */
const updating = (f: (labels: ReadonlyArray<MetricLabel.MetricLabel>) => void): Effect.Effect<void> =>
  Effect.withFiberRuntime((fiber) => {
    f(fiber.getFiberRef(FiberRef.currentMetricLabels))
    return Effect.void
  })

/** Count one tool call and its latency. */
export const recordCall = (tool: string, code: string, credits: number, seconds: number) =>
  updating((labels) => {
    callsBy(`${tool}\u0000${code}`).unsafeUpdate(1, labels)
    durationBy(tool).unsafeUpdate(seconds, labels)
    if (credits > 0) creditsBy(tool).unsafeUpdate(credits, labels)
    if (code === "replayed") idempotencyReplays.unsafeUpdate(1, labels)
  })

export const recordProvider = (tool: string, seconds: number) =>
  updating((labels) => providerBy(tool).unsafeUpdate(seconds, labels))

export const recordStatus = (status: number) =>
  updating((labels) => statusBy(`${Math.floor(status / 100)}xx`).unsafeUpdate(1, labels))

/**
 * The facts of one call, filled in as the pipeline learns them, read by the request log line.
 */
export interface CallFacts {
  /**
   * The caller, while its key came from the cache and no statement has confirmed it yet: an error answer
   * confirms it before it is sent (a revoked key gets `invalid_key`, whatever else was wrong).
   */
  unconfirmed: Caller | undefined
  orgId: string | undefined
  keyId: string | undefined
  tool: string | undefined
  credits: number
  provider: string | undefined
  providerMs: number | undefined
  /** How the call ended (its answer's status and code), once it has: what a log line says if the client left. */
  status: number | undefined
  code: string | undefined
}

export const newCallFacts = (): CallFacts => ({
  unconfirmed: undefined,
  orgId: undefined,
  keyId: undefined,
  tool: undefined,
  credits: 0,
  provider: undefined,
  providerMs: undefined,
  status: undefined,
  code: undefined
})

/**
 * The facts of the call in progress, per fiber: set by the HTTP layer in each request's own fiber,
 * and by `Gateway` for a call made outside any request (an in-process caller), so that concurrent calls
 * never write into each other's. Undefined outside a call.
 */
export const CurrentCallFacts = FiberRef.unsafeMake<CallFacts | undefined>(undefined)

/**
 * The current call's facts (outside a call: a fresh object, whose writes go nowhere), read from the fiber in one
 * step (`FiberRef.get` and then `map` are three): a call reads them several times.
 */
export const callFacts: Effect.Effect<CallFacts> = Effect.withFiberRuntime((fiber) =>
  Effect.succeed(fiber.getFiberRef(CurrentCallFacts) ?? newCallFacts()))

/** Run `effect` with facts of its own unless the fiber already has a call's (a request's). */
export const withCallFacts = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.withFiberRuntime((fiber) =>
    fiber.getFiberRef(CurrentCallFacts) !== undefined ? effect : Effect.locally(effect, CurrentCallFacts, newCallFacts()))
