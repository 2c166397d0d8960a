/**
 * The admin CLI, run as the built `tool-gateway` command in its own process: every command with `--json`,
 * against `DATABASE_URL`; a revocation seen at once by a running server; colour only for a terminal; and the
 * embedded database, shared by a running `serve` and the CLI, with the first-start key that `npm start`
 * prints on a terminal (a pseudo-terminal from util-linux `script`) and does not print without one.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it, layer } from "@effect/vitest"
import { Clock, Effect, Redacted, Schema } from "effect"
import * as Child from "node:child_process"
import * as Fs from "node:fs/promises"
import Pg from "pg"
import { startEmbedded } from "../src/db/embedded.js"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { adminQuery, freshDatabaseUrl, TestDatabaseUrl } from "./support/database.js"
import { callTool, gatewayLayer, givenOrg, TEST_ENCRYPTION_KEY } from "./support/gateway.js"
import { CREDENTIALS } from "./upstreams/accounts.js"
import { Connections } from "../src/services/Connections.js"
import { DeltaSessions } from "../src/services/DeltaSessions.js"
import { expectEnvelope, expectOk } from "./support/assert.js"
import { BIN } from "./support/processes.js"
import { migrationCount } from "../src/db/migrations/index.js"
import { startUpstream } from "../src/testing/harness.js"
import { handleOpenMeteo } from "../src/testing/openMeteo.js"

const JsonObject = Schema.Record({ key: Schema.String, value: Schema.Unknown })

interface Run {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

const baseEnv = () => {
  const env: Record<string, string> = {}
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && k !== "DATABASE_URL" && k !== "GATEWAY_DATA_DIR") env[k] = v
  }
  return env
}

const run = (args: ReadonlyArray<string>, env: Record<string, string>) =>
  Effect.async<Run>((resume) => {
    Child.execFile("node", [BIN, ...args], { env: { ...baseEnv(), ...env }, timeout: 60_000 }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === "number" ? error.code : 1
      resume(Effect.succeed({ code, stdout, stderr }))
    })
  })

/** Whether util-linux `script` can give a command a pseudo-terminal here. */
const hasScript = Child.spawnSync("script", ["--version"]).status === 0
if (!hasScript) console.log("skipping the terminal parts of the CLI tests (colour, the first run's key): util-linux `script` is not installed")

const shellQuote = (s: string) => `'${s.replace(/'/g, "'\\''")}'`

/** The built command on a pseudo-terminal (`script`); its output, as the terminal got it. */
const runOnTerminal = (args: ReadonlyArray<string>, env: Record<string, string>) =>
  Effect.async<Run>((resume) => {
    const command = ["node", BIN, ...args].map(shellQuote).join(" ")
    Child.execFile("script", ["-qefc", command, "/dev/null"], { env: { ...baseEnv(), ...env }, timeout: 60_000 }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === "number" ? error.code : 1
      resume(Effect.succeed({ code, stdout, stderr }))
    })
  })

const ESC = "\u001b["

/**
 * A started process (`serve`, or `script` running it), until its output satisfies `ready`; killed at the end
 * of the scope if it is still running (`pid`: the gateway's own, when `script` runs it).
 */
const launch = (spawn: () => Child.ChildProcessWithoutNullStreams, ready: (output: string) => boolean) =>
  Effect.gen(function* () {
    const child = yield* Effect.acquireRelease(Effect.sync(spawn), (child) =>
      Effect.promise(() =>
        new Promise<void>((done) => {
          if (child.exitCode !== null || child.signalCode !== null) return done()
          child.once("exit", () => done())
          child.kill("SIGKILL")
        })
      ))
    let output = ""
    let stdout = ""
    child.stdout.on("data", (d: Buffer) => {
      output += d.toString()
      stdout += d.toString()
    })
    child.stderr.on("data", (d: Buffer) => (output += d.toString()))
    yield* Effect.promise(() =>
      new Promise<void>((done, fail) => {
        const timer = setTimeout(() => fail(new Error(`serve was not ready:\n${output}`)), 45_000)
        const check = () => {
          if (ready(output)) {
            clearTimeout(timer)
            done()
          }
        }
        child.stdout.on("data", check)
        child.stderr.on("data", check)
        child.once("exit", () => fail(new Error(`serve exited:\n${output}`)))
      })
    )
    return { child, output: () => output, stdout: () => stdout }
  })

/** SIGTERM to the gateway (`pid`), and the exit status of `child` (the gateway, or `script` running it). */
const stop = (child: Child.ChildProcess, pid: number) =>
  Effect.promise(() =>
    new Promise<number | null>((done) => {
      if (child.exitCode !== null) return done(child.exitCode)
      child.once("exit", (code) => done(code))
      process.kill(pid, "SIGTERM")
    })
  )

const runJson = (args: ReadonlyArray<string>, env: Record<string, string>) =>
  Effect.map(run([...args, "--json"], env), (r) => {
    expect(r.code, r.stderr).toBe(0)
    return Schema.decodeUnknownSync(JsonObject)(JSON.parse(r.stdout))
  })

