/**
 * The OpenAPI document, cleaned: the envelope is the error schema of every operation (the framework's own
 * decode-error schema is documented as `invalid_request`, which is how a request that does not decode is
 * answered), each error status lists the codes that operation can give (they follow from the errors each
 * part of the API declares), tool operations take `Idempotency-Key`, and operations and errors carry examples.
 */
import { envelopeOf, type EnvelopeSpec } from "../domain/errors.js"
import { inputExamples, outputExamples } from "../domain/examples.js"
import { isToolName } from "../domain/tools.js"
import { dropSchemaIds } from "./jsonSchema.js"

type Json = Record<string, unknown>

const isObject = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)
const FRAMEWORK_SCHEMAS = ["HttpApiDecodeError", "Issue", "PropertyKey"]

const specByName = new Map(Object.entries(envelopeOf).map(([tag, spec]) => [`${tag}Error`, spec]))
const DECODE_ERROR = "#/components/schemas/HttpApiDecodeError"
const INVALID_REQUEST = "#/components/schemas/InvalidRequestError"

const exampleEnvelope = (spec: EnvelopeSpec) => ({
  error: { type: spec.type, code: spec.code, message: "A sentence that says what happened and what to do.", retryable: spec.retryable, billable: spec.billable }
})

const refOf = (u: unknown): string | undefined => (isObject(u) && typeof u["$ref"] === "string" ? u["$ref"] : undefined)

/**
 * Rewrite one error response: the framework's decode error is answered as `invalid_request`, so it is
 * documented as that; the description lists the codes this operation can give with this status, and an
 * example shows the first.
 */
const cleanResponse = (status: number, response: unknown): unknown => {
  if (!isObject(response) || status < 400) return response
  const content = isObject(response["content"]) ? response["content"] : {}
  const json = isObject(content["application/json"]) ? content["application/json"] : {}
  const schema = isObject(json["schema"]) ? json["schema"] : {}
  const members = Array.isArray(schema["anyOf"]) ? schema["anyOf"] : [schema]
  const refs = [...new Set(members.map((m) => (refOf(m) === DECODE_ERROR ? INVALID_REQUEST : refOf(m) ?? "")).filter((r) => r !== ""))]
  const specs = refs.flatMap((ref) => {
    const spec = specByName.get(ref.replace("#/components/schemas/", ""))
    return spec === undefined ? [] : [spec]
  })
  const cleaned = refs.length === 1 ? { $ref: refs[0] } : { anyOf: refs.map(($ref) => ({ $ref })) }
  const first = specs[0]
  return {
    ...response,
    description: `Error envelope. Codes: ${specs.map((s) => `${s.code} (retryable ${s.retryable}, billable ${s.billable})`).join("; ")}.`,
    content: {
      "application/json": { ...json, schema: cleaned, ...(first !== undefined ? { example: exampleEnvelope(first) } : {}) }
    }
  }
}

/** `Idempotency-Key`, a parameter of every tool operation (read by the handlers, not declared per endpoint). */
const idempotencyParameter = {
  name: "Idempotency-Key",
  in: "header",
  required: false,
  description: "Makes a retry safe: the same key with the same tool and input replays the first answer (1 to 255 visible ASCII characters).",
  schema: { type: "string" }
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
      for (const [status, response] of Object.entries(responses)) {
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
      const call = isToolName(tool) || path === "/v1/run"
      const parameters = Array.isArray(operation["parameters"]) ? operation["parameters"] : []
      cleanedItem[method] = {
        ...operation,
        responses: cleanedResponses,
        ...(requestBody !== undefined ? { requestBody } : {}),
        ...(call ? { parameters: [...parameters, idempotencyParameter] } : {})
      }
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
