/**
 * What the benchmark and the soak share: child processes (bench servers, the built gateway), a fresh
 * database on the embedded PostgreSQL or `BENCH_DATABASE_URL`, and the orgs and keys they load it with.
 */
import * as Crypto from "node:crypto"
import { Effect, Layer, Option, Redacted, Scope } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Path from "node:path"
import * as Readline from "node:readline"
import { fileURLToPath } from "node:url"
import Pg from "pg"
import { configLayer, DatabaseLive, KeyStore, Orgs, ServicesLive, startEmbedded } from "tool-gateway"

const here = Path.dirname(fileURLToPath(import.meta.url))
export const root = Path.resolve(here, "..", "..")

// ---------------------------------------------------------------------------------------------------------
// processes

export interface Proc {
  readonly name: string
  readonly child: ChildProcess.ChildProcess
  readonly port: number
}

export const children: Array<ChildProcess.ChildProcess> = []

export const stopAll = () => {
  for (const child of children) if (child.exitCode === null) child.kill("SIGTERM")
}
process.on("exit", stopAll)
process.on("SIGINT", () => {
  stopAll()
  process.exit(130)
})

export const script = (name: string) => Path.join(here, `${name}.js`)

/** Start a bench server script; resolves with the port it prints. */
export const startServer = (
  name: string,
  file: string,
  extra: ReadonlyArray<string> = [],
  /** Node's options (a probe preloaded with `--import`) and the environment's additions, for this server. */
  options: { readonly nodeArgs: ReadonlyArray<string>; readonly env: Readonly<Record<string, string>> } = { nodeArgs: [], env: {} }
) =>
  new Promise<Proc>((resolve, reject) => {
    const child = ChildProcess.spawn(process.execPath, [...options.nodeArgs, file, ...extra], {
      stdio: ["ignore", "pipe", "inherit"],
      env: { ...process.env, ...options.env }
    })
    children.push(child)
    const lines = Readline.createInterface({ input: child.stdout })
    lines.once("line", (line) => {
      const parsed: unknown = JSON.parse(line)
      const port = typeof parsed === "object" && parsed !== null && "port" in parsed ? Number(parsed.port) : NaN
      if (Number.isFinite(port)) resolve({ name, child, port })
      else reject(new Error(`${name} printed ${line}`))
    })
    child.once("exit", (code) => reject(new Error(`${name} exited with ${code}`)))
  })

export const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = Net.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

export const waitReady = async (port: number, child: ChildProcess.ChildProcess, name: string) => {
  for (let i = 0; i < 600; i++) {
    if (child.exitCode !== null) throw new Error(`${name} exited with ${child.exitCode}`)
    const ok = await fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.ok, () => false)
    if (ok) return
    await sleep(100)
  }
  throw new Error(`${name} did not become ready`)
}

/** What `npm start` runs: the bundle of the gateway's command (bundle.mjs). */
export const gatewayEntry = Path.join(root, "dist", "bundle", "bin.js")

/** The built gateway (`tool-gateway serve`, from `entry`), on the benchmark's database. */
export const startGateway = async (
  name: string,
  env: Readonly<Record<string, string>>,
  workers = 1,
  nodeArgs: ReadonlyArray<string> = [],
  entry = gatewayEntry,
  // each line the process writes to stdout (its log lines, and what V8's --trace-gc prints); ignored without it
  onStdout?: (line: string) => void
): Promise<Proc> => {
  const port = await freePort()
  const child = ChildProcess.spawn(
    process.execPath,
    [...nodeArgs, entry, "serve", ...(workers > 1 ? ["--workers", String(workers)] : [])],
    {
      stdio: ["ignore", onStdout === undefined ? "ignore" : "pipe", "inherit"],
      env: { ...process.env, ...env, PORT: String(port), HOST: "127.0.0.1", GATEWAY_BOOTSTRAP: "false" }
    }
  )
  if (onStdout !== undefined && child.stdout !== null) Readline.createInterface({ input: child.stdout }).on("line", onStdout)
  children.push(child)
  await waitReady(port, child, name)
  return { name, child, port }
}

export const stop = (proc: Proc) =>
  new Promise<void>((resolve) => {
    if (proc.child.exitCode !== null) return resolve()
    proc.child.once("exit", () => resolve())
    proc.child.kill("SIGTERM")
  })

/** Resident memory of a process and its children (cluster workers), in MB. */
export const rssOf = (pid: number): number => {
  const pids = [pid, ...childPids(pid)]
  let kb = 0
  for (const p of pids) {
    try {
      const status = Fs.readFileSync(`/proc/${p}/status`, "utf8")
      kb += Number(status.match(/VmRSS:\s+(\d+)/)?.[1] ?? "0")
    } catch {
      // the process ended
    }
  }
  return Math.round(kb / 1024)
}

/** A `/proc/.../stat` file's fields after the command name (which may hold spaces); none once the task ended. */
const statFields = (file: string): ReadonlyArray<string> => {
  try {
    return Fs.readFileSync(file, "utf8").split(") ")[1]?.split(" ") ?? []
  } catch {
    return []
  }
}

/** Clock ticks (USER_HZ, 100 a second on Linux) to ms, of the `stat` fields at `from` and the one after it. */
const ticksMs = (fields: ReadonlyArray<string>, from: number) => (Number(fields[from] ?? "0") + Number(fields[from + 1] ?? "0")) * 10

