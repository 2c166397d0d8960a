/**
 * The embedded PostgreSQL's life across processes: one process owns a data directory's server at a time (a second
 * `serve` is refused, the first serves on); a server whose owner was killed is taken over and stopped; a stale
 * `postmaster.pid`, an initdb stopped part-way and a comma in the path do not stop a start; a refused login and a
 * failing start are said at once, from this start's log; Ctrl-C during the start stops it and its server.
 * Each test starts from a copy of one data directory initialised once for the file.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Schema } from "effect"
import * as Child from "node:child_process"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs/promises"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Readline from "node:readline"
import type { Readable } from "node:stream"
import { startEmbedded } from "../src/db/embedded.js"
import { BIN, baseEnv, freePort } from "./support/processes.js"

interface Run {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** The built command, to its end (killed after `timeout` ms). */
const run = (args: ReadonlyArray<string>, dataDir: string, timeout = 30_000, env: Record<string, string> = {}) =>
  Effect.async<Run>((resume) => {
    Child.execFile("node", [BIN, ...args], { env: { ...baseEnv(), ...env, GATEWAY_DATA_DIR: dataDir }, timeout, killSignal: "SIGKILL" }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === "number" ? error.code : null
      resume(Effect.succeed({ code, stdout, stderr }))
    })
  })

const root = Fs.mkdtemp(Path.join(Os.tmpdir(), "tool-gateway-lifecycle-")).then(async (dir) => {
  await Fs.chmod(dir, 0o755) // as root, the database runs as postgres, which must enter it
  return dir
})
afterAll(() => root.then((dir) => Fs.rm(dir, { recursive: true, force: true })))

/** A data directory initialised and migrated once (by a command, which stops its server when it ends). */
const template = root.then(async (dir) => {
  const made = Path.join(dir, "template")
  const result = await Effect.runPromise(run(["org", "list", "--json"], made, 60_000))
  if (result.code !== 0) throw new Error(`the template data directory could not be made: ${result.stderr}`)
  return made
})

/** A pid no process has: above the largest Linux gives (`pid_max` is at most 2^22). */
const DEAD_PID = 4_194_305

const exists = (path: string) => Fs.access(path).then(() => true, () => false)

/** Whether `pid` runs (a zombie does not). */
const running = async (pid: number) => {
  const stat = await Fs.readFile(`/proc/${pid}/stat`, "utf8").catch(() => undefined)
  return stat !== undefined && stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z"
}

const postmasterPid = (dataDir: string) =>
  Fs.readFile(Path.join(dataDir, "pg", "postmaster.pid"), "utf8").then((text) => Number(text.split("\n")[0]), () => undefined)

const until = (condition: () => Promise<boolean>, ms: number) =>
  Effect.promise(async () => {
    for (let waited = 0; waited < ms; waited += 50) {
      if (await condition()) return true
      await new Promise((done) => setTimeout(done, 50))
    }
    return condition()
  })

/**
 * A copy of the template (`cp -a`: as root, `pg` stays the postgres user's), removed at the end of the scope with
 * whatever still runs on it: the postmaster its `postmaster.pid` names, if that is one for this directory.
 */
const dataDirectory = (name: string) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const dir = Path.join(await root, name)
      Child.execFileSync("cp", ["-a", await template, dir])
      return dir
    }),
    (dir) =>
      Effect.promise(async () => {
        const pid = await postmasterPid(dir)
        const cmdline = pid === undefined ? "" : await Fs.readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "")
        if (pid !== undefined && cmdline.includes(Path.join(dir, "pg"))) {
          process.kill(pid, "SIGKILL")
          await Effect.runPromise(until(async () => !(await running(pid)), 10_000))
        }
        await Fs.rm(dir, { recursive: true, force: true })
      })
  )

/** `serve` in a process group of its own (as a terminal runs it), until `/readyz` answers 200; killed with its group at the end. */
const serve = (dataDir: string) =>
  Effect.gen(function* () {
    const port = yield* freePort
    const child = yield* Effect.acquireRelease(
      Effect.sync(() =>
        Child.spawn("node", [BIN, "serve"], { env: { ...baseEnv(), GATEWAY_DATA_DIR: dataDir, PORT: String(port), LOG_FORMAT: "pretty" }, detached: true })
      ),
      (child) =>
        Effect.sync(() => {
          if (child.exitCode === null && child.signalCode === null && child.pid !== undefined) process.kill(-child.pid, "SIGKILL")
        })
    )
    let output = ""
    child.stdout.on("data", (d: Buffer) => (output += d.toString()))
    child.stderr.on("data", (d: Buffer) => (output += d.toString()))
    const base = `http://127.0.0.1:${port}`
    const ready = () => fetch(`${base}/readyz`).then((r) => r.status === 200, () => false)
    yield* until(async () => child.exitCode !== null || (await ready()), 30_000)
    expect(child.exitCode, output).toBeNull()
    return { child, base, ready, pid: child.pid ?? 0, output: () => output }
  })

