/**
 * Usage records through database errors: a batch the database did not take goes back and is written by a later
 * flush (one comes on its own), and a batch whose commit's answer was lost is not written again.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Context, Effect, Layer, Redacted } from "effect"
import * as Net from "node:net"
import { pgLayer } from "../src/db/Database.js"
import type { OrgId } from "../src/domain/ids.js"
import { Usage, type UsageEntry, UsageLive } from "../src/services/Usage.js"
import { blockDatabase, TestDatabaseUrl } from "./support/database.js"
import { givenOrg, type GivenOrg, servicesLayer } from "./support/gateway.js"

const entry = (org: GivenOrg, requestId: string): UsageEntry => ({
  orgId: org.orgId,
  keyId: org.keyId,
  tool: "weather",
  requestId,
  status: 200,
  code: "ok",
  credits: 1,
  latencyMs: 12,
  provider: "open-meteo",
  at: Date.parse("2026-05-04T10:00:00Z")
})

/** How many rows the log holds for each of the org's request ids. */
const written = (orgId: OrgId) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ readonly request_id: string; readonly n: number }>`
      SELECT request_id, count(*)::int AS n FROM usage WHERE org_id = ${orgId} GROUP BY request_id ORDER BY request_id`).pipe(
    Effect.map((rows) => Object.fromEntries(rows.map((row) => [row.request_id, row.n]))),
    Effect.orDie
  )

/**
 * A TCP relay to the test's database that can lose a commit's answer: `cutAfterCommit`, it passes a COMMIT on,
 * then closes both sides as the server answers it (the transaction committed; the client never hears so) and goes
 * down; `down`, it refuses every connection; `up`, it relays.
 */
interface Relay {
  url: string
  readonly server: Net.Server
  mode: "up" | "down" | "cutAfterCommit"
  cuts: number
}

const relay = (target: URL) =>
  Effect.acquireRelease(
    Effect.async<Relay>((resume) => {
      const state: Relay = { url: "", server: Net.createServer(), mode: "up", cuts: 0 }
      state.server.on("connection", (client) => {
        if (state.mode === "down") {
          client.destroy()
          return
        }
        // the embedded server's URL names its Unix-domain socket's directory in `host`; a server's, its address
        const socketDir = target.searchParams.get("host")
        const upstream = socketDir !== null && socketDir.startsWith("/")
          ? Net.connect(`${socketDir}/.s.PGSQL.${target.port}`)
          : Net.connect(Number(target.port), target.hostname)
        let committing = false
        client.on("data", (data) => {
          if (state.mode === "cutAfterCommit" && data.includes("COMMIT")) committing = true
          upstream.write(data)
        })
        upstream.on("data", (data) => {
          if (committing) {
            state.mode = "down"
            state.cuts += 1
            client.destroy()
            upstream.destroy()
            return
          }
          client.write(data)
        })
        client.on("error", () => upstream.destroy())
        client.on("close", () => upstream.destroy())
        upstream.on("error", () => client.destroy())
        upstream.on("close", () => client.destroy())
      })
      state.server.listen(0, "127.0.0.1", () => {
        const address = state.server.address()
        const url = new URL(target.toString())
        url.hostname = "127.0.0.1"
        url.port = String(typeof address === "object" && address !== null ? address.port : 0)
        // the client goes through the relay, over TCP, not to the socket
        url.searchParams.delete("host")
        state.url = url.toString()
        resume(Effect.succeed(state))
      })
    }),
    (state) => Effect.async<void>((resume) => {
      state.server.close(() => resume(Effect.void))
    })
  )

layer(servicesLayer(), { excludeTestServices: true })("usage records through database errors", (it) => {
  it.effect("a batch written while the database refuses connections is written once it answers, by a flush that comes on its own", () =>
    Effect.gen(function* () {
      const usage = yield* Usage
      const org = yield* givenOrg()
      yield* blockDatabase(false)
      for (const id of ["req_a1", "req_a2", "req_a3"]) yield* usage.record(entry(org, id))
      yield* usage.flush
      // the flush the first record scheduled fails too
      yield* Effect.sleep("400 millis")
      yield* blockDatabase(true)
      // no call comes and nobody reads: the failed flush scheduled the next one
      let rows = yield* written(org.orgId)
      for (let tries = 0; Object.keys(rows).length < 3 && tries < 50; tries++) {
        yield* Effect.sleep("100 millis")
        rows = yield* written(org.orgId)
      }
      expect(rows).toEqual({ req_a1: 1, req_a2: 1, req_a3: 1 })
      yield* usage.flush
      expect(yield* written(org.orgId)).toEqual({ req_a1: 1, req_a2: 1, req_a3: 1 })
    }))

  it.scoped("a batch whose commit's answer was lost is not written again; the batch after it, refused, is", () =>
    Effect.gen(function* () {
      const org = yield* givenOrg()
      const { url } = yield* TestDatabaseUrl
      const lossy = yield* relay(new URL(url))
      const context = yield* Layer.build(UsageLive.pipe(Layer.provide(Layer.orDie(pgLayer(Redacted.make(lossy.url), { maxConnections: 2 })))))
      const usage = Context.get(context, Usage)
      // the first batch commits, its answer is lost, and the database cannot be asked about it for now
      lossy.mode = "cutAfterCommit"
      for (const id of ["req_b1", "req_b2"]) yield* usage.record(entry(org, id))
      yield* usage.flush
      expect(lossy.cuts).toBe(1)
      expect(yield* written(org.orgId)).toEqual({ req_b1: 1, req_b2: 1 })
      // the second is refused
      yield* usage.record(entry(org, "req_b3"))
      yield* usage.flush
      expect(yield* written(org.orgId)).toEqual({ req_b1: 1, req_b2: 1 })
      // the database answers again
      lossy.mode = "up"
      yield* usage.flush
      yield* usage.flush
      expect(yield* written(org.orgId)).toEqual({ req_b1: 1, req_b2: 1, req_b3: 1 })
    }))
})