layer(gatewayLayer(), { excludeTestServices: true })("the CLI against DATABASE_URL", (it) => {
  const envFor = Effect.map(TestDatabaseUrl, ({ url }) => ({ DATABASE_URL: url }))

  it.effect("org, credits, cap, keys and beta commands, with --json", () =>
    Effect.gen(function* () {
      const env = yield* envFor
      const org = yield* runJson(["org", "create", "--name", "acme", "--credits", "100", "--spend-cap", "50"], env)
      expect(org).toMatchObject({ name: "acme", balance: 100, held: 0, available: 100, month_spend: 0, spend_cap: 50 })
      const id = String(org["id"])
      expect(id).toMatch(/^org_/)
      const orgs = yield* run(["org", "list", "--json"], env)
      expect(orgs.code, orgs.stderr).toBe(0)
      expect(JSON.parse(orgs.stdout)).toEqual(
        expect.arrayContaining([expect.objectContaining({ id, name: "acme", balance: 100, month_spend: 0, spend_cap: 50 })])
      )

      expect(yield* runJson(["credits", "grant", "--org", id, "--amount", "25"], env)).toMatchObject({ balance: 125 })
      expect(yield* runJson(["cap", "set", "--org", id, "--amount", "none"], env)).toMatchObject({ spend_cap: null })
      expect(yield* runJson(["cap", "set", "--org", id, "--amount", "80"], env)).toMatchObject({ spend_cap: 80 })

      const created = yield* runJson(["keys", "create", "--org", id, "--name", "ci"], env)
      expect(created).toMatchObject({ org_id: id, name: "ci", revoked_at: null })
      expect(String(created["key"])).toMatch(/^tg_[0-9A-Za-z]{32}$/)
      expect(String(created["key"]).startsWith(String(created["prefix"]))).toBe(true)

      const listed = yield* run(["keys", "list", "--org", id, "--json"], env)
      expect(listed.stdout).not.toContain(String(created["key"]))
      expect(JSON.parse(listed.stdout)).toEqual([expect.objectContaining({ id: created["id"], prefix: created["prefix"] })])
      // a key's limits, tools and rate, in both outputs
      const limits = ["--spend-limit", "20", "--tools", "weather,search", "--rate-limit", "5", "--burst", "10"]
      const limited = yield* runJson(["keys", "create", "--org", id, "--name", "bot", ...limits], env)
      expect(limited).toMatchObject({
        monthly_spend_limit: 20,
        allowed_tools: ["weather", "search"],
        rate_limit: { per_second: 5, burst: 10 }
      })
      const keysText = (yield* run(["keys", "list", "--org", id], env)).stdout
      expect(keysText).toContain(`${String(limited["id"])}  ${String(limited["prefix"])}…  bot  active`)
      expect(keysText).toMatch(/spend limit +20 a month \(spent 0 this month\)/)
      expect(keysText).toMatch(/tools +weather, search/)
      expect(keysText).toMatch(/rate +5\/s, burst 10/)
      expect(keysText).toMatch(/tools +all/)
      expect(keysText).toMatch(/rate +the gateway's/)
      expect(keysText).toMatch(/expires +never/)
      // a key whose expiry (set through the dashboard API or the library) has passed is expired, not active
      const sql = yield* SqlClient.SqlClient
      yield* sql`UPDATE api_keys SET expires_at = '2026-01-01T00:00:00Z' WHERE id = ${String(created["id"])}`.pipe(Effect.orDie)
      yield* sql`UPDATE api_keys SET expires_at = '2999-01-01T00:00:00Z' WHERE id = ${String(limited["id"])}`.pipe(Effect.orDie)
      const expiredText = (yield* run(["keys", "list", "--org", id], env)).stdout
      expect(expiredText).toContain(`${String(created["id"])}  ${String(created["prefix"])}…  ci  expired 2026-01-01T00:00:00.000Z`)
      expect(expiredText).toContain(`${String(limited["id"])}  ${String(limited["prefix"])}…  bot  active\n  expires      2999-01-01T00:00:00.000Z`)

      expect(yield* runJson(["beta", "enable", "--org", id, "--tool", "iota_delete_service"], env)).toEqual({
        org_id: id,
        betas: ["iota_delete_service"]
      })
      expect(yield* runJson(["org", "show", "--org", id], env)).toMatchObject({ balance: 125, spend_cap: 80, betas: ["iota_delete_service"] })
      // every command that prints the org prints its betas as they are
      expect(yield* runJson(["credits", "grant", "--org", id, "--amount", "1"], env)).toMatchObject({ balance: 126, betas: ["iota_delete_service"] })
      expect(yield* runJson(["cap", "set", "--org", id, "--amount", "80"], env)).toMatchObject({ spend_cap: 80, betas: ["iota_delete_service"] })
      expect(yield* runJson(["beta", "disable", "--org", id, "--tool", "iota_delete_service"], env)).toMatchObject({ betas: [] })

      const revoked = yield* runJson(["keys", "revoke", "--key-id", String(created["id"])], env)
      expect(revoked["revoked_at"]).toEqual(expect.any(String))

      expect(yield* runJson(["migrate"], env)).toEqual({ applied: [] })
      const [human, orgList] = yield* Effect.all([run(["org", "show", "--org", id], env), run(["org", "list"], env)], { concurrency: 2 })
      expect(human.stdout).toContain("balance      126")
      // id, name, balance, month spend, cap
      expect(orgList.stdout).toMatch(new RegExp(`^${id} +acme +126 +0 +80$`, "m"))
    }), 180_000) // two dozen CLI processes, each a Node start and a database connection

  it.effect("mistakes exit with status 1 and a clear message", () =>
    Effect.gen(function* () {
      const env = yield* envFor
      const missing = yield* run(["org", "show", "--org", "org_doesnotexist"], env)
      expect(missing.code).toBe(1)
      expect(missing.stderr).toContain("no org with id org_doesnotexist")
      const badAmount = yield* run(["credits", "grant", "--org", "org_x", "--amount", "-5"], env)
      expect(badAmount.code).not.toBe(0)
      const badTool = yield* run(["beta", "enable", "--org", "org_x", "--tool", "nope"], env)
      expect(badTool.code).not.toBe(0)
      // only beta tools can be enabled
      expect((yield* run(["beta", "enable", "--org", "org_x", "--tool", "weather"], env)).code).not.toBe(0)
      // with --json the error is the envelope, on stdout
      const asJson = yield* run(["org", "show", "--org", "org_doesnotexist", "--json"], env)
      expect(asJson.code).toBe(1)
      expect(JSON.parse(asJson.stdout)).toEqual({
        error: { type: "not_found", code: "not_found", message: expect.stringContaining("org_doesnotexist"), retryable: false, billable: false }
      })
      // an org needs a name: a mistake in the arguments (status 2), as the API refuses a key's
      const [unnamed, blank] = yield* Effect.all([run(["org", "create", "--name", "", "--json"], env), run(["org", "create", "--name", "  "], env)], {
        concurrency: 2
      })
      expect(unnamed.code).toBe(2)
      expect(JSON.parse(unnamed.stdout)).toMatchObject({ error: { code: "invalid_request", message: expect.stringContaining("--name must be 1 to 100 characters") } })
      expect(blank.code).toBe(2)
      expect(blank.stderr).toContain("--name must be 1 to 100 characters, not blank")
      // a mistake in the arguments, with --json: the envelope on stdout too (and status 2)
      const mistakes = [
        [["org", "create"], "--name"],
        [["keys", "create", "--org", "org_x", "--tools", "weather,nope,serch"], `no tool named "nope", "serch"`],
        [["dev", "token"], "--uid"]
      ] as const
      const answers = yield* Effect.forEach(mistakes, ([args]) => run([...args, "--json"], env), { concurrency: 3 })
      answers.forEach((answer, i) => {
        const [args, named] = mistakes[i] ?? [[], ""]
        expect(answer.code, args.join(" ")).toBe(2)
        expect(JSON.parse(answer.stdout), args.join(" ")).toEqual({
          error: { type: "validation", code: "invalid_request", message: expect.stringContaining(named), retryable: false, billable: false }
        })
      })
      // a mistyped org is an error, not an empty list
      for (const args of [["keys", "list", "--org", "org_doesnotexist"], ["members", "list", "--org", "org_doesnotexist"]]) {
        const listed = yield* run(args, env)
        expect(listed.code, args.join(" ")).toBe(1)
        expect(listed.stderr).toContain("org_doesnotexist")
      }
    }))

  it.effect("members: add and list a dashboard user", () =>
    Effect.gen(function* () {
      const env = yield* envFor
      const org = yield* runJson(["org", "create", "--name", "team"], env)
      const id = String(org["id"])
      expect(yield* runJson(["members", "add", "--org", id, "--uid", "alice"], env)).toMatchObject({ uid: "alice", org_id: id })
      const listed = yield* run(["members", "list", "--org", id, "--json"], env)
      expect(JSON.parse(listed.stdout)).toEqual([expect.objectContaining({ uid: "alice", org_id: id })])
      // and out again; a user who is not a member of that org is an error
      expect(yield* runJson(["members", "remove", "--org", id, "--uid", "alice"], env)).toEqual({ uid: "alice", org_id: id, removed: true })
      expect(JSON.parse((yield* run(["members", "list", "--org", id, "--json"], env)).stdout)).toEqual([])
      const again = yield* run(["members", "remove", "--org", id, "--uid", "alice"], env)
      expect(again.code).toBe(1)
      expect(again.stderr).toContain("alice is not a member of")
      // a user belongs to one org: adding a member of another is refused, unless moved with --move
      expect(yield* runJson(["members", "add", "--org", id, "--uid", "bob"], env)).toMatchObject({ uid: "bob", org_id: id })
      const other = String((yield* runJson(["org", "create", "--name", "other team"], env))["id"])
      const refused = yield* run(["members", "add", "--org", other, "--uid", "bob"], env)
      expect(refused.code).toBe(1)
      expect(refused.stderr).toContain(`bob is a member of ${id}: a user belongs to one org. Add --move to move them to ${other}`)
      expect(JSON.parse((yield* run(["members", "list", "--org", id, "--json"], env)).stdout)).toEqual([expect.objectContaining({ uid: "bob" })])
      expect(JSON.parse((yield* run(["members", "list", "--org", other, "--json"], env)).stdout)).toEqual([])
      const moved = yield* run(["members", "add", "--org", other, "--uid", "bob", "--move"], env)
      expect(moved.code, moved.stderr).toBe(0)
      expect(moved.stdout).toContain(`bob is a member of ${other} (moved from ${id}).`)
      expect(JSON.parse((yield* run(["members", "list", "--org", id, "--json"], env)).stdout)).toEqual([])
      // a mistyped org is not found, whoever the user is (not "add --move")
      const mistyped = yield* run(["members", "add", "--org", "org_doesnotexist", "--uid", "bob"], env)
      expect(mistyped.code).toBe(1)
      expect(mistyped.stderr).toContain("no org with id org_doesnotexist")
      // added again where they are: nothing moves
      const same = yield* runJson(["members", "add", "--org", other, "--uid", "bob", "--move"], env)
      expect(same).toMatchObject({ uid: "bob", org_id: other })
      expect(same).not.toHaveProperty("moved_from")
    }))

  it.effect("connections reseal: after a rotation, every connection sealed with the current key, delta's sessions of other keys deleted", () =>
    Effect.gen(function* () {
      const env = { ...(yield* envFor), GATEWAY_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY }
      const first = yield* runJson(["connections", "reseal"], env)
      expect(first).toEqual({ resealed: expect.any(Number), unreadable: 0, sessions_deleted: 0 })
      // nothing left to do the second time
      expect(yield* runJson(["connections", "reseal"], env)).toEqual({ resealed: 0, unreadable: 0, sessions_deleted: 0 })
      // a key that did not seal them (and no old keys): the connections are unreadable, and the exit status says so
      const { orgId } = yield* givenOrg()
      yield* Effect.orDie(Effect.flatMap(Connections, (c) => c.connect(orgId, "lambda", CREDENTIALS.lambda, null)))
      // and a Bluesky session kept with this key, found by a mac under it: the other key would never find it
      yield* Effect.orDie(Effect.flatMap(Connections, (c) => c.connect(orgId, "delta", CREDENTIALS.delta, null)))
      const far = (yield* Clock.currentTimeMillis) + 86_400_000
      yield* Effect.flatMap(DeltaSessions, (sessions) =>
        sessions.set(
          { orgId, service: "https://bsky.social", identifier: CREDENTIALS.delta.identifier, appPassword: CREDENTIALS.delta.app_password },
          { accessJwt: "a.b.c", refreshJwt: "d.e.f", did: "did:plc:alice", pds: null, accessUntil: far, refreshUntil: far }
        ))
      const otherKey = Buffer.alloc(32, 9).toString("base64")
      const unreadable = yield* run(["connections", "reseal", "--json"], { ...env, GATEWAY_ENCRYPTION_KEY: otherKey })
      expect(unreadable.code, unreadable.stdout + unreadable.stderr).toBe(1)
      expect(JSON.parse(unreadable.stdout)).toEqual({ resealed: 0, unreadable: expect.any(Number), sessions_deleted: expect.any(Number) })
      expect(JSON.parse(unreadable.stdout).unreadable).toBeGreaterThan(0)
      expect(JSON.parse(unreadable.stdout).sessions_deleted).toBeGreaterThan(0)
      const sql = yield* SqlClient.SqlClient
      expect(yield* sql`SELECT 1 FROM delta_sessions`).toHaveLength(0)
      // without --json, the same in words
      const text = yield* run(["connections", "reseal"], { ...env, GATEWAY_ENCRYPTION_KEY: otherKey })
      expect(text.code).toBe(1)
      expect(text.stdout).toContain("Sealed 0 connection(s) again with the current key.")
      expect(text.stdout).toContain("Deleted 0 delta session(s) sealed with another key")
      // and the process that builds the connections says so at start, in its log (stderr for a command: not in its answer)
      expect(unreadable.stderr).toContain("sealed with a key this process does not have")
      // with every log line on (DEBUG), a command's --json answer is still one JSON document
      const verbose = yield* run(["org", "list", "--json"], { ...env, LOG_LEVEL: "debug" })
      expect(verbose.code, verbose.stderr).toBe(0)
      expect(Array.isArray(JSON.parse(verbose.stdout))).toBe(true)
      expect(verbose.stderr).toContain("\"logLevel\":\"DEBUG\"")
      // with DATABASE_URL the key must be given
      // (a mistake in the configuration, as for every command: status 2, one line; with --json, the envelope on stdout)
      const keyless = yield* run(["connections", "reseal"], yield* envFor)
      expect(keyless.code).toBe(2)
      expect(keyless.stderr).toContain("encryption key: GATEWAY_ENCRYPTION_KEY is required")
      // malformed: too short, or text that is not base64 (what Node's decoder skips would leave 32 bytes)
      for (const key of [{}, { GATEWAY_ENCRYPTION_KEY: "short" }, { GATEWAY_ENCRYPTION_KEY: "!!!!" + "A".repeat(43) }]) {
        const answer = yield* run(["connections", "reseal", "--json"], { ...(yield* envFor), ...key })
        expect(answer.code, answer.stderr).toBe(2)
        expect(JSON.parse(answer.stdout)).toMatchObject({ error: { type: "validation", code: "invalid_request", billable: false } })
        expect(JSON.parse(answer.stdout).error.message).toContain("encryption key: GATEWAY_ENCRYPTION_KEY")
      }
    }))

  it.effect("connections reseal: a row the key it names does not open is counted and named, the others resealed, the answer one JSON document", () =>
    Effect.gen(function* () {
      const env = { ...(yield* envFor), GATEWAY_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY }
      const { orgId } = yield* givenOrg()
      const connections = yield* Connections
      yield* Effect.orDie(connections.connect(orgId, "lambda", CREDENTIALS.lambda, null))
      yield* Effect.orDie(connections.connect(orgId, "nu", CREDENTIALS.nu, null))
      const sql = yield* SqlClient.SqlClient
      // its authentication tag altered: the key it names no longer opens it
      const altered = yield* sql<{ readonly id: string; readonly key_id: string }>`
        UPDATE connections SET tag = decode(repeat('00', 16), 'hex') WHERE org_id = ${orgId} AND provider = 'lambda' RETURNING id, key_id`
      const alteredId = altered[0]?.id ?? ""
      const newKey = Buffer.alloc(32, 11).toString("base64")
      // a rotation: one row fails, and did the whole command (no answer on stdout, a stack trace, the rest not resealed)
      const answer = yield* run(["connections", "reseal", "--json"], { ...env, GATEWAY_ENCRYPTION_KEY: newKey, GATEWAY_ENCRYPTION_OLD_KEYS: TEST_ENCRYPTION_KEY })
      expect(answer.code, answer.stdout + answer.stderr).toBe(1)
      const result = JSON.parse(answer.stdout)
      expect(result).toEqual({ resealed: expect.any(Number), unreadable: 1, sessions_deleted: expect.any(Number) })
      expect(result.resealed).toBeGreaterThan(0)
      expect(answer.stderr).toContain(`connection ${alteredId} (org ${orgId}, lambda) does not open with the key it names`)
      expect(answer.stderr).not.toMatch(/\n\s+at /)
      const nu = yield* sql<{ readonly key_id: string }>`SELECT key_id FROM connections WHERE org_id = ${orgId} AND provider = 'nu'`
      expect(nu[0]?.key_id).not.toBe(altered[0]?.key_id)
      // back to the tests' key, without the altered row
      yield* sql`DELETE FROM connections WHERE id = ${alteredId}`
      const back = yield* run(["connections", "reseal", "--json"], { ...env, GATEWAY_ENCRYPTION_OLD_KEYS: newKey })
      expect(back.code, back.stderr).toBe(0)
      expect(JSON.parse(back.stdout)).toMatchObject({ unreadable: 0 })
    }))

  it.effect("dev token: only with DEV_IDENTITY, on a loopback HOST, with a sane lifetime", () =>
    Effect.gen(function* () {
      const env = yield* envFor
      const off = yield* run(["dev", "token", "--uid", "alice"], env)
      expect(off.code).toBe(1)
      expect(off.stderr).toContain("DEV_IDENTITY=true")
      const dev = { ...env, DEV_IDENTITY: "true", GATEWAY_DATA_DIR: Path.join(Os.tmpdir(), `tg-dev-${process.pid}`) }
      const exposed = yield* run(["dev", "token", "--uid", "alice"], { ...dev, HOST: "0.0.0.0" })
      expect(exposed.code).toBe(1)
      expect(exposed.stderr).toContain("loopback")
      const expired = yield* run(["dev", "token", "--uid", "alice", "--ttl", "-100"], dev)
      expect(expired.code).toBe(2)
      expect(expired.stderr).toContain("--ttl")
      const ok = yield* run(["dev", "token", "--uid", "alice", "--ttl", "60"], dev)
      expect(ok.code, ok.stderr).toBe(0)
      expect(ok.stdout.trim().split(".")).toHaveLength(3)
      const asJson = yield* runJson(["dev", "token", "--uid", "alice", "--ttl", "60"], dev)
      expect(asJson).toEqual({ token: expect.stringMatching(/^[\w-]+\.[\w-]+\.[\w-]+$/), uid: "alice", expires_at: expect.any(String) })
      expect(Date.parse(String(asJson["expires_at"])) - Date.now()).toBeGreaterThan(30_000)
      const refused = yield* run(["dev", "token", "--uid", "alice", "--json"], env)
      expect(refused.code).toBe(1)
      expect(JSON.parse(refused.stdout)).toMatchObject({ error: { code: "invalid_request", message: expect.stringContaining("DEV_IDENTITY=true") } })
    }))

  it.effect("--name, --uid, --burst and --ttl take what the API takes; anything else is a mistake in the arguments (status 2)", () =>
    Effect.gen(function* () {
      const env = yield* envFor
      const dev = { ...env, DEV_IDENTITY: "true", GATEWAY_DATA_DIR: Path.join(Os.tmpdir(), `tg-dev-${process.pid}`) }
      const long = (n: number) => "n".repeat(n)
      const mistakes = [
        [["dev", "token", "--uid", ""], dev, "--uid must be 1 to 128 characters"],
        [["dev", "token", "--uid", "   "], dev, "--uid must be 1 to 128 characters"],
        [["members", "add", "--org", "org_x", "--uid", long(129)], env, "--uid must be 1 to 128 characters"],
        [["org", "create", "--name", long(100_000)], env, "--name must be 1 to 100 characters"],
        [["keys", "create", "--org", "org_x", "--name", long(101)], env, "--name must be 1 to 100 characters"],
        [["keys", "create", "--org", "org_x", "--burst", "5"], env, "--burst needs --rate-limit"],
        [["dev", "token", "--uid", "alice", "--ttl", "0"], dev, "--ttl must be a whole number from 1 to 604800"],
        [["dev", "token", "--uid", "alice", "--ttl", "604801"], dev, "--ttl must be a whole number from 1 to 604800"],
        [["dev", "token", "--uid", "alice", "--ttl", "1e3"], dev, "--ttl must be a whole number from 1 to 604800"]
      ] as const
      const answers = yield* Effect.forEach(mistakes, ([args, env]) => run([...args, "--json"], env), { concurrency: 4 })
      answers.forEach((answer, i) => {
        const [args, , says] = mistakes[i] ?? [[], {}, ""]
        const what = args.join(" ").slice(0, 80)
        expect(answer.code, what).toBe(2)
        expect(JSON.parse(answer.stdout), what).toEqual({
          error: { type: "validation", code: "invalid_request", message: expect.stringContaining(says), retryable: false, billable: false }
        })
        // the value refused is not echoed back whole
        expect(answer.stdout.length + answer.stderr.length, what).toBeLessThan(2_000)
      })
      // the longest the API takes is taken
      const org = yield* runJson(["org", "create", "--name", long(100)], env)
      expect(org["name"]).toBe(long(100))
      const id = String(org["id"])
      expect(yield* runJson(["members", "add", "--org", id, "--uid", long(128)], env)).toMatchObject({ uid: long(128) })
      expect(yield* runJson(["keys", "create", "--org", id, "--name", long(100), "--rate-limit", "5"], env)).toMatchObject({
        name: long(100),
        rate_limit: { per_second: 5, burst: 5 }
      })
    }), 120_000)

  it.effect("with --json, a command that cannot start on its configuration or its database prints the envelope and exits 2", () =>
    Effect.gen(function* () {
      const env = yield* envFor
      const commands = [
        ["migrate"],
        ["org", "list"],
        ["org", "show", "--org", "org_x"],
        ["keys", "list", "--org", "org_x"],
        ["members", "list", "--org", "org_x"],
        ["connections", "reseal"]
      ] as const
      // configuration: invalid_request, naming the variable
      const misconfigured = yield* Effect.forEach(
        [...commands, ["dev", "token", "--uid", "alice"] as const],
        (args) => run([...args, "--json"], { ...env, PORT: "1e3" }),
        { concurrency: 4 }
      )
      misconfigured.forEach((answer) => {
        expect(answer.code, answer.stderr).toBe(2)
        expect(JSON.parse(answer.stdout)).toEqual({
          error: { type: "validation", code: "invalid_request", message: expect.stringContaining("PORT must be"), retryable: false, billable: false }
        })
        expect(answer.stderr.trim().split("\n")).toHaveLength(1)
      })
      // the database: internal_error, with the hint about DATABASE_URL (it is set)
      const unreachable = yield* Effect.forEach(
        commands,
        (args) => run([...args, "--json"], { DATABASE_URL: "postgres://nobody@127.0.0.1:1/none", GATEWAY_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY }),
        { concurrency: 4 }
      )
      unreachable.forEach((answer, i) => {
        const what = (commands[i] ?? []).join(" ")
        expect(answer.code, what).toBe(2)
        expect(JSON.parse(answer.stdout), what).toEqual({
          error: { type: "internal", code: "internal_error", message: expect.stringContaining("(check DATABASE_URL)"), retryable: true, billable: false }
        })
      })
      // serve's --json is its log format: no envelope, the one line on stderr
      const served = yield* run(["serve", "--json"], { ...env, PORT: "1e3" })
      expect(served.code).toBe(2)
      expect(served.stdout).toBe("")
      expect(served.stderr.trim()).toMatch(/^configuration error: PORT must be/)
    }), 120_000)

  it.effect("serve --workers with the dev issuer on a non-loopback HOST refuses to start, at once", () =>
    Effect.gen(function* () {
      const env = yield* envFor
      const started = Date.now()
      const refused = yield* run(["serve", "--workers", "2"], {
        ...env,
        GATEWAY_ENCRYPTION_KEY: Buffer.alloc(32, 9).toString("base64"),
        DEV_IDENTITY: "true",
        HOST: "0.0.0.0",
        PORT: "0"
      })
      expect(refused.code).toBe(2)
      expect(refused.stderr).toContain("loopback")
      expect(Date.now() - started).toBeLessThan(30_000)
    }), 60_000)

  it.effect("a zero where zero means nothing, or a value that is not one, stops serve at start-up with one line", () =>
    Effect.gen(function* () {
      const env = yield* envFor
      const cases = [
        ["PROVIDER_TIMEOUT_MS", "0", "PROVIDER_TIMEOUT_MS must be a whole number of at least 1"],
        ["MAX_BODY_BYTES", "0", "MAX_BODY_BYTES must be a whole number of at least 1"],
        ["HOLD_LEASE_MS", "10", "HOLD_LEASE_MS must be a whole number of at least 30"],
        ["IDEMPOTENCY_RETENTION_SECONDS", "0", "IDEMPOTENCY_RETENTION_SECONDS must be a whole number of at least 1"],
        ["PUBLIC_URL", "gateway.example.com", "PUBLIC_URL must be an http(s) URL"]
      ] as const
      const runs = yield* Effect.forEach(cases, ([name, value]) => run(["serve"], { ...env, [name]: value, PORT: "0" }), { concurrency: 3 })
      runs.forEach((refused, i) => {
        const [name, , message] = cases[i] ?? ["", "", ""]
        expect(refused.code, name).toBe(2)
        expect(refused.stderr, name).toContain(message)
        expect(refused.stderr.trim().split("\n"), name).toHaveLength(1)
      })
    }), 60_000)

  it.effect("serve named after the CLI's own options (--log-level info serve) drains when told to stop and exits 0, as serve does", () =>
    Effect.gen(function* () {
      const env = yield* envFor
      const server = yield* launch(
        () => Child.spawn("node", [BIN, "--log-level", "info", "serve"], {
          env: { ...baseEnv(), ...env, GATEWAY_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, HOST: "127.0.0.1", PORT: "0", LOG_LEVEL: "info" }
        }),
        (output) => /Listening on http:\/\/[\d.]+:\d+/.test(output)
      )
      expect(yield* stop(server.child, server.child.pid ?? 0)).toBe(0)
      expect(server.output()).not.toContain("interrupted")
    }).pipe(Effect.scoped), 60_000)

  it.effect("a PORT another process listens on stops serve at start-up with one line that names it", () =>
    Effect.gen(function* () {
      const env = yield* envFor
      const taken = yield* Effect.acquireRelease(
        Effect.async<Net.Server>((resume) => {
          const server = Net.createServer()
          server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
        }),
        (server) => Effect.sync(() => server.close())
      )
      const address = taken.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      const refused = yield* run(["serve"], { ...env, GATEWAY_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, HOST: "127.0.0.1", PORT: String(port) })
      expect(refused.code, refused.stderr).toBe(2)
      expect(refused.stderr.trim().split("\n").at(-1)).toBe(
        `cannot listen: listen EADDRINUSE: address already in use 127.0.0.1:${port} (check HOST and PORT)`
      )
    }).pipe(Effect.scoped), 60_000)

  it.effect("the schema: migrate says what it applied; a failing migration, a statement failing part-way and a database that takes no writes are one line and status 2", () =>
    Effect.gen(function* () {
      const url = yield* freshDatabaseUrl
      const env = { DATABASE_URL: url }
      const query = (text: string) => Effect.promise(() => adminQuery(url, text))
      const oneLine = (answer: Run, message: string) => {
        expect(answer.code, answer.stderr).toBe(2)
        expect(answer.stderr.trim().split("\n"), answer.stderr).toEqual([expect.stringContaining(message)])
      }
      const envelopeOf = (answer: Run, message: string) => {
        oneLine(answer, message)
        expect(JSON.parse(answer.stdout)).toEqual({
          error: { type: "internal", code: "internal_error", message: answer.stderr.trim(), retryable: expect.any(Boolean), billable: false }
        })
      }

      // a migration that fails (a table of its name is there already): named as its file is, the database quoted
      yield* query("CREATE TABLE artifacts (x int)")
      const failed = yield* run(["org", "list", "--json"], env)
      envelopeOf(failed, "migration failed: 0004_artifacts: relation \"artifacts\" already exists")
      oneLine(yield* run(["migrate"], env), "migration failed: 0004_artifacts")
      // put right, `migrate` applies every migration and says which (the connection it used had applied them first)
      yield* query("DROP TABLE artifacts")
      const applied = yield* run(["migrate"], env)
      expect(applied.code, applied.stderr).toBe(0)
      const names = /^Applied (.*)\.$/.exec(applied.stdout.trim())?.[1]?.split(", ") ?? []
      expect(names).toHaveLength(migrationCount)
      expect(names[0]).toBe("0001_init")
      expect(names[3]).toBe("0004_artifacts")
      expect(yield* runJson(["migrate"], env)).toEqual({ applied: [] })

      // a statement that fails part-way through a command (a trigger refusing): the database quoted, no stack trace
      yield* query("CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'no new orgs here'; END $$")
      yield* query("CREATE TRIGGER refuse BEFORE INSERT ON orgs FOR EACH ROW EXECUTE FUNCTION refuse()")
      envelopeOf(yield* run(["org", "create", "--name", "refused", "--json"], env), "no new orgs here")
      oneLine(yield* run(["org", "create", "--name", "refused"], env), "database error:")

      // a database that takes no writes (a standby; here default_transaction_read_only): a running server is no
      // longer ready, and a server's start is refused — it would have answered every call 500
      const server = yield* launch(
        () => Child.spawn("node", [BIN, "serve"], {
          env: { ...baseEnv(), ...env, GATEWAY_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, HOST: "127.0.0.1", PORT: "0", LOG_LEVEL: "info" }
        }),
        (output) => /Listening on http:\/\/[\d.]+:\d+/.test(output)
      )
      const base = /Listening on (http:\/\/[\d.]+:\d+)/.exec(server.output())?.[1] ?? ""
      const readiness = Effect.promise(() => fetch(`${base}/readyz`).then(async (r) => ({ status: r.status, text: await r.text() })))
      expect((yield* readiness).status).toBe(200)
      const name = new URL(url).pathname.slice(1)
      yield* query(`ALTER DATABASE ${name} SET default_transaction_read_only = on`)
      yield* query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${name}' AND pid <> pg_backend_pid()`)
      let notReady = yield* readiness
      for (let tries = 0; notReady.status === 200 && tries < 40; tries++) {
        yield* Effect.sleep("250 millis")
        notReady = yield* readiness
      }
      expect(notReady.status).toBe(503)
      expect(notReady.text).toContain("database read-only")
      // serve is refused at start; the CLI's reading commands work on it (a standby), a writing one fails with one line
      const refused = yield* run(["serve"], { ...env, GATEWAY_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, HOST: "127.0.0.1", PORT: "0" })
      oneLine(refused, "database error: the database takes no writes")
      expect((yield* run(["org", "list", "--json"], env)).code).toBe(0)
      envelopeOf(yield* run(["org", "create", "--name", "standby", "--json"], env), "read-only transaction")
    }).pipe(Effect.scoped), 120_000)

  it.effect("a key revoked through the CLI is refused at once by the running server", () =>
    Effect.gen(function* () {
      const env = yield* envFor
      const org = yield* runJson(["org", "create", "--name", "revocation", "--credits", "10"], env)
      const created = yield* runJson(["keys", "create", "--org", String(org["id"])], env)
      const key = String(created["key"])
      expectOk(yield* callTool("weather", { q: "Berlin" }, { key }))
      yield* runJson(["keys", "revoke", "--key-id", String(created["id"])], env)
      expectEnvelope(yield* callTool("weather", { q: "Berlin" }, { key }), {
        status: 401,
        type: "auth",
        code: "invalid_key",
        retryable: false,
        billable: false
      })
    }))
})

describe("colour", () => {
  it.live("only for a terminal, and not with NO_COLOR: help and mistakes carry no escape codes otherwise", () =>
    Effect.gen(function* () {
      const [help, mistake] = yield* Effect.all([run(["--help"], {}), run(["org", "create"], {})], { concurrency: 2 })
      expect(help.stdout).toContain("USAGE")
      expect(help.stdout).not.toContain(ESC)
      expect(mistake.stderr).toContain("--name")
      expect(mistake.stderr).not.toContain(ESC)
      if (!hasScript) return
      const [coloured, plain] = yield* Effect.all([runOnTerminal(["--help"], {}), runOnTerminal(["--help"], { NO_COLOR: "1" })], {
        concurrency: 2
      })
      expect(coloured.stdout).toContain(ESC)
      expect(plain.stdout).toContain("USAGE")
      expect(plain.stdout).not.toContain(ESC)
    }), 60_000)
})

describe("a command stopped before it finished", () => {
  it.live("Ctrl-C or SIGTERM while it waits for its database: 130 or 143 and a line that says so, not 0 with no answer", () =>
    Effect.forEach([["SIGINT", 130, []], ["SIGTERM", 143, ["--log-level", "warning"]]] as const, ([signal, status, before]) => Effect.gen(function* () {
      // a database that takes the connection and never answers: the command waits (up to DATABASE_TIMEOUT_MS)
      const sockets = new Set<Net.Socket>()
      const silent = yield* Effect.acquireRelease(
        Effect.async<Net.Server>((resume) => {
          const server = Net.createServer((socket) => void sockets.add(socket))
          server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
        }),
        (server) => Effect.sync(() => {
          for (const socket of sockets) socket.destroy()
          server.close()
        })
      )
      const address = silent.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      const child = Child.spawn("node", [BIN, ...before, "org", "list", "--json"], {
        env: { ...baseEnv(), DATABASE_URL: `postgres://nobody@127.0.0.1:${port}/none` },
        detached: true
      })
      let stdout = ""
      let stderr = ""
      child.stdout.on("data", (d: Buffer) => (stdout += d.toString()))
      child.stderr.on("data", (d: Buffer) => (stderr += d.toString()))
      const exited = new Promise<number | null>((done) => child.once("exit", (code) => done(code)))
      // connected: the command is under way
      yield* Effect.promise(async () => {
        while (sockets.size === 0) await new Promise((resolve) => setTimeout(resolve, 20))
      })
      process.kill(-(child.pid ?? 0), signal)
      const code = yield* Effect.promise(() => exited)
      expect(code, stderr).toBe(status)
      expect(stdout).toBe("")
      expect(stderr).toContain("interrupted: the command did not finish")
      expect(stderr).not.toMatch(/\n\s+at /)
    }).pipe(Effect.scoped), { discard: true }), 60_000)
})

/** A data directory of its own, removed after the test; as root, the database runs as postgres, which must enter it. */
const dataDirectory = (prefix: string) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const dir = await Fs.mkdtemp(Path.join(Os.tmpdir(), prefix))
      await Fs.chmod(dir, 0o755)
      return dir
    }),
    (dir) => Effect.promise(() => Fs.rm(dir, { recursive: true, force: true }))
  )

