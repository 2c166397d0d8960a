/**
 * Hosted MCP at `/mcp` (Streamable HTTP transport, stateless, JSON responses, POST only). The MCP client's
 * server settings carry the API key as `X-API-Key`; a request without a valid key is refused at the HTTP
 * level with the envelope. Every tool the key's org can use is an MCP tool — its JSON Schema input and
 * output from the same `Schema`s, its description and price, and hints (`readOnlyHint` for reads,
 * `destructiveHint` for posts, deletes and other writes that change or remove what exists). `tools/call`
 * runs the gateway pipeline (rate limit, connection check, reservation, settlement; an Idempotency-Key from
 * `_meta.idempotencyKey`); failures, a rate-limit refusal included, are tool errors carrying the envelope as
 * text and in `_meta` (never as `structuredContent`, which a client checks against the output schema).
 * Every result's `_meta` carries the request id and the credits charged. `run` is a tool too: `POST /v1/run`
 * (`{tool, input}` → the provider's raw answer), shown with the tools the caller can use.
 * Files a tool kept are `resource_link`s (`tool-gateway://artifacts/<id>`); `resources/list` lists the org's
 * kept files and `resources/read` answers one (text, or base64 bytes), so the agent never needs the key.
 *
 * The transport is the official MCP SDK's web-standard one, fed the message the gateway already parsed and
 * checked like every other JSON body (size, depth, no infinite number or __proto__ key, one object: no batches); a
 * body that is not one message is answered as JSON-RPC answers it (-32700, -32600), the envelope as its `data`.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import type { CallToolResult, JSONRPCErrorResponse, Tool } from "@modelcontextprotocol/sdk/types.js"
import * as Cause from "effect/Cause"
import * as DateTime from "effect/DateTime"
import type * as Either from "effect/Either"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import type * as ParseResult from "effect/ParseResult"
import * as Runtime from "effect/Runtime"
import * as Schema from "effect/Schema"
import {
  envelope,
  envelopeOf,
  exceededState,
  InternalError,
  InvalidIdempotencyKey,
  InvalidRequest,
  isGatewayError,
  type MalformedJson,
  MethodNotAllowed,
  NotFound,
  responseHeaders,
  UnknownTool
} from "../domain/errors.js"
import { describeParseError } from "../domain/parse.js"
import { describePrice, type Price } from "../domain/pricing.js"
import { RunOutput, RunRequest } from "../domain/schemas.js"
import { catalog, isToolName, type ToolName, toolNames } from "../domain/tools.js"
import { ProviderRegistry } from "../services/ProviderRegistry.js"
import { type ArtifactCursor, type ArtifactRef, Artifacts, type ListedArtifact, orgTurns, readerOf } from "../services/Artifacts.js"
import { Betas } from "../services/Betas.js"
import { Connections } from "../services/Connections.js"
import { ServerConfig } from "../config.js"
import { Authentication } from "../services/Authentication.js"
import { Gateway, type Outcome } from "../services/Gateway.js"
import type { Caller } from "../services/KeyStore.js"
import { Pricing } from "../services/Pricing.js"
import { type CallFacts, callFacts, CurrentCallFacts } from "../services/Telemetry.js"
import { currentRequest, type RequestState } from "./envelope.js"
import { jsonSchemaOf, objectSchemaOf } from "./jsonSchema.js"
import { bodyProblems, emptyBody, isJsonObject, MAX_JSON_DEPTH, notJson, readJsonText } from "./security.js"
import { isArray, type JsonProblem, jsonProblem } from "../domain/json.js"
import { cachedSuccess } from "../services/cachedSuccess.js"
import { weightedMembers } from "./weighted.js"

// Whether an Accept header takes a JSON answer: none (or one with no media range in it: an empty list states no
// preference, RFC 9110 §5.6.1), or a media range application/json, application/* or */* not given q=0 — unless
// application/json itself is given q=0 (the most specific range decides, RFC 9110 §12.5.1).
const takesJson = (accept: string | undefined): boolean => {
  const ranges = accept === undefined ? [] : weightedMembers(accept)
  if (ranges.length === 0) return true
  const json = ranges.find((range) => range.value === "application/json")
  if (json !== undefined) return json.weight > 0
  return ranges.some((range) => range.weight > 0 && (range.value === "application/*" || range.value === "*/*"))
}

