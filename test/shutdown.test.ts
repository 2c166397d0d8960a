/**
 * Stopping the gateway loses nothing, however it is stopped: Ctrl-C in a terminal (SIGINT to the whole
 * process group), SIGTERM to the server process, and both with `serve --workers 2` — on the embedded
 * database, which the gateway runs in a process group of its own and stops last. Each time, calls are in
 * flight at a slow provider: every one is answered 200, nothing stays held, there is a usage record for each
 * call, and the process exits 0.
 */
import { afterAll, describe, expect, it, layer } from "@effect/vitest"
import { Effect, Redacted, Schema } from "effect"
import * as Child from "node:child_process"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"
import Pg from "pg"
import { startEmbedded } from "../src/db/embedded.js"
import { gatewayLayer, TestUpstreams } from "./support/gateway.js"
import { BIN, baseEnv, eventually, freePort, post } from "./support/processes.js"

const CALLS = 16

const sharedDataDir = Fs.mkdtemp(Path.join(Os.tmpdir(), "tool-gateway-stop-")).then(async (dir) => {
  await Fs.chmod(dir, 0o755) // as root, the database runs as postgres, which must enter it
  return dir
})
afterAll(() => sharedDataDir.then((dir) => Fs.rm(dir, { recursive: true, force: true })))
const Created = Schema.parseJson(Schema.Struct({ id: Schema.String }))
const CreatedKey = Schema.parseJson(Schema.Struct({ key: Schema.String }))

/**
 * The gateway as a terminal runs it: a process group of its own (the shell's job), the embedded database — or as
 * `npm start` runs it (`--ignore-scripts`: the build its `prestart` makes is made).
 */
const launch = (args: ReadonlyArray<string>, env: Record<string, string>, npm = false) =>
  Effect.acquireRelease(
    Effect.gen(function* () {
      const port = yield* freePort
      const child = npm
        ? Child.spawn("npm", ["start", "--ignore-scripts", "--silent", "--", ...args], { env: { ...env, PORT: String(port) }, detached: true })
        : Child.spawn("node", [BIN, "serve", ...args], { env: { ...env, PORT: String(port) }, detached: true })
      let output = ""
      child.stdout.on("data", (d: Buffer) => (output += d.toString()))
      child.stderr.on("data", (d: Buffer) => (output += d.toString()))
      const base = `http://127.0.0.1:${port}`
      yield* eventually(
        Effect.promise(() => fetch(`${base}/readyz`).then((r) => r.status === 200, () => false)),
        (ready) => ready || child.exitCode !== null,
        60_000
      )
      expect(child.exitCode, output).toBeNull()
      return { child, base, output: () => output }
    }),
    // the whole group, even once the process started has exited (npm, whose gateway would be left running)
    ({ child }) =>
      Effect.sync(() => {
        try {
          if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL")
        } catch {
          // nothing of the group is left
        }
      })
  )

const cli = (args: ReadonlyArray<string>, env: Record<string, string>) =>
  Effect.async<string>((resume) => {
    Child.execFile("node", [BIN, ...args, "--json"], { env }, (error, stdout, stderr) =>
      resume(error === null ? Effect.succeed(stdout) : Effect.dieMessage(`${args.join(" ")}: ${stderr}`)))
  })

const exited = (child: Child.ChildProcess) =>
  Effect.async<number | null>((resume) => {
    if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.succeed(child.exitCode))
    child.once("exit", (code) => resume(Effect.succeed(code)))
  })

/** What the database says once the gateway has stopped: held credits, pending holds, usage records, charges. */
const booksAfter = (dataDir: string, orgId: string) =>
  Effect.scoped(Effect.gen(function* () {
    const db = yield* startEmbedded(dataDir, { ownProcessGroup: false })
    return yield* Effect.promise(async () => {
      const client = new Pg.Client({ connectionString: Redacted.value(db.url) })
      await client.connect()
      try {
        const org = await client.query<{ balance: string; held: string }>("SELECT balance, held FROM orgs WHERE id = $1", [orgId])
        const pending = await client.query<{ n: string }>("SELECT count(*) AS n FROM holds WHERE org_id = $1 AND status = 'pending'", [orgId])
        const usage = await client.query<{ n: string }>("SELECT count(*) AS n FROM usage WHERE org_id = $1 AND code = 'ok'", [orgId])
        const journal = await client.query<{ s: string }>("SELECT coalesce(sum(amount), 0) AS s FROM journal WHERE org_id = $1", [orgId])
        return {
          balance: Number(org.rows[0]?.balance),
          held: Number(org.rows[0]?.held),
          pendingHolds: Number(pending.rows[0]?.n),
          usageRecords: Number(usage.rows[0]?.n),
          journalSum: Number(journal.rows[0]?.s)
        }
      } finally {
        await client.end()
      }
    })
  }))

