/**
 * Hosted MCP at `/mcp` (Streamable HTTP transport, stateless, JSON responses). The MCP client's server
 * settings carry the API key as `X-API-Key`; a request without a valid key is refused at the HTTP level with
 * the envelope. Every tool the key's org can use is an MCP tool — its JSON Schema input and output from the
 * same `Schema`s, its description and price, and hints (`readOnlyHint` for reads, `destructiveHint` for
 * posts, deletes and other writes). `tools/call` runs the gateway pipeline (rate limit, connection check,
 * reservation, settlement; an Idempotency-Key from `_meta.idempotencyKey`); failures are tool errors
 * carrying the envelope.
 *
 * The transport is the official MCP SDK's web-standard one, fed the request the gateway already parsed.
 */
import { HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js"
import { Cause, Effect, Exit, Option, Runtime } from "effect"
import { envelope, InternalError, isGatewayError, MalformedJson, UnknownTool } from "../domain/errors.js"
import type { Price } from "../domain/pricing.js"
import { catalog, isToolName, type ToolName, toolNames } from "../domain/tools.js"
import { Betas } from "../services/Betas.js"
import { Gateway, type Outcome } from "../services/Gateway.js"
import type { Caller } from "../services/KeyStore.js"
import { Pricing } from "../services/Pricing.js"
import { CurrentCallFacts } from "../services/Telemetry.js"
import { CurrentRequest } from "./envelope.js"
import { jsonSchemaOf } from "./jsonSchema.js"

export const MCP_PATH = "/mcp"
const VERSION = "0.1.0"

const describePrice = (price: Price) =>
  price.unit === "call"
    ? `${price.credits} credit${price.credits === 1 ? "" : "s"} per call`
    : `${price.credits} credit per ${price.per} ${price.unit === "results" ? "results" : "characters"} (at least ${price.min})`

/** The MCP description of every tool, built once. */
const toolDescriptions = (pricing: typeof Pricing.Service) =>
  new Map(toolNames.map((name): readonly [ToolName, Tool] => {
    const def = catalog[name]
    const notes = [
      def.account ? "Runs on the org's own connected account (POST /v1/connections)." : "",
      def.beta ? "Beta." : "",
      `Costs ${describePrice(pricing.priceOf(name))}.`
    ].filter((n) => n !== "")
    return [name, {
      name,
      title: def.summary,
      description: `${def.summary}. ${notes.join(" ")}`,
      inputSchema: { type: "object", ...jsonSchemaOf(def.input.ast) },
      outputSchema: { type: "object", ...jsonSchemaOf(def.output.ast) },
      annotations: {
        title: def.summary,
        readOnlyHint: def.effect === "read",
        destructiveHint: def.effect === "write",
        idempotentHint: def.effect === "read",
        openWorldHint: true
      }
    }]
  }))

const errorResult = (error: unknown): CallToolResult => {
  const body = envelope(isGatewayError(error) ? error : new InternalError({ message: "An internal error occurred; retry." }))
  return { isError: true, content: [{ type: "text", text: JSON.stringify(body) }], structuredContent: { error: body.error } }
}

const parseJson = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

const resultOf = (outcome: Outcome<unknown>): CallToolResult => {
  const meta = { "tool-gateway/request-id": outcome.requestId, "tool-gateway/credits-charged": outcome._tag === "Fresh" ? outcome.charged : 0 }
  if (outcome._tag === "Replayed" && outcome.status !== 200) {
    const body = parseJson(outcome.body)
    return { isError: true, content: [{ type: "text", text: outcome.body }], ...(isRecord(body) ? { structuredContent: body } : {}), _meta: { ...meta, "tool-gateway/replayed": true } }
  }
  const structured = parseJson(outcome.body)
  return {
    content: [{ type: "text", text: outcome.body }],
    ...(isRecord(structured) ? { structuredContent: structured } : {}),
    _meta: outcome._tag === "Replayed" ? { ...meta, "tool-gateway/replayed": true } : meta
  }
}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

export const McpLive = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function* () {
    const gateway = yield* Gateway
    const betas = yield* Betas
    const pricing = yield* Pricing
    const runtime = yield* Effect.runtime<never>()
    const described = toolDescriptions(pricing)

    /** The tools the caller's org can use: betas only when enabled, and only the key's allowed tools. */
    const visibleTools = (caller: Caller, enabledBetas: ReadonlyArray<string>) =>
      toolNames.filter((name) =>
        (!catalog[name].beta || enabledBetas.includes(name)) &&
        (caller.allowedTools === null || caller.allowedTools.includes(name))
      ).flatMap((name) => {
        const tool = described.get(name)
        return tool === undefined ? [] : [tool]
      })

    const callTool = (caller: Caller, requestId: string, name: string, args: unknown, idempotencyKey: string | undefined) =>
      Effect.gen(function* () {
        if (!isToolName(name)) return errorResult(new UnknownTool({ message: `There is no tool named "${name.slice(0, 100)}".` }))
        const exit = yield* Effect.exit(gateway.runUnknown(caller, name, args ?? {}, { idempotencyKey, requestId }))
        if (Exit.isSuccess(exit)) return resultOf(exit.value)
        return errorResult(Option.getOrUndefined(Cause.failureOption(exit.cause)))
      })

    // The MCP SDK (and the schemas it brings) is loaded on the first MCP request: a gateway that serves
    // only the REST API does not carry it (about 25 MB of a process's memory).
    const sdk = yield* Effect.cached(Effect.promise(async () => {
      const [server, transport, types] = await Promise.all([
        import("@modelcontextprotocol/sdk/server/index.js"),
        import("@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js"),
        import("@modelcontextprotocol/sdk/types.js")
      ])
      return {
        Server: server.Server,
        WebStandardStreamableHTTPServerTransport: transport.WebStandardStreamableHTTPServerTransport,
        CallToolRequestSchema: types.CallToolRequestSchema,
        ListToolsRequestSchema: types.ListToolsRequestSchema
      }
    }))

    const handle = Effect.gen(function* () {
      const request = yield* HttpServerRequest.HttpServerRequest
      const { requestId } = yield* CurrentRequest
      // The key is checked before anything MCP: a bad key is an HTTP 401 with the envelope.
      const { caller } = yield* gateway.authenticate(request.headers["x-api-key"], request.headers["authorization"])
      const parsedBody = request.method === "POST"
        ? yield* request.json.pipe(Effect.mapError(() => new MalformedJson({ message: "The request body is not valid JSON-RPC." })))
        : undefined
      const enabledBetas = yield* betas.list(caller.orgId)
      // tool calls run on the server's runtime: give them this request's facts for its log line and metrics
      const facts = yield* CurrentCallFacts

      const { Server, WebStandardStreamableHTTPServerTransport, CallToolRequestSchema, ListToolsRequestSchema } = yield* sdk
      const server = new Server({ name: "tool-gateway", version: VERSION }, { capabilities: { tools: {} } })
      server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: visibleTools(caller, enabledBetas) }))
      server.setRequestHandler(CallToolRequestSchema, (call) => {
        const meta = call.params._meta
        const key = isRecord(meta) && typeof meta["idempotencyKey"] === "string" ? meta["idempotencyKey"] : undefined
        return Runtime.runPromise(runtime)(
          callTool(caller, requestId, call.params.name, call.params.arguments, key).pipe(Effect.provideService(CurrentCallFacts, facts))
        )
      })
      // Stateless: no session id (the option left out), one server per HTTP request.
      const transport = new WebStandardStreamableHTTPServerTransport({ enableJsonResponse: true })
      yield* Effect.promise(() => server.connect(transport))
      const headers = new Headers()
      for (const [k, v] of Object.entries(request.headers)) headers.set(k, v)
      const webRequest = new Request(`http://gateway${MCP_PATH}`, {
        method: request.method,
        headers,
        ...(parsedBody !== undefined ? { body: JSON.stringify(parsedBody) } : {})
      })
      const response = yield* Effect.promise(() => transport.handleRequest(webRequest, { parsedBody }))
      const text = yield* Effect.promise(() => response.text())
      yield* Effect.promise(() => server.close())
      const out: Record<string, string> = {}
      response.headers.forEach((value, key) => {
        if (key !== "content-length") out[key] = value
      })
      return HttpServerResponse.text(text, { status: response.status, headers: out })
    })

    yield* router.all(MCP_PATH, handle)
  }))