export const MCP_PATH = "/mcp"
const VERSION = "0.1.0"

/** The JSON-RPC error MCP gives for a resource that does not exist. */
const RESOURCE_NOT_FOUND = -32002
/** JSON-RPC's invalid params: what MCP answers to a cursor it did not give. */
const INVALID_PARAMS = -32602
/** JSON-RPC's parse error: the body is not JSON. */
const PARSE_ERROR = -32700
/** JSON-RPC's invalid request: JSON, but not one request this server takes. */
const INVALID_REQUEST = -32600
/** Kept files per `resources/list` page. */
const RESOURCES_PAGE = 50

export const ARTIFACT_URI_PREFIX = "tool-gateway://artifacts/"

/**
 * How many `resources/read` answers a process makes at once, and an org's: each holds its whole file, the file's
 * base64 and the JSON-RPC text until it is written (about four times the file). The rest wait their turn.
 */
export const MCP_FILE_READS_AT_ONCE = 2
export const MCP_FILE_READS_PER_ORG = 1

const Meta = Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
/** A list request's params, when it has any: where the last page ended. */
const ListParams = Schema.UndefinedOr(Schema.Struct({ cursor: Schema.optional(Schema.String), _meta: Meta }))

/** A `tools/list` cursor: never one this server gave. */
const NoCursor = Schema.Unknown.pipe(Schema.filter(() => "is not one this server gave: tools/list answers every tool at once (send no cursor)"))

/**
 * The params of the requests this server answers, as MCP's schema (2025-11-25) gives them: `initialize` names the
 * client's protocol version, capabilities and name and version; a call is a name with its arguments as an object; a
 * read, a resource's URI; a list, perhaps a cursor (not `tools/list`, which is one page).
 */
type DecodeParams = (params: unknown) => Either.Either<unknown, ParseResult.ParseError>
const paramsOf: ReadonlyMap<string, DecodeParams> = new Map<string, DecodeParams>([
  ["tools/call", Schema.decodeUnknownEither(
    Schema.Struct({ name: Schema.String, arguments: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown })), _meta: Meta }),
    { errors: "all" }
  )],
  ["initialize", Schema.decodeUnknownEither(
    Schema.Struct({
      protocolVersion: Schema.String,
      capabilities: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
      clientInfo: Schema.Struct({ name: Schema.String, version: Schema.String }),
      _meta: Meta
    }),
    { errors: "all" }
  )],
  // not paginated: every tool is on the one page, and any cursor is one this server did not give
  ["tools/list", Schema.decodeUnknownEither(Schema.UndefinedOr(Schema.Struct({ cursor: Schema.optional(NoCursor), _meta: Meta })), { errors: "all" })],
  ["resources/list", Schema.decodeUnknownEither(ListParams, { errors: "all" })],
  ["resources/read", Schema.decodeUnknownEither(Schema.Struct({ uri: Schema.String, _meta: Meta }), { errors: "all" })]
])

/**
 * A request whose params are not what its method takes: JSON-RPC's invalid params (-32602), answered before the
 * SDK's server, which would answer its own validation failure as an internal error (-32603) quoting its schema
 * library's issues. Undefined for well-formed params, for a method this server does not answer (the SDK answers
 * it), and for a message without a request id (not a request: the transport answers it).
 */
const invalidParams = ({ message, paramsProblem: problem }: Message): JSONRPCErrorResponse | undefined => {
  const id = message["id"]
  const method = message["method"]
  if (typeof method !== "string" || !isRequestId(id)) return undefined
  // what JSON.parse read but the gateway does not pass on (a number read as infinite, a __proto__ key), in any method's params
  if (problem !== undefined) {
    return { jsonrpc: "2.0", id, error: { code: INVALID_PARAMS, message: `Invalid ${method} params: ${bodyProblems[problem]}` } }
  }
  const decode = paramsOf.get(method)
  if (decode === undefined) return undefined
  const decoded = decode(message["params"])
  return decoded._tag === "Right"
    ? undefined
    : { jsonrpc: "2.0", id, error: { code: INVALID_PARAMS, message: `Invalid ${method} params: ${describeParseError(decoded.left)}` } }
}

/** A request id as MCP has it (a string or an integer): one an answer can repeat. */
const isRequestId = (id: unknown): id is string | number =>
  typeof id === "string" || (typeof id === "number" && Number.isInteger(id))

