/**
 * The OpenAPI document, cleaned: the envelope is the error schema of every operation (the framework's own
 * decode-error schema is dropped, since decode errors are answered as `invalid_request` envelopes), each
 * error status says which codes it carries, and operations and errors carry examples.
 */
import { envelopeOf, type EnvelopeSpec } from "../domain/errors.js"
import { inputExamples, outputExamples } from "../domain/examples.js"
import { isToolName } from "../domain/tools.js"
import { dropSchemaIds } from "./jsonSchema.js"

type Json = Record<string, unknown>

const isObject = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)
const FRAMEWORK_SCHEMAS = ["HttpApiDecodeError", "Issue", "PropertyKey"]
const isFrameworkRef = (u: unknown) =>
  isObject(u) && typeof u["$ref"] === "string" && FRAMEWORK_SCHEMAS.some((s) => u["$ref"] === `#/components/schemas/${s}`)

const specsByStatus = new Map<number, Array<EnvelopeSpec>>()
for (const spec of Object.values(envelopeOf)) {
  specsByStatus.set(spec.status, [...(specsByStatus.get(spec.status) ?? []), spec])
}

const describeStatus = (status: number) => {
  const specs = specsByStatus.get(status) ?? []
  return `Error envelope. Codes: ${specs.map((s) => `${s.code} (retryable ${s.retryable}, billable ${s.billable})`).join("; ")}.`
}

const exampleEnvelope = (spec: EnvelopeSpec) => ({
  error: { type: spec.type, code: spec.code, message: "A sentence that says what happened and what to do.", retryable: spec.retryable, billable: spec.billable }
})

/** Rewrite one response: no framework schema, a description listing the codes, an example. */
const cleanResponse = (status: number, response: unknown): unknown => {
  if (!isObject(response) || status < 400) return response
  const content = isObject(response["content"]) ? response["content"] : {}
  const json = isObject(content["application/json"]) ? content["application/json"] : {}
  const schema = isObject(json["schema"]) ? json["schema"] : {}
  const anyOf = Array.isArray(schema["anyOf"]) ? schema["anyOf"].filter((s) => !isFrameworkRef(s)) : undefined
  const cleaned = anyOf === undefined ? schema : anyOf.length === 1 ? anyOf[0] : { ...schema, anyOf }
  const first = specsByStatus.get(status)?.[0]
  return {
    ...response,
    description: describeStatus(status),
    content: {
      "application/json": { ...json, schema: cleaned, ...(first !== undefined ? { example: exampleEnvelope(first) } : {}) }
    }
  }
}

/**
 * Whether an error status can come from an operation: credits and providers only concern tool calls, a
 * range only files, a key or token only the operations that need one. (The framework lists every error
 * status of the API on every operation.)
 */
const relevant = (path: string, status: number, secured: boolean): boolean => {
  if (status < 400) return true
  const call = path === "/v1/run" || isToolName(path.startsWith("/v1/") ? path.slice(4) : "")
  if ((status === 402 || status === 502 || status === 504) && !call) return false
  if (status === 416) return path.startsWith("/v1/artifacts/")
  if (status === 401 || status === 429) return secured
  return true
}

/** A success response with an example answer. */
const withExample = (response: unknown, example: unknown): unknown => {
  if (!isObject(response) || !isObject(response["content"])) return response
  const json = response["content"]["application/json"]
  return { ...response, content: { ...response["content"], "application/json": { ...(isObject(json) ? json : {}), example } } }
}

export const cleanSpec = (input: Json): Json => {
  const dropped = dropSchemaIds(input)
  const spec = isObject(dropped) ? dropped : input
  const paths = isObject(spec["paths"]) ? spec["paths"] : {}
  const cleanedPaths: Json = {}
  for (const [path, item] of Object.entries(paths)) {
    if (!isObject(item)) continue
    const cleanedItem: Json = {}
    for (const [method, operation] of Object.entries(item)) {
      if (!isObject(operation)) {
        cleanedItem[method] = operation
        continue
      }
      const responses = isObject(operation["responses"]) ? operation["responses"] : {}
      const tool = path.startsWith("/v1/") ? path.slice(4) : ""
      const cleanedResponses: Json = {}
      const secured = Array.isArray(operation["security"]) && operation["security"].length > 0
      for (const [status, response] of Object.entries(responses)) {
        if (!relevant(path, Number(status), secured)) continue
        cleanedResponses[status] = status === "200" && isToolName(tool)
          ? withExample(response, outputExamples[tool])
          : cleanResponse(Number(status), response)
      }
      let requestBody = operation["requestBody"]
      if (isToolName(tool) && isObject(requestBody) && isObject(requestBody["content"])) {
        const json = requestBody["content"]["application/json"]
        requestBody = {
          ...requestBody,
          content: { "application/json": { ...(isObject(json) ? json : {}), example: inputExamples[tool] } }
        }
      }
      cleanedItem[method] = { ...operation, responses: cleanedResponses, ...(requestBody !== undefined ? { requestBody } : {}) }
    }
    cleanedPaths[path] = cleanedItem
  }
  const components = isObject(spec["components"]) ? spec["components"] : {}
  const schemas = isObject(components["schemas"]) ? components["schemas"] : {}
  const cleanedSchemas: Json = {}
  for (const [name, schema] of Object.entries(schemas)) {
    if (FRAMEWORK_SCHEMAS.includes(name)) continue
    const errorSpec = Object.entries(envelopeOf).find(([tag]) => `${tag}Error` === name)?.[1]
    cleanedSchemas[name] = errorSpec !== undefined && isObject(schema) ? { ...schema, examples: [exampleEnvelope(errorSpec)] } : schema
  }
  return {
    ...spec,
    info: {
      ...(isObject(spec["info"]) ? spec["info"] : {}),
      description:
        "One API key reaches many tools: each is `POST /v1/<tool>` with a JSON body and a normalized JSON answer. " +
        "Every failure is the error envelope `{error: {type, code, message, retryable, billable}}`; `billable` is authoritative."
    },
    paths: cleanedPaths,
    components: { ...components, schemas: cleanedSchemas }
  }
}
