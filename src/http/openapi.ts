/**
 * The OpenAPI document, cleaned for people and for the tools that read it (linters, client generators): the
 * envelope is the error schema of every operation (the framework's own decode-error schema is documented as
 * `invalid_request`, which is how a request that does not decode is answered), each error status lists the
 * codes that operation can give (they follow from the errors each part of the API declares), tool operations
 * take `Idempotency-Key` and say their price, every response declares the headers the gateway sends with it,
 * operation ids are plain identifiers, nothing Effect generates for itself is left in the schemas
 * (`jsonSchema.ts`), and operations and errors carry examples.
 *
 * This module is part of the typed client's bundle (through `Api.ts`): it knows the catalog, never the
 * configuration. `GET /openapi.json` (`openapiRoute.ts`) applies this gateway's prices and public URL.
 */
import { envelopeOf, type EnvelopeSpec, type ErrorHeader, replayedErrors } from "../domain/errors.js"
import { inputExamples, outputExamples } from "../domain/examples.js"
import { describePrice, type Price } from "../domain/pricing.js"
import { catalog, isToolName, type ToolName } from "../domain/tools.js"
import { dropGenerated, inlineTypeOnly } from "./jsonSchema.js"
import { isArray } from "../domain/json.js"

type Json = Record<string, unknown>

const isObject = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)
const objectAt = (u: Json, key: string): Json => {
  const value = u[key]
  return isObject(value) ? value : {}
}
const FRAMEWORK_SCHEMAS = ["HttpApiDecodeError", "Issue", "PropertyKey"]

const specByName = new Map(Object.entries(envelopeOf).map(([tag, spec]) => [`${tag}Error`, spec]))
const SCHEMAS = "#/components/schemas/"
const DECODE_ERROR = `${SCHEMAS}HttpApiDecodeError`
const INVALID_REQUEST = `${SCHEMAS}InvalidRequestError`

const exampleEnvelope = (spec: EnvelopeSpec) => ({
  error: { type: spec.type, code: spec.code, message: "A sentence that says what happened and what to do.", retryable: spec.retryable, billable: spec.billable }
})

const refOf = (u: unknown): string | undefined => (isObject(u) && typeof u["$ref"] === "string" ? u["$ref"] : undefined)

// -- headers -------------------------------------------------------------------------------------------

/**
 * The headers a client reads, as the gateway sends them: `X-Request-Id` and the rate-limit headers from the
 * envelope middleware (`envelope.ts`), `X-Credits-Charged` and `Idempotent-Replayed` from the tool handlers
 * (`handlers.ts`), and what an error's table entry names (`responseHeaders` in `src/domain/errors.ts`).
 */
const HEADERS = {
  "X-Request-Id": {
    description: "This request's id (`req_…`): quote it when you report a problem; the gateway's log line and the call's usage record carry it.",
    required: true,
    schema: { type: "string" }
  },
  "X-Credits-Charged": {
    description:
      "The credits this call was charged: 0 for a replay (the first call was charged), the least the tool costs for `normalization_failed`.",
    required: true,
    schema: { type: "integer", minimum: 0 }
  },
  "Idempotent-Replayed": {
    description: "`true`: this is the stored answer of an earlier call with the same `Idempotency-Key` and input; nothing was called again.",
    required: false,
    schema: { type: "string", enum: ["true"] }
  },
  "X-Original-Request-Id": {
    description: "With `Idempotent-Replayed`: the `X-Request-Id` of the call that produced this answer (its log line and usage record).",
    required: false,
    schema: { type: "string" }
  },
  RateLimit: {
    description:
      "Where the API key stands against its rate limit (draft-ietf-httpapi-ratelimit-headers): `\"key\";r=<requests left>;t=<seconds until full>`. " +
      "Sent once the key is authenticated, when a rate limit applies to it.",
    required: false,
    schema: { type: "string" },
    example: "\"key\";r=9;t=1"
  },
  "RateLimit-Policy": {
    description: "The API key's rate limit: `\"key\";q=<requests>;w=<window in seconds>`. Sent with `RateLimit`.",
    required: false,
    schema: { type: "string" },
    example: "\"key\";q=10;w=1"
  },
  "WWW-Authenticate": {
    description: "On an `invalid_token` of a route that takes a Bearer token (an ID token): `Bearer realm=\"tool-gateway\"`.",
    required: false,
    schema: { type: "string" }
  },
  "Retry-After": {
    description: "Seconds to wait before trying again.",
    required: true,
    schema: { type: "integer", minimum: 1 }
  },
  "X-Next-Cursor": {
    description:
      "With `format=csv`, when more records match than one export holds: the `cursor` that asks for the rest (the export is newest first).",
    required: false,
    schema: { type: "string" }
  }
} as const

