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
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Betas } from "../src/services/Betas.js"
import { Connections } from "../src/services/Connections.js"
import { KeyStore } from "../src/services/KeyStore.js"
import { baseUrl, books, capturedLogs, gatewayLayer, givenOrg, request, TestUpstreams } from "./support/gateway.js"
import { CREDENTIALS } from "./upstreams/accounts.js"
import { PDF } from "./upstreams/pages.js"

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

const sha256 = (data: Uint8Array) => Crypto.createHash("sha256").update(data).digest("hex")

const mcpHeaders = (key: string) => ({ "content-type": "application/json", accept: "application/json, text/event-stream", "x-api-key": key })

/** One JSON-RPC message (or anything else) posted to /mcp as it is. */
const rpc = (key: string, message: unknown) => request("/mcp", { body: JSON.stringify(message), headers: mcpHeaders(key) })

const RpcResult = Schema.Struct({
  result: Schema.Struct({
    isError: Schema.optional(Schema.Boolean),
    structuredContent: Schema.optional(Schema.Unknown),
    _meta: Schema.optional(Schema.Unknown)
  })
})

const LogLine = Schema.parseJson(Schema.Struct({
  message: Schema.String,
  annotations: Schema.Struct({ path: Schema.optional(Schema.String), code: Schema.optional(Schema.String) })
}))

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
      // account tools appear once the org has connected their provider, beta tools once enabled
      expect(names).not.toContain("delta_post")
      expect(names).not.toContain("iota_delete_service")
      const weather = tools.find((t) => t.name === "weather")
      expect(weather?.inputSchema).toMatchObject({ type: "object", properties: { q: expect.anything(), lat: expect.anything() } })
      expect(weather?.annotations).toMatchObject({ readOnlyHint: true, destructiveHint: false, idempotentHint: true })
      expect(tools.find((t) => t.name === "search")?.description).toContain("credit")

      yield* Effect.orDie(Effect.flatMap(Connections, (c) => c.connect(orgId, "delta", CREDENTIALS.delta, null)))
      const connected = (yield* Effect.promise(() => client.listTools())).tools
      expect(connected.find((t) => t.name === "delta_post")?.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: true })
      // a like only adds: a write, but not a destructive one
      expect(connected.find((t) => t.name === "delta_like")?.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: false })

      const result = yield* Effect.promise(() => client.callTool({ name: "weather", arguments: { q: "Berlin" } }))
      expect(result.isError).toBeFalsy()
      expect(result.structuredContent).toMatchObject({ provider: "open-meteo", location: { name: "Berlin" } })
      expect(JSON.parse(textOf(result))).toMatchObject({ current: { description: "Overcast" } })
      expect(result._meta).toMatchObject({ "tool-gateway/credits-charged": 1 })
      expect(yield* books(orgId)).toMatchObject({ balance: 9, held: 0 })

      yield* Effect.orDie(Effect.flatMap(Connections, (c) => c.connect(orgId, "iota", CREDENTIALS.iota, null)))
      expect((yield* Effect.promise(() => client.listTools())).tools.map((t) => t.name)).not.toContain("iota_delete_service")
      yield* Effect.orDie(Effect.flatMap(Betas, (b) => b.enable(orgId, "iota_delete_service")))
      const again = yield* Effect.promise(() => client.listTools())
      const deleteService = again.tools.find((t) => t.name === "iota_delete_service")
      expect(deleteService?.annotations).toMatchObject({ destructiveHint: true, idempotentHint: true })
    }))

  it.scoped("after listTools(), every failure reaches the SDK client as a tool error carrying the envelope, never an McpError", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const { key } = yield* givenOrg({ credits: 0 })
      const client = yield* connect(key)
      // what every agent does first: the SDK client then checks each result against the tool's outputSchema
      const { tools } = yield* Effect.promise(() => client.listTools())
      expect(tools.find((t) => t.name === "weather")?.outputSchema).toBeDefined()

      const call = (name: string, args: Record<string, unknown>) =>
        Effect.tryPromise(() => client.callTool({ name, arguments: args })).pipe(
          // an McpError here is the defect this test is about
          Effect.catchAll((e) => Effect.dieMessage(`callTool(${name}) threw ${String(e.error)}`))
        )
      const broke = yield* call("weather", { q: "Berlin" })
      expect(broke.isError).toBe(true)
      expect(broke.structuredContent).toBeUndefined()
      const envelope = {
        error: { type: "insufficient_credits", code: "insufficient_credits", message: expect.any(String), retryable: false, billable: false }
      }
      expect(JSON.parse(textOf(broke))).toEqual(envelope)
      expect(broke._meta).toMatchObject({
        "tool-gateway/error": envelope.error,
        "tool-gateway/credits-charged": 0,
        "tool-gateway/request-id": expect.stringMatching(/^req_/)
      })

      const account = yield* call("nu_account", {})
      expect(account._meta).toMatchObject({ "tool-gateway/error": { code: "credential_required", type: "auth", billable: false } })
      const invalid = yield* call("read", { url: "https://example.com", max_chars: 5 })
      expect(JSON.parse(textOf(invalid))).toMatchObject({ error: { code: "invalid_request", message: expect.stringContaining("max_chars") } })
      const unknown = yield* call("nope", {})
      expect(JSON.parse(textOf(unknown))).toMatchObject({ error: { code: "unknown_tool" } })

      // with credits: a provider failure, and a normalization failure (billed at the tool's minimum)
      const funded = yield* givenOrg({ credits: 10 })
      const agent = yield* connect(funded.key)
      yield* Effect.promise(() => agent.listTools())
      u.openMeteo.fault({ status: 500 })
      const provider = yield* Effect.promise(() => agent.callTool({ name: "weather", arguments: { lat: 1, lon: 2 } }))
      expect(provider.isError).toBe(true)
      expect(provider._meta).toMatchObject({ "tool-gateway/error": { code: "provider_unavailable", retryable: true, billable: false }, "tool-gateway/credits-charged": 0 })
      u.openMeteo.fault({ wrongShape: true })
      const normalization = yield* Effect.promise(() => agent.callTool({ name: "weather", arguments: { lat: 1, lon: 2 } }))
      u.openMeteo.fault()
      expect(normalization.isError).toBe(true)
      expect(normalization.structuredContent).toBeUndefined()
      expect(normalization._meta).toMatchObject({ "tool-gateway/error": { code: "normalization_failed", billable: true }, "tool-gateway/credits-charged": 1 })
      expect(yield* books(funded.orgId)).toMatchObject({ balance: 9, held: 0 })

      // each of those requests is logged with the code the agent saw, not "ok"
      const logged = capturedLogs.flatMap((line) => {
        const entry = Schema.decodeUnknownOption(LogLine)(line)
        return entry._tag === "Some" && entry.value.annotations.path === "/mcp" ? [entry.value.annotations] : []
      })
      for (const code of ["insufficient_credits", "credential_required", "invalid_request", "unknown_tool", "provider_unavailable", "normalization_failed"]) {
        expect(logged.map((l) => l.code)).toContain(code)
      }
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

  it.effect("GET and DELETE on /mcp are answered at once: 405 with the envelope and Allow: POST", () =>
    Effect.gen(function* () {
      const { key } = yield* givenOrg()
      for (const method of ["GET", "DELETE"]) {
        const answer = yield* request("/mcp", { method, headers: { accept: "text/event-stream", "x-api-key": key } }).pipe(
          Effect.timeoutFail({ duration: "2 seconds", onTimeout: () => new Error(`${method} /mcp did not answer`) }),
          Effect.orDie
        )
        expect(answer.status).toBe(405)
        expect(answer.headers.get("allow")).toBe("POST")
        expect(answer.body).toEqual({
          error: { type: "not_found", code: "method_not_allowed", message: expect.stringContaining("POST"), retryable: false, billable: false }
        })
      }
    }))

  it.effect("a batch, a body nested too deep or too large, and a wrong Accept are envelopes, never a 500", () =>
    Effect.gen(function* () {
      const { key } = yield* givenOrg()
      const list = { jsonrpc: "2.0", id: 1, method: "tools/list" }
      const batch = yield* rpc(key, [list, { ...list, id: 2 }])
      expect(batch.status).toBe(400)
      expect(batch.body).toMatchObject({ error: { code: "invalid_request", message: expect.stringContaining("batch") } })
      const deep = yield* request("/mcp", { body: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":${"[".repeat(5000)}${"]".repeat(5000)}}`, headers: mcpHeaders(key) })
      expect(deep.status).toBe(400)
      expect(deep.body).toMatchObject({ error: { code: "invalid_request", message: expect.stringContaining("deeper") } })
      const large = yield* request("/mcp", { body: JSON.stringify({ ...list, params: { pad: "x".repeat(2 * 1024 * 1024) } }), headers: mcpHeaders(key) })
      expect(large.status).toBe(413)
      expect(large.body).toMatchObject({ error: { code: "payload_too_large", billable: false } })
      const accept = yield* request("/mcp", { body: JSON.stringify(list), headers: { ...mcpHeaders(key), accept: "text/html" } })
      expect(accept.status).toBe(400)
      expect(accept.body).toMatchObject({ error: { type: "validation", code: "invalid_request", message: expect.stringContaining("Accept") } })
      const notRpc = yield* rpc(key, { hello: "world" })
      expect(notRpc.status).toBe(400)
      expect(notRpc.body).toMatchObject({ error: { code: "invalid_request", retryable: false, billable: false } })
    }))

  it.effect("every tools/call takes a token from the key's rate limit; past it, a tool error carrying rate_limit_exceeded", () =>
    Effect.gen(function* () {
      const { orgId } = yield* givenOrg({ credits: 100 })
      const keys = yield* KeyStore
      const created = yield* Effect.orDie(keys.create(orgId, { name: "slow", rateLimit: { perSecond: 1, burst: 3 } }))
      const key = Redacted.value(created.key)
      const results = []
      // one call that runs, then quick ones (refused as invalid, which counts too) to use the burst up
      for (let i = 0; i < 5; i++) {
        const args = i === 0 ? { q: "Berlin" } : { q: 5 }
        const answer = yield* rpc(key, { jsonrpc: "2.0", id: i, method: "tools/call", params: { name: "weather", arguments: args } })
        expect(answer.status).toBe(200)
        results.push(answer.body)
      }
      const decoded = results.map((r) => Schema.decodeUnknownSync(RpcResult)(r).result)
      expect(decoded.slice(0, 3).map((r) => r.isError ?? false)).toEqual([false, true, true])
      expect(decoded[1]?._meta).toMatchObject({ "tool-gateway/error": { code: "invalid_request" } })
      for (const refused of decoded.slice(3)) {
        expect(refused.isError).toBe(true)
        expect(refused._meta).toMatchObject({ "tool-gateway/error": { type: "rate_limited", code: "rate_limit_exceeded", retryable: true, billable: false } })
      }
      expect(yield* books(orgId)).toMatchObject({ balance: 99, held: 0 })
      // other messages count too, and are refused at the HTTP level
      const listed = yield* rpc(key, { jsonrpc: "2.0", id: 9, method: "tools/list" })
      expect(listed.status).toBe(429)
      expect(listed.headers.get("retry-after")).not.toBeNull()
      expect(listed.body).toMatchObject({ error: { code: "rate_limit_exceeded" } })
    }))

  it.scoped("a file a tool kept is a resource_link; resources/read answers its exact bytes to its org only", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      const { key } = yield* givenOrg()
      const client = yield* connect(key)
      const result = yield* Effect.promise(() => client.callTool({ name: "read", arguments: { url: `${u.pages.url}/doc.pdf` } }))
      expect(result.isError).toBeFalsy()
      const link = Schema.decodeUnknownSync(Schema.Array(Schema.Unknown))(result.content).find(
        (c): c is { type: "resource_link"; uri: string; mimeType: string; size: number } =>
          typeof c === "object" && c !== null && "type" in c && c.type === "resource_link"
      )
      expect(link).toMatchObject({ uri: expect.stringMatching(/^tool-gateway:\/\/artifacts\//), mimeType: "application/pdf", size: PDF.length })
      const read = yield* Effect.promise(() => client.readResource({ uri: link?.uri ?? "" }))
      const blob = read.contents[0] !== undefined && "blob" in read.contents[0] ? read.contents[0].blob : ""
      expect(sha256(Buffer.from(blob, "base64"))).toBe(sha256(PDF))
      expect(read.contents[0]?.mimeType).toBe("application/pdf")

      const other = yield* givenOrg()
      const stranger = yield* connect(other.key)
      const refused = yield* Effect.flip(Effect.tryPromise(() => stranger.readResource({ uri: link?.uri ?? "" })))
      expect(String(refused.error)).toContain("MCP error -32002: No resource")
    }))
})

layer(gatewayLayer({ providers: { searchProviders: [] } }), { excludeTestServices: true })("hosted MCP on a gateway without search providers", (it) => {
  it.scoped("a tool this gateway has no provider for is not listed; called anyway, it says why", () =>
    Effect.gen(function* () {
      const { key } = yield* givenOrg()
      const client = yield* connect(key)
      const names = (yield* Effect.promise(() => client.listTools())).tools.map((t) => t.name)
      expect(names).toContain("weather")
      expect(names).not.toContain("search")
      const result = yield* Effect.promise(() => client.callTool({ name: "search", arguments: { query: "effect" } }))
      expect(result._meta).toMatchObject({ "tool-gateway/error": { code: "provider_not_configured", billable: false } })
    }))
})
