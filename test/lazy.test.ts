/**
 * What a tool call does not use is not loaded: a served gateway that answers tool calls, /metrics and
 * /healthz has not loaded the `/docs` page's bundle (Scalar, several MB in memory), Swagger UI, the OTLP
 * exporter and its HTTP client, the Redis client, or the MCP SDK; asking for `/docs` loads Scalar then. The
 * Prometheus exporter waits for the first scrape of /metrics, which still reports the calls made before it.
 * Observed the only way a module load can be: a Node module hook in the child process that writes every
 * module it resolves to a file.
 */
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

const SCALAR = /@effect\/platform\/dist\/esm\/HttpApiScalar\.js/

/** OpenTelemetry's Prometheus exporter: loaded by the first scrape of /metrics. */
const METRICS_EXPORTER = /\/node_modules\/@opentelemetry\/exporter-prometheus\//

const NOT_FOR_A_TOOL_CALL = [
  SCALAR,
  /@effect\/platform\/dist\/esm\/HttpApiSwagger\.js/,
  /@effect\/opentelemetry\/dist\/esm\/OtlpTracer\.js/,
  /\/node_modules\/ioredis\//,
  /\/node_modules\/@modelcontextprotocol\//
]

layer(gatewayLayer(), { excludeTestServices: true })("modules loaded on demand", (it) => {
  it.effect("a gateway that serves tool calls and /metrics has not loaded /docs, OTLP, Redis or MCP; /metrics loads its exporter and /docs Scalar when asked", () =>
    Effect.gen(function* () {
      const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "lazy-"))
      const log = Path.join(dir, "modules.log")
      const env = yield* envFor
      const served = yield* serve([], { ...env, NODE_OPTIONS: `--import=${hooks(dir, log)}` })
      const { key } = yield* givenOrg({ credits: 10 })
      const answer = yield* post(served.base, "/v1/weather", key, { q: "Berlin" })
      expect(answer.status).toBe(200)
      // the hook sees the modules (a check that it works at all)
      expect(Fs.readFileSync(log, "utf8")).toMatch(/\/dist\/services\/Gateway\.js/)
      // nobody scraped yet: no metrics exporter; the first scrape loads it and reports the call made before
      expect(Fs.readFileSync(log, "utf8")).not.toMatch(METRICS_EXPORTER)
      const metrics = yield* Effect.promise(() => fetch(`${served.base}/metrics`).then(async (r) => ({ status: r.status, text: await r.text() })))
      expect(metrics.status).toBe(200)
      expect(metrics.text).toMatch(/^tool_gateway_tool_calls_total\{[^}]*tool="weather"[^}]*\} 1$/m)
      const loaded = Fs.readFileSync(log, "utf8")
      expect(loaded).toMatch(METRICS_EXPORTER)
      for (const module of NOT_FOR_A_TOOL_CALL) expect(loaded).not.toMatch(module)
      const docs = yield* Effect.promise(() => fetch(`${served.base}/docs`).then(async (r) => ({ status: r.status, text: await r.text() })))
      expect(docs.status).toBe(200)
      expect(docs.text).toContain("api-reference")
      expect(Fs.readFileSync(log, "utf8")).toMatch(SCALAR)
    }).pipe(Effect.scoped), 60_000)
})
