/**
 * Hosted MCP at `/mcp` (Streamable HTTP transport, stateless, JSON responses, POST only). The MCP client's
 * server settings carry the API key as `X-API-Key`; a request without a valid key is refused at the HTTP
 * level with the envelope. Every tool the key's org can use is an MCP tool — its JSON Schema input and
 * output from the same `Schema`s, its description and price, and hints (`readOnlyHint` for reads,
 * `destructiveHint` for posts, deletes and other writes that change or remove what exists). `tools/call`
 * runs the gateway pipeline (rate limit, connection check, reservation, settlement; an Idempotency-Key from
 * `_meta.idempotencyKey`); failures, a rate-limit refusal included, are tool errors carrying the envelope as
 * text and in `_meta` (never as `structuredContent`, which a client checks against the output schema).
 * Files a tool kept are `resource_link`s (`tool-gateway://artifacts/<id>`) that `resources/read` answers
 * with their bytes, so the agent never needs the key.
 *
 * The transport is the official MCP SDK's web-standard one, fed the message the gateway already parsed and
 * checked like every other JSON body (size, depth, one object: no batches).
 */
import { HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js"
import { Cause, Effect, Exit, Option, Runtime } from "effect"
import {
  envelope,
  envelopeOf,
  InternalError,
  InvalidRequest,
  isGatewayError,
  MethodNotAllowed,
  NotFound,
  UnknownTool
} from "../domain/errors.js"
import type { Price } from "../domain/pricing.js"
import { catalog, isToolName, type ToolName, toolNames } from "../domain/tools.js"
import { ProviderRegistry } from "../services/ProviderRegistry.js"
import { type ArtifactRef, Artifacts } from "../services/Artifacts.js"
import { Betas } from "../services/Betas.js"
import { Connections } from "../services/Connections.js"
import { ServerConfig } from "../config.js"
import { Authentication } from "../services/Authentication.js"
import { Gateway, type Outcome } from "../services/Gateway.js"
import type { Caller } from "../services/KeyStore.js"
import { Pricing } from "../services/Pricing.js"
import { callFacts, CurrentCallFacts } from "../services/Telemetry.js"
import { currentRequest, type RequestState } from "./envelope.js"
import { jsonSchemaOf } from "./jsonSchema.js"
import { readJsonObject } from "./security.js"

export const MCP_PATH = "/mcp"
const VERSION = "0.1.0"

const describePrice = (price: Price) =>
  price.unit === "call"
    ? `${price.credits} credit${price.credits === 1 ? "" : "s"} per call`
    : `${price.credits} credit per ${price.per} ${price.unit === "results" ? "results" : "characters"} (at least ${price.min})`

/** The JSON-RPC error MCP gives for a resource that does not exist. */
const RESOURCE_NOT_FOUND = -32002

export const ARTIFACT_URI_PREFIX = "tool-gateway://artifacts/"

/** The files an answer refers to: every `{artifact: {id, content_type, bytes, …}}` in it, however deep. */
const artifactsIn = (value: unknown, found: Array<ArtifactRef> = [], depth = 0): Array<ArtifactRef> => {
  if (depth > 16 || typeof value !== "object" || value === null) return found
  if (Array.isArray(value)) {
    for (const v of value) artifactsIn(v, found, depth + 1)
    return found
  }
  const entries = Object.entries(value)
  for (const [key, v] of entries) {
    if (key === "artifact" && isArtifactRef(v)) found.push(v)
    else artifactsIn(v, found, depth + 1)
  }
  return found
}

const isArtifactRef = (u: unknown): u is ArtifactRef =>
  isRecord(u) && typeof u["id"] === "string" && typeof u["content_type"] === "string" && typeof u["bytes"] === "number" &&
  typeof u["sha256"] === "string" && typeof u["url"] === "string"

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
        destructiveHint: def.destructive,
        idempotentHint: def.idempotent,
        openWorldHint: true
      }
    }]
  }))

/**
 * What a call answered, for `_meta`: its request id and the credits it was charged (a normalization failure
 * is billed; every other failure is free).
 */
type CallMeta = {
  readonly "tool-gateway/request-id": string
  readonly "tool-gateway/credits-charged": number
  readonly "tool-gateway/replayed"?: true
}

/**
 * A failed call: the envelope as text, and again in `_meta`. Never as `structuredContent`: a client that
 * listed the tools validates `structuredContent` against the tool's output schema even when `isError` is set
 * (the official SDK client does), and an envelope would fail that check and hide the tool error.
 */
const errorResult = (error: unknown, meta: CallMeta): CallToolResult => {
  const body = envelope(isGatewayError(error) ? error : new InternalError({ message: "An internal error occurred; retry." }))
  return { isError: true, content: [{ type: "text", text: JSON.stringify(body) }], _meta: { ...meta, "tool-gateway/error": body.error } }
}