const exited = (child: Child.ChildProcess) =>
  Effect.async<number | null>((resume) => {
    if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.succeed(child.exitCode))
    child.once("exit", (code) => resume(Effect.succeed(code)))
  })

describe("the embedded database's owner", () => {
  it.live("a second serve on the data directory is refused at once with one line; the first serves on and stops its database", () =>
    Effect.gen(function* () {
      const dir = yield* dataDirectory("second-serve")
      const first = yield* serve(dir)
      const second = yield* run(["serve"], dir, 30_000, { PORT: String(yield* freePort) })
      expect(second.code, second.stderr).toBe(2)
      expect(second.stderr.trim().split("\n")).toEqual([
        `embedded PostgreSQL: another gateway (pid ${first.pid}) serves ${dir}: stop it, or use serve --workers`
      ])
      // a command still joins the first's database
      const listed = yield* run(["org", "list", "--json"], dir)
      expect(listed.code, listed.stderr).toBe(0)
      expect(yield* Effect.promise(first.ready)).toBe(true)
      process.kill(first.pid, "SIGTERM")
      expect(yield* exited(first.child)).toBe(0)
      expect(yield* Effect.promise(() => exists(Path.join(dir, "pg", "postmaster.pid")))).toBe(false)
    }).pipe(Effect.scoped), 60_000)

  it.live("an owner file naming this process's own pid, from a process that was killed (a container restarted: pid 1 again), does not refuse the start", () =>
    Effect.gen(function* () {
      const dir = yield* dataDirectory("own-pid")
      // what a killed gateway left: its pid (the one this process has now) and its start time (not this process's)
      yield* Effect.promise(() => Fs.writeFile(Path.join(dir, "pg-owner"), `${process.pid} 1 server\n`))
      const started = yield* Effect.exit(Effect.scoped(Effect.gen(function* () {
        const db = yield* startEmbedded(dir, { role: "server", ownProcessGroup: false })
        expect(db.owned).toBe(true)
        return (yield* Effect.promise(() => Fs.readFile(Path.join(dir, "pg-owner"), "utf8"))).split(" ")[1]
      })))
      expect(Exit.isSuccess(started), String(started)).toBe(true)
      // the file named this process once it owned the directory (its own start time), and is let go after
      if (Exit.isSuccess(started)) expect(started.value).not.toBe("1")
      expect(yield* Effect.promise(() => exists(Path.join(dir, "pg-owner")))).toBe(false)
    }).pipe(Effect.scoped), 60_000)

  it.live("two processes that find a killed owner's file at the same instant: one owns the directory, the other sees it live", () =>
    Effect.gen(function* () {
      // sixty data directories, each left by a killed owner (a pid that runs no process); two processes claim them
      // each at the same instant — without a lock each could remove the other's new owner file
      const base = yield* Effect.promise(async () => Fs.mkdtemp(Path.join(await root, "claims-")))
      const dirs = yield* Effect.promise(() =>
        Promise.all(Array.from({ length: 60 }, async (_, i) => {
          const dir = Path.join(base, `claimed-${i}`)
          await Fs.mkdir(dir)
          await Fs.writeFile(Path.join(dir, "pg-owner"), `${DEAD_PID} 1 server\n`)
          return dir
        }))
      )
      // both start their claims 2 s from now (time for node to start), one directory every 25 ms
      const at = String(performance.timeOrigin + performance.now() + 2_000)
      const claimer = Effect.acquireRelease(
        Effect.sync(() => Child.spawn("node", [Path.resolve("test/support/claim-data-dirs.mjs"), at, "25", ...dirs], { stdio: ["pipe", "pipe", "inherit"] })),
        (child) => Effect.sync(() => child.kill("SIGKILL"))
      )
      const claimed = (child: { readonly stdout: Readable }) =>
        Effect.promise(async () => {
          const line = await Readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]().next()
          return Schema.decodeUnknownSync(Schema.parseJson(Schema.Array(Schema.String)))(line.value)
        })
      const [one, two] = [yield* claimer, yield* claimer]
      const [first, second] = yield* Effect.all([claimed(one), claimed(two)], { concurrency: 2 })
      one.stdin.end()
      two.stdin.end()
      expect(first.filter((dir) => second.includes(dir))).toEqual([])
      expect(first.length + second.length).toBe(dirs.length)
    }).pipe(Effect.scoped), 60_000)

  it.live("a process waiting for the owner's decision lock, which another holds, stops at once on Ctrl-C", () =>
    Effect.gen(function* () {
      const dir = yield* Effect.promise(async () => Fs.mkdtemp(Path.join(await root, "locked-")))
      // the lock as the gateway names it (docs/operations.md), held by this process for the test
      const real = yield* Effect.promise(() => Fs.realpath(dir))
      const name = `\0tool-gateway-owner-${Crypto.createHash("sha256").update(real).digest("hex").slice(0, 40)}`
      yield* Effect.acquireRelease(
        Effect.async<Net.Server>((resume) => {
          const server = Net.createServer()
          server.listen({ path: name }, () => resume(Effect.succeed(server)))
        }),
        (server) => Effect.sync(() => server.close())
      )
      const child = yield* Effect.acquireRelease(
        Effect.sync(() => Child.spawn("node", [BIN, "org", "list"], { env: { ...baseEnv(), GATEWAY_DATA_DIR: dir }, stdio: ["ignore", "ignore", "pipe"] })),
        (child) => Effect.sync(() => child.kill("SIGKILL"))
      )
      yield* Effect.sleep("1500 millis")
      expect(child.exitCode).toBeNull() // it waits for the lock
      child.kill("SIGINT")
      // the wait between its tries is interruptible (it was one uninterruptible acquisition: no signal, and no timeout, ended it)
      expect(yield* until(async () => child.exitCode !== null, 3_000)).toBe(true)
      expect(child.exitCode).toBe(130)
    }).pipe(Effect.scoped), 30_000)

  it.live("the database of a killed gateway is taken over by the next, said at WARN, and stopped when it exits", () =>
    Effect.gen(function* () {
      const dir = yield* dataDirectory("taken-over")
      const killed = yield* serve(dir)
      const pid = yield* Effect.promise(() => postmasterPid(dir))
      process.kill(killed.pid, "SIGKILL") // the gateway alone: its database runs on in a group of its own
      yield* exited(killed.child)
      expect(pid !== undefined && (yield* Effect.promise(() => running(pid)))).toBe(true)

      const next = yield* serve(dir)
      expect(next.output()).toContain(`WARN`)
      expect(next.output()).toContain(`The embedded PostgreSQL in ${dir}/pg (pid ${pid}) was left running by a process that is gone`)
      process.kill(next.pid, "SIGTERM")
      expect(yield* exited(next.child)).toBe(0)
      expect(yield* until(async () => pid !== undefined && !(await running(pid)), 10_000)).toBe(true)
      expect(yield* Effect.promise(() => exists(Path.join(dir, "pg", "postmaster.pid")))).toBe(false)
    }).pipe(Effect.scoped), 60_000)
})