type HeaderName = keyof typeof HEADERS

/** The component when it says the same about `required`, else a copy that says otherwise. */
const header = (name: HeaderName, required: boolean = HEADERS[name].required): unknown =>
  required === HEADERS[name].required ? { $ref: `#/components/headers/${name}` } : { ...HEADERS[name], required }

/** The statuses a tool call's answer can have when it is replayed under its `Idempotency-Key`. */
const REPLAYED_STATUSES = new Set([200, ...replayedErrors.map((tag) => envelopeOf[tag].status)])

interface OperationKind {
  /** A tool call (`POST /v1/<tool>`, `POST /v1/run`): charged, and replayed under an `Idempotency-Key`. */
  readonly call: boolean
  /** Authenticated by the API key, so rate limited. */
  readonly apiKey: boolean
}

/** The headers of one response: every answer's, the API key's, a call's, and those of the errors it can be. */
const headersOf = (kind: OperationKind, status: number, errors: ReadonlyArray<EnvelopeSpec>): Json => {
  const headers: Json = { "X-Request-Id": header("X-Request-Id") }
  const some = (h: ErrorHeader) => errors.some((spec) => spec.headers?.includes(h) === true)
  if (kind.apiKey || some("ratelimit")) {
    headers["RateLimit"] = header("RateLimit")
    headers["RateLimit-Policy"] = header("RateLimit-Policy")
  }
  if (kind.call && REPLAYED_STATUSES.has(status)) {
    headers["X-Credits-Charged"] = header("X-Credits-Charged", status === 200)
    headers["Idempotent-Replayed"] = header("Idempotent-Replayed")
    headers["X-Original-Request-Id"] = header("X-Original-Request-Id")
  } else if (some("credits-charged")) {
    headers["X-Credits-Charged"] = header("X-Credits-Charged", false)
  }
  if (some("www-authenticate")) headers["WWW-Authenticate"] = header("WWW-Authenticate")
  if (some("retry-after")) {
    headers["Retry-After"] = header("Retry-After", errors.every((spec) => spec.headers?.includes("retry-after") === true))
  }
  return headers
}

// -- responses -----------------------------------------------------------------------------------------

/**
 * Rewrite one error response: the framework's decode error is answered as `invalid_request`, so it is
 * documented as that; the description lists the codes this operation can give with this status, and an
 * example shows the first.
 */
const cleanError = (kind: OperationKind, status: number, response: Json): Json => {
  const json = objectAt(objectAt(response, "content"), "application/json")
  const schema = objectAt(json, "schema")
  const members = isArray(schema["anyOf"]) ? schema["anyOf"] : [schema]
  const refs = [...new Set(members.map((m) => (refOf(m) === DECODE_ERROR ? INVALID_REQUEST : refOf(m) ?? "")).filter((r) => r !== ""))]
  const specs = refs.flatMap((ref) => {
    const spec = specByName.get(ref.replace(SCHEMAS, ""))
    return spec === undefined ? [] : [spec]
  })
  const cleaned = refs.length === 1 ? { $ref: refs[0] } : { anyOf: refs.map(($ref) => ({ $ref })) }
  const first = specs[0]
  return {
    ...response,
    description: `Error envelope. Codes: ${specs.map((s) => `${s.code} (retryable ${s.retryable}, billable ${s.billable})`).join("; ")}.`,
    headers: headersOf(kind, status, specs),
    content: {
      "application/json": { ...json, schema: cleaned, ...(first !== undefined ? { example: exampleEnvelope(first) } : {}) }
    }
  }
}

