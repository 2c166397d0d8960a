/**
 * What a tool call does not use is not loaded: a served gateway that answers tool calls, /metrics and
 * /healthz has not loaded the `/docs` page's bundle (Scalar, several MB in memory), Swagger UI, the OTLP
 * exporter and its HTTP client (undici), the Redis client, the page converter's pool (piscina) or the MCP SDK,
 * nor read the dashboard's files; asking for `/docs` loads Scalar then, and `/dashboard` reads its files. The
 * Prometheus exporter waits for the first scrape of /metrics, which still reports the calls made before it.
 * And an idle gateway does no work: nothing polls while no call comes.
 * Observed the only way a module load can be: a Node module hook in the child process that writes every
 * module it resolves to a file. The served gateway is the bundle `npm start` runs (bundle.mjs): a file of it stands
 * for the modules it holds, as dist/bundle/modules.json lists them.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { gatewayLayer, givenOrg } from "./support/gateway.js"
import { envFor, post, serve } from "./support/processes.js"

/** A module hook (node:module `register`) that appends each resolved URL to `log`. */
const hooks = (dir: string, log: string) => {
  const hook = Path.join(dir, "hooks.mjs")
  Fs.writeFileSync(hook, `import { appendFileSync } from "node:fs"
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context)
  appendFileSync(${JSON.stringify(log)}, resolved.url + "\\n")
  return resolved
}
`)
  const register = Path.join(dir, "register.mjs")
  Fs.writeFileSync(register, `import { register } from "node:module"\nregister(${JSON.stringify(`file://${hook}`)})\n`)
  return register
}

/**
 * A preload that appends each path the process reads with `fs/promises.readFile` to `log` (the gateway imports
 * `node:fs/promises`; `syncBuiltinESMExports` gives its importers the wrapped function).
 */
const reads = (dir: string, log: string) => {
  const file = Path.join(dir, "reads.mjs")
  Fs.writeFileSync(file, `import { appendFileSync } from "node:fs"
import { createRequire, syncBuiltinESMExports } from "node:module"
const fsp = createRequire(import.meta.url)("node:fs/promises")
const readFile = fsp.readFile
fsp.readFile = function (path, ...rest) {
  appendFileSync(${JSON.stringify(log)}, String(path) + "\\n")
  return readFile.call(this, path, ...rest)
}
syncBuiltinESMExports()
`)
  return file
}

const DASHBOARD_FILES = /\/dist\/dashboard\//

const BUNDLE = Path.resolve("dist/bundle")
const bundled: Readonly<Record<string, ReadonlyArray<string>>> = JSON.parse(Fs.readFileSync(Path.join(BUNDLE, "modules.json"), "utf8"))

/** The modules the gateway has loaded: each URL the hook wrote, a file of the bundle replaced by its modules. */
const loadedModules = (log: string) =>
  Fs.readFileSync(log, "utf8").split("\n").flatMap((url) => {
    const file = url.startsWith(`file://${BUNDLE}/`) ? url.slice(`file://${BUNDLE}/`.length) : undefined
    if (file === undefined) return [url]
    const modules = bundled[file]
    if (modules === undefined) throw new Error(`${file} is not in dist/bundle/modules.json`)
    return modules.map((module) => `file://${Path.resolve(module)}`)
  }).join("\n")

const SCALAR = /@effect\/platform\/dist\/esm\/HttpApiScalar\.js/

/** OpenTelemetry's Prometheus exporter: loaded by the first scrape of /metrics. */
const METRICS_EXPORTER = /\/node_modules\/@opentelemetry\/exporter-prometheus\//

const NOT_FOR_A_TOOL_CALL = [
  SCALAR,
  /@effect\/platform\/dist\/esm\/HttpApiSwagger\.js/,
  /@effect\/opentelemetry\/dist\/esm\/OtlpTracer\.js/,
  /\/node_modules\/ioredis\//,
  /\/node_modules\/@modelcontextprotocol\//,
  // a second HTTP client (the OTLP exporter's): the provider client is Node's own
  /\/node_modules\/undici\//,
  // the page converter's thread pool, made on the first page read
  /\/node_modules\/piscina\//
]

layer(gatewayLayer(), { excludeTestServices: true })("modules loaded on demand", (it) => {
  it.effect("a gateway that serves tool calls and /metrics has not loaded /docs, OTLP, Redis or MCP nor read the dashboard; /metrics loads its exporter, /docs Scalar and /dashboard its files when asked", () =>
    Effect.gen(function* () {
      const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "lazy-"))
      const log = Path.join(dir, "modules.log")
      const env = yield* envFor
      const readLog = Path.join(dir, "reads.log")
      Fs.writeFileSync(readLog, "")
      const served = yield* serve([], { ...env, NODE_OPTIONS: `--import=${hooks(dir, log)} --import=${reads(dir, readLog)}` })
      const { key } = yield* givenOrg({ credits: 10 })
      const answer = yield* post(served.base, "/v1/weather", key, { q: "Berlin" })
      expect(answer.status).toBe(200)
      // the hook sees the modules (a check that it works at all)
      expect(loadedModules(log)).toMatch(/\/dist\/services\/Gateway\.js/)
      // nobody scraped yet: no metrics exporter; the first scrape loads it and reports the call made before
      expect(loadedModules(log)).not.toMatch(METRICS_EXPORTER)
      const metrics = yield* Effect.promise(() => fetch(`${served.base}/metrics`).then(async (r) => ({ status: r.status, text: await r.text() })))
      expect(metrics.status).toBe(200)
      expect(metrics.text).toMatch(/^tool_gateway_tool_calls_total\{[^}]*tool="weather"[^}]*\} 1$/m)
      const loaded = loadedModules(log)
      expect(loaded).toMatch(METRICS_EXPORTER)
      for (const module of NOT_FOR_A_TOOL_CALL) expect(loaded).not.toMatch(module)
      // the dashboard's files are read when the dashboard is first asked for, not by a process serving tool calls
      expect(Fs.readFileSync(readLog, "utf8")).not.toMatch(DASHBOARD_FILES)
      const page = yield* Effect.promise(() => fetch(`${served.base}/dashboard`).then(async (r) => ({ status: r.status, text: await r.text() })))
      expect(page.status).toBe(200)
      expect(page.text).toContain("<html")
      expect(Fs.readFileSync(readLog, "utf8")).toMatch(DASHBOARD_FILES)
      const docs = yield* Effect.promise(() => fetch(`${served.base}/docs`).then(async (r) => ({ status: r.status, text: await r.text() })))
      expect(docs.status).toBe(200)
      expect(docs.text).toContain("api-reference")
      expect(loadedModules(log)).toMatch(SCALAR)
    }).pipe(Effect.scoped), 60_000)
})

