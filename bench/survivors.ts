/**
 * `npm run bench -- --survivors`: a probe preloaded into the gateway (`node --import`), for the measurement only.
 * It samples the gateway's allocations with the inspector's sampling heap profiler, leaving out what scavenges
 * collect (`includeObjectsCollectedByMinorGC: false`): what remains is what no scavenge collected, that is, what
 * was promoted to the old generation (or was still live when the sampling stopped). That is what fills the old
 * generation under load, and what its collections have to mark.
 *
 * With `BENCH_SURVIVORS_ALL=1` (`npm run bench -- --allocations`) it keeps what scavenges collect too: then it
 * reports everything a call allocates, by site (the per-call allocation the performance notes cite).
 *
 * The first `SIGUSR2` starts the sampling, the next stops it and writes `BENCH_SURVIVORS_OUT`: the bytes sampled
 * by allocation site (function, file and line) and the responses finished meanwhile; and so on, in pairs. Each
 * signal writes the file, so that the runner can wait for it (see `survivorsReport` in run.ts).
 */
import * as DiagnosticsChannel from "node:diagnostics_channel"
import * as Inspector from "node:inspector"
import { writeProbeFile } from "./probeFile.js"

export interface Survivors {
  /** Whether this file closes a sampling (false: the signal started one). */
  readonly sampled: boolean
  /** Whether what scavenges collected was sampled too (`--allocations`): then the sites are every allocation. */
  readonly all: boolean
  /** Responses finished while sampling. */
  readonly responses: number
  /** Bytes sampled, by allocation site, largest first. */
  readonly sites: ReadonlyArray<readonly [string, number]>
}

const out = process.env["BENCH_SURVIVORS_OUT"]
const all = process.env["BENCH_SURVIVORS_ALL"] === "1"

const write = (file: string, survivors: Survivors) => writeProbeFile(file, survivors)

/** Self bytes (the sampled allocations' sizes) by allocation site, over the profile's tree. */
const bySite = (profile: Inspector.HeapProfiler.SamplingHeapProfile): Array<readonly [string, number]> => {
  const sites = new Map<string, number>()
  const visit = (node: Inspector.HeapProfiler.SamplingHeapProfileNode) => {
    const bytes = node.selfSize
    if (bytes > 0) {
      const frame = node.callFrame
      const file = frame.url.replace(/^.*\/node_modules\//, "").replace(/^file:\/\/.*?\/(dist|src)\//, "$1/")
      const site = `${frame.functionName === "" ? "(anonymous)" : frame.functionName} ${file}:${frame.lineNumber + 1}`
      sites.set(site, (sites.get(site) ?? 0) + bytes)
    }
    for (const child of node.children) visit(child)
  }
  visit(profile.head)
  return [...sites.entries()].sort((a, b) => b[1] - a[1])
}

if (out !== undefined) {
  const session = new Inspector.Session()
  session.connect()
  let responses = 0
  DiagnosticsChannel.subscribe("http.server.response.finish", () => {
    responses++
  })
  let sampling = false
  // the two options are V8's (Chrome 109 and later); Node's types for the method do not list them yet
  const start = { samplingInterval: 1024, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: all }
  process.on("SIGUSR2", () => {
    if (!sampling) {
      sampling = true
      responses = 0
      session.post("HeapProfiler.startSampling", start, () => write(out, { sampled: false, all, responses: 0, sites: [] }))
      return
    }
    sampling = false
    const finished = responses
    session.post("HeapProfiler.stopSampling", (error, result) => {
      write(out, { sampled: error === null, all, responses: finished, sites: error === null ? bySite(result.profile) : [] })
    })
  })
}
