/**
 * The README walkthrough, pasted into a shell: it runs against a live gateway (whose weather provider is a
 * local server speaking Open-Meteo's protocol) and shows what the README says it shows.
 */
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as Child from "node:child_process"
import * as Fs from "node:fs/promises"
import { TestDatabaseUrl } from "./support/database.js"
import { baseUrl, gatewayLayer } from "./support/gateway.js"

const walkthrough = Effect.promise(async () => {
  const readme = await Fs.readFile("README.md", "utf8")
  const block = readme.split("<!-- walkthrough:start -->")[1]?.split("<!-- walkthrough:end -->")[0] ?? ""
  return block.replace(/^\s*```sh\n/, "").replace(/```\s*$/, "")
})

layer(gatewayLayer(), { excludeTestServices: true })("README", (it) => {
  it.effect("the walkthrough works when pasted into a shell", () =>
    Effect.gen(function* () {
      const script = yield* walkthrough
      expect(script).toContain("npx tool-gateway org create")
      const { url } = yield* TestDatabaseUrl
      const env: Record<string, string> = {}
      for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v
      Object.assign(env, { GATEWAY: yield* baseUrl, DATABASE_URL: url, npm_config_offline: "true" })
      const output = yield* Effect.async<string>((resume) => {
        Child.execFile("bash", ["-euo", "pipefail", "-c", script], { env, timeout: 90_000 }, (error, stdout, stderr) => {
          resume(error === null ? Effect.succeed(stdout) : Effect.die(new Error(`${error.message}\n${stdout}\n${stderr}`)))
        })
      })
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
})
