/**
 * Real gateway processes for a test: the built `tool-gateway serve` in a child process of its own, on the
 * test file's database, until `/healthz` answers; stopped (SIGTERM, then SIGKILL after 10 s) when the
 * scope closes. Plus plain HTTP helpers that do not share a connection pool with anything.
 */
import { Effect } from "effect"
import { expect } from "vitest"
import { errorOf } from "./assert.js"
import { TestDatabaseUrl } from "./database.js"
import { books, TEST_ENCRYPTION_KEY, TestUpstreams } from "./gateway.js"
import * as Child from "node:child_process"
import * as Http from "node:http"
import * as Path from "node:path"

export const BIN = Path.resolve("dist/bundle/bin.js")

/** The test process's environment without what would point a child at another database or log setup. */
export const baseEnv = () => {
  const env: Record<string, string> = {}
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && k !== "DATABASE_URL" && k !== "GATEWAY_DATA_DIR" && k !== "REDIS_URL" && !k.startsWith("LOG_")) {
      env[k] = v
    }
  }
  return env
}

/**
 * A port for a child process to listen on. Not "bind port 0, close, hand the number out": two children
 * started at once (or by test files running side by side) could be handed the same number, and the loser
 * would die while the winner answered its health checks. Each vitest worker takes its ports from a range of
 * its own, below the kernel's ephemeral range, one after the other, skipping any that is taken.
 */
let nextPort = 20_000 + (Number(process.env["VITEST_POOL_ID"] ?? "0") % 8) * 1_000
const isFree = (port: number) =>
  Effect.async<boolean>((resume) => {
    const probe = Http.createServer()
    probe.once("error", () => resume(Effect.succeed(false)))
    probe.listen(port, "127.0.0.1", () => probe.close(() => resume(Effect.succeed(true))))
  })
export const freePort: Effect.Effect<number> = Effect.suspend(() => {
  const port = nextPort++
  return Effect.flatMap(isFree(port), (free) => (free ? Effect.succeed(port) : freePort))
})

export interface Served {
  readonly base: string
  readonly port: number
  readonly child: Child.ChildProcessWithoutNullStreams
  readonly output: () => string
}

const healthy = (base: string) => fetch(`${base}/healthz`).then((r) => r.status === 200, () => false)

/** Start `serve` on `port` (a free one by default) and wait until it answers. */
export const start = (args: ReadonlyArray<string>, env: Record<string, string>, port?: number) =>
  Effect.gen(function* () {
    const p = port ?? (yield* freePort)
    const base = `http://127.0.0.1:${p}`
    const child = Child.spawn("node", [BIN, "serve", ...args], { env: { ...baseEnv(), ...env, PORT: String(p) } })
    let output = ""
    child.stdout.on("data", (d: Buffer) => (output += d.toString()))
    child.stderr.on("data", (d: Buffer) => (output += d.toString()))
    for (let i = 0; i < 300 && !(yield* Effect.promise(() => healthy(base))); i++) {
      if (child.exitCode !== null) break
      yield* Effect.sleep("100 millis")
    }
    if (!(yield* Effect.promise(() => healthy(base)))) {
      child.kill("SIGKILL")
      return yield* Effect.dieMessage(`serve did not start:\n${output}`)
    }
    return { base, port: p, child, output: () => output } satisfies Served
  })

/** Send `signal` and wait for the exit; its code (null when killed by a signal). */
export const stop = (served: Served, signal: NodeJS.Signals = "SIGTERM") =>
  Effect.promise(() =>
    new Promise<number | null>((done) => {
      if (served.child.exitCode !== null || served.child.signalCode !== null) return done(served.child.exitCode)
      const kill = setTimeout(() => served.child.kill("SIGKILL"), 10_000)
      served.child.once("exit", (code) => {
        clearTimeout(kill)
        done(code)
      })
      served.child.kill(signal)
    })
  )

/** `start`, stopped with SIGTERM when the scope closes (if it still runs). */
export const serve = (args: ReadonlyArray<string>, env: Record<string, string>, port?: number) =>
  Effect.acquireRelease(start(args, env, port), (served) => Effect.asVoid(stop(served)))

export interface Answer {
  readonly status: number
  readonly requestId: string | null
  readonly headers: Headers
  readonly text: string
}

/** `POST` a JSON body with an API key (and optional headers) to a process. */
export const post = (base: string, path: string, key: string, body: unknown, headers: Record<string, string> = {}) =>
  Effect.promise(() =>
    fetch(`${base}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": key, ...headers },
      body: JSON.stringify(body)
    }).then(
      async (r): Promise<Answer> => ({ status: r.status, requestId: r.headers.get("x-request-id"), headers: r.headers, text: await r.text() }),
      // the process went away mid-request
      (): Answer => ({ status: 0, requestId: null, headers: new Headers(), text: "" })
    )
  )

/** The environment of a gateway process on this file's database and fake upstreams. */
export const envFor = Effect.gen(function* () {
  const { url } = yield* TestDatabaseUrl
  const u = yield* TestUpstreams
  return {
    DATABASE_URL: url,
    APPSTORE_BASE_URL: u.itunes.url,
    WEATHER_BASE_URL: u.openMeteo.url,
    GEOCODING_BASE_URL: u.openMeteo.url,
    GATEWAY_BOOTSTRAP: "false",
    LOG_LEVEL: "error",
    RATE_LIMIT_PER_SECOND: "0",
    PROVIDER_TIMEOUT_MS: "1500",
    HOLD_LEASE_MS: "1500",
    SWEEP_INTERVAL_MS: "200",
    DEV_IDENTITY: "true",
    GATEWAY_DATA_DIR: u.dataDir,
    GATEWAY_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY
  }
})

export const statuses = (answers: ReadonlyArray<Answer>) => {
  const out: Record<string, number> = {}
  for (const a of answers) {
    const key = a.status === 200 ? "200" : `${a.status} ${errorOf({ status: a.status, headers: a.headers, text: a.text, body: parse(a.text) })?.code ?? ""}`
    out[key] = (out[key] ?? 0) + 1
  }
  return out
}

export const parse = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

/** Wait until `check` holds (polling), or fail with what it last saw. */
export const eventually = <A, R>(effect: Effect.Effect<A, never, R>, check: (a: A) => boolean, timeoutMs = 15_000) =>
  Effect.gen(function* () {
    const deadline = Date.now() + timeoutMs
    let last = yield* effect
    while (!check(last) && Date.now() < deadline) {
      yield* Effect.sleep("100 millis")
      last = yield* effect
    }
    expect(check(last), JSON.stringify(last)).toBe(true)
    return last
  })

/** The books once no hold is pending any more (the sweeper voids a dead process's holds after their lease). */
export const settledBooks = (orgId: Parameters<typeof books>[0]) => eventually(books(orgId), (b) => b.pendingHolds === 0)