const parseJson = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

const resultOf = (outcome: Outcome<unknown>): CallToolResult => {
  const meta: CallMeta = {
    "tool-gateway/request-id": outcome.requestId,
    "tool-gateway/credits-charged": outcome._tag === "Fresh" ? outcome.charged : 0,
    ...(outcome._tag === "Replayed" ? { "tool-gateway/replayed": true } : {})
  }
  if (outcome._tag === "Replayed" && outcome.status !== 200) {
    // a stored failure (a normalization failure, or a write whose outcome is unknown), replayed
    const body = parseJson(outcome.body)
    const error = isRecord(body) ? body["error"] : undefined
    return { isError: true, content: [{ type: "text", text: outcome.body }], _meta: { ...meta, ...(error !== undefined ? { "tool-gateway/error": error } : {}) } }
  }
  const structured = parseJson(outcome.body)
  const links = artifactsIn(structured).map((a) => ({
    type: "resource_link" as const,
    uri: `${ARTIFACT_URI_PREFIX}${a.id}`,
    name: a.id,
    mimeType: a.content_type,
    size: a.bytes
  }))
  return {
    content: [{ type: "text", text: outcome.body }, ...links],
    ...(isRecord(structured) ? { structuredContent: structured } : {}),
    _meta: meta
  }
}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