/** Times the process's main thread has blocked and been woken (`voluntary_ctxt_switches` of its leader). */
const wakeUps = (pid: number) => {
  const line = Fs.readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("voluntary_ctxt_switches:"))
  return Number(line?.split(/\s+/)[1] ?? "NaN")
}

layer(gatewayLayer(), { excludeTestServices: true })("an idle gateway", (it) => {
  it.effect.skipIf(!Fs.existsSync("/proc/self/status"))("wakes for nothing: after a call, its usage written, no timer polls", () =>
    Effect.gen(function* () {
      const env = yield* envFor
      // the sweeper at its default interval (the test environment sweeps every 200 ms)
      const served = yield* serve([], { ...env, SWEEP_INTERVAL_MS: "15000" })
      const { key } = yield* givenOrg({ credits: 10 })
      const answer = yield* post(served.base, "/v1/weather", key, { q: "Berlin" })
      expect(answer.status).toBe(200)
      // its usage record is written within 100 ms of the call, by the process itself (nothing read it)
      yield* Effect.sleep("1 second")
      const sql = yield* SqlClient.SqlClient
      const written = yield* sql<{ readonly n: number }>`SELECT count(*)::int AS n FROM usage WHERE request_id = ${answer.requestId ?? ""}`
      expect(written[0]?.n).toBe(1)
      const pid = served.child.pid ?? 0
      const before = wakeUps(pid)
      yield* Effect.sleep("3 seconds")
      const woken = wakeUps(pid) - before
      // a writer polling every 100 ms woke it 30 times and more; idle, it wakes a few times at most
      expect(woken).toBeLessThan(15)
    }).pipe(Effect.scoped), 30_000)
})