describe("starting the embedded database", () => {
  it.live("a postmaster.pid naming a live process that is no postgres (its pid reused) does not stop the start", () =>
    Effect.gen(function* () {
      const dir = yield* dataDirectory("stale-pid")
      const pg = Path.join(dir, "pg")
      const lockFile = Path.join(pg, "postmaster.pid")
      const owner = yield* Effect.promise(() => Fs.stat(pg))
      // another process of the user the database runs as (PostgreSQL takes another user's pid for a dead one)
      const other = yield* Effect.acquireRelease(
        Effect.sync(() => Child.spawn("sleep", ["60"], { stdio: "ignore", ...(process.getuid?.() === 0 ? { uid: owner.uid, gid: owner.gid } : {}) })),
        (child) => Effect.sync(() => child.kill("SIGKILL"))
      )
      // what a postmaster killed before a reboot leaves: its pid now that process's, its port nobody's
      const port = yield* freePort
      yield* Effect.promise(async () => {
        await Fs.writeFile(lockFile, `${other.pid}\n${pg}\n1700000000\n${port}\n${pg}\nlocalhost\n`, { mode: 0o600 })
        await Fs.chown(lockFile, owner.uid, owner.gid)
      })
      const listed = yield* run(["org", "list", "--json"], dir)
      expect(listed.code, listed.stderr).toBe(0)
      expect(JSON.parse(listed.stdout)).toEqual([])
    }).pipe(Effect.scoped), 60_000)

  it.live("an initdb stopped part-way (the process group killed) is made again by the next start", () =>
    Effect.gen(function* () {
      const dir = Path.join(yield* Effect.promise(() => root), "interrupted-initdb")
      yield* Effect.addFinalizer(() => Effect.promise(() => Fs.rm(dir, { recursive: true, force: true })))
      yield* Effect.promise(() => Fs.mkdir(dir))
      const first = Child.spawn("node", [BIN, "org", "list", "--json"], { env: { ...baseEnv(), GATEWAY_DATA_DIR: dir }, detached: true, stdio: "ignore" })
      // initdb has begun: PG_VERSION is among the first files it writes, long before its end
      const begun = async () => {
        for (const name of await Fs.readdir(dir).catch(() => [])) {
          if (await exists(Path.join(dir, name, "PG_VERSION"))) return true
        }
        return false
      }
      const caught = yield* until(begun, 20_000)
      if (first.pid !== undefined) process.kill(-first.pid, "SIGKILL")
      yield* exited(first)
      expect(caught).toBe(true)

      const listed = yield* run(["org", "list", "--json"], dir)
      expect(listed.code, listed.stderr).toBe(0)
      expect(JSON.parse(listed.stdout)).toEqual([])
      // what the stopped initdb left is gone
      expect((yield* Effect.promise(() => Fs.readdir(dir))).filter((name) => name.startsWith("pg.init-"))).toEqual([])
    }).pipe(Effect.scoped), 60_000)

  it.live("a data directory whose path has a comma in it", () =>
    Effect.gen(function* () {
      const dir = yield* dataDirectory("with,comma")
      const listed = yield* run(["org", "list", "--json"], dir)
      expect(listed.code, listed.stderr).toBe(0)
      expect(JSON.parse(listed.stdout)).toEqual([])
    }).pipe(Effect.scoped), 60_000)

  it.live("a login the server refuses stops the start at once, quoting the server", () =>
    Effect.gen(function* () {
      const dir = yield* dataDirectory("wrong-password")
      yield* Effect.promise(() => Fs.writeFile(Path.join(dir, "pg-password"), "not-the-password\n"))
      const refused = yield* run(["org", "list"], dir, 20_000)
      expect(refused.code).toBe(2)
      expect(refused.stderr).toContain(`password authentication failed for user "postgres" (28P01)`)
    }).pipe(Effect.scoped), 60_000)

  it.live("a server that cannot start is quoted from what this start wrote to the log, not an earlier one, however long the log", () =>
    Effect.gen(function* () {
      const dir = yield* dataDirectory("bad-setting")
      yield* Effect.promise(async () => {
        // a log of years: 3 GiB (sparse), more than a whole read of it may take
        await Fs.truncate(Path.join(dir, "postgres.log"), 3 * 2 ** 30)
        await Fs.appendFile(Path.join(dir, "postgres.log"), "2026-01-01 00:00:00.000 UTC [1] FATAL:  an earlier start's failure\n")
        await Fs.appendFile(Path.join(dir, "pg", "postgresql.conf"), "max_connections = 'many'\n")
      })
      const refused = yield* run(["org", "list"], dir, 20_000)
      expect(refused.code).toBe(2)
      expect(refused.stderr).toContain(`invalid value for parameter "max_connections": "many"`)
      expect(refused.stderr).not.toContain("an earlier start's failure")
    }).pipe(Effect.scoped), 60_000)

  it.live("SIGINT while the database starts stops the start and the database at once", () =>
    Effect.gen(function* () {
      const dir = yield* dataDirectory("interrupted-start")
      // every login waits 3 s before its authentication: the server is slow to take the gateway's
      yield* Effect.promise(() => Fs.appendFile(Path.join(dir, "pg", "postgresql.conf"), "pre_auth_delay = 3\n"))
      const port = yield* freePort
      const child = yield* Effect.acquireRelease(
        Effect.sync(() => Child.spawn("node", [BIN, "serve"], { env: { ...baseEnv(), GATEWAY_DATA_DIR: dir, PORT: String(port) }, detached: true, stdio: "ignore" })),
        (child) =>
          Effect.sync(() => {
            if (child.exitCode === null && child.signalCode === null && child.pid !== undefined) process.kill(-child.pid, "SIGKILL")
          })
      )
      expect(yield* until(async () => (await postmasterPid(dir)) !== undefined, 20_000)).toBe(true)
      const pid = yield* Effect.promise(() => postmasterPid(dir))
      process.kill(child.pid ?? 0, "SIGINT")
      // the start is stopped while logins wait in the pre_auth_delay (3 s): the process and its database end, whenever that is
      expect(yield* until(async () => child.exitCode !== null || child.signalCode !== null, 10_000)).toBe(true)
      expect(pid !== undefined && (yield* Effect.promise(() => running(pid)))).toBe(false)
    }).pipe(Effect.scoped), 60_000)
})
