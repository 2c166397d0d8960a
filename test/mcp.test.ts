/**
 * Hosted MCP, with real clients: the official TypeScript SDK client over Streamable HTTP, and the MCP
 * Inspector's CLI. Configured with only the URL and the X-API-Key header, they list and call tools; failures
 * are tool errors carrying the envelope; without a key the HTTP request is refused.
 */
import { expect, layer } from "@effect/vitest"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { Effect, Redacted, Schema } from "effect"
import * as Child from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Betas } from "../src/services/Betas.js"
import { KeyStore } from "../src/services/KeyStore.js"
import { baseUrl, books, gatewayLayer, givenOrg, request, TestUpstreams } from "./support/gateway.js"

const connect = (key: string | undefined) =>
  Effect.gen(function* () {
    const base = yield* baseUrl
    const client = new Client({ name: "test-client", version: "1.0.0" })
    const transport = new StreamableHTTPClientTransport(new URL(`${base}/mcp`), {
      requestInit: { headers: key === undefined ? {} : { "X-API-Key": key } }
    })
    yield* Effect.acquireRelease(Effect.promise(() => client.connect(transport)), () => Effect.promise(() => client.close()))
    return client
  })

const textOf = (result: unknown) => {
  const content = typeof result === "object" && result !== null && "content" in result && Array.isArray(result.content)
    ? result.content
    : []
  const first: unknown = content[0]
  return typeof first === "object" && first !== null && "text" in first && typeof first.text === "string" ? first.text : ""
}