export const McpLive = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function* () {
    const gateway = yield* Gateway
    const authentication = yield* Authentication
    const betas = yield* Betas
    const connections = yield* Connections
    const artifacts = yield* Artifacts
    const pricing = yield* Pricing
    const providers = yield* ProviderRegistry
    const { maxBodyBytes } = yield* ServerConfig
    const runtime = yield* Effect.runtime<never>()
    const run = Runtime.runPromise(runtime)
    const described = toolDescriptions(pricing)

    /**
     * The tools the caller's org can use: configured on this gateway, betas only when enabled, account tools
     * only once the org has connected their provider, and only the key's allowed tools. (A call to any other
     * tool still runs the pipeline and answers why it cannot run.)
     */
    const visibleTools = (caller: Caller) =>
      Effect.gen(function* () {
        const enabledBetas = yield* betas.list(caller.orgId)
        const connected = new Set((yield* connections.list(caller.orgId)).map((c) => c.provider))
        return toolNames.filter((name) => {
          const def = catalog[name]
          return providers.configured(name) &&
            (!def.beta || enabledBetas.includes(name)) &&
            (!def.account || connected.has(def.provider)) &&
            (caller.allowedTools === null || caller.allowedTools.includes(name))
        }).flatMap((name) => {
          const tool = described.get(name)
          return tool === undefined ? [] : [tool]
        })
      })

    /** One `tools/call`: a result, or a tool error carrying the envelope; the request's log line gets its code. */
    const callTool = (
      caller: Caller,
      state: RequestState,
      name: string,
      args: unknown,
      idempotencyKey: string | undefined
    ) =>
      Effect.gen(function* () {
        const failed = (error: unknown) =>
          Effect.map(callFacts, (facts) => {
            const result = errorResult(error, {
              "tool-gateway/request-id": state.requestId,
              "tool-gateway/credits-charged": facts.credits
            })
            state.code = isGatewayError(error) ? envelopeOf[error._tag].code : envelopeOf.InternalError.code
            return result
          })
        // Each call takes its token from the key's rate limit here, so that a refusal is a tool error too.
        const throttled = yield* Effect.either(authentication.throttle(caller))
        if (throttled._tag === "Left") return yield* failed(throttled.left)
        if (!isToolName(name)) return yield* failed(new UnknownTool({ message: `There is no tool named "${name.slice(0, 100)}".` }))
        const exit = yield* Effect.exit(gateway.runUnknown(caller, name, args ?? {}, { idempotencyKey, requestId: state.requestId }))
        if (Exit.isSuccess(exit)) {
          if (exit.value._tag === "Replayed" && exit.value.status !== 200) state.code = codeOfStored(exit.value.body)
          return resultOf(exit.value)
        }
        return yield* failed(Option.getOrUndefined(Cause.failureOption(exit.cause)))
      })

    /** `resources/read` of a file a tool kept: its exact bytes, base64, to the org that owns it. */
    const readArtifact = (caller: Caller, uri: string) =>
      Effect.gen(function* () {
        const id = uri.startsWith(ARTIFACT_URI_PREFIX) ? uri.slice(ARTIFACT_URI_PREFIX.length) : ""
        const { data, ref } = yield* artifacts.get(caller.orgId, id).pipe(
          Effect.catchTag("NotFound", () => new NotFound({ message: `No resource ${uri.slice(0, 200)} (files expire; see ARTIFACT_RETENTION_SECONDS).` }))
        )
        return { contents: [{ uri, mimeType: ref.content_type, blob: Buffer.from(data).toString("base64") }] }
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
        ListToolsRequestSchema: types.ListToolsRequestSchema,
        ListResourcesRequestSchema: types.ListResourcesRequestSchema,
        ReadResourceRequestSchema: types.ReadResourceRequestSchema,
        McpError: types.McpError
      }
    }))

    const handle = Effect.gen(function* () {
      const request = yield* HttpServerRequest.HttpServerRequest
      const state = yield* currentRequest
      // Stateless: no server-sent event stream to open (GET) and no session to end (DELETE).
      if (request.method !== "POST") {
        return yield* new MethodNotAllowed({
          message: `${request.method} is not allowed on ${MCP_PATH}: this MCP server is stateless and answers each JSON-RPC message on POST.`,
          allow: "POST"
        })
      }
      // The key is checked before anything MCP: a bad key is an HTTP 401 with the envelope.
      const { caller } = yield* authentication.authenticate(request.headers["x-api-key"], request.headers["authorization"], {
        rateLimit: false
      })
      const message = yield* readJsonObject(
        maxBodyBytes,
        "JSON-RPC batches are not accepted (MCP dropped them in 2025-06-18): send one message per request."
      )
      // Every message counts against the key's rate limit; a tool call takes its token in the call.
      if (message["method"] !== "tools/call") state.rateLimit = yield* authentication.throttle(caller)
      // tool calls run on the server's runtime: give them this request's facts for its log line and metrics
      const facts = yield* callFacts

      const {
        CallToolRequestSchema,
        ListResourcesRequestSchema,
        ListToolsRequestSchema,
        McpError,
        ReadResourceRequestSchema,
        Server,
        WebStandardStreamableHTTPServerTransport
      } = yield* sdk
      const server = new Server({ name: "tool-gateway", version: VERSION }, { capabilities: { tools: {}, resources: {} } })
      server.setRequestHandler(ListToolsRequestSchema, () => run(Effect.map(visibleTools(caller), (tools) => ({ tools }))))
      server.setRequestHandler(CallToolRequestSchema, (call) => {
        const meta = call.params._meta
        const key = isRecord(meta) && typeof meta["idempotencyKey"] === "string" ? meta["idempotencyKey"] : undefined
        return run(
          callTool(caller, state, call.params.name, call.params.arguments, key).pipe(Effect.locally(CurrentCallFacts, facts))
        )
      })
      // Files are listed in the answers that kept them, not here.
      server.setRequestHandler(ListResourcesRequestSchema, () => ({ resources: [] }))
      server.setRequestHandler(ReadResourceRequestSchema, async (read) => {
        const found = await run(Effect.either(readArtifact(caller, read.params.uri)))
        if (found._tag === "Left") throw new McpError(RESOURCE_NOT_FOUND, found.left.message, { uri: read.params.uri })
        return found.right
      })
      // Stateless: no session id (the option left out), one server per HTTP request.
      const transport = new WebStandardStreamableHTTPServerTransport({ enableJsonResponse: true })
      yield* Effect.promise(() => server.connect(transport))
      const headers = new Headers()
      for (const [k, v] of Object.entries(request.headers)) headers.set(k, v)
      // The body was read and parsed above; the transport takes the parsed message.
      const webRequest = new Request(`http://gateway${MCP_PATH}`, { method: "POST", headers })
      const response = yield* Effect.promise(() => transport.handleRequest(webRequest, { parsedBody: message }))
      const text = yield* Effect.promise(() => response.text())
      yield* Effect.promise(() => server.close())
      // What the transport refuses (a wrong Accept or Content-Type, a message that is not JSON-RPC) is a
      // non-2xx answer, and every non-2xx answer is the envelope.
      if (response.status >= 400) {
        return yield* new InvalidRequest({ message: `Not a valid MCP request: ${jsonRpcErrorMessage(text)}` })
      }
      const out: Record<string, string> = {}
      response.headers.forEach((value, key) => {
        if (key !== "content-length") out[key] = value
      })
      return HttpServerResponse.text(text, { status: response.status, headers: out })
    })

    yield* router.all(MCP_PATH, handle)
  }))

/** The code of a stored (replayed) failure's envelope. */
const codeOfStored = (body: string): string => {
  const parsed = parseJson(body)
  const error = isRecord(parsed) ? parsed["error"] : undefined
  return isRecord(error) && typeof error["code"] === "string" ? error["code"] : envelopeOf.InternalError.code
}

/** The message of a JSON-RPC error answer, or the answer itself. */
const jsonRpcErrorMessage = (text: string): string => {
  const body = parseJson(text)
  if (isRecord(body) && isRecord(body["error"]) && typeof body["error"]["message"] === "string") {
    return body["error"]["message"].slice(0, 300)
  }
  return text.slice(0, 300)
}
