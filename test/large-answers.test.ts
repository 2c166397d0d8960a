/**
 * An account tool's upstream is the org's choice (epsilon's base URL, delta's PDS), so it can answer as much JSON as
 * the size limit lets through. Twenty calls whose answers are 5 MB of JSON each, arriving together at a real gateway
 * process while its `/healthz` is polled every 50 ms (from a process of its own): every health answer comes within
 * 750 ms — large answers are read and encoded one at a time, each after the event loop has had a turn (slowest
 * 260–437 ms, median 51–68 ms). They were read back to back: the slowest health answer took 1.2–2.0 s. Measured on
 * the 2-core machine the tests run on, where this process's upstream and client share the cores with the gateway
 * and PostgreSQL. Timed: it runs after the other files, alone (vitest.config.ts). The leases are the default 30 s, not
 * the 1.5 s the other process tests use to see the sweeper at work: a call waiting its turn on a machine this loaded
 * can be held past 1.5 s between its reservation and its request, and is then not sent (`LeaseLost`, a 500 by
 * design; a CI run saw one). On a failed call the assertion shows the gateway's log.
 */
import { expect, layer } from "@effect/vitest"
import { Effect, Schema } from "effect"
import * as Child from "node:child_process"
import * as Path from "node:path"
import { EPSILON_TOKEN } from "./upstreams/accounts.js"
import { dashboard, gatewayLayer, givenMember, TestUpstreams } from "./support/gateway.js"
import { envFor, eventually, post, serve } from "./support/processes.js"

/** About 5.1 MB of JSON, under the 5 MiB answer limit: 25,000 objects of a few fields, as a REST API's long list. */
const bigList = () => ({
  items: Array.from({ length: 25_000 }, (_, i) => ({
    id: i,
    name: `item number ${i} with a name of some length`,
    tags: ["alpha", "beta", "gamma"],
    owner: { id: i % 97, login: `user-${i % 97}`, url: `https://example.test/users/${i % 97}` },
    created_at: "2026-11-28T12:00:00Z"
  }))
})

layer(gatewayLayer({ providers: { ssrfAllow: ["127.0.0.1"] } }), { excludeTestServices: true })("large upstream answers", (it) => {
  it.effect("twenty of 5 MB at once: /healthz answers every 50 ms poll within 750 ms, and every call is answered whole", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const gateway = yield* serve([], { ...(yield* envFor), SSRF_ALLOW: "127.0.0.1", PROVIDER_TIMEOUT_MS: "30000", HOLD_LEASE_MS: "30000" })
      const { key, token } = yield* givenMember({ credits: 1_000 })
      const connected = yield* dashboard("POST", "/v1/connections", token, { provider: "epsilon", credentials: { base_url: u.rest.url, token: EPSILON_TOKEN } })
      expect(connected.status).toBe(201)
      const body = JSON.stringify(bigList())
      u.rest.fault({ text: body })

      const poller = Child.spawn("node", [Path.resolve("test/support/poll-health.mjs"), gateway.base], { stdio: ["pipe", "pipe", "inherit"] })
      let polled = ""
      poller.stdout.on("data", (d: Buffer) => (polled += d.toString()))
      yield* eventually(Effect.sync(() => polled), (out) => out.startsWith("ready"))
      const started = performance.now()
      const answers = yield* Effect.all(
        Array.from({ length: 20 }, () => post(gateway.base, "/v1/epsilon_request", key, { path: "/items" })),
        { concurrency: "unbounded" }
      )
      const seconds = (performance.now() - started) / 1_000
      poller.stdin.end()
      yield* Effect.async<void>((resume) => {
        if (poller.exitCode !== null) return resume(Effect.void)
        poller.once("exit", () => resume(Effect.void))
      })
      const healthTimes = Schema.decodeUnknownSync(Schema.parseJson(Schema.Array(Schema.Number)))(polled.split("\n")[1] ?? "[]")

      for (const answer of answers) {
        expect(answer.status, `${answer.text.slice(0, 300)}\n${gateway.output().slice(-4_000)}`).toBe(200)
        expect(answer.text.startsWith(`{"provider":"epsilon","status":200,"body":${body.slice(0, 100)}`)).toBe(true)
        expect(answer.text.length).toBe(body.length + `{"provider":"epsilon","status":200,"body":}`.length)
      }
      const sorted = [...healthTimes].sort((a, b) => a - b)
      const slowest = sorted.at(-1) ?? 0
      console.log(
        `large answers: 20 of ${(body.length / 1e6).toFixed(1)} MB in ${seconds.toFixed(2)} s; /healthz polled ${healthTimes.length} times, ` +
          `slowest ${slowest.toFixed(1)} ms, median ${sorted[Math.floor(sorted.length / 2)]?.toFixed(1)} ms`
      )
      expect(healthTimes.length).toBeGreaterThan(10)
      expect(slowest).toBeLessThan(750)
    }).pipe(Effect.scoped), 120_000)
})
