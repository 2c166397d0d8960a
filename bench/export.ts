/**
 * A usage CSV export against the built gateway, alone and many at once, while a cheap request (`GET /v1/tools`)
 * is timed every 20 ms: how long other requests wait while exports run, how long the exports take, and the
 * gateway's peak RSS. One org holds 120,000 usage records (each export is its newest 50,000, 4.7 MB).
 *
 *   npm run build && npx tsc -p bench/tsconfig.json
 *   node bench/.build/export.js                          the gateway of this checkout (dist/bundle/bin.js)
 *   node bench/.build/export.js --entry <other>/dist/bundle/bin.js --exports 30
 *
 * The database is a fresh one on `BENCH_DATABASE_URL`'s server, or on the embedded PostgreSQL. Prints one line a
 * measurement; writes nothing.
 */
import * as ChildProcess from "node:child_process"
import * as Crypto from "node:crypto"
import { Effect, Exit, Scope } from "effect"
import Pg from "pg"
import { gatewayEntry, prepareDatabase, rssOf, sleep, startGateway, stop, stopAll } from "./harness.js"
import { argValue } from "./proc.js"

const entry = argValue("--entry") ?? gatewayEntry
const many = Number(argValue("--exports") ?? "30")
const RECORDS = 120_000

const cli = (env: Readonly<Record<string, string>>, args: ReadonlyArray<string>) =>
  ChildProcess.execFileSync(process.execPath, [entry, ...args], { env: { ...process.env, ...env }, encoding: "utf8" })

const main = async () => {
  const scope = Effect.runSync(Scope.make())
  const database = await prepareDatabase(scope)
  const env = {
    DATABASE_URL: database.url,
    GATEWAY_ENCRYPTION_KEY: Crypto.randomBytes(32).toString("base64"),
    DEV_IDENTITY: "true",
    LOG_LEVEL: "warning"
  }
  const gateway = await startGateway("gateway", env, 1, [], entry)
  const base = `http://127.0.0.1:${gateway.port}`
  const org = /org_\w+/.exec(cli(env, ["org", "create", "--name", "exports", "--json"]))?.[0] ?? ""
  cli(env, ["members", "add", "--org", org, "--uid", "exporter"])
  const db = new Pg.Client({ connectionString: database.url })
  await db.connect()
  await db.query(
    `INSERT INTO usage (org_id, key_id, tool, request_id, status, code, credits, latency_ms, provider, created_at)
     SELECT $1, 'key_bench', 'weather', 'req_bench' || n, 200, 'ok', 1, 5, 'open-meteo', now() - n * interval '1 second'
       FROM generate_series(1, ${RECORDS}) AS n`,
    [org]
  )
  await db.query("VACUUM ANALYZE usage")
  await db.end()
  const minted: unknown = await fetch(`${base}/dev/token`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ uid: "exporter" })
  }).then((r) => r.json())
  const token = typeof minted === "object" && minted !== null && "token" in minted ? String(minted.token) : ""
  const pid = gateway.child.pid ?? 0
  await sleep(1000)
  const idle = rssOf(pid)

  const run = async (exports: number) => {
    let stopped = false
    let peak = rssOf(pid)
    const waits: Array<number> = []
    const probe = (async () => {
      while (!stopped) {
        const t = performance.now()
        await fetch(`${base}/v1/tools`).then((r) => r.arrayBuffer())
        waits.push(performance.now() - t)
        peak = Math.max(peak, rssOf(pid))
        await sleep(20)
      }
    })()
    const started = performance.now()
    const bytes = await Promise.all(Array.from({ length: exports }, () =>
      fetch(`${base}/v1/usage?format=csv`, { headers: { authorization: `Bearer ${token}` } })
        .then((r) => r.arrayBuffer())
        .then((b) => b.byteLength)))
    const seconds = (performance.now() - started) / 1000
    stopped = true
    await probe
    waits.sort((a, b) => a - b)
    const at = (q: number) => (waits[Math.min(waits.length - 1, Math.floor(waits.length * q))] ?? NaN).toFixed(1)
    console.log(
      `${exports} export(s) of ${bytes[0]} bytes: ${seconds.toFixed(1)} s; GET /v1/tools meanwhile (n=${waits.length}) ` +
        `p50 ${at(0.5)} ms, p99 ${at(0.99)} ms, max ${at(1)} ms; RSS idle ${idle.toFixed(0)} MB, peak ${peak.toFixed(0)} MB`
    )
  }
  await run(1)
  await run(many)
  await stop(gateway)
  await database.drop()
  await Effect.runPromise(Scope.close(scope, Exit.void))
}

main().catch((error: unknown) => {
  console.error(error)
  stopAll()
  process.exit(1)
})