const ways = [
  { name: "Ctrl-C (SIGINT to the process group)", args: [], stop: (pid: number) => process.kill(-pid, "SIGINT") },
  // a service manager's stop (systemd's, `docker stop`'s) signals the process it started: npm, which passes it on
  { name: "SIGTERM to npm start", args: [], npm: true, stop: (pid: number) => process.kill(pid, "SIGTERM") },
  { name: "SIGTERM to the server process", args: [], stop: (pid: number) => process.kill(pid, "SIGTERM") },
  { name: "Ctrl-C with --workers 2", args: ["--workers", "2"], stop: (pid: number) => process.kill(-pid, "SIGINT") },
  { name: "SIGTERM to the primary of --workers 2", args: ["--workers", "2"], stop: (pid: number) => process.kill(pid, "SIGTERM") },
  // an impatient operator: the second Ctrl-C, while the calls finish, changes nothing
  { name: "Ctrl-C twice", args: [], stop: (pid: number) => twice(pid) },
  { name: "Ctrl-C twice with --workers 2", args: ["--workers", "2"], stop: (pid: number) => twice(pid) }
] as const

/** SIGINT to the process group, and again 300 ms later (while the calls in flight finish). */
const twice = (pid: number) => {
  process.kill(-pid, "SIGINT")
  setTimeout(() => {
    try {
      process.kill(-pid, "SIGINT")
    } catch {
      // already gone
    }
  }, 300)
}

layer(gatewayLayer(), { excludeTestServices: true })("stopping with calls in flight, on the embedded database", (it) => {
  for (const way of ways) {
    it.effect(`${way.name}: every call answered 200, nothing held, a usage record per call, exit 0`, () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        // one data directory for every way of stopping (each with an org of its own): initdb runs once
        const dataDir = yield* Effect.promise(() => sharedDataDir)
        const env: Record<string, string> = {
          ...baseEnv(),
          GATEWAY_DATA_DIR: dataDir,
          APPSTORE_BASE_URL: u.itunes.url,
          GATEWAY_BOOTSTRAP: "false",
          LOG_LEVEL: "info",
          RATE_LIMIT_PER_SECOND: "0",
          PROVIDER_TIMEOUT_MS: "5000"
        }
        const gateway = yield* launch(way.args, env, "npm" in way && way.npm)
        // an org and a key, made with the CLI (which joins the running server's database)
        const org = Schema.decodeUnknownSync(Created)(yield* cli(["org", "create", "--name", "stop", "--credits", "100"], env))
        const key = Schema.decodeUnknownSync(CreatedKey)(yield* cli(["keys", "create", "--org", org.id], env)).key

        u.itunes.reset()
        u.itunes.fault({ delayMs: 1_500, status: 200, body: { resultCount: 0, results: [] } })
        const calls = yield* Effect.fork(Effect.forEach(
          Array.from({ length: CALLS }),
          () => post(gateway.base, "/v1/mobile_app_search", key, { query: "in flight" }),
          { concurrency: CALLS }
        ))
        // every call is at the provider, its credits held, when the signal comes
        yield* eventually(Effect.sync(() => u.itunes.hits()), (n) => n >= CALLS)
        const pid = gateway.child.pid ?? 0
        way.stop(pid)
        const answers = yield* calls.await.pipe(Effect.flatten)
        const code = yield* exited(gateway.child)
        u.itunes.fault()

        expect(answers.map((a) => a.status), gateway.output()).toEqual(Array.from({ length: CALLS }, () => 200))
        expect(code, gateway.output()).toBe(0)
        expect(gateway.output()).not.toMatch(/could not write|ECONNREFUSED|terminating connection/)
        // the operator is told why the process waits, when the drain starts: before the calls in flight are answered
        const said = gateway.output().indexOf("Stopping")
        expect(said, gateway.output()).toBeGreaterThanOrEqual(0)
        expect(gateway.output().lastIndexOf(`"path":"/v1/mobile_app_search"`), gateway.output()).toBeGreaterThan(said)
        // the database was stopped after the gateway, not with it: its books are whole
        expect(yield* booksAfter(dataDir, org.id)).toEqual({
          balance: 100 - CALLS,
          held: 0,
          pendingHolds: 0,
          usageRecords: CALLS,
          journalSum: 100 - CALLS
        })
      }).pipe(Effect.scoped), 120_000)
  }
})

describe("serve --workers out of bounds", () => {
  it.effect("--workers 0, -1 and more than twice the cores are refused before anything starts: exit 2, one line", () =>
    Effect.gen(function* () {
      const limit = 2 * Os.availableParallelism()
      for (const count of ["0", "-1", String(limit + 1), "99999"]) {
        const { code, stdout, stderr } = yield* Effect.async<{ code: number | null; stdout: string; stderr: string }>((resume) => {
          Child.execFile("node", [BIN, "serve", "--workers", count, "--json"], { env: { ...baseEnv(), DATABASE_URL: "postgres://nobody@127.0.0.1:1/none" } },
            (error, stdout, stderr) => resume(Effect.succeed({ code: error === null ? 0 : typeof error.code === "number" ? error.code : null, stdout, stderr })))
        })
        expect(code, `${count}: ${stderr}`).toBe(2)
        expect(stderr, count).toContain(`--workers takes 1 to ${limit}`)
        expect(stderr, count).not.toMatch(/ECONNREFUSED|database error|\n\s+at /)
        expect(JSON.parse(stdout), count).toMatchObject({ error: { code: "invalid_request" } })
      }
    }), 60_000)
})
