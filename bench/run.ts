/**
 * `npm run bench`: the gateway against the physical baseline, in one run on one machine.
 *
 * Starts a fixed-JSON upstream, a bare `node:http` pass-through proxy (the floor), the framework's own
 * ceilings (`HttpRouter` and `HttpApi` answering constant JSON) and the gateway on PostgreSQL (embedded in
 * `bench/.data` by default, `BENCH_DATABASE_URL` for a server; a fresh database either way), then loads
 * each scenario three ways with autocannon in a process of its own: one request at a time (sequential),
 * as fast as it answers (closed loop), and at a fixed rate. Writes a markdown table and JSON to
 * `bench/results/`.
 *
 *   npm run bench                      the full run (about 10 minutes)
 *   npm run bench -- --quick           every scenario briefly (under a minute): checks that all produce figures
 *   npm run bench -- --only gateway    scenarios whose name contains a word (several: --only proxy,gateway);
 *                                      a word after "=" is a whole name (--only =gateway,idempotency)
 *   npm run bench -- --profile         the gateway runs with --cpu-prof (profiles in bench/results/profiles)
 *   npm run bench -- --timeline        each single-process gateway scenario also reports, from inside the gateway
 *                                      (bench/timeline.ts), where a call alone spends its time and what the
 *                                      slowest calls at the fixed rate ran beside (garbage collections)
 *   npm run bench -- --survivors       each single-process gateway scenario also reports what of its calls' memory
 *                                      no scavenge collected (bench/survivors.ts), by allocation site
 *   npm run bench -- --allocations     the same probe, counting what scavenges collect too: all a call allocates, by site
 *   npm run bench -- --steps           each single-process gateway scenario also reports the Effect runtime's steps per
 *                                      call, by kind and by the code each runs (bench/steps.ts; with --entry dist/bin.js:
 *                                      the bundle carries its own Effect, which the probe does not reach)
 *   npm run bench -- --gc              each single-process gateway scenario also reports, from V8's --trace-gc, its
 *                                      collections of the old generation: what each left live, where the next began,
 *                                      and the growing factor V8 chose (with the gc/mutator speed ratio it chose it by)
 *   npm run bench -- --entry dist/bin.js  the gateway started from another entry (default: dist/bundle/bin.js, the
 *                                      bundle `npm start` runs; dist/bin.js is tsc's output, unbundled)
 */
import * as Crypto from "node:crypto"
import { Effect, Exit, Scope } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Url from "node:url"
import {
  cpuOf,
  gatewayEntry,
  mainThreadCpuOf,
  mainThreadWaitOf,
  postmasterOf,
  prepareDatabase,
  type Proc,
  provision,
  root,
  rssOf,
  script,
  sleep,
  startGateway,
  startServer,
  stop,
  stopAll
} from "./harness.js"
import type { LoadPlan, LoadResult } from "./load.js"
import type { Survivors } from "./survivors.js"
import type { Steps } from "./steps.js"
import type { StatementKind, Timeline } from "./timeline.js"

const resultsDir = Path.join(root, "bench", "results")
const args = process.argv.slice(2)
const flag = (name: string) => args.includes(name)
const option = (name: string) => {
  const i = args.indexOf(name)
  return i >= 0 ? args[i + 1] : undefined
}

const quick = flag("--quick")
const only = option("--only")
const profile = flag("--profile")
const timeline = flag("--timeline")
const allocations = flag("--allocations")
// --allocations is the --survivors probe, sampling what scavenges collect as well
const survivors = flag("--survivors") || allocations
const steps = flag("--steps")
const gc = flag("--gc")
const seconds = Number(option("--duration") ?? (quick ? "0.6" : "10"))
const warmupSeconds = quick ? 0.3 : 3
const connections = Number(option("--connections") ?? "32")
const fixedRate = Number(option("--rate") ?? "300")
const rssSeconds = Number(option("--rss-seconds") ?? (quick ? "0" : "60"))
// How long the gateway is left without calls before its idle memory is read (and again after the load): V8
// compacts an idle heap and gives back its unused young generation only after some seconds without work.
const idleSeconds = Number(option("--idle-seconds") ?? (quick ? "0" : "60"))
const entry = Path.resolve(root, option("--entry") ?? gatewayEntry)
// A fresh gateway runs its hot path thousands of times before V8 has optimized it (its CPU per call falls by
// a third over the first ~5,000 calls); the full run warms each gateway up before measuring it.
const jitWarmupSeconds = Number(option("--jit-warmup") ?? (quick ? "0" : "15"))
// The V8 heap limit of the bounded-heap scenario (`NODE_OPTIONS=--max-old-space-size=…`).
const boundedHeapMb = 128
// the probes that both the gateway and the `HttpApi` ceiling get (the timeline is the gateway's only)
const probeImports = [
  ...(survivors ? ["--import", Url.pathToFileURL(script("survivors")).href] : []),
  ...(steps ? ["--import", Url.pathToFileURL(script("steps")).href] : [])
]
const gatewayNodeArgs = [
  ...(profile ? ["--cpu-prof", "--cpu-prof-dir", Path.join(resultsDir, "profiles")] : []),
  ...(timeline ? ["--import", Url.pathToFileURL(script("timeline")).href] : []),
  ...probeImports,
  ...(gc ? ["--trace-gc", "--trace-gc-verbose"] : [])
]

/**
 * --gc: V8's lines about collections of the old generation, as the single-process gateway prints them while a
 * scenario runs (the scenarios run one after the other; between them the lines are not kept).
 */
const gcLines: Array<string> = []
let gcTracing = false
const onGatewayStdout = gc
  ? (line: string) => {
    if (gcTracing && (line.includes("Mark-Compact") || line.includes("[HeapController] factor") || line.includes("New space,"))) {
      gcLines.push(line)
    }
  }
  : undefined

// ---------------------------------------------------------------------------------------------------------
// load

/** Load plans run one after the other in one load-generator process; a result per plan. */
const loadAll = (plans: ReadonlyArray<LoadPlan>, onResult?: (index: number) => void) =>
  new Promise<ReadonlyArray<LoadResult>>((resolve, reject) => {
    const child = ChildProcess.spawn(process.execPath, [script("load"), JSON.stringify(plans)], {
      stdio: ["ignore", "pipe", "inherit"]
    })
    let out = ""
    let lines = 0
    child.stdout.on("data", (chunk: Buffer) => {
      const text = chunk.toString("utf8")
      out += text
      // a plan's result is written as it ends (a line), and the next plan starts at once: `onResult` marks the moment
      for (const c of text) {
        if (c !== "\n") continue
        onResult?.(lines)
        lines += 1
      }
    })
    child.once("exit", (code) => {
      if (code !== 0) return reject(new Error(`load generator exited with ${code}`))
      const results: Array<LoadResult> = out.trim().split("\n").filter((l) => l !== "").map((l) => JSON.parse(l))
      if (results.length !== plans.length) return reject(new Error(`load generator gave ${results.length} of ${plans.length} results`))
      resolve(results)
    })
  })

