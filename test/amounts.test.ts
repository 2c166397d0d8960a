/**
 * Amounts of credits on every surface are whole numbers up to 2^53 − 1 (`Number.MAX_SAFE_INTEGER`), checked
 * with a clear message: the CLI, the dashboard API, the library — and the database never reaches a sum past
 * it (a balance after grants, a month's spend).
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as Child from "node:child_process"
import { MAX_CREDITS } from "../src/domain/credits.js"
import { KeyStore } from "../src/services/KeyStore.js"
import { Orgs } from "../src/services/Orgs.js"
import { expectEnvelope, expectOk } from "./support/assert.js"
import { TestDatabaseUrl } from "./support/database.js"
import { books, callTool, dashboard, gatewayLayer, givenMember, givenOrg, request } from "./support/gateway.js"
import { BIN } from "./support/processes.js"


const cli = (args: ReadonlyArray<string>) =>
  Effect.flatMap(TestDatabaseUrl, ({ url }) =>
    Effect.async<{ readonly code: number; readonly stdout: string; readonly stderr: string }>((resume) => {
      Child.execFile("node", [BIN, ...args], { env: { ...process.env, DATABASE_URL: url }, timeout: 60_000 }, (error, stdout, stderr) => {
        resume(Effect.succeed({ code: error === null ? 0 : typeof error.code === "number" ? error.code : 1, stdout, stderr }))
      })
    }))

const invalid = { status: 400, type: "validation", code: "invalid_request", retryable: false, billable: false } as const

layer(gatewayLayer(), { excludeTestServices: true })("amounts past 2^53", (it) => {
  it.effect("the CLI refuses them with one clear line, before any SQL", () =>
    Effect.gen(function* () {
      const { orgId } = yield* givenOrg({ credits: 10 })
      const cases = [
        ["cap", "set", "--org", orgId, "--amount", "99999999999999999999"],
        ["credits", "grant", "--org", orgId, "--amount", "9007199254740993"],
        ["credits", "grant", "--org", orgId, "--amount", "1e3"],
        ["org", "create", "--name", "big", "--credits", "18446744073709551616"],
        ["keys", "create", "--org", orgId, "--spend-limit", "-1"],
        ["keys", "create", "--org", orgId, "--rate-limit", "99999999999"]
      ]
      const runs = yield* Effect.forEach(cases, cli, { concurrency: 3 })
      runs.forEach((run, i) => {
        expect(run.code, cases[i]?.join(" ")).not.toBe(0)
        expect(run.stdout + run.stderr).toMatch(/must be a whole number (of credits )?from \d+ to \d+/)
        expect(run.stdout + run.stderr).not.toMatch(/SqlError|out of range for type|at Query/)
      })
      expect(yield* books(orgId)).toMatchObject({ balance: 10, spendCap: null })
      // the largest amount is accepted, and a grant past it is refused by name
      const cap = yield* cli(["cap", "set", "--org", orgId, "--amount", String(MAX_CREDITS), "--json"])
      expect(JSON.parse(cap.stdout)).toMatchObject({ spend_cap: MAX_CREDITS })
      const grant = yield* cli(["credits", "grant", "--org", orgId, "--amount", String(MAX_CREDITS), "--json"])
      expect(grant.code).toBe(1)
      expect(JSON.parse(grant.stdout)).toMatchObject({ error: { code: "invalid_request", message: expect.stringContaining(String(MAX_CREDITS)) } })
      expect(yield* books(orgId)).toMatchObject({ balance: 10, journalSum: 10 })
    }))

  it.effect("the dashboard API refuses them with the envelope, naming the field", () =>
    Effect.gen(function* () {
      const { token } = yield* givenMember()
      for (const spend_cap of [Number.MAX_SAFE_INTEGER + 1, 1e20, 1.5, -1]) {
        const answer = yield* dashboard("PUT", "/v1/org/spend-cap", token, { spend_cap })
        expectEnvelope(answer, { ...invalid, message: "spend_cap: must be a whole number of credits from 0 to 9007199254740991" })
      }
      // a literal past 2^53 in the JSON text: JSON.parse rounds it, and the rounded value is out of range too
      const raw = yield* request("/v1/org/spend-cap", {
        method: "PUT",
        body: `{"spend_cap": 9007199254740993}`,
        headers: { "content-type": "application/json", authorization: `Bearer ${token}` }
      })
      expectEnvelope(raw, { ...invalid, message: "spend_cap" })
      const key = yield* dashboard("POST", "/v1/keys", token, { name: "big", monthly_spend_limit: 2 ** 60 })
      expectEnvelope(key, { ...invalid, message: "monthly_spend_limit" })
      const ok = yield* dashboard("PUT", "/v1/org/spend-cap", token, { spend_cap: MAX_CREDITS })
      expect(ok.status).toBe(200)
      expect(ok.body).toMatchObject({ spend_cap: MAX_CREDITS })
    }))

  it.effect("validation messages name the tool that is not one", () =>
    Effect.gen(function* () {
      const { token } = yield* givenMember()
      const beta = yield* dashboard("PUT", "/v1/org/betas/no_such_tool", token, { enabled: true })
      expectEnvelope(beta, { ...invalid, message: "\"no_such_tool\" is not a beta tool" })
      expect(beta.text).not.toContain("[object Object]")
      const key = yield* dashboard("POST", "/v1/keys", token, { name: "k", allowed_tools: ["weather", "nope"] })
      expectEnvelope(key, { ...invalid, message: "allowed_tools[1]: \"nope\" is not a tool" })
      expect(key.text).not.toContain("[object Object]")
    }))

  it.effect("the library checks them too, and the database never holds a sum past 2^53", () =>
    Effect.gen(function* () {
      const orgs = yield* Orgs
      const keys = yield* KeyStore
      expect((yield* Effect.flip(orgs.create({ name: "x", credits: 2 ** 53 })))._tag).toBe("InvalidRequest")
      expect((yield* Effect.flip(orgs.create({ name: "x", spendCap: 0.5 })))._tag).toBe("InvalidRequest")
      const { orgId, key } = yield* givenOrg({ credits: MAX_CREDITS - 5 })
      expect((yield* Effect.flip(orgs.setSpendCap(orgId, 2 ** 53)))._tag).toBe("InvalidRequest")
      expect((yield* Effect.flip(keys.create(orgId, { name: "k", spendLimit: 2 ** 54 })))._tag).toBe("InvalidRequest")
      yield* orgs.grant(orgId, 5)
      const past = yield* Effect.flip(orgs.grant(orgId, 1))
      expect(past).toMatchObject({ _tag: "InvalidRequest", message: expect.stringContaining("past 9007199254740991") })
      expect(yield* books(orgId)).toMatchObject({ balance: MAX_CREDITS, journalSum: MAX_CREDITS })

      // the database refuses what the services would never write
      const sql = yield* SqlClient.SqlClient
      const refused = yield* Effect.flip(sql`UPDATE orgs SET spend_cap = 9007199254740992 WHERE id = ${orgId}`)
      expect(String(refused.cause)).toContain("spend_cap_safe")

      // without a cap, a month's spend still cannot pass 2^53: the reservation is refused
      yield* sql`UPDATE orgs SET month_spend = ${MAX_CREDITS}, spend_month = ${monthNow()} WHERE id = ${orgId}`
      const call = yield* callTool("weather", { q: "Berlin" }, { key })
      expectEnvelope(call, { status: 429, type: "rate_limited", code: "spend_cap_exceeded", retryable: false, billable: false, message: "largest amount" })
      yield* sql`UPDATE orgs SET month_spend = 0 WHERE id = ${orgId}`
      expectOk(yield* callTool("weather", { q: "Berlin" }, { key }))
    }))
})

const monthNow = () => {
  const d = new Date()
  return d.getUTCFullYear() * 100 + d.getUTCMonth() + 1
}