/**
 * A body this server does not take as a message, answered as JSON-RPC answers it (2.0, §5.1) and with the status the
 * official SDK's transport gives it (400): -32700 (parse error) for a body that is not JSON, -32600 (invalid request)
 * for JSON that is not one request it takes. The id is the message's, or null when it cannot be read; `data` is the
 * gateway's envelope (`type`, `code`, `retryable`, `billable`), as every other refusal carries it.
 */
type Refusal = { readonly _tag: "Refusal"; readonly code: number; readonly id: string | number | null; readonly error: InvalidRequest | MalformedJson }

const refusal = (code: number, error: InvalidRequest | MalformedJson, id: unknown = null): Refusal =>
  ({ _tag: "Refusal", code, id: isRequestId(id) ? id : null, error })

/**
 * One JSON-RPC message, and what is wrong in its `params` if anything (an infinite number, a `__proto__` key,
 * nesting too deep there): `invalidParams` answers that with the message's id, as a request's bad params are answered.
 */
interface Message {
  readonly _tag: "Message"
  readonly message: Readonly<Record<string, unknown>>
  readonly paramsProblem?: JsonProblem
}

/**
 * A body's text as one JSON-RPC message, or why it is not one: a message whose only problem is in its `params` and
 * whose id and method can be read is a message (the whole of it walked once; its params again only when the walk
 * found something).
 */
const messageOf = (text: string): Message | Refusal => {
  if (text.trim() === "") return refusal(PARSE_ERROR, emptyBody())
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return refusal(PARSE_ERROR, notJson())
  }
  if (isArray(parsed)) {
    return refusal(INVALID_REQUEST, new InvalidRequest({
      message: "JSON-RPC batches are not accepted (MCP dropped them in 2025-06-18): send one message per request."
    }))
  }
  if (!isJsonObject(parsed)) return refusal(INVALID_REQUEST, new InvalidRequest({ message: "The request body must be a JSON-RPC message: a JSON object." }))
  const problem = jsonProblem(parsed, MAX_JSON_DEPTH)
  if (problem === undefined) return { _tag: "Message", message: parsed }
  // the message but its params, as an own-key copy (a __proto__ key stays a key)
  const { params: _params, ...rest } = parsed
  const outsideParams = jsonProblem(rest, MAX_JSON_DEPTH)
  if (outsideParams === undefined && typeof parsed["method"] === "string" && isRequestId(parsed["id"])) {
    return { _tag: "Message", message: parsed, paramsProblem: problem }
  }
  return refusal(INVALID_REQUEST, new InvalidRequest({ message: bodyProblems[outsideParams ?? problem] }), parsed["id"])
}

/** A refusal's answer: a JSON-RPC error response. */
const refusalResponse = (r: Refusal) =>
  HttpServerResponse.unsafeJson(
    { jsonrpc: "2.0", id: r.id, error: { code: r.code, message: r.error.message, data: envelope(r.error).error } },
    { status: 400 }
  )

/**
 * A JSON-RPC error a request handler throws: the SDK's server answers its code, message and data. (The SDK's own
 * `McpError` puts "MCP error <code>: " in its message, and its client adds the same again.)
 */
class JsonRpcFailure extends Error {
  constructor(readonly code: number, message: string, readonly data?: unknown) {
    super(message)
  }
}

/**
 * The files an answer refers to: every file reference `{id: "art_…", content_type, bytes, sha256, url}` in it,
 * however deep and under whatever name (`artifact`, `screenshot`, `run`'s `artifacts`), each once.
 */
const artifactsIn = (value: unknown, found: Map<string, ArtifactRef> = new Map(), depth = 0): Map<string, ArtifactRef> => {
  if (depth > 16 || typeof value !== "object" || value === null) return found
  if (isArtifactRef(value)) {
    found.set(value.id, value)
    return found
  }
  for (const v of isArray(value) ? value : Object.values(value)) artifactsIn(v, found, depth + 1)
  return found
}

const isArtifactRef = (u: unknown): u is ArtifactRef =>
  isRecord(u) && typeof u["id"] === "string" && u["id"].startsWith("art_") && typeof u["content_type"] === "string" &&
  typeof u["bytes"] === "number" && typeof u["sha256"] === "string" && typeof u["url"] === "string"

const artifactUri = (id: string) => `${ARTIFACT_URI_PREFIX}${id}`