const load = (plan: LoadPlan) =>
  loadAll([plan]).then((results) => {
    const [result] = results
    if (result === undefined) throw new Error("no load result")
    return result
  })

interface Target {
  readonly url: string
  readonly body?: string
  readonly headers?: Readonly<Record<string, string>>
  readonly keys?: ReadonlyArray<string>
  readonly uniqueIdempotencyKey?: boolean
  readonly expectStatus: number
}

interface Figures {
  readonly sequential: LoadResult
  readonly max: LoadResult
  readonly rate: LoadResult
  /** Highest RSS seen during the closed-loop run, in MB (gateway scenarios). */
  readonly rssMb?: number
  /**
   * The gateway's CPU time (user + system, its workers included) per answered request over all phases
   * (warm-up, sequential, max, fixed rate), in ms: what a call costs the process, whatever else shares the
   * cores — steadier from run to run than the throughput on a shared machine.
   */
  readonly cpuMsPerCall?: number
  /** What the closed loop used of the machine (the gateway's scenarios, the proxy's and the ceilings'). */
  readonly closedLoop?: ClosedLoop
}

/**
 * Read at the closed loop's start and end: what the server's process, its main (JavaScript) thread and the
 * database's processes used of the cores meanwhile, how long that thread waited for a core, and the gateway's
 * ledger statements by kind (the `tool_gateway_ledger_batch_size` histogram): statements per second and calls
 * per statement. Whatever of these nears its limit (a thread running or waiting 1.0 of the time; the cores of the
 * machine all in use) is what bounds the calls/s.
 */
interface ClosedLoop {
  readonly seconds: number
  /** The server's process: the gateway (its workers included), or the proxy or ceiling measured. */
  readonly processCores: number
  /** Undefined for workers: each has its own. */
  readonly mainThreadCores?: number
  /** The share of the time the main thread waited, runnable, for a core (the machine's other processes had them). */
  readonly mainThreadWaiting?: number
  readonly databaseCores?: number
  readonly statements: Readonly<Record<string, { readonly perSecond: number; readonly callsEach: number }>>
}

/**
 * What the closed loop is read from: the server's process, the database's postmaster, whether to read its main
 * thread (a single process: workers each have their own), and a single gateway's port for its metrics.
 */
interface Inside {
  readonly pid: number
  readonly databasePid?: number | undefined
  readonly mainThread: boolean
  readonly metricsPort?: number
}

interface Reading {
  readonly at: number
  readonly process: number
  readonly mainThread: number | undefined
  readonly mainThreadWait: number | undefined
  readonly database: number | undefined
  readonly batches: Promise<Readonly<Record<string, { readonly count: number; readonly sum: number }>>>
}

/** The gateway's metrics, as `/metrics` writes them (Prometheus' text format). */
const scrape = async (port: number) => (await fetch(`http://127.0.0.1:${port}/metrics`)).text()

