/**
 * `npm run soak`: mixed traffic for a while (5 minutes by default) against the built gateway and a faulty
 * provider (`upstream.js --faults`: 503s, invalid JSON, hangs past the deadline, resets, stalls after the
 * headers), sampling the gateway's RSS and the holds outstanding every 5 s, then checking the books:
 * no hold left pending, every org's balance equal to the sum of its journal, nothing negative, no 500.
 * RSS must level off (the last quarter's average within 10% + 10 MB of the second quarter's). Writes
 * `bench/results/soak-<time>.md` and `.json`; exits 1 when a check fails.
 *
 *   npm run soak                     five minutes
 *   npm run soak -- --seconds 60     shorter (what `npm run test:stress` runs)
 */
import * as Crypto from "node:crypto"
import { Effect, Exit, Scope } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import Pg from "pg"
import { Pool } from "undici"
import { prepareDatabase, provision, root, rssOf, script, sleep, startGateway, startServer, stopAll } from "./harness.js"

const args = process.argv.slice(2)
const option = (name: string) => {
  const i = args.indexOf(name)
  return i >= 0 ? args[i + 1] : undefined
}
const seconds = Number(option("--seconds") ?? "300")
const concurrency = Number(option("--concurrency") ?? "16")
// The soak runs with a bounded heap (see docs/performance.md): without one, V8 grows the heap for as long
// as memory is free, and growth could not be told from a leak.
const heapMb = 192

interface Sample {
  readonly second: number
  readonly rssMb: number
  readonly holdsPending: number
  readonly requests: number
}

