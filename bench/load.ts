/**
 * Load runs, in a process of their own so that the load generator does not share an event loop with
 * anything it measures. The plans come as a JSON array in argv[2] and run one after the other; one JSON
 * line of results per plan goes to stdout.
 *
 * - Closed loop (no `rate`): autocannon with `connections` connections, each sending its next request when
 *   the previous answer arrives (`connections: 1` is one request at a time).
 * - Open loop (`rate`): requests start on a fixed schedule, one every 1/rate s, whatever the answers do,
 *   over an undici pool; latency is measured from the scheduled start, so a stall is not hidden
 *   (autocannon's own rate limit sends each connection's quota in a burst at the top of every second).
 *
 * Latencies are recorded with microsecond resolution (autocannon's histogram keeps whole milliseconds,
 * too coarse for sub-millisecond overheads).
 */
import autocannon from "autocannon"
import * as hdr from "hdr-histogram-js"
import { randomUUID } from "node:crypto"
import { Pool } from "undici"

export interface LoadPlan {
  readonly url: string
  readonly body?: string
  readonly headers?: Readonly<Record<string, string>>
  readonly connections: number
  readonly durationSec: number
  /** Requests per second across all connections; none: as fast as the server answers (closed loop). */
  readonly rate?: number
  /** API keys to rotate through, one per request (spreads calls over orgs). */
  readonly keys?: ReadonlyArray<string>
  /** Send a fresh Idempotency-Key with every request. */
  readonly uniqueIdempotencyKey?: boolean
  /** The status every answer should have. */
  readonly expectStatus: number
}

export interface LoadResult {
  readonly requests: number
  readonly durationSec: number
  readonly rps: number
  readonly p50: number
  readonly p90: number
  readonly p99: number
  readonly max: number
  readonly mean: number
  /** Answers with another status than the expected one, and connection errors. */
  readonly unexpected: number
  readonly errors: number
  readonly statuses: Readonly<Record<string, number>>
}

const runPlan = (plan: LoadPlan): Promise<LoadResult> =>
  new Promise<LoadResult>((resolve, reject) => {
    const histogram = hdr.build({
      lowestDiscernibleValue: 1,
      highestTrackableValue: 120_000_000,
      numberOfSignificantValueDigits: 3
    })
    const statuses: Record<string, number> = {}
    let counted = 0
    let unexpected = 0
    let keyIndex = 0

    const headers: Record<string, string> = { "content-type": "application/json", ...plan.headers }
    const rotate = plan.keys !== undefined && plan.keys.length > 0
    const perRequest = rotate || plan.uniqueIdempotencyKey === true

    const done = (result: { readonly duration: number; readonly errors: number }) => {
      const ms = (us: number) => Math.round(us) / 1000
      resolve({
        requests: counted,
        durationSec: result.duration,
        rps: Math.round(counted / result.duration),
        p50: ms(histogram.getValueAtPercentile(50)),
        p90: ms(histogram.getValueAtPercentile(90)),
        p99: ms(histogram.getValueAtPercentile(99)),
        max: ms(histogram.maxValue),
        mean: ms(histogram.mean),
        unexpected: unexpected + result.errors,
        errors: result.errors,
        statuses
      })
    }

    const requestHeaders = (): Record<string, string> => {
      const extra: Record<string, string> = {}
      if (rotate && plan.keys !== undefined) extra["x-api-key"] = plan.keys[keyIndex++ % plan.keys.length] ?? ""
      if (plan.uniqueIdempotencyKey === true) extra["idempotency-key"] = randomUUID()
      return { ...headers, ...extra }
    }

    const closedLoop = () => {
      const instance = autocannon({
        url: plan.url,
        method: "POST",
        connections: plan.connections,
        duration: plan.durationSec,
        requests: [
          {
            method: "POST",
            headers,
            ...(plan.body !== undefined ? { body: plan.body } : {}),
            ...(perRequest
              ? { setupRequest: (request: autocannon.Request) => ({ ...request, headers: requestHeaders() }) }
              : {})
          }
        ]
      }, (error, result) => {
        if (error !== null && error !== undefined) return reject(error)
        done(result)
      })
      instance.on("response", (_client: unknown, statusCode: number, _bytes: number, responseTime: number) => {
        counted++
        statuses[statusCode] = (statuses[statusCode] ?? 0) + 1
        if (statusCode !== plan.expectStatus) unexpected++
        histogram.recordValue(Math.max(1, Math.round(responseTime * 1000)))
      })
    }

    const openLoop = async (rate: number) => {
      const url = new URL(plan.url)
      const pool = new Pool(url.origin, { connections: plan.connections, pipelining: 1, keepAliveTimeout: 60_000 })
      const interval = 1000 / rate
      const total = Math.round(rate * plan.durationSec)
      const start = performance.now()
      let errors = 0
      const inFlight: Array<Promise<void>> = []
      for (let i = 0; i < total; i++) {
        const scheduled = start + i * interval
        const wait = scheduled - performance.now()
        if (wait > 1) await new Promise((r) => setTimeout(r, wait))
        inFlight.push(
          pool.request({
            path: url.pathname + url.search,
            method: "POST",
            headers: requestHeaders(),
            ...(plan.body !== undefined ? { body: plan.body } : {})
          }).then(
            async (response) => {
              await response.body.dump()
              const elapsed = performance.now() - scheduled
              counted++
              statuses[response.statusCode] = (statuses[response.statusCode] ?? 0) + 1
              if (response.statusCode !== plan.expectStatus) unexpected++
              histogram.recordValue(Math.max(1, Math.round(elapsed * 1000)))
            },
            () => {
              errors++
            }
          )
        )
      }
      await Promise.all(inFlight)
      await pool.close()
      done({ duration: (performance.now() - start) / 1000, errors })
    }

    if (plan.rate !== undefined) openLoop(plan.rate).catch(reject)
    else closedLoop()
  })

const parsed: LoadPlan | ReadonlyArray<LoadPlan> = JSON.parse(process.argv[2] ?? "[]")
const plans: ReadonlyArray<LoadPlan> = Array.isArray(parsed) ? parsed : [parsed]

const main = async () => {
  for (const plan of plans) process.stdout.write(`${JSON.stringify(await runPlan(plan))}\n`)
}

main().catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