layer(gatewayLayer(), { excludeTestServices: true })("hosted MCP", (it) => {
  it.scoped("the SDK client initializes, lists the org's tools with schemas and hints, and calls one", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const { key, orgId } = yield* givenOrg({ credits: 10 })
      const client = yield* connect(key)
      expect(client.getServerVersion()).toMatchObject({ name: "tool-gateway" })
      const { tools } = yield* Effect.promise(() => client.listTools())
      const names = tools.map((t) => t.name)
      expect(names).toContain("weather")
      expect(names).toContain("delta_post")
      // beta tools appear once the org enables them
      expect(names).not.toContain("iota_delete_service")
      const weather = tools.find((t) => t.name === "weather")
      expect(weather?.inputSchema).toMatchObject({ type: "object", properties: { q: expect.anything(), lat: expect.anything() } })
      expect(weather?.annotations).toMatchObject({ readOnlyHint: true, destructiveHint: false })
      expect(tools.find((t) => t.name === "delta_post")?.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: true })
      expect(tools.find((t) => t.name === "search")?.description).toContain("credit")

      const result = yield* Effect.promise(() => client.callTool({ name: "weather", arguments: { q: "Berlin" } }))
      expect(result.isError).toBeFalsy()
      expect(result.structuredContent).toMatchObject({ provider: "open-meteo", location: { name: "Berlin" } })
      expect(JSON.parse(textOf(result))).toMatchObject({ current: { description: "Overcast" } })
      expect(result._meta).toMatchObject({ "tool-gateway/credits-charged": 1 })
      expect(yield* books(orgId)).toMatchObject({ balance: 9, held: 0 })

      yield* Effect.orDie(Effect.flatMap(Betas, (b) => b.enable(orgId, "iota_delete_service")))
      const again = yield* Effect.promise(() => client.listTools())
      expect(again.tools.map((t) => t.name)).toContain("iota_delete_service")
    }))

  it.scoped("failures are tool errors carrying the envelope: 402 and credential_required", () =>
    Effect.gen(function* () {
      const { key } = yield* givenOrg({ credits: 0 })
      const client = yield* connect(key)
      const broke = yield* Effect.promise(() => client.callTool({ name: "weather", arguments: { q: "Berlin" } }))
      expect(broke.isError).toBe(true)
      expect(JSON.parse(textOf(broke))).toEqual({
        error: { type: "insufficient_credits", code: "insufficient_credits", message: expect.any(String), retryable: false, billable: false }
      })
      const account = yield* Effect.promise(() => client.callTool({ name: "nu_account", arguments: {} }))
      expect(account.isError).toBe(true)
      expect(account.structuredContent).toMatchObject({ error: { code: "credential_required", type: "auth", billable: false } })
      const invalid = yield* Effect.promise(() => client.callTool({ name: "read", arguments: { url: "https://example.com", max_chars: 5 } }))
      expect(JSON.parse(textOf(invalid))).toMatchObject({ error: { code: "invalid_request", message: expect.stringContaining("max_chars") } })
      const unknown = yield* Effect.promise(() => client.callTool({ name: "nope", arguments: {} }))
      expect(JSON.parse(textOf(unknown))).toMatchObject({ error: { code: "unknown_tool" } })
    }))

  it.scoped("an Idempotency-Key in _meta makes a call replayable", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const { key, orgId } = yield* givenOrg({ credits: 10 })
      const client = yield* connect(key)
      const call = () => client.callTool({ name: "mobile_app_search", arguments: { query: "notes" }, _meta: { idempotencyKey: "mcp-1" } })
      const first = yield* Effect.promise(call)
      const second = yield* Effect.promise(call)
      expect(second.structuredContent).toEqual(first.structuredContent)
      expect(second._meta).toMatchObject({ "tool-gateway/replayed": true })
      expect(u.itunes.hits()).toBe(1)
      expect(yield* books(orgId)).toMatchObject({ balance: 9 })
    }))

  it.scoped("a key's tool allow-list narrows the tool list", () =>
    Effect.gen(function* () {
      const { orgId } = yield* givenOrg()
      const keys = yield* KeyStore
      const limited = yield* Effect.orDie(keys.create(orgId, { name: "weather only", allowedTools: ["weather"] }))
      const client = yield* connect(Redacted.value(limited.key))
      const { tools } = yield* Effect.promise(() => client.listTools())
      expect(tools.map((t) => t.name)).toEqual(["weather"])
    }))

  it.effect("without a valid key the HTTP request is refused with the envelope", () =>
    Effect.gen(function* () {
      const init = { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "x", version: "1" } } }
      const headers = { "content-type": "application/json", accept: "application/json, text/event-stream" }
      const missing = yield* request("/mcp", { body: JSON.stringify(init), headers })
      expect(missing.status).toBe(401)
      expect(missing.body).toMatchObject({ error: { code: "invalid_key", type: "auth" } })
      const wrong = yield* request("/mcp", { body: JSON.stringify(init), headers: { ...headers, "x-api-key": "tg_" + "x".repeat(32) } })
      expect(wrong.status).toBe(401)
      const failed = yield* Effect.exit(connect(undefined).pipe(Effect.scoped))
      expect(failed._tag).toBe("Failure")
    }))

  it.effect("the MCP Inspector's CLI lists the tools", () =>
    Effect.gen(function* () {
      const bin = Path.resolve("node_modules/@modelcontextprotocol/inspector/cli/build/cli.js")
      if (!Fs.existsSync(bin)) {
        console.log("skipped: @modelcontextprotocol/inspector is not installed")
        return
      }
      const { key } = yield* givenOrg()
      const base = yield* baseUrl
      const output = yield* Effect.async<string>((resume) => {
        Child.execFile(
          "node",
          [bin, "--cli", `${base}/mcp`, "--transport", "http", "--method", "tools/list", "--header", `X-API-Key: ${key}`],
          { timeout: 60_000 },
          (error, stdout, stderr) => resume(error === null ? Effect.succeed(stdout) : Effect.die(new Error(`${error.message}\n${stdout}\n${stderr}`)))
        )
      })
      const listed = Schema.decodeUnknownSync(Schema.Struct({ tools: Schema.Array(Schema.Struct({ name: Schema.String })) }))(
        JSON.parse(output)
      )
      expect(listed.tools.map((t) => t.name)).toEqual(expect.arrayContaining(["search", "read", "weather", "mobile_app_search"]))
    }), 90_000)
})