/**
 * A tool's description for a model choosing one: what it does and which provider answers (the catalog's), then
 * whether it needs a connected account or is a beta, and its price (this gateway's, `PRICES_FILE` included).
 */
const describeTool = (def: { readonly description: string; readonly account: boolean; readonly beta: boolean }, price: Price): string =>
  [
    def.description,
    def.account ? "Runs on the org's own account at this provider, connected in the dashboard or with POST /v1/connections." : "",
    def.beta ? "Beta: shown once enabled for the org." : "",
    `Costs ${describePrice(price)}; a call that fails costs nothing, unless the provider's answer could not be normalized (then its minimum).`
  ].filter((n) => n !== "").join(" ")

/** The MCP description of every tool, built once. */
const toolDescriptions = (pricing: typeof Pricing.Service) =>
  new Map(toolNames.map((name): readonly [ToolName, Tool] => {
    const def = catalog[name]
    return [name, {
      name,
      title: def.summary,
      description: describeTool(def, pricing.priceOf(name)),
      inputSchema: objectSchemaOf(def.input.ast),
      outputSchema: objectSchemaOf(def.output.ast),
      annotations: {
        title: def.summary,
        readOnlyHint: def.effect === "read",
        destructiveHint: def.destructive,
        idempotentHint: def.idempotent,
        openWorldHint: true
      }
    }]
  }))

/** `POST /v1/run` as an MCP tool. Not a catalog tool: its name is one no tool can have (`run` is no tool). */
const RUN_TOOL = "run"

const runInput = jsonSchemaOf(RunRequest.ast)
const runOutput = jsonSchemaOf(RunOutput.ast)

/** The `run` tool, for the tools the caller can use: its `tool` is one of them. */
const runTool = (names: ReadonlyArray<ToolName>): Tool => {
  const properties: Record<string, object> = {}
  for (const [key, value] of Object.entries(isRecord(runInput["properties"]) ? runInput["properties"] : {})) {
    if (isRecord(value)) properties[key] = value
  }
  properties["tool"] = { ...properties["tool"], enum: names }
  return {
    name: RUN_TOOL,
    title: "A tool's raw provider answer",
    description:
      "Call one of the other tools' provider and get its raw, unnormalized answer: {tool, provider, status, body}, where body is " +
      "the provider's answer as it sent it (the same as POST /v1/run). Use it when a tool answered normalization_failed, or to " +
      "see what its answer leaves out. input is validated against that tool's input schema, and the call is checked and charged " +
      "as that tool is: its connection, beta and price (in credits, counted from the raw answer); a call that fails costs nothing. " +
      "It can run any tool listed here, writes included. Files the call kept are resource links.",
    inputSchema: { type: "object", ...runInput, properties },
    outputSchema: { type: "object", ...runOutput },
    annotations: {
      title: "A tool's raw provider answer",
      readOnlyHint: false,
      destructiveHint: true,
      idempotentHint: false,
      openWorldHint: true
    }
  }
}

/** An error message as seen over MCP: the raw answer is the `run` tool here (messages name `POST /v1/run`). */
const overMcp = (message: string): string => message.replace("POST /v1/run with {", "The run tool (POST /v1/run) with {")

/**
 * What a call answered, for `_meta`: its request id and the credits it was charged (a normalization failure
 * is billed; every other failure is free). The keys are namespaced as MCP asks of `_meta`: a prefix of the
 * server's own, `tool-gateway/` (prefixes whose second label is `modelcontextprotocol` or `mcp` are MCP's).
 */
type CallMeta = {
  readonly "tool-gateway/request-id": string
  readonly "tool-gateway/credits-charged": number
  readonly "tool-gateway/replayed"?: true
  /** With `replayed`: the request id of the call whose answer this is. */
  readonly "tool-gateway/original-request-id"?: string
  /** A refusal that says when to come back (HTTP's `Retry-After`, which an MCP result has no header for), in seconds. */
  readonly "tool-gateway/retry-after"?: number
}

/**
 * A failed call: the envelope as text, and again in `_meta`. Never as `structuredContent`: a client that
 * listed the tools validates `structuredContent` against the tool's output schema even when `isError` is set
 * (the official SDK client does), and an envelope would fail that check and hide the tool error.
 */