describe("the embedded database", () => {
  it.live("npm start's first run prints a working key; the CLI joins the running server's database", () =>
    Effect.gen(function* () {
      const dataDir = yield* dataDirectory("tool-gateway-embedded-")
      const weather = yield* Effect.acquireRelease(
        Effect.promise(() => startUpstream(handleOpenMeteo)),
        (u) => Effect.promise(() => u.close())
      )
      const env = { GATEWAY_DATA_DIR: dataDir, PORT: "0", WEATHER_BASE_URL: weather.url, GEOCODING_BASE_URL: weather.url }

      // Without a terminal (a service manager, a container): no org, no key; the log says how to make them.
      // `--json` makes the log lines JSON whatever LOG_FORMAT says.
      const headless = yield* launch(
        () => Child.spawn("node", [BIN, "serve", "--json"], { env: { ...baseEnv(), ...env, LOG_FORMAT: "pretty" } }),
        (output) => /Listening on http:\/\/[\d.]+:\d+/.test(output) && output.includes("keys create")
      )
      // as a newcomer can paste it: the command is not on PATH outside npm's scripts
      expect(headless.output()).toContain("`npx tool-gateway org create --name default --credits 1000`")
      expect(headless.output()).toContain("`npx tool-gateway keys create --org <its id>`")
      expect(headless.output()).not.toMatch(/tg_[0-9A-Za-z]{32}/)
      const logLines = headless.stdout().split("\n").filter((line) => line.trim() !== "")
      expect(logLines.length).toBeGreaterThan(0)
      for (const line of logLines) expect(Schema.decodeUnknownSync(Schema.parseJson(JsonObject))(line)).toHaveProperty("message")
      // the first start says it made the database; the CLI, joining the server's, says nothing of the kind
      expect(headless.output()).toContain(`Made a new, empty database in ${dataDir} (GATEWAY_DATA_DIR)`)
      const joined = yield* run(["org", "list", "--json"], { GATEWAY_DATA_DIR: dataDir })
      expect(JSON.parse(joined.stdout)).toEqual([])
      expect(joined.stderr).not.toContain("Made a new")
      expect(yield* stop(headless.child, headless.child.pid ?? 0)).toBe(0)

      // A command given another data directory than the server's (a typo) is told, on stderr, that it made a new,
      // empty database there: its answer on stdout stays one JSON document. Once: the next command uses it.
      const other = yield* dataDirectory("tool-gateway-other-")
      const typo = yield* run(["org", "list", "--json"], { GATEWAY_DATA_DIR: other })
      expect(JSON.parse(typo.stdout)).toEqual([])
      expect(typo.stderr).toContain(`Made a new, empty database in ${other} (GATEWAY_DATA_DIR)`)
      expect((yield* run(["org", "list", "--json"], { GATEWAY_DATA_DIR: other })).stderr).not.toContain("Made a new")

      // A database that fails the first start's own statements (its orgs table gone): one line and status 2, as
      // any database that cannot be used at start — not a stack trace and status 1.
      yield* Effect.scoped(Effect.gen(function* () {
        const db = yield* startEmbedded(other, { ownProcessGroup: false })
        yield* Effect.promise(async () => {
          const client = new Pg.Client({ connectionString: Redacted.value(db.url) })
          await client.connect()
          await client.query("ALTER TABLE orgs RENAME TO orgs_gone").finally(() => client.end())
        })
      }))
      const broken = yield* run(["serve"], { GATEWAY_DATA_DIR: other, PORT: "0" })
      expect(broken.code, broken.stderr).toBe(2)
      expect(broken.stderr.trim().split("\n").at(-1)).toMatch(/^database error: .*orgs/)
      expect(broken.stderr + broken.stdout).not.toMatch(/\n\s+at |SqlError: Failed/)

      // On a terminal (a pseudo-terminal here), the first start makes an org and prints its key, once.
      if (!hasScript) return
      const server = yield* launch(
        () =>
          Child.spawn("script", ["-qefc", `echo "PID $$"; exec node ${shellQuote(BIN)} serve`, "/dev/null"], {
            env: { ...baseEnv(), ...env, NO_COLOR: "1" }
          }),
        (output) => /tg_[0-9A-Za-z]{32}/.test(output) && /Listening on http:\/\/[\d.]+:\d+/.test(output)
      )
      const output = server.output()
      const pid = Number(output.match(/PID (\d+)/)?.[1])
      const key = output.match(/tg_[0-9A-Za-z]{32}/)?.[0] ?? ""
      const base = output.match(/Listening on (http:\/\/[\d.]+:\d+)/)?.[1] ?? ""
      const orgId = output.match(/org_[0-9A-Za-z]{16}/)?.[0] ?? ""
      expect(output).toContain(`curl -s ${base}/v1/weather -H "X-API-Key: ${key}"`)
      // NO_COLOR, on a terminal: readable log lines without colour
      expect(output).not.toContain(ESC)

      const call = () =>
        Effect.promise(() =>
          fetch(`${base}/v1/weather`, {
            method: "POST",
            headers: { "content-type": "application/json", "x-api-key": key },
            body: JSON.stringify({ q: "Berlin" })
          }).then(async (r) => ({ status: r.status, body: Schema.decodeUnknownSync(JsonObject)(await r.json()) }))
        )
      const ok = yield* call()
      expect(ok.status).toBe(200)
      expect(ok.body).toMatchObject({ provider: "open-meteo", location: { name: "Berlin" } })

      // The CLI, while the server runs, uses the same database.
      const shown = yield* runJson(["org", "show", "--org", orgId], { GATEWAY_DATA_DIR: dataDir })
      expect(shown).toMatchObject({ name: "default", balance: 999 })
      const listed = yield* run(["keys", "list", "--org", orgId, "--json"], { GATEWAY_DATA_DIR: dataDir })
      const [listedKey] = Schema.decodeUnknownSync(Schema.Array(JsonObject))(JSON.parse(listed.stdout))
      expect(listedKey).toMatchObject({ name: "default", revoked_at: null, last_used_at: expect.any(String) })
      const keyId = String(listedKey?.["id"])
      yield* runJson(["keys", "revoke", "--key-id", keyId], { GATEWAY_DATA_DIR: dataDir })
      expect((yield* call()).status).toBe(401)

      // SIGTERM: a clean exit that stops the database it started.
      expect(yield* stop(server.child, pid)).toBe(0)
      const pidFile = yield* Effect.promise(() => Fs.access(Path.join(dataDir, "pg", "postmaster.pid")).then(() => true, () => false))
      expect(pidFile).toBe(false)

      // Without a server, the CLI starts the database for itself; a second start keeps the first org.
      const after = yield* runJson(["org", "show", "--org", orgId], { GATEWAY_DATA_DIR: dataDir })
      expect(after).toMatchObject({ name: "default", balance: 999 })
    }).pipe(Effect.scoped), 120_000)

  // As root, PostgreSQL runs as the postgres user, which cannot enter a directory that `mktemp -d` made (0700).
  it.live.skipIf(process.getuid?.() !== 0)("as root, a data directory the postgres user cannot reach stops serve with one line and the fix", () =>
    Effect.gen(function* () {
      const parent = yield* Effect.acquireRelease(
        Effect.promise(() => Fs.mkdtemp(Path.join(Os.tmpdir(), "tool-gateway-private-"))),
        (dir) => Effect.promise(() => Fs.rm(dir, { recursive: true, force: true }))
      )
      expect((yield* Effect.promise(() => Fs.stat(parent))).mode & 0o777).toBe(0o700)
      const refused = yield* run(["serve"], { GATEWAY_DATA_DIR: Path.join(parent, "data"), PORT: "0" })
      expect(refused.code).toBe(2)
      const lines = refused.stderr.trim().split("\n")
      expect(lines, refused.stderr).toHaveLength(1)
      expect(lines[0]).toContain(`cannot enter ${parent} (mode 0700`)
      expect(lines[0]).toContain(`chmod o+x ${parent}`)
      expect(lines[0]).toContain("GATEWAY_DATA_DIR")
    }).pipe(Effect.scoped), 60_000)
})