/** The samples of a scrape, each line's metric, labels and value, read in one pass. */
const samplesOf = (text: string) =>
  text.split("\n").flatMap((l) => {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})? (\S+)/.exec(l)
    if (m === null || m[1] === undefined) return []
    const labels = new Map([...(m[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"/g)].map(([, k, v]) => [k, v]))
    return [{ metric: m[1], labels, value: Number(m[3]) }]
  })

/** The ledger's batch-size histogram, by kind: how many statements, and how many calls in all. */
const batchesOf = async (port: number) => {
  const kinds: Record<string, { count: number; sum: number }> = {}
  for (const { metric, labels, value } of samplesOf(await scrape(port))) {
    const field = metric === "tool_gateway_ledger_batch_size_count"
      ? "count"
      : metric === "tool_gateway_ledger_batch_size_sum"
      ? "sum"
      : undefined
    const kind = labels.get("kind")
    if (field !== undefined && kind !== undefined) (kinds[kind] ??= { count: 0, sum: 0 })[field] = value
  }
  return kinds
}

const readInside = (inside: Inside): Reading => ({
  at: performance.now(),
  process: cpuOf(inside.pid),
  mainThread: inside.mainThread ? mainThreadCpuOf(inside.pid) : undefined,
  mainThreadWait: inside.mainThread ? mainThreadWaitOf(inside.pid) : undefined,
  database: inside.databasePid === undefined ? undefined : cpuOf(inside.databasePid),
  // a scrape that fails leaves the statements out, not the run (and is caught at once: it is awaited only later)
  batches: inside.metricsPort === undefined ? Promise.resolve({}) : batchesOf(inside.metricsPort).catch(() => ({}))
})

const closedLoopOf = async (start: Reading, end: Reading): Promise<ClosedLoop> => {
  const ms = end.at - start.at
  const cores = (a: number, b: number) => Math.round((100 * (b - a)) / ms) / 100
  const [before, after] = await Promise.all([start.batches, end.batches])
  const statements: Record<string, { perSecond: number; callsEach: number }> = {}
  for (const [kind, b] of Object.entries(after)) {
    const a = before[kind] ?? { count: 0, sum: 0 }
    const count = b.count - a.count
    if (count > 0) {
      statements[kind] = { perSecond: Math.round((1000 * count) / ms), callsEach: Math.round((10 * (b.sum - a.sum)) / count) / 10 }
    }
  }
  return {
    seconds: Math.round(ms / 100) / 10,
    processCores: cores(start.process, end.process),
    ...(start.mainThread !== undefined && end.mainThread !== undefined
      ? { mainThreadCores: cores(start.mainThread, end.mainThread) }
      : {}),
    ...(start.mainThreadWait !== undefined && end.mainThreadWait !== undefined
      ? { mainThreadWaiting: cores(start.mainThreadWait, end.mainThreadWait) }
      : {}),
    ...(start.database !== undefined && end.database !== undefined ? { databaseCores: cores(start.database, end.database) } : {}),
    statements
  }
}

const describeStatements = (c: ClosedLoop) =>
  Object.entries(c.statements).map(([kind, s]) => `${kind} ${s.perSecond}/s × ${s.callsEach}`).join(" · ")

const measure = async (name: string, target: Target, pid?: number | undefined, inside?: Inside): Promise<Figures> => {
  const plan = (c: number, durationSec: number, rate?: number): LoadPlan => ({
    url: target.url,
    connections: c,
    durationSec,
    expectStatus: target.expectStatus,
    ...(target.body !== undefined ? { body: target.body } : {}),
    ...(target.headers !== undefined ? { headers: target.headers } : {}),
    ...(target.keys !== undefined ? { keys: target.keys } : {}),
    ...(target.uniqueIdempotencyKey === true ? { uniqueIdempotencyKey: true } : {}),
    ...(rate !== undefined ? { rate } : {})
  })
  // warm-up, sequential, max throughput, fixed rate: one load-generator process (RSS: the largest seen
  // while it runs, which the closed-loop phases set)
  let rssMb = 0
  const sampler = pid === undefined ? undefined : setInterval(() => (rssMb = Math.max(rssMb, rssOf(pid))), 250)
  const cpuBefore = pid === undefined ? 0 : cpuOf(pid)
  // the closed loop runs between the second plan's result and the third's
  const readings: Array<Reading> = []
  const [warmup, sequential, max, rate] = await loadAll([
    plan(connections, warmupSeconds),
    plan(1, seconds),
    plan(connections, seconds),
    plan(64, seconds, fixedRate)
  ], (index) => {
    if (inside !== undefined && (index === 1 || index === 2)) readings.push(readInside(inside))
  })
  const [start, end] = readings
  const closedLoop = start !== undefined && end !== undefined ? await closedLoopOf(start, end) : undefined
  if (sampler !== undefined) clearInterval(sampler)
  if (warmup === undefined || sequential === undefined || max === undefined || rate === undefined) throw new Error("missing load results")
  const answered = warmup.requests + sequential.requests + max.requests + rate.requests
  const cpuMsPerCall = pid === undefined ? undefined : Math.round((1000 * (cpuOf(pid) - cpuBefore)) / Math.max(1, answered)) / 1000
  for (const [label, r] of [["sequential", sequential], ["max", max], ["rate", rate]] as const) {
    if (r.requests === 0 || r.unexpected > 0) {
      console.error(`  ${name} ${label}: ${r.requests} answers, ${r.unexpected} unexpected ${JSON.stringify(r.statuses)}`)
    }
  }
  console.error(
    `  ${name.padEnd(28)} seq p50 ${r3(sequential.p50)} ms · max ${max.rps} req/s · @${fixedRate}/s p50 ${
      r3(rate.p50)
    } p99 ${r3(rate.p99)} ms${pid !== undefined ? ` · rss ${rssMb} MB · cpu ${cpuMsPerCall} ms/call` : ""}`
  )
  if (closedLoop !== undefined) {
    console.error(
      `  ${"".padEnd(28)} closed loop: process ${closedLoop.processCores} cores` +
        `${closedLoop.mainThreadCores !== undefined ? ` (main thread ${closedLoop.mainThreadCores}, waited for a core ${closedLoop.mainThreadWaiting})` : ""}` +
        `${closedLoop.databaseCores !== undefined ? ` · PostgreSQL ${closedLoop.databaseCores} cores` : ""} · ${describeStatements(closedLoop)}`
    )
  }
  return {
    sequential,
    max,
    rate,
    ...(pid !== undefined ? { rssMb } : {}),
    ...(cpuMsPerCall !== undefined ? { cpuMsPerCall } : {}),
    ...(closedLoop !== undefined ? { closedLoop } : {})
  }
}

const r3 = (n: number) => n.toFixed(3)

// ---------------------------------------------------------------------------------------------------------
// probes (--timeline, --survivors, --steps): what the probes in the gateway recorded over one scenario

const probeFile = (probe: "timeline" | "survivors" | "steps", name: string) => Path.join(root, "bench", ".data", `${probe}-${name}.json`)

/** A probe's file, once it is written (each probe writes its own on SIGUSR2), read and removed. */
const readWhenWritten = async (file: string): Promise<string | undefined> => {
  for (let i = 0; i < 400; i++) {
    if (Fs.existsSync(file)) {
      const text = Fs.readFileSync(file, "utf8")
      Fs.rmSync(file, { force: true })
      return text
    }
    await sleep(25)
  }
  return undefined
}

/**
 * Signal a process's probes and read what each wrote: the timeline since the last signal, the survivors sampled,
 * the steps counted. The gateway has all three; the `HttpApi` ceiling not the timeline (`withTimeline` false).
 */
const takeProbes = async (proc: Proc, withTimeline: boolean) => {
  const files = { timeline: probeFile("timeline", proc.name), survivors: probeFile("survivors", proc.name), steps: probeFile("steps", proc.name) }
  Fs.mkdirSync(Path.dirname(files.timeline), { recursive: true })
  for (const file of Object.values(files)) Fs.rmSync(file, { force: true })
  proc.child.kill("SIGUSR2")
  const [recorded, sampled, counted] = await Promise.all([
    timeline && withTimeline ? readWhenWritten(files.timeline) : Promise.resolve(undefined),
    survivors ? readWhenWritten(files.survivors) : Promise.resolve(undefined),
    steps ? readWhenWritten(files.steps) : Promise.resolve(undefined)
  ])
  const parsedTimeline: Timeline | undefined = recorded === undefined ? undefined : JSON.parse(recorded)
  const parsedSurvivors: Survivors | undefined = sampled === undefined ? undefined : JSON.parse(sampled)
  const parsedSteps: Steps | undefined = counted === undefined ? undefined : JSON.parse(counted)
  return { timeline: parsedTimeline, survivors: parsedSurvivors, steps: parsedSteps }
}

/** The Effect runtime's steps per call: by kind, and the code the most frequent run. */
const stepsReport = (name: string, s: Steps): string => {
  const calls = Math.max(1, s.responses)
  const perCall = (n: number) => (n / calls).toFixed(1)
  const kinds = s.kinds.map(([kind, n]) => `${kind} ${perCall(n)}`).join(", ")
  const top = s.sites.slice(0, 12).map(([site, n]) => `${perCall(n)} ${site.slice(0, 90)}`)
  return `steps ${name}: ${perCall(s.steps)} Effect steps per call (${s.responses} calls over the scenario's four phases): ` +
    `${kinds}; the most run: ${top.join(" | ")}`
}

/** What no scavenge collected, per call (or, with --allocations, all that was allocated), and its largest allocation sites. */
const survivorsReport = (name: string, s: Survivors): string => {
  const total = s.sites.reduce((sum, [, bytes]) => sum + bytes, 0)
  const top = s.sites.slice(0, 8).map(([site, bytes]) => `${site} ${((100 * bytes) / Math.max(1, total)).toFixed(1)}%`)
  const perCall = `${(total / 1024 / Math.max(1, s.responses)).toFixed(1)} KB per call`
  return (s.all ? `allocations ${name}: ${perCall} was allocated, what scavenges collected included (` : `survivors ${name}: ${perCall} was never collected by a scavenge (`) +
    `${s.responses} calls over the scenario's four phases, sampled every 1 KiB; objects still live at the end ` +
    `included); the largest sites: ${top.join(", ")}`
}

/**
 * The old generation's collections during a scenario: what each left live, the size at which the next began,
 * and the factor V8 grew the limit by. V8 (heap-controller.cc) takes factor = r(1 - mu) / (r(1 - mu) - mu) with
 * mu = 0.97 and r the speed of its collector over the speed the program fills the old generation, at most 4
 * (a heap limit of several GB): below 4 only when r is above about 43.
 */
const gcReport = (name: string, lines: ReadonlyArray<string>): string => {
  const numbers = (re: RegExp) => lines.flatMap((l) => {
    const m = l.match(re)
    return m === null ? [] : [m.slice(1).map(Number)]
  })
  const compacts = numbers(/Mark-Compact(?: \(reduce\))? ([\d.]+) \([\d.]+\) -> ([\d.]+) \(/)
  // a factor computed without both speeds (the first collection's gc=0, or no promotion: speed_ratio=inf) says nothing
  const factors = numbers(/factor ([\d.]+) based on mu=[\d.]+, speed_ratio=([\d.]+) \(gc=([\d.]+), mutator=([\d.]+)\)/)
    .filter(([, , g, m]) => (g ?? 0) > 0 && (m ?? 0) > 0)
  if (compacts.length === 0) return `gc ${name}: no collection of the old generation while it ran`
  const range = (xs: ReadonlyArray<number>, digits = 1) => {
    const sorted = [...xs].sort((a, b) => a - b)
    return `${(sorted[0] ?? 0).toFixed(digits)}–${(sorted[sorted.length - 1] ?? 0).toFixed(digits)}`
  }
  // after each collection, what the young generation has committed (its two semi-spaces)
  const young = numbers(/New space,\s+used:\s+\d+ KB, available:\s+\d+ KB.*committed:\s+(\d+) KB/).map(([kb]) => (kb ?? 0) / 1024)
  const live = compacts.map(([, after]) => after ?? 0)
  const began = compacts.map(([before]) => before ?? 0)
  return `gc ${name}: ${compacts.length} collections of the old generation; each left ${range(live)} MB live ` +
    `(median ${quantile([...live].sort((a, b) => a - b), 0.5).toFixed(1)}), each began with ${range(began)} MB of objects in the heap (the young generation's included); ` +
    `growing factor ${range(factors.map(([f]) => f ?? 0))} by a gc/mutator speed ratio of ${range(factors.map(([, r]) => r ?? 0), 0)} ` +
    `(gc ${range(factors.map(([, , g]) => (g ?? 0) / 1024), 0)} KB/ms, the program filling the old generation at ` +
    `${range(factors.map(([, , , m]) => (m ?? 0) / 1024), 0)} KB/ms); the young generation committed at most ` +
    `${Math.max(0, ...young).toFixed(1)} MB`
}

const quantile = (sorted: ReadonlyArray<number>, q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0
const p50Of = (xs: Array<number>) => quantile(xs.sort((a, b) => a - b), 0.5)
const r2 = (n: number) => n.toFixed(2)

/**
 * A call alone: the sequential phase's requests that overlapped no other, each cut at its reservation (or claim),
 * upstream request and settlement; and the fixed-rate phase: the gateway's own latency, and whether its slowest
 * calls ran beside a collection of the old generation.
 */
const timelineReport = (name: string, t: Timeline): string => {
  const requests = [...t.requests].sort((a, b) => a[0] - b[0])
  const statements = [...t.statements].sort((a, b) => a[0] - b[0])
  const upstream = [...t.upstream].sort((a, b) => a[0] - b[0])
  const first = requests[0]
  const last = requests.reduce((end, r) => Math.max(end, r[1]), 0)
  if (first === undefined) return `timeline ${name}: no request recorded`
  // the phases by time: warm-up, sequential, closed loop, fixed rate
  const seqFrom = first[0] + warmupSeconds * 1000
  const seqTo = seqFrom + seconds * 1000
  const within = <R extends readonly [number, number, ...ReadonlyArray<unknown>]>(rows: ReadonlyArray<R>, from: number, to: number) =>
    rows.filter((r) => r[0] >= from && r[0] < to)
  const segments: Record<"before" | "reserve" | "toUpstream" | "upstream" | "toSettle" | "settle" | "after" | "call", Array<number>> = {
    before: [],
    reserve: [],
    toUpstream: [],
    upstream: [],
    toSettle: [],
    settle: [],
    after: [],
    call: []
  }
  const isReserve = (kind: StatementKind) => kind === "reserve" || kind === "claim"
  requests.forEach((r, i) => {
    if (r[0] < seqFrom || r[0] >= seqTo) return
    const previous = requests[i - 1]
    const next = requests[i + 1]
    if ((previous !== undefined && previous[1] > r[0]) || (next !== undefined && next[0] < r[1])) return
    const own = within(statements, r[0], r[1])
    const reserve = own.filter((x) => isReserve(x[2]))
    const settle = own.filter((x) => x[2] === "resolve")
    const up = within(upstream, r[0], r[1])
    const [a] = reserve
    const [b] = settle
    const [u] = up
    if (reserve.length !== 1 || settle.length !== 1 || up.length !== 1 || a === undefined || b === undefined || u === undefined) return
    segments.before.push(a[0] - r[0])
    segments.reserve.push(a[1] - a[0])
    segments.toUpstream.push(u[0] - a[1])
    segments.upstream.push(u[1] - u[0])
    segments.toSettle.push(b[0] - u[1])
    segments.settle.push(b[1] - b[0])
    segments.after.push(r[1] - b[1])
    segments.call.push(r[1] - r[0])
  })
  const alone = segments.call.length === 0
    ? "no billed call answered alone"
    : `a call alone (${segments.call.length} calls), p50: to the reservation ${r2(p50Of(segments.before))} · reservation ${
      r2(p50Of(segments.reserve))
    } · to the upstream ${r2(p50Of(segments.toUpstream))} · upstream ${r2(p50Of(segments.upstream))} · to the settlement ${
      r2(p50Of(segments.toSettle))
    } · settlement ${r2(p50Of(segments.settle))} · to the response ${r2(p50Of(segments.after))} · the call ${r2(p50Of(segments.call))} ms`
  // the fixed-rate phase: its calls end with the recording
  const rateFrom = last - seconds * 1000
  const rate = requests.filter((r) => r[0] >= rateFrom)
  const latencies = rate.map((r) => r[1] - r[0]).sort((a, b) => a - b)
  const p99 = quantile(latencies, 0.99)
  const gcs = within(t.gc, rateFrom, last)
  const scavenges = gcs.filter((g) => g[2] === 1)
  const majors = gcs.filter((g) => g[2] === 4)
  const slow = rate.filter((r) => r[1] - r[0] > p99)
  const gaps = within(t.gaps, rateFrom, last)
  const besideMajor = (r: readonly [number, number]) => majors.some((g) => r[0] <= g[0] + g[1] && r[1] >= g[0] - 100)
  const inGap = (r: readonly [number, number]) => gaps.some((g) => r[0] < g[0] + g[1] && r[1] > g[0])
  // the slow calls neither beside an old-generation collection nor in a late stretch: their longest statement and
  // upstream wait (each begun and ended within the call), beside the call itself
  const rest = slow.filter((r) => !besideMajor(r) && !inGap(r))
  const longest = (rows: ReadonlyArray<readonly [number, number, ...ReadonlyArray<unknown>]>, r: readonly [number, number]) =>
    rows.filter((x) => x[0] >= r[0] && x[1] <= r[1]).reduce((m, x) => Math.max(m, x[1] - x[0]), 0)
  const restText = rest.length === 0
    ? ""
    : `; the other ${rest.length}: p50 ${r2(p50Of(rest.map((r) => r[1] - r[0])))} ms, of which their longest statement p50 ${
      r2(p50Of(rest.map((r) => longest(statements, r))))
    } ms and their upstream wait p50 ${r2(p50Of(rest.map((r) => longest(upstream, r))))} ms`
  const mean = (xs: ReadonlyArray<number>) => xs.reduce((x, y) => x + y, 0) / Math.max(1, xs.length)
  return `timeline ${name}: ${alone}. At ${fixedRate}/s, in the gateway: p50 ${r2(quantile(latencies, 0.5))} ms, p99 ${r2(p99)} ms; ` +
    `${scavenges.length} scavenges (${r2(mean(scavenges.map((g) => g[1])))} ms each), ${majors.length} old-generation collection${
      majors.length === 1 ? "" : "s"
    } (longest ${
      r2(majors.reduce((m, g) => Math.max(m, g[1]), 0))
    } ms); of the ${slow.length} calls above the p99, ${slow.filter(besideMajor).length} ran beside one (within 100 ms before it, or during it), ${
      slow.filter(inGap).length
    } ` +
    `through a stretch in which the event loop reached its timers more than ${t.gapMs} ms late (${gaps.length} such ` +
    `stretch${gaps.length === 1 ? "" : "es"} in the phase, longest ${r2(gaps.reduce((m, g) => Math.max(m, g[1]), 0))} ms)${restText}`
}

interface Memory {
  readonly rssMb: number
  /** Undefined for a gateway whose `/metrics` has no heap gauges (a build older than them, measured with `--entry`). */
  readonly heap: { readonly usedMb: number; readonly totalMb: number } | undefined
}

/**
 * The gateway's RSS (the OS's view, workers included; read before the scrape, which loads the metrics exporter
 * the first time) and its `tool_gateway_process_memory_bytes` heap gauges, in MB.
 */
const memoryOf = async (port: number, pid: number | undefined): Promise<Memory> => {
  const rss = pid === undefined ? undefined : rssOf(pid)
  const memory = samplesOf(await scrape(port)).filter((s) => s.metric === "tool_gateway_process_memory_bytes")
  const mb = (kind: string) => {
    const sample = memory.find((m) => m.labels.get("kind") === kind)
    return sample === undefined ? undefined : Math.round(sample.value / 2 ** 20)
  }
  const [used, total] = [mb("heap_used"), mb("heap_total")]
  return {
    rssMb: rss ?? mb("rss") ?? 0,
    heap: used === undefined || total === undefined ? undefined : { usedMb: used, totalMb: total }
  }
}

const describeMemory = (m: Memory) =>
  `RSS ${m.rssMb} MB, ${m.heap === undefined ? "no V8 heap gauges in its /metrics" : `V8 heap ${m.heap.usedMb} MB used of ${m.heap.totalMb} MB`}`

/**
 * The gateway left without calls for `idleSeconds`, its RSS sampled every second: what it holds at the end, and
 * when it last fell by more than 10% (V8 compacting the idle heap).
 */
const idleMemory = async (proc: Proc) => {
  const pid = proc.child.pid
  const samples: Array<number> = []
  for (let i = 0; i < idleSeconds; i++) {
    await sleep(1000)
    if (pid !== undefined) samples.push(rssOf(pid))
  }
  const memory = await memoryOf(proc.port, pid)
  let fell: number | undefined
  for (let i = 1; i < samples.length; i++) if ((samples[i] ?? 0) < 0.9 * (samples[i - 1] ?? 0)) fell = i + 1
  return {
    memory,
    describe: describeMemory(memory) +
      (fell === undefined ? "; RSS did not fall during the wait" : `; RSS fell from ${samples[fell - 2]} MB to ${samples[fell - 1]} MB after ${fell} s`) +
      ` (highest ${Math.max(...samples)} MB, lowest ${Math.min(...samples)} MB)`
  }
}

let fresh: Memory | undefined
let idle: Memory | undefined
/**
 * The `HttpApi` ceiling's closed loop measured again right after `gateway-100-orgs`: the throughput target divides
 * by the ceiling, and the machine's speed can drift in the minutes between the two scenarios (a full run once read
 * the bare proxy and the ceiling at half their usual figures while the gateway scenarios after them read as usual).
 */
let ceilingAgain: LoadResult | undefined

// ---------------------------------------------------------------------------------------------------------
// report

interface Row {
  readonly name: string
  readonly what: string
  readonly figures: Figures
}

const machine = () => ({
  cores: Os.cpus().length,
  cpu: Os.cpus()[0]?.model ?? "unknown",
  memoryGb: Math.round(Os.totalmem() / 2 ** 30),
  node: process.version,
  platform: `${Os.type()} ${Os.release()}`
})

const main = async () => {
  const scope = Effect.runSync(Scope.make())
  const started = new Date()
  const words = only === undefined ? undefined : only.split(",").filter((w) => w !== "")
  const selected = (name: string) =>
    words === undefined || words.some((w) => (w.startsWith("=") ? name === w.slice(1) : name.includes(w)))
  console.error(`bench: ${quick ? "quick" : "full"} run, ${seconds} s per measurement, ${connections} connections`)
  const db = await prepareDatabase(scope)
  // the database's processes, for the closed loop's reading of the cores (when the server runs on this machine)
  const databasePid = await postmasterOf(db.url)
  const rows: Array<Row> = []
  const notes: Array<string> = []
  // --timeline, --survivors, --steps: a single-process gateway gets the probes' output files; each of its scenarios
  // is reported
  const probesEnv = (name: string) => ({
    ...(survivors ? { BENCH_SURVIVORS_OUT: probeFile("survivors", name) } : {}),
    ...(allocations ? { BENCH_SURVIVORS_ALL: "1" } : {}),
    ...(steps ? { BENCH_STEPS_OUT: probeFile("steps", name) } : {})
  })
  const withProbes = (name: string, env: Readonly<Record<string, string>>) => ({
    ...env,
    ...(timeline ? { BENCH_TIMELINE_OUT: probeFile("timeline", name) } : {}),
    ...probesEnv(name)
  })
  const note = (line: string) => {
    notes.push(line)
    console.error(`  ${line}`)
  }
  // the gateway has every probe asked for, the `HttpApi` ceiling all but the timeline (`withTimeline` false)
  const probed = async (name: string, proc: Proc, run: () => Promise<Figures>, withTimeline = true): Promise<Figures> => {
    // the preloaded probes are signalled (SIGUSR2) around the scenario; --gc only reads what V8 printed meanwhile
    const signalled = (timeline && withTimeline) || survivors || steps
    const traced = gc && withTimeline
    if (!signalled && !traced) return run()
    if (signalled) await takeProbes(proc, withTimeline)
    gcLines.length = 0
    gcTracing = traced
    const figures = await run()
    gcTracing = false
    if (traced) note(gcReport(name, gcLines))
    if (!signalled) return figures
    const taken = await takeProbes(proc, withTimeline)
    if (timeline && withTimeline) note(taken.timeline === undefined ? `timeline ${name}: the probe wrote nothing` : timelineReport(name, taken.timeline))
    if (survivors) {
      note(taken.survivors?.sampled === true ? survivorsReport(name, taken.survivors) : `${allocations ? "allocations" : "survivors"} ${name}: the probe sampled nothing`)
    }
    if (steps) {
      note(taken.steps?.counted === true
        ? stepsReport(name, taken.steps)
        : `steps ${name}: the probe counted nothing (a bundled entry carries its own Effect: run with --entry dist/bin.js; ` +
          "or the probe could not load the runtime's module)")
    }
    return figures
  }
  try {
    // independent set-up steps run side by side
    const [keys, upstream] = await Promise.all([provision(db.url), startServer("upstream", script("upstream"))])
    const env = {
      DATABASE_URL: db.url,
      GATEWAY_ENCRYPTION_KEY: Crypto.randomBytes(32).toString("base64"),
      APPSTORE_BASE_URL: `http://127.0.0.1:${upstream.port}`,
      RATE_LIMIT_PER_SECOND: "0",
      // under --gc the gateway's stdout comes to the bench: only V8's lines, not a log line per request
      LOG_LEVEL: process.env["LOG_LEVEL"] ?? (gc ? "warn" : "info")
    }
    const [proxy, router, api, gateway] = await Promise.all([
      startServer("proxy", script("proxy"), ["--upstream", String(upstream.port)]),
      startServer("router", script("ceiling"), ["--mode", "router"]),
      // under --survivors, --allocations or --steps the `HttpApi` ceiling gets the same probes: the framework's own share of a call
      startServer("api", script("ceiling"), ["--mode", "api"], {
        nodeArgs: probeImports,
        env: probesEnv("api")
      }),
      startGateway("gateway", withProbes("gateway", env), 1, gatewayNodeArgs, entry, onGatewayStdout)
    ])
    const body = JSON.stringify({ query: "notes", limit: 3 })
    const ceiling = { url: `http://127.0.0.1:${api.port}/v1/mobile_app_search`, body, expectStatus: 200 }
    const tool = `http://127.0.0.1:${gateway.port}/v1/mobile_app_search`
    // memory just started (migrated, no call yet), then idle: no call for `idleSeconds`
    await sleep(2000)
    fresh = await memoryOf(gateway.port, gateway.child.pid)
    note(`Started (2 s after start, no call yet): ${describeMemory(fresh)}.`)
    if (idleSeconds > 0 && selected("idle")) {
      const rest = await idleMemory(gateway)
      idle = rest.memory
      note(`Idle (then ${idleSeconds} s without a call): ${rest.describe}.`)
    }
    const jitWarmup = (port: number) =>
      jitWarmupSeconds > 0 && (words === undefined || words.some((w) => w.replace(/^=/, "").startsWith("gateway") || w === "workers" || w === "heap"))
        ? load({
          url: `http://127.0.0.1:${port}/v1/mobile_app_search`,
          body,
          keys: keys.spreadKeys,
          connections,
          durationSec: jitWarmupSeconds,
          expectStatus: 200
        })
        : Promise.resolve(undefined)
    await jitWarmup(gateway.port)
    const withKey = (key: string) => ({ "x-api-key": key })
    // `pid`: the process whose CPU a call costs; `probe`: a process other than the gateway whose probe samples it;
    // `server`: a process other than the gateway whose use of the cores the closed loop reads
    const scenarios: ReadonlyArray<
      { name: string; what: string; target: Target; pid?: number | undefined; probe?: Proc; server?: Proc }
    > = [
      {
        name: "upstream",
        what: "the fake provider alone (`node:http`, fixed JSON)",
        target: { url: `http://127.0.0.1:${upstream.port}/search?term=notes`, body, expectStatus: 200 }
      },
      {
        name: "bare-proxy",
        what: "`node:http` proxy: checks a key header, forwards over keep-alive (the floor)",
        target: {
          url: `http://127.0.0.1:${proxy.port}/v1/mobile_app_search`,
          body,
          headers: { "x-api-key": "bench-key" },
          expectStatus: 200
        },
        server: proxy
      },
      {
        name: "ceiling-router",
        what: "`HttpRouter` on `NodeHttpServer`, constant JSON (no upstream)",
        target: { url: `http://127.0.0.1:${router.port}/v1/mobile_app_search`, body, expectStatus: 200 },
        server: router
      },
      {
        name: "ceiling-httpapi",
        what: "`HttpApi` endpoint decoding the tool's payload, constant JSON (no upstream)",
        target: ceiling,
        probe: api,
        server: api
      },
      {
        name: "gateway",
        what: "tool call (`mobile_app_search`), billed: every call on one org (hot row)",
        target: { url: tool, body, headers: withKey(keys.hotKey), expectStatus: 200 },
        pid: gateway.child.pid
      },
      {
        name: "gateway-100-orgs",
        what: "the same, calls spread over 100 orgs (one key each)",
        target: { url: tool, body, keys: keys.spreadKeys, expectStatus: 200 },
        pid: gateway.child.pid
      },
      {
        name: "gateway-idempotency",
        what: "tool call with a unique `Idempotency-Key` per call (one org)",
        target: { url: tool, body, headers: withKey(keys.hotKey), uniqueIdempotencyKey: true, expectStatus: 200 },
        pid: gateway.child.pid
      },
      {
        name: "gateway-run",
        what: "`POST /v1/run` (raw provider answer), one org",
        target: {
          url: `http://127.0.0.1:${gateway.port}/v1/run`,
          body: JSON.stringify({ tool: "mobile_app_search", input: { query: "notes", limit: 3 } }),
          headers: withKey(keys.hotKey),
          expectStatus: 200
        },
        pid: gateway.child.pid
      },
      {
        name: "gateway-402",
        what: "`402 insufficient_credits` storm (rejections only, no provider call)",
        target: { url: tool, body, headers: withKey(keys.brokeKey), expectStatus: 402 },
        pid: gateway.child.pid
      }
    ]
    for (const s of scenarios) {
      if (!selected(s.name)) continue
      const probe = s.pid === gateway.child.pid ? gateway : s.probe
      const inside = s.pid !== undefined && s.pid === gateway.child.pid
        ? { pid: s.pid, databasePid, mainThread: true, metricsPort: gateway.port }
        : s.server?.child.pid !== undefined
        ? { pid: s.server.child.pid, mainThread: true }
        : undefined
      const figures = probe === undefined
        ? await measure(s.name, s.target, s.pid, inside)
        : await probed(s.name, probe, () => measure(s.name, s.target, s.pid, inside), probe === gateway)
      rows.push({ name: s.name, what: s.what, figures })
      if (s.name === "gateway-100-orgs" && selected("ceiling-httpapi")) {
        ceilingAgain = await load({ ...ceiling, connections, durationSec: seconds })
        const { rps, unexpected, statuses } = ceilingAgain
        note(`ceiling-httpapi again, right after gateway-100-orgs (closed loop, ${seconds} s): ${rps} req/s${
          unexpected > 0 ? ` (${unexpected} unexpected answers: ${JSON.stringify(statuses)})` : ""
        }.`)
      }
    }

    // RSS, sampled every second over a long closed-loop run: does it level off?
    const rssRun = async (proc: Proc, label: string) => {
      const samples: Array<number> = []
      const pid = proc.child.pid
      const sampler = setInterval(() => pid !== undefined && samples.push(rssOf(pid)), 1000)
      const run = await load({
        url: `http://127.0.0.1:${proc.port}/v1/mobile_app_search`,
        body,
        keys: keys.spreadKeys,
        connections,
        durationSec: rssSeconds,
        expectStatus: 200
      })
      clearInterval(sampler)
      const avg = (xs: ReadonlyArray<number>) => Math.round(xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length))
      const tenth = Math.max(1, Math.floor(samples.length / 6))
      note(
        `RSS over a ${rssSeconds} s closed-loop run${label} (${run.rps} req/s, ${run.requests} calls): ` +
          `first ${tenth} s average ${avg(samples.slice(0, tenth))} MB, last ${tenth} s average ${
            avg(samples.slice(-tenth))
          } MB, highest ${Math.max(...samples)} MB.`
      )
    }

    if (rssSeconds > 0 && selected("rss")) await rssRun(gateway, "")
    const after = await memoryOf(gateway.port, gateway.child.pid)
    note(`After the load (the scenarios above on one process): ${describeMemory(after)}.`)
    if (idleSeconds > 0 && selected("idle")) {
      const rest = await idleMemory(gateway)
      note(`Idle after the load (then ${idleSeconds} s without a call): ${rest.describe}.`)
    }
    await stop(gateway)

    if (selected("gateway-heap")) {
      const bounded = await startGateway(
        "gateway-heap",
        withProbes("gateway-heap", { ...env, NODE_OPTIONS: `--max-old-space-size=${boundedHeapMb}` }),
        1,
        gatewayNodeArgs,
        entry,
        onGatewayStdout
      )
      await jitWarmup(bounded.port)
      rows.push({
        name: "gateway-heap-128",
        what: `the same as gateway-100-orgs, V8 heap limited to ${boundedHeapMb} MB (\`NODE_OPTIONS=--max-old-space-size=${boundedHeapMb}\`)`,
        figures: await probed("gateway-heap-128", bounded, () =>
          measure(
            "gateway-heap-128",
            { url: `http://127.0.0.1:${bounded.port}/v1/mobile_app_search`, body, keys: keys.spreadKeys, expectStatus: 200 },
            bounded.child.pid,
            bounded.child.pid === undefined ? undefined : { pid: bounded.child.pid, databasePid, mainThread: true, metricsPort: bounded.port }
          ))
      })
      if (rssSeconds > 0) await rssRun(bounded, ` with the heap limited to ${boundedHeapMb} MB`)
      await stop(bounded)
    }

    if (selected("workers")) {
      // --gc traces the single-process gateways only: a worker's trace would have nobody to read it
      const two = await startGateway("gateway-2-workers", env, 2, gatewayNodeArgs.filter((arg) => !arg.startsWith("--trace-gc")), entry)
      await jitWarmup(two.port)
      rows.push({
        name: "gateway-2-workers",
        what: "`serve --workers 2`, calls spread over 100 orgs",
        figures: await measure(
          "gateway-2-workers",
          {
            url: `http://127.0.0.1:${two.port}/v1/mobile_app_search`,
            body,
            keys: keys.spreadKeys,
            expectStatus: 200
          },
          two.child.pid,
          two.child.pid === undefined ? undefined : { pid: two.child.pid, databasePid, mainThread: false }
        )
      })
      await stop(two)
    }
  } finally {
    stopAll()
    await sleep(300)
    await db.drop().catch(() => undefined)
    await Effect.runPromise(Scope.close(scope, Exit.void))
  }
  report(rows, notes, started, db.kind)
}

const report = (rows: ReadonlyArray<Row>, notes: ReadonlyArray<string>, started: Date, database: string) => {
  const m = machine()
  const get = (name: string) => rows.find((r) => r.name === name)?.figures
  const proxy = get("bare-proxy")
  const targets: Array<{ target: string; measured: string; met: boolean }> = []
  const gw = get("gateway")
  const spread = get("gateway-100-orgs")
  const api = get("ceiling-httpapi")
  // the targets of the current round (docs/performance.md): beside this run's own baselines
  if (proxy !== undefined && gw !== undefined) {
    const seq = gw.sequential.p50 - proxy.sequential.p50
    const sync = process.env["LEDGER_SYNC"] ?? "full"
    targets.push({ target: `sequential added p50 ≤ 1.5 ms (LEDGER_SYNC=${sync})`, measured: `${r3(seq)} ms`, met: seq <= 1.5 })
    const p99 = gw.rate.p99 - proxy.rate.p99
    targets.push({ target: `added p99 at ${fixedRate} req/s ≤ 10 ms`, measured: `${r3(p99)} ms`, met: p99 <= 10 })
    targets.push({ target: "one org (hot row) ≥ 1,000 calls/s", measured: `${gw.max.rps} calls/s`, met: gw.max.rps >= 1000 })
  }
  if (spread !== undefined && api !== undefined) {
    // against the ceiling measured before the gateway's scenarios and, when it was, again right after this one:
    // met only against the higher of the two
    const again = ceilingAgain !== undefined && ceilingAgain.requests > 0 ? ceilingAgain.rps : undefined
    const percent = (ceiling: number) => `${spread.max.rps} / ${ceiling} = ${Math.round((spread.max.rps / ceiling) * 100)}%`
    targets.push({
      target: "billed throughput, 100 orgs, ≥ 35% of the `HttpApi` ceiling",
      measured: again === undefined
        ? percent(api.max.rps)
        : `${percent(api.max.rps)}; ${percent(again)} against the ceiling measured again right after it`,
      met: spread.max.rps / Math.max(api.max.rps, again ?? 0) >= 0.35
    })
  }
  const keyed = get("gateway-idempotency")
  if (keyed !== undefined && gw !== undefined) {
    const ratio = keyed.max.rps / gw.max.rps
    targets.push({
      target: "unique `Idempotency-Key` per call ≥ 85% of the calls/s without",
      measured: `${keyed.max.rps} / ${gw.max.rps} = ${Math.round(ratio * 100)}%`,
      met: ratio >= 0.85
    })
  }
  const two = get("gateway-2-workers")
  if (two !== undefined && spread !== undefined) {
    targets.push({
      target: "throughput grows with workers (1 → 2)",
      measured: `${spread.max.rps} → ${two.max.rps} calls/s (×${(two.max.rps / spread.max.rps).toFixed(2)})`,
      met: two.max.rps > spread.max.rps
    })
  }
  const rss = Math.max(0, ...rows.filter((r) => r.name.startsWith("gateway") && r.name !== "gateway-2-workers" && r.name !== "gateway-heap-128")
    .map((r) => r.figures.rssMb ?? 0))
  // idle: after `idleSeconds` without a call when measured, otherwise just started (which holds more)
  const resting = idle ?? fresh
  if (resting !== undefined) {
    targets.push({
      target: "RSS idle ≤ 120 MB (V8 defaults)",
      measured: idle !== undefined ? `${idle.rssMb} MB (${fresh?.rssMb ?? "?"} MB 2 s after start)` : `${resting.rssMb} MB (2 s after start)`,
      met: resting.rssMb <= 120
    })
  }
  if (rss > 0) targets.push({ target: "RSS under max throughput ≤ 250 MB (V8 defaults)", measured: `${rss} MB`, met: rss <= 250 })
  const bounded = get("gateway-heap-128")?.rssMb
  if (bounded !== undefined) {
    targets.push({ target: `RSS under max throughput ≤ 200 MB (heap limited to ${boundedHeapMb} MB)`, measured: `${bounded} MB`, met: bounded <= 200 })
  }

  const line = (cells: ReadonlyArray<string | number>) => `| ${cells.join(" | ")} |`
  const md = [
    `# Benchmark, ${started.toISOString()}`,
    "",
    `${m.cores} cores (${m.cpu}), ${m.memoryGb} GB, ${m.platform}, Node ${m.node}; database: ${database} PostgreSQL; ` +
    `gateway: \`${Path.relative(root, entry)}\`.`,
    `Load generator: autocannon in its own process on the same machine; ${seconds} s per measurement after a ` +
    `${warmupSeconds} s warm-up; closed loop with ${connections} connections; fixed rate ${fixedRate} req/s.` +
    (quick ? " **Quick run: figures are indicative only.**" : ""),
    "",
    line(["scenario", "sequential p50 ms", "sequential p99 ms", "max req/s", `p50 ms @${fixedRate}/s`, `p99 ms @${fixedRate}/s`, "RSS MB", "CPU ms/call", "what"]),
    line(["---", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---"]),
    ...rows.map((r) =>
      line([
        r.name,
        r3(r.figures.sequential.p50),
        r3(r.figures.sequential.p99),
        r.figures.max.rps,
        r3(r.figures.rate.p50),
        r3(r.figures.rate.p99),
        r.figures.rssMb ?? "",
        r.figures.cpuMsPerCall ?? "",
        r.what
      ])
    ),
    "",
    ...(rows.some((r) => r.figures.closedLoop !== undefined)
      ? [
        `In the closed loop (${connections} connections): what the server's process (the gateway, or the proxy or ceiling ` +
        `measured), its main (JavaScript) thread and PostgreSQL's processes used of the ${m.cores} cores, how much of ` +
        "the time the main thread waited for a core, the CPU per call, and the ledger's statements (per second × calls in each):",
        "",
        line([
          "scenario",
          "calls/s",
          "process cores",
          "main thread cores",
          "main thread waiting",
          "PostgreSQL cores",
          "process ms/call",
          "main thread ms/call",
          "PostgreSQL ms/call",
          "statements"
        ]),
        line(["---", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---"]),
        ...rows.flatMap((r) => {
          const c = r.figures.closedLoop
          if (c === undefined) return []
          const perCall = (cores: number | undefined) => cores === undefined ? "" : r3(cores * 1000 / Math.max(1, r.figures.max.rps))
          return [line([
            r.name,
            r.figures.max.rps,
            c.processCores.toFixed(2),
            c.mainThreadCores?.toFixed(2) ?? "",
            c.mainThreadWaiting?.toFixed(2) ?? "",
            c.databaseCores?.toFixed(2) ?? "",
            perCall(c.processCores),
            perCall(c.mainThreadCores),
            perCall(c.databaseCores),
            describeStatements(c)
          ])]
        }),
        ""
      ]
      : []),
    ...(proxy !== undefined
      ? [
        "Overhead (gateway − bare proxy, same run):",
        "",
        line(["scenario", "sequential p50", `p50 @${fixedRate}/s`, `p99 @${fixedRate}/s`]),
        line(["---", "---:", "---:", "---:"]),
        ...rows.filter((r) => r.name.startsWith("gateway")).map((r) =>
          line([
            r.name,
            `+${r3(r.figures.sequential.p50 - proxy.sequential.p50)} ms`,
            `+${r3(r.figures.rate.p50 - proxy.rate.p50)} ms`,
            `+${r3(r.figures.rate.p99 - proxy.rate.p99)} ms`
          ])
        ),
        ""
      ]
      : []),
    ...(targets.length > 0
      ? [
        line(["target", "measured", "met"]),
        line(["---", "---", "---"]),
        ...targets.map((t) => line([t.target, t.measured, t.met ? "yes" : "**no**"])),
        ""
      ]
      : []),
    ...notes.map((n) => `${n}\n`)
  ].join("\n")

  Fs.mkdirSync(resultsDir, { recursive: true })
  const stamp = started.toISOString().replace(/[:.]/g, "-")
  const base = Path.join(resultsDir, `${quick ? "quick-" : ""}${stamp}`)
  Fs.writeFileSync(`${base}.md`, md)
  Fs.writeFileSync(
    `${base}.json`,
    JSON.stringify(
      {
        started: started.toISOString(),
        quick,
        machine: m,
        database,
        entry: Path.relative(root, entry),
        seconds,
        connections,
        fixedRate,
        rows,
        ...(ceilingAgain !== undefined ? { ceilingAgain } : {}),
        targets,
        notes
      },
      null,
      2
    )
  )
  process.stdout.write(`${md}\nWritten: ${Path.relative(root, base)}.md and .json\n`)

  const unclean = (x: LoadResult) => x.requests === 0 || x.unexpected > 0
  const missing = [
    ...rows.filter((r) => [r.figures.sequential, r.figures.max, r.figures.rate].some(unclean)).map((r) => r.name),
    ...(ceilingAgain !== undefined && unclean(ceilingAgain) ? ["ceiling-httpapi again"] : [])
  ]
  if (missing.length > 0) {
    console.error(`bench: scenarios without clean figures: ${missing.join(", ")}`)
    process.exitCode = 1
  }
}

main().catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