const main = async () => {
  const scope = Effect.runSync(Scope.make())
  const started = new Date()
  console.error(`soak: ${seconds} s, ${concurrency} concurrent clients, faulty provider`)
  const db = await prepareDatabase(scope)
  const failures: Array<string> = []
  const samples: Array<Sample> = []
  const statuses: Record<string, number> = {}
  let requests = 0
  let badEnvelopes = 0
  try {
    const [keys, upstream] = await Promise.all([provision(db.url), startServer("upstream", script("upstream"), ["--faults"])])
    const gateway = await startGateway("gateway", {
      DATABASE_URL: db.url,
      GATEWAY_ENCRYPTION_KEY: Crypto.randomBytes(32).toString("base64"),
      APPSTORE_BASE_URL: `http://127.0.0.1:${upstream.port}`,
      RATE_LIMIT_PER_SECOND: "0",
      PROVIDER_TIMEOUT_MS: "1000",
      HOLD_LEASE_MS: "3000",
      SWEEP_INTERVAL_MS: "1000",
      LOG_LEVEL: "error",
      NODE_OPTIONS: `--max-old-space-size=${heapMb}`
    })
    const pool = new Pool(`http://127.0.0.1:${gateway.port}`, { connections: concurrency, headersTimeout: 30_000, bodyTimeout: 30_000 })
    const pg = new Pg.Client({ connectionString: db.url })
    await pg.connect()

    const body = JSON.stringify({ query: "notes", limit: 3 })
    const kinds = ["tool", "tool", "tool", "tool", "tool", "tool", "idempotent", "run", "broke", "invalid", "unknown-key"] as const
    let n = 0
    const one = async () => {
      const i = n++
      const kind = kinds[i % kinds.length] ?? "tool"
      const key = kind === "broke" ? keys.brokeKey : kind === "unknown-key" ? "tg_00000000000000000000000000000000" : keys.spreadKeys[i % keys.spreadKeys.length] ?? ""
      const headers: Record<string, string> = { "content-type": "application/json", "x-api-key": key }
      // a few idempotency keys, each used several times: replays, and in-progress refusals
      if (kind === "idempotent") headers["idempotency-key"] = `soak-${i % 97}`
      const path = kind === "run" ? "/v1/run" : "/v1/mobile_app_search"
      const payload = kind === "run"
        ? JSON.stringify({ tool: "mobile_app_search", input: { query: "notes", limit: 3 } })
        : kind === "invalid"
        ? `{"query": 5`
        : body
      try {
        const response = await pool.request({ path, method: "POST", headers, body: payload })
        const text = await response.body.text()
        statuses[response.statusCode] = (statuses[response.statusCode] ?? 0) + 1
        if (response.statusCode !== 200) {
          const parsed: unknown = JSON.parse(text)
          const ok = typeof parsed === "object" && parsed !== null && "error" in parsed && typeof parsed.error === "object" &&
            parsed.error !== null && "code" in parsed.error && "retryable" in parsed.error && "billable" in parsed.error
          if (!ok) badEnvelopes++
        }
      } catch {
        statuses["error"] = (statuses["error"] ?? 0) + 1
      }
      requests++
    }

    const endAt = Date.now() + seconds * 1000
    const client = async () => {
      while (Date.now() < endAt) await one()
    }
    const sampler = setInterval(() => {
      const pid = gateway.child.pid
      if (pid === undefined) return
      pg.query<{ n: string }>("SELECT count(*) AS n FROM holds WHERE status = 'pending'").then((r) => {
        samples.push({
          second: Math.round((Date.now() - (endAt - seconds * 1000)) / 1000),
          rssMb: rssOf(pid),
          holdsPending: Number(r.rows[0]?.n ?? 0),
          requests
        })
      }, () => undefined)
    }, 5_000)
    await Promise.all(Array.from({ length: concurrency }, client))
    clearInterval(sampler)

    // the books, once the calls in flight (and any hold whose lease runs out) are done
    let pending = -1
    for (let i = 0; i < 60 && pending !== 0; i++) {
      pending = Number((await pg.query<{ n: string }>("SELECT count(*) AS n FROM holds WHERE status = 'pending'")).rows[0]?.n ?? -1)
      if (pending !== 0) await sleep(500)
    }
    if (pending !== 0) failures.push(`${pending} holds still pending after the traffic stopped`)
    const mismatched = await pg.query<{ id: string; balance: string; journal: string; held: string }>(`
      SELECT o.id, o.balance, coalesce(j.total, 0) AS journal, o.held
        FROM orgs o LEFT JOIN (SELECT org_id, sum(amount) AS total FROM journal GROUP BY org_id) j ON j.org_id = o.id
       WHERE o.balance <> coalesce(j.total, 0) OR o.held <> 0 OR o.balance < 0`)
    for (const row of mismatched.rows) {
      failures.push(`org ${row.id}: balance ${row.balance}, journal ${row.journal}, held ${row.held}`)
    }
    const charged = await pg.query<{ settled: string; voided: string }>(`
      SELECT count(*) FILTER (WHERE status = 'settled') AS settled, count(*) FILTER (WHERE status = 'voided') AS voided
        FROM holds`)
    await pg.end()
    await pool.close()
    if ((statuses["500"] ?? 0) > 0) failures.push(`${statuses["500"]} answers were 500`)
    if (badEnvelopes > 0) failures.push(`${badEnvelopes} failures without a valid envelope`)
    if ((statuses["200"] ?? 0) === 0) failures.push("no call succeeded")

    // RSS must level off
    const quarter = Math.max(1, Math.floor(samples.length / 4))
    const avg = (xs: ReadonlyArray<Sample>) => xs.reduce((a, s) => a + s.rssMb, 0) / Math.max(1, xs.length)
    const second = avg(samples.slice(quarter, 2 * quarter))
    const last = avg(samples.slice(-quarter))
    if (samples.length >= 4 && last > second * 1.1 + 10) {
      failures.push(`RSS kept growing: ${Math.round(second)} MB in the second quarter, ${Math.round(last)} MB in the last`)
    }

    const row = charged.rows[0]
    const summary = {
      started: started.toISOString(),
      seconds,
      concurrency,
      heapMb,
      database: db.kind,
      requests,
      statuses,
      holds: { settled: Number(row?.settled ?? 0), voided: Number(row?.voided ?? 0) },
      rss: { secondQuarterMb: Math.round(second), lastQuarterMb: Math.round(last), maxMb: Math.max(0, ...samples.map((s) => s.rssMb)) },
      samples,
      failures
    }
    const md = [
      `# Soak, ${summary.started}`,
      "",
      `${seconds} s, ${concurrency} concurrent clients, a faulty provider; the gateway with a ${heapMb} MB heap on the ${db.kind} database.`,
      "",
      `Requests: ${requests}; answers by status: ${JSON.stringify(statuses)}.`,
      `Holds: ${summary.holds.settled} settled, ${summary.holds.voided} voided, none pending at the end.`,
      `RSS: ${summary.rss.secondQuarterMb} MB (second quarter) → ${summary.rss.lastQuarterMb} MB (last quarter), highest ${summary.rss.maxMb} MB.`,
      "",
      "| second | RSS MB | holds pending | requests so far |",
      "| ---: | ---: | ---: | ---: |",
      ...samples.map((s) => `| ${s.second} | ${s.rssMb} | ${s.holdsPending} | ${s.requests} |`),
      "",
      failures.length === 0 ? "Every check passed: no hold pending, every balance equal to its journal, no 500, every failure an envelope, RSS level." : `**Failed:**\n\n${failures.map((f) => `- ${f}`).join("\n")}`,
      ""
    ].join("\n")
    const dir = Path.join(root, "bench", "results")
    Fs.mkdirSync(dir, { recursive: true })
    const base = Path.join(dir, `soak-${summary.started.replace(/[:.]/g, "-")}`)
    Fs.writeFileSync(`${base}.md`, md)
    Fs.writeFileSync(`${base}.json`, JSON.stringify(summary, null, 2))
    console.log(md)
    console.error(`Written: ${base}.md and .json`)
  } finally {
    stopAll()
    await sleep(300)
    await db.drop().catch(() => undefined)
    await Effect.runPromise(Scope.close(scope, Exit.void))
  }
  if (failures.length > 0) process.exitCode = 1
}

main().catch((error: unknown) => {
  console.error(error)
  stopAll()
  process.exitCode = 1
})