/** A success response: its headers, and for a tool its example answer and what it is. */
const cleanSuccess = (kind: OperationKind, tool: string, status: number, response: Json): Json => {
  // the headers an endpoint declared itself (`textAlternative`), then those every answer of its kind has
  const cleaned = { ...response, headers: { ...objectAt(response, "headers"), ...headersOf(kind, status, []) } }
  if (status !== 200 || !kind.call) return cleaned
  if (!isToolName(tool)) return { ...cleaned, description: "The provider's raw answer" }
  const content = objectAt(response, "content")
  const json = objectAt(content, "application/json")
  return {
    ...cleaned,
    description: "The tool's answer, normalized",
    content: { ...content, "application/json": { ...json, example: outputExamples[tool] } }
  }
}

/**
 * For an endpoint with a JSON success and a text one of the same status (`OpenApi.Transform` on the endpoint):
 * the framework documents both as one JSON union; the text one goes under its own media type. `headers`: what
 * else its 200 may carry.
 */
export const textAlternative = (contentType: string, headers: ReadonlyArray<HeaderName> = []) =>
(operation: Record<string, unknown>): Record<string, unknown> => {
  const responses = objectAt(operation, "responses")
  const ok = objectAt(responses, "200")
  const schema = objectAt(objectAt(objectAt(ok, "content"), "application/json"), "schema")
  const members = isArray(schema["anyOf"]) ? schema["anyOf"] : []
  const text = members.filter((m) => isObject(m) && m["type"] === "string")
  const json = members.filter((m) => !text.includes(m))
  const [textSchema] = text
  const [jsonSchema] = json
  if (text.length !== 1 || json.length !== 1 || textSchema === undefined || jsonSchema === undefined) return operation
  return {
    ...operation,
    responses: {
      ...responses,
      "200": {
        ...ok,
        content: { "application/json": { schema: jsonSchema }, [contentType]: { schema: textSchema } },
        headers: Object.fromEntries(headers.map((name) => [name, header(name)]))
      }
    }
  }
}

// -- operations ----------------------------------------------------------------------------------------

/**
 * `Idempotency-Key`, a parameter of every tool operation (read by the handlers, not declared per endpoint).
 * Its example is what request samples send (without one, the /docs page's samples send it empty, which is
 * refused); it names the operation, so samples of two tools copied with their keys do not collide.
 */
const idempotencyParameter = (operation: string) => ({
  name: "Idempotency-Key",
  in: "header",
  required: false,
  description: "Makes a retry safe: the same key with the same tool and input replays the first answer (1 to 255 visible ASCII characters). " +
    "A new call needs a new key (a UUID, say).",
  schema: { type: "string", minLength: 1, maxLength: 255 },
  example: `${operation}-7d0f6c1e-2b4a-4f57-9a43-1c8e5b2d9f60`
})

/** `group.endpoint` (the framework's) as one identifier: `tools.mobile_app_search` → `toolsMobileAppSearch`. */
export const operationIdOf = (id: string): string =>
  id.split(/[._]/).filter((part) => part !== "").map((part, i) => (i === 0 ? part : part.charAt(0).toUpperCase() + part.slice(1))).join("")

/** What a tool does, what it needs, and what it costs: the description of its operation. */
export const describeToolOperation = (tool: ToolName, price: Price): string => {
  const def = catalog[tool]
  return [
    def.description,
    def.account
      ? "Runs on the org's own account at the provider, connected with `POST /v1/connections`; until then it answers `401 credential_required`."
      : "",
    def.beta ? `Beta: off until enabled for the org (\`PUT /v1/org/betas/${tool}\`); until then it answers \`401 beta_unavailable\`.` : "",
    `**Price: ${describePrice(price)}.**${price.unit === "call" ? "" : " The most the input can ask for is reserved; what the answer holds is charged."} ` +
      "A call that fails costs nothing, except `normalization_failed` (the least the tool costs); `X-Credits-Charged` says what a call was charged."
  ].filter((paragraph) => paragraph !== "").join("\n\n")
}

