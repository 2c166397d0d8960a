/**
 * `npm run bench -- --timeline`: a probe preloaded into the gateway (`node --import`), for the measurement only.
 * It records, in the gateway's own clock (`performance.now()`):
 *
 * - each HTTP request, from its start to its response's end (`node:diagnostics_channel`, `http.server.*`);
 * - each statement, from `pg`'s `Query.submit` to its `end` event (the database's answer, as the gateway reads it);
 * - each upstream request, from the moment it is all handed to its socket to its answer's headers
 *   (`http.client.request.start`, published when the request is finished, and `http.client.response.finish`,
 *   when the answer's headers are parsed): the wait for the provider, not the client's own work before it;
 * - each garbage collection (`PerformanceObserver`, `gc` entries);
 * - each turn of a 5 ms timer that came more than `GAP_MS` late: a stretch in which the event loop did not get to
 *   its timers (busy with the gateway's work, paused by a collection, or the process waiting for a core).
 *
 * On `SIGUSR2` it writes what it recorded since the last signal to `BENCH_TIMELINE_OUT` and starts afresh: the
 * runner signals before and after each scenario and reads the file (see `timelineReport` in run.ts).
 */
import * as DiagnosticsChannel from "node:diagnostics_channel"
import { performance, PerformanceObserver } from "node:perf_hooks"
import Pg from "pg"
import { writeProbeFile } from "./probeFile.js"

export interface Timeline {
  /** [start, end] of each request. */
  readonly requests: Array<readonly [number, number]>
  /** [submitted, answered, kind] of each statement. */
  readonly statements: Array<readonly [number, number, StatementKind]>
  /** [start, end] of each upstream request. */
  readonly upstream: Array<readonly [number, number]>
  /** [start, duration, kind] of each collection: kind 1 a scavenge, 4 the old generation, 8 incremental marking. */
  readonly gc: Array<readonly [number, number, number]>
  /** [start, duration] of each interval between two turns of the probe's 5 ms timer that came more than `gapMs` late. */
  readonly gaps: Array<readonly [number, number]>
  /** How late a turn of the 5 ms timer marks a gap. */
  readonly gapMs: number
}

const GAP_MS = 10

export type StatementKind = "reserve" | "claim" | "resolve" | "other"

const kindOf = (text: unknown): StatementKind => {
  if (typeof text !== "string") return "other"
  if (text.includes("gateway_claim_reserve_batch(")) return "claim"
  if (text.includes("gateway_reserve_batch(")) return "reserve"
  if (text.includes("gateway_resolve_batch(")) return "resolve"
  return "other"
}

const out = process.env["BENCH_TIMELINE_OUT"]

if (out !== undefined) {
  const fresh = (): Timeline => ({ requests: [], statements: [], upstream: [], gc: [], gaps: [], gapMs: GAP_MS })
  let timeline = fresh()

  /** A span between two channels' messages, keyed by one object the messages carry (`response` or `request`). */
  const span = (opened: string, closed: string, field: "response" | "request", record: (start: number, end: number) => void) => {
    const objectOf = (message: unknown): object | undefined => {
      const value: unknown = typeof message === "object" && message !== null ? Reflect.get(message, field) : undefined
      return typeof value === "object" && value !== null ? value : undefined
    }
    const starts = new WeakMap<object, number>()
    DiagnosticsChannel.subscribe(opened, (message) => {
      const key = objectOf(message)
      if (key !== undefined) starts.set(key, performance.now())
    })
    DiagnosticsChannel.subscribe(closed, (message) => {
      const key = objectOf(message)
      const start = key === undefined ? undefined : starts.get(key)
      if (start !== undefined) record(start, performance.now())
    })
  }
  span("http.server.request.start", "http.server.response.finish", "response", (start, end) => timeline.requests.push([start, end]))
  span("http.client.request.start", "http.client.response.finish", "request", (start, end) => timeline.upstream.push([start, end]))

  // pg emits `end` on a query right after handing its rows to the caller's callback
  const submit = Pg.Query.prototype.submit
  Pg.Query.prototype.submit = function (this: Pg.Query, connection) {
    const start = performance.now()
    const kind = kindOf(Reflect.get(this, "text"))
    const record = timeline
    this.once("end", () => record.statements.push([start, performance.now(), kind]))
    return submit.call(this, connection)
  }

  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const detail: unknown = Reflect.get(entry, "detail")
      const kind = typeof detail === "object" && detail !== null && "kind" in detail && typeof detail.kind === "number" ? detail.kind : 0
      timeline.gc.push([entry.startTime, entry.duration, kind])
    }
  }).observe({ entryTypes: ["gc"] })

  let tick = performance.now()
  setInterval(() => {
    const now = performance.now()
    if (now - tick > 5 + GAP_MS) timeline.gaps.push([tick, now - tick])
    tick = now
  }, 5).unref()

  process.on("SIGUSR2", () => {
    const written = timeline
    timeline = fresh()
    writeProbeFile(out, written)
  })
}
