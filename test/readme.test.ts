/**
 * The README walkthrough, pasted into a shell: it runs against a live gateway (whose weather provider is a
 * local server speaking Open-Meteo's protocol) and shows what the README says it shows.
 */
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as Child from "node:child_process"
import * as Fs from "node:fs/promises"
import { TestDatabaseUrl } from "./support/database.js"
import { baseUrl, gatewayLayer, TestUpstreams } from "./support/gateway.js"

const block = (name: string) =>
  Effect.promise(async () => {
    const readme = await Fs.readFile("README.md", "utf8")
    const text = readme.split(`<!-- ${name}:start -->`)[1]?.split(`<!-- ${name}:end -->`)[0] ?? ""
    return text.replace(/^\s*```sh\n/, "").replace(/```\s*$/, "")
  })

const runScript = (script: string, extra: Record<string, string>) =>
  Effect.async<string>((resume) => {
    const env: Record<string, string> = {}
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v
    Object.assign(env, { npm_config_offline: "true" }, extra)
    Child.execFile("bash", ["-euo", "pipefail", "-c", script], { env, timeout: 90_000 }, (error, stdout, stderr) => {
      resume(error === null ? Effect.succeed(stdout) : Effect.die(new Error(`${error.message}\n${stdout}\n${stderr}`)))
    })
  })

layer(gatewayLayer({ providers: { ssrfAllow: ["127.0.0.1"] } }), { excludeTestServices: true })("README", (it) => {
  it.effect("the walkthrough works when pasted into a shell", () =>
    Effect.gen(function* () {
      const script = yield* block("walkthrough")
      expect(script).toContain("npx tool-gateway org create")
      const { url } = yield* TestDatabaseUrl
      const output = yield* runScript(script, { GATEWAY: yield* baseUrl, DATABASE_URL: url })
      const responses = output.split(/(?=HTTP\/1\.1 )/).filter((r) => r.startsWith("HTTP/1.1"))
      expect(responses).toHaveLength(4)
      const [first, claimed, replayed, refused] = responses
      expect(first).toMatch(/^HTTP\/1\.1 200/)
      expect(first).toMatch(/x-credits-charged: 1/i)
      expect(first).toContain("\"description\":\"Overcast\"")
      expect(claimed).toMatch(/^HTTP\/1\.1 200/)
      expect(claimed).not.toMatch(/idempotent-replayed/i)
      expect(replayed).toMatch(/^HTTP\/1\.1 200/)
      expect(replayed).toMatch(/idempotent-replayed: true/i)
      expect(replayed).toMatch(/x-credits-charged: 0/i)
      expect(refused).toMatch(/^HTTP\/1\.1 402/)
      expect(refused).toContain("\"code\":\"insufficient_credits\"")
      expect(output).toMatch(/^200$/m)
      expect(output).toMatch(/balance +0\n/)
      expect(output).toMatch(/held +0\n/)
      expect(output).toMatch(/month spend +3\n/)
    }), 120_000)

  it.effect("the dashboard walkthrough signs in, connects, calls an account tool, revokes a key, reads usage", () =>
    Effect.gen(function* () {
      const script = yield* block("dashboard-walkthrough")
      expect(script).toContain("dev token --uid alice")
      const u = yield* TestUpstreams
      u.resetAll()
      const { url } = yield* TestDatabaseUrl
      const output = yield* runScript(script, {
        GATEWAY: yield* baseUrl,
        DATABASE_URL: url,
        GATEWAY_DATA_DIR: u.dataDir,
        REST_API: u.rest.url
      })
      const lines = output.split("\n").filter((l) => l.length > 0)
      const jsonLines = lines.filter((l) => l.startsWith("{"))
      const [org, connection, call, revoked, usage] = jsonLines.map((l) => JSON.parse(l))
      expect(org).toMatchObject({ name: "team", balance: 10, spend_cap: null })
      expect(connection).toMatchObject({ provider: "epsilon", label: "demo", status: "active" })
      expect(output).not.toContain("\"token\":\"demo-token\"")
      expect(call).toEqual({
        provider: "epsilon",
        status: 200,
        body: { method: "POST", path: "/anything", query: {}, body: { hello: "world" } }
      })
      expect(u.rest.requests[0]?.headers["authorization"]).toBe("Bearer demo-token")
      expect(revoked).toMatchObject({ name: "agent", revoked_at: expect.any(String), month_spend: 1 })
      expect(lines).toContain("401")
      expect(usage).toMatchObject({ data: [expect.objectContaining({ tool: "epsilon_request", code: "ok", credits: 1 })] })
    }), 120_000)
})