const RUN_DESCRIPTION =
  "The fallback when a curated tool answers normalization_failed: the same authentication, input validation, connection check, " +
  "reservation and settlement as the tool, without normalization.\n\n" +
  "**Price: the price of the tool named in `tool`** (its operation here, or `GET /v1/tools`), counted from the raw answer " +
  "(an answer it cannot count is charged the least the tool costs); `X-Credits-Charged` says what a call was charged."

/** The tool operations' descriptions, with these prices (the catalog's here; this gateway's when served). */
export const withPrices = (spec: Json, priceOf: (tool: ToolName) => Price): Json => {
  const paths: Json = {}
  for (const [path, item] of Object.entries(objectAt(spec, "paths"))) {
    const tool = path.slice("/v1/".length)
    const post = isObject(item) ? item["post"] : undefined
    paths[path] = isObject(item) && isObject(post) && path.startsWith("/v1/") && isToolName(tool)
      ? { ...item, post: { ...post, description: describeToolOperation(tool, priceOf(tool)) } }
      : item
  }
  return { ...spec, paths }
}

const hasSecurity = (operation: Json, scheme: string) =>
  isArray(operation["security"]) && operation["security"].some((s) => isObject(s) && scheme in s)

const cleanOperation = (path: string, operation: Json): Json => {
  const tool = path.startsWith("/v1/") ? path.slice(4) : ""
  const kind: OperationKind = { call: isToolName(tool) || path === "/v1/run", apiKey: hasSecurity(operation, "apiKey") }
  const responses: Json = {}
  for (const [status, response] of Object.entries(objectAt(operation, "responses"))) {
    if (!isObject(response)) continue
    const code = Number(status)
    responses[status] = code >= 400 ? cleanError(kind, code, response) : cleanSuccess(kind, tool, code, response)
  }
  let requestBody = operation["requestBody"]
  if (isToolName(tool) && isObject(requestBody)) {
    const json = objectAt(objectAt(requestBody, "content"), "application/json")
    requestBody = { ...requestBody, content: { "application/json": { ...json, example: inputExamples[tool] } } }
  }
  const parameters = isArray(operation["parameters"]) ? operation["parameters"] : []
  const id = operation["operationId"]
  return {
    ...operation,
    ...(typeof id === "string" ? { operationId: operationIdOf(id) } : {}),
    ...(path === "/v1/run" ? { description: RUN_DESCRIPTION } : {}),
    responses,
    ...(requestBody !== undefined ? { requestBody } : {}),
    ...(kind.call ? { parameters: [...parameters, idempotencyParameter(tool)] } : {})
  }
}

export const cleanSpec = (input: Json): Json => {
  const dropped = dropGenerated(input)
  const generated = isObject(dropped) ? dropped : input
  const components = objectAt(generated, "components")
  const inlined = inlineTypeOnly(generated, objectAt(components, "schemas"), SCHEMAS)
  const spec = inlined.root
  const cleanedPaths: Json = {}
  for (const [path, item] of Object.entries(objectAt(spec, "paths"))) {
    if (!isObject(item)) continue
    const cleanedItem: Json = {}
    for (const [method, operation] of Object.entries(item)) {
      cleanedItem[method] = isObject(operation) ? cleanOperation(path, operation) : operation
    }
    cleanedPaths[path] = cleanedItem
  }
  const cleanedSchemas: Json = {}
  for (const [name, schema] of Object.entries(inlined.defs)) {
    if (FRAMEWORK_SCHEMAS.includes(name)) continue
    const errorSpec = specByName.get(name)
    cleanedSchemas[name] = errorSpec !== undefined && isObject(schema) ? { ...schema, examples: [exampleEnvelope(errorSpec)] } : schema
  }
  return withPrices({
    ...spec,
    info: {
      ...objectAt(spec, "info"),
      description:
        "One API key reaches many tools: each is `POST /v1/<tool>` with a JSON body and a normalized JSON answer, priced in credits. " +
        "Every failure is the error envelope `{error: {type, code, message, retryable, billable}}`; `billable` is authoritative.",
      license: { name: "MIT", identifier: "MIT" }
    },
    paths: cleanedPaths,
    components: { ...objectAt(spec, "components"), schemas: cleanedSchemas, headers: HEADERS }
  }, (tool) => catalog[tool].price)
}