/**
 * CPU time (user + system) a process and its children (cluster workers; a PostgreSQL server's backends) have used
 * so far, in ms: the process's own, its live children's, and that of its children that ended (and were waited
 * for), which Linux adds to the parent's — a backend that closes mid-measurement does not take its time with it.
 */
export const cpuOf = (pid: number): number => {
  const own = statFields(`/proc/${pid}/stat`)
  // utime and stime are the 12th and 13th fields, the waited-for children's cutime and cstime the 14th and 15th
  let ms = ticksMs(own, 11) + ticksMs(own, 13)
  for (const child of childPids(pid)) ms += ticksMs(statFields(`/proc/${child}/stat`), 11)
  return ms
}

/** CPU time (user + system) one process's main thread has used so far, in ms: for Node, the JavaScript thread. */
export const mainThreadCpuOf = (pid: number): number => ticksMs(statFields(`/proc/${pid}/task/${pid}/stat`), 11)

/**
 * How long one process's main thread has waited, runnable, for a core so far, in ms (`schedstat`'s second field):
 * time it would have run had the machine had a core free.
 */
export const mainThreadWaitOf = (pid: number): number => {
  try {
    return Number(Fs.readFileSync(`/proc/${pid}/task/${pid}/schedstat`, "utf8").split(" ")[1] ?? "0") / 1e6
  } catch {
    return 0
  }
}

/**
 * The postmaster of the PostgreSQL server behind `url`, when it runs on this machine: its pid, read from the
 * `postmaster.pid` of the data directory the server reports (its backends and background processes are its
 * children, so `cpuOf` of it is the database's CPU). Undefined when the server cannot tell or is elsewhere.
 */
export const postmasterOf = async (url: string): Promise<number | undefined> => {
  const client = new Pg.Client({ connectionString: url })
  try {
    await client.connect()
    const result = await client.query<{ data_directory: string }>("SHOW data_directory")
    const dir = result.rows[0]?.data_directory
    if (dir === undefined) return undefined
    const pid = Number(Fs.readFileSync(Path.join(dir, "postmaster.pid"), "utf8").split("\n")[0])
    return Number.isInteger(pid) && pid > 0 && Fs.existsSync(`/proc/${pid}`) ? pid : undefined
  } catch {
    return undefined
  } finally {
    await client.end().catch(() => undefined)
  }
}

export const childPids = (pid: number): ReadonlyArray<number> => {
  try {
    return Fs.readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter((s) => s !== "")
      .map(Number)
  } catch {
    return []
  }
}

// ---------------------------------------------------------------------------------------------------------
// database

/** A fresh database for this run, on the server of `BENCH_DATABASE_URL` or on the embedded one. */
export const prepareDatabase = async (scope: Scope.CloseableScope) => {
  const external = process.env["BENCH_DATABASE_URL"]
  const serverUrl = external !== undefined && external !== ""
    ? external
    : Redacted.value(
      (await Effect.runPromise(Scope.extend(startEmbedded(Path.join(root, "bench", ".data")), scope))).url
    )
  const name = `bench_${Date.now().toString(36)}`
  const admin = new Pg.Client({ connectionString: serverUrl })
  await admin.connect()
  await admin.query(`CREATE DATABASE ${name}`)
  await admin.end()
  const url = new URL(serverUrl)
  url.pathname = `/${name}`
  const drop = async () => {
    const client = new Pg.Client({ connectionString: serverUrl })
    await client.connect()
    await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
    await client.end()
  }
  return { url: url.toString(), kind: external !== undefined && external !== "" ? "server" : "embedded", drop }
}

export interface Provisioned {
  readonly hotKey: string
  readonly spreadKeys: ReadonlyArray<string>
  readonly brokeKey: string
}

/** Orgs and keys, through the gateway's own services. */
export const provision = (url: string): Promise<Provisioned> =>
  Effect.runPromise(
    Effect.gen(function* () {
      const orgs = yield* Orgs
      const keys = yield* KeyStore
      const credits = 1_000_000_000_000
      const keyFor = (orgId: Parameters<typeof keys.create>[0], name: string) =>
        Effect.map(Effect.orDie(keys.create(orgId, { name })), (k) => Redacted.value(k.key))
      const hot = yield* orgs.create({ name: "bench-hot", credits })
      const hotKey = yield* keyFor(hot.id, "hot")
      const spreadKeys = yield* Effect.forEach(
        Array.from({ length: 100 }, (_, i) => i),
        (i) => Effect.flatMap(orgs.create({ name: `bench-${i}`, credits }), (org) => keyFor(org.id, `spread-${i}`)),
        { concurrency: 10 }
      )
      const broke = yield* orgs.create({ name: "bench-broke", credits: 0 })
      const brokeKey = yield* keyFor(broke.id, "broke")
      return { hotKey, spreadKeys, brokeKey }
    }).pipe(
      Effect.provide(
        ServicesLive.pipe(
          Layer.provideMerge(DatabaseLive),
          Layer.provideMerge(configLayer({
            server: { databaseUrl: Option.some(Redacted.make(url)) },
            // provisioning seals no connection; the key only satisfies the rule for DATABASE_URL
            identity: { encryptionKey: Option.some(Redacted.make(Crypto.randomBytes(32).toString("base64"))) }
          }))
        )
      )
    )
  )