const errorResult = (error: unknown, meta: CallMeta): CallToolResult => {
  const failure = isGatewayError(error) ? error : new InternalError({ message: "An internal error occurred; retry." })
  const { error: described } = envelope(failure)
  const retryAfter = responseHeaders(failure)["retry-after"]
  const message = overMcp(described.message).replace("(Retry-After)", "(_meta's tool-gateway/retry-after)")
  const body = { error: { ...described, message } }
  return {
    isError: true,
    content: [{ type: "text", text: JSON.stringify(body) }],
    _meta: { ...meta, ...(retryAfter !== undefined ? { "tool-gateway/retry-after": Number(retryAfter) } : {}), "tool-gateway/error": body.error }
  }
}

const parseJson = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

/**
 * The first protocol revision with `resource_link` content (2025-06-18). An older client's SDK refuses a result that
 * holds one (the official TypeScript SDK 1.11 throws on it), so it gets the link as text.
 */
const RESOURCE_LINKS_SINCE = "2025-06-18"
/** The revision a request without `MCP-Protocol-Version` is taken to speak (the transport section of 2025-06-18). */
const REVISION_WITHOUT_HEADER = "2025-03-26"

/** How a result refers to the files its call kept, in the protocol revision the client speaks. */
const fileContent = (a: ArtifactRef, revision: string) =>
  revision >= RESOURCE_LINKS_SINCE
    ? { type: "resource_link" as const, uri: artifactUri(a.id), name: a.id, mimeType: a.content_type, size: a.bytes }
    : {
      type: "text" as const,
      text: `A file this call kept: ${artifactUri(a.id)} (${a.content_type}, ${a.bytes} bytes); resources/read answers it.`
    }

const resultOf = (outcome: Outcome<unknown>, revision: string): CallToolResult => {
  const meta: CallMeta = {
    "tool-gateway/request-id": outcome.requestId,
    "tool-gateway/credits-charged": outcome._tag === "Fresh" ? outcome.charged : 0,
    ...(outcome._tag === "Replayed" ? { "tool-gateway/replayed": true, "tool-gateway/original-request-id": outcome.originalRequestId } : {})
  }
  if (outcome._tag === "Replayed" && outcome.status !== 200) {
    // a stored failure (a normalization failure, or a write whose outcome is unknown), replayed
    const body = parseJson(outcome.body)
    const stored = isRecord(body) ? body["error"] : undefined
    const error = isRecord(stored) && typeof stored["message"] === "string" ? { ...stored, message: overMcp(stored["message"]) } : stored
    const text = error === stored ? outcome.body : JSON.stringify({ error })
    return { isError: true, content: [{ type: "text", text }], _meta: { ...meta, ...(error !== undefined ? { "tool-gateway/error": error } : {}) } }
  }
  const structured = parseJson(outcome.body)
  const links = [...artifactsIn(structured).values()].map((a) => fileContent(a, revision))
  return {
    content: [{ type: "text", text: outcome.body }, ...links],
    ...(isRecord(structured) ? { structuredContent: structured } : {}),
    _meta: meta
  }
}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

const iso = (date: Date) => DateTime.formatIso(DateTime.unsafeFromDate(date))

/** A kept file as an MCP resource. */
const resourceOf = ({ createdAt, expiresAt, ref }: ListedArtifact) => ({
  uri: artifactUri(ref.id),
  name: ref.id,
  title: `${ref.content_type} kept ${iso(createdAt)}`,
  description: `A file a tool call kept byte for byte (${ref.bytes} bytes, SHA-256 ${ref.sha256}); expires ${iso(expiresAt)}.`,
  mimeType: ref.content_type,
  size: ref.bytes,
  annotations: { lastModified: iso(createdAt) }
})

/** `resources/list`'s cursor: where the last page ended, opaque to the client. */
const Cursor = Schema.compose(Schema.StringFromBase64Url, Schema.parseJson(Schema.Tuple(Schema.Int, Schema.String)))
const encodeCursor = (cursor: ArtifactCursor): string =>
  Schema.encodeSync(Cursor)([DateTime.toEpochMillis(DateTime.unsafeFromDate(cursor.createdAt)), cursor.id])
const decodeCursor = (text: string): Option.Option<ArtifactCursor> =>
  Option.map(Schema.decodeUnknownOption(Cursor)(text), ([millis, id]) => ({ createdAt: DateTime.toDateUtc(DateTime.unsafeMake(millis)), id }))

/** Content types answered as `text` by `resources/read` (when the bytes are UTF-8); every other file is a `blob`. */
const isTextual = (contentType: string): boolean => {
  const type = contentType.split(";")[0]?.trim().toLowerCase() ?? ""
  return type.startsWith("text/") || type === "application/json" || type.endsWith("+json") || type === "application/xml" ||
    type.endsWith("+xml") || type === "application/javascript"
}

const utf8 = (data: Uint8Array): string | undefined => {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(data)
  } catch {
    return undefined
  }
}

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
    const wholeFileTurn = yield* orgTurns(MCP_FILE_READS_PER_ORG, MCP_FILE_READS_AT_ONCE)
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
        })
      })

    /** What `tools/list` shows: the tools the caller can use, and `run` for them. */
    const listedTools = (caller: Caller) =>
      Effect.map(visibleTools(caller), (names) => {
        const tools = names.flatMap((name) => {
          const tool = described.get(name)
          return tool === undefined ? [] : [tool]
        })
        return names.length === 0 ? tools : [...tools, runTool(names)]
      })

    /** The `run` tool: `POST /v1/run`'s `{tool, input}`, checked as that endpoint checks it. */
    const runRaw = (caller: Caller, args: unknown, options: { readonly idempotencyKey: string | undefined; readonly requestId: string }) =>
      Effect.gen(function* () {
        const request = yield* Schema.decodeUnknown(RunRequest, { errors: "all" })(args ?? {}).pipe(
          Effect.mapError((error) => new InvalidRequest({ message: `Invalid run input: ${describeParseError(error)}` }))
        )
        const tool = request.tool
        if (!isToolName(tool)) {
          return yield* new InvalidRequest({ message: `Invalid run input: tool: ${tool.slice(0, 100)} is not a tool (tools/list lists them).` })
        }
        return yield* gateway.runRaw(caller, tool, request.input, options)
      })

    /** One `tools/call`: a result, or a tool error carrying the envelope; the request's log line gets its code. */
    const callTool = (
      caller: Caller,
      state: RequestState,
      name: string,
      args: unknown,
      idempotencyKey: unknown,
      headerKey: string | undefined,
      revision: string
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
        // Each call takes its token from the key's rate limit here, so that a refusal is a tool error too; the HTTP
        // answer's RateLimit headers say where the bucket stands, as a tool route's do.
        const throttled = yield* Effect.either(authentication.throttle(caller))
        if (throttled._tag === "Left") {
          state.rateLimit = exceededState(throttled.left)
          return yield* failed(throttled.left)
        }
        state.rateLimit = throttled.right
        // a key that is not a string is refused, as a malformed Idempotency-Key header is: never run without one
        if (idempotencyKey !== undefined && typeof idempotencyKey !== "string") {
          return yield* failed(new InvalidIdempotencyKey({
            message: "_meta.idempotencyKey must be a string of 1–255 visible ASCII characters."
          }))
        }
        // the HTTP header, as a tool route takes it, when the message names no key; two different keys are neither
        if (headerKey !== undefined && idempotencyKey !== undefined && headerKey !== idempotencyKey) {
          return yield* failed(new InvalidIdempotencyKey({
            message: "The Idempotency-Key header and _meta.idempotencyKey differ: send one key (either, or both the same)."
          }))
        }
        const options = { idempotencyKey: idempotencyKey ?? headerKey, requestId: state.requestId }
        const call: Effect.Effect<Outcome<unknown>, unknown> = name === RUN_TOOL
          ? runRaw(caller, args, options)
          : isToolName(name)
          ? gateway.runUnknown(caller, name, args ?? {}, options)
          : Effect.fail(new UnknownTool({ message: `There is no tool named "${name.slice(0, 100)}" (tools/list lists them).` }))
        const exit = yield* Effect.exit(call)
        if (Exit.isSuccess(exit)) {
          if (exit.value._tag === "Replayed" && exit.value.status !== 200) state.code = codeOfStored(exit.value.body)
          return resultOf(exit.value, revision)
        }
        return yield* failed(Option.getOrUndefined(Cause.failureOption(exit.cause)))
      })

    /** `resources/read` of a file a tool kept: its exact bytes, base64, to the org that owns it. */
    const readArtifact = (caller: Caller, uri: string) =>
      Effect.gen(function* () {
        const id = uri.startsWith(ARTIFACT_URI_PREFIX) ? uri.slice(ARTIFACT_URI_PREFIX.length) : ""
        const { data, ref } = yield* artifacts.get(readerOf(caller), id).pipe(
          Effect.catchTag("NotFound", () => new NotFound({ message: `No resource ${uri.slice(0, 200)} (files expire; see ARTIFACT_RETENTION_SECONDS).` }))
        )
        const text = isTextual(ref.content_type) ? utf8(data) : undefined
        return {
          contents: [
            text !== undefined
              ? { uri, mimeType: ref.content_type, text }
              : { uri, mimeType: ref.content_type, blob: Buffer.from(data).toString("base64") }
          ]
        }
      })

    /** `resources/list`: the org's kept files that have not expired, newest first, a page at a time. */
    const listArtifacts = (caller: Caller, cursor: string | undefined) =>
      Effect.gen(function* () {
        const after = cursor === undefined ? Option.none() : decodeCursor(cursor)
        if (cursor !== undefined && Option.isNone(after)) {
          return yield* new InvalidRequest({ message: "Invalid cursor: pass the nextCursor of the last resources/list answer." })
        }
        const page = yield* artifacts.list(readerOf(caller), { limit: RESOURCES_PAGE, after: Option.getOrUndefined(after) })
        return {
          resources: page.artifacts.map(resourceOf),
          ...(page.next !== null ? { nextCursor: encodeCursor(page.next) } : {})
        }
      })

    // The MCP SDK (and the schemas it brings) is loaded on the first MCP request: a gateway that serves
    // only the REST API does not carry it (about 25 MB of a process's memory).
    const sdk = yield* cachedSuccess(Effect.promise(async () => {
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
        ListResourceTemplatesRequestSchema: types.ListResourceTemplatesRequestSchema
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
      // A body that is not one message is a JSON-RPC error; what HTTP refuses (size, media type) is the envelope.
      const read = yield* Effect.map(
        Effect.catchTag(readJsonText(request, maxBodyBytes), "MalformedJson", (error) => Effect.succeed(refusal(PARSE_ERROR, error))),
        (text) => typeof text === "string" ? messageOf(text) : text
      )
      if (read._tag === "Refusal") {
        // counted against the key's rate limit as every message (a flood of bad bodies was never throttled)
        state.rateLimit = yield* authentication.throttle(caller)
        state.code = envelopeOf[read.error._tag].code
        return refusalResponse(read)
      }
      const message = read.message
      // Every message counts against the key's rate limit; a tool call takes its token in the call.
      const invalid = invalidParams(read)
      if (message["method"] !== "tools/call" || invalid !== undefined) state.rateLimit = yield* authentication.throttle(caller)
      if (invalid !== undefined) {
        state.code = envelopeOf.InvalidRequest.code
        return HttpServerResponse.unsafeJson(invalid)
      }
      // tool calls run on the server's runtime: give them this request's facts for its log line and metrics
      const facts = yield* callFacts
      // A file's whole answer (its bytes, their base64, the JSON-RPC text) is made a few at a time, an org's one at a
      // time (thirty reads of a 10 MB file at once held them all, over a gigabyte). Made to its end once begun: the
      // SDK reads the file in a fiber of its own, which a client that hangs up would leave running without a turn.
      const answer = answerMessage(request, caller, state, facts, message)
      return yield* message["method"] === "resources/read" ? wholeFileTurn(caller.orgId, Effect.uninterruptible(answer)) : answer
    })

    /** What the MCP SDK's server answers a message the checks above let through. */
    const answerMessage = (
      request: HttpServerRequest.HttpServerRequest,
      caller: Caller,
      state: RequestState,
      facts: CallFacts,
      message: Message["message"]
    ) =>
      Effect.gen(function* () {

        const {
          CallToolRequestSchema,
          ListResourcesRequestSchema,
          ListResourceTemplatesRequestSchema,
          ListToolsRequestSchema,
          ReadResourceRequestSchema,
          Server,
          WebStandardStreamableHTTPServerTransport
        } = yield* sdk
        const server = new Server({ name: "tool-gateway", version: VERSION }, { capabilities: { tools: {}, resources: {} } })
        // the transport has refused a revision it does not know before any handler runs
        const revision = request.headers["mcp-protocol-version"] ?? REVISION_WITHOUT_HEADER
        server.setRequestHandler(ListToolsRequestSchema, () => run(Effect.map(listedTools(caller), (tools) => ({ tools }))))
        server.setRequestHandler(CallToolRequestSchema, (call) => {
          const meta = call.params._meta
          const key: unknown = isRecord(meta) ? meta["idempotencyKey"] : undefined
          return run(
            callTool(caller, state, call.params.name, call.params.arguments, key, request.headers["idempotency-key"], revision).pipe(
              Effect.locally(CurrentCallFacts, facts)
            )
          )
        })
        server.setRequestHandler(ListResourcesRequestSchema, async (list) => {
          const listed = await run(Effect.either(listArtifacts(caller, list.params?.cursor)))
          if (listed._tag === "Left") {
            state.code = envelopeOf.InvalidRequest.code
            throw new JsonRpcFailure(INVALID_PARAMS, listed.left.message)
          }
          return listed.right
        })
        server.setRequestHandler(ReadResourceRequestSchema, async (read) => {
          const found = await run(Effect.either(readArtifact(caller, read.params.uri)))
          if (found._tag === "Left") {
            state.code = envelopeOf.NotFound.code
            throw new JsonRpcFailure(RESOURCE_NOT_FOUND, found.left.message, { uri: read.params.uri.slice(0, 200) })
          }
          return found.right
        })
        // resources, but no templates: the kept files are listed one by one (clients that see the capability ask)
        server.setRequestHandler(ListResourceTemplatesRequestSchema, () => ({ resourceTemplates: [] }))
        // Stateless: no session id (the option left out), one server per HTTP request.
        const transport = new WebStandardStreamableHTTPServerTransport({ enableJsonResponse: true })
        yield* Effect.promise(() => server.connect(transport))
        const headers = new Headers()
        for (const [k, v] of Object.entries(request.headers)) headers.set(k, v)
        // Every answer here is JSON: a client that takes JSON (`application/json`, `*/*` as curl sends, or no Accept)
        // is served, though the transport wants `text/event-stream` named too (modelcontextprotocol/typescript-sdk#1944).
        if (takesJson(request.headers["accept"])) headers.set("accept", "application/json, text/event-stream")
        // The body was read and parsed above; the transport takes the parsed message.
        const webRequest = new Request(`http://gateway${MCP_PATH}`, { method: "POST", headers })
        const response = yield* Effect.promise(() => transport.handleRequest(webRequest, { parsedBody: message }))
        const text = yield* Effect.promise(() => response.text())
        yield* Effect.promise(() => server.close())
        // a JSON-RPC error answered 200 (no such resource or method, bad params) is logged with its code too
        if (state.code === undefined) state.code = codeOfJsonRpcError(text)
        // A message the transport refuses as not JSON-RPC (the SDK says -32700 or -32600: it was JSON, so it is an
        // invalid request); what it refuses of the HTTP request (a wrong Accept, protocol version) is the envelope.
        if (response.status >= 400) {
          const refused = new InvalidRequest({ message: `Not a valid MCP request: ${jsonRpcErrorMessage(text)}` })
          const code = jsonRpcErrorCode(text)
          if (response.status === 400 && (code === PARSE_ERROR || code === INVALID_REQUEST)) {
            state.code = envelopeOf.InvalidRequest.code
            return refusalResponse(refusal(INVALID_REQUEST, refused, message["id"]))
          }
          return yield* refused
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

/** The code of a JSON-RPC error answer; none for a result. */
const jsonRpcErrorCode = (text: string): unknown => {
  const body = parseJson(text)
  return isRecord(body) && isRecord(body["error"]) ? body["error"]["code"] : undefined
}

/** The envelope code a JSON-RPC error answer stands for in the request's log line; none for a result. */
const codeOfJsonRpcError = (text: string): string | undefined => {
  const code = jsonRpcErrorCode(text)
  if (code === undefined) return undefined
  return code === RESOURCE_NOT_FOUND
    ? envelopeOf.NotFound.code
    : code === -32603 ? envelopeOf.InternalError.code : envelopeOf.InvalidRequest.code
}

/** The message of a JSON-RPC error answer, or the answer itself. */
const jsonRpcErrorMessage = (text: string): string => {
  const body = parseJson(text)
  if (isRecord(body) && isRecord(body["error"]) && typeof body["error"]["message"] === "string") {
    return body["error"]["message"].slice(0, 300)
  }
  return text.slice(0, 300)
}
