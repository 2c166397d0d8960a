/**
 * Assertions on what a caller sees: status, the exact envelope, and the headers every response carries.
 */
import { Schema } from "effect"
import { expect } from "vitest"
import { catalog, type ToolName } from "../../src/domain/tools.js"
import type { HttpResult } from "./gateway.js"

export interface ExpectedError {
  readonly status: number
  readonly type: string
  readonly code: string
  readonly retryable: boolean
  readonly billable: boolean
  /** A fragment the message must contain. */
  readonly message?: string | RegExp
}

export const expectEnvelope = (result: HttpResult, expected: ExpectedError) => {
  expect({ status: result.status, body: result.body }).toEqual({
    status: expected.status,
    body: {
      error: {
        type: expected.type,
        code: expected.code,
        message: expect.any(String),
        retryable: expected.retryable,
        billable: expected.billable
      }
    }
  })
  expect(result.headers.get("content-type")).toMatch(/^application\/json/)
  expect(result.headers.get("x-request-id")).toMatch(/^req_[0-9A-Za-z]{20}$/)
  // a billable failure says what it was charged, as a success does; a replay says 0; the rest say nothing
  const charged = result.headers.get("x-credits-charged")
  if (result.headers.get("idempotent-replayed") === "true") expect(charged).toBe("0")
  else if (expected.billable) expect(charged).toMatch(/^\d+$/)
  else expect(charged).toBeNull()
  if (expected.status === 429) expect(Number(result.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)
  if (expected.message !== undefined) {
    const message = errorOf(result)?.message ?? ""
    if (typeof expected.message === "string") expect(message).toContain(expected.message)
    else expect(message).toMatch(expected.message)
  }
  // Never a stack trace, SQL or an internal path in a message.
  expect(result.text).not.toMatch(/\bat [\w.<>]+ \(|node_modules|SELECT |INSERT |\.ts:\d+/)
}

export const expectOk = (result: HttpResult, charged?: number) => {
  expect(result.status, result.text).toBe(200)
  expect(result.headers.get("x-request-id")).toMatch(/^req_/)
  if (charged !== undefined) expect(result.headers.get("x-credits-charged")).toBe(String(charged))
  else expect(result.headers.get("x-credits-charged")).toMatch(/^\d+$/)
}

/** The envelope's error of a response, if it has one. */
export const errorOf = (result: HttpResult): { readonly code: string; readonly message: string } | undefined => {
  const body = result.body
  if (typeof body !== "object" || body === null || !("error" in body)) return undefined
  const error = body.error
  if (typeof error !== "object" || error === null || !("code" in error) || !("message" in error)) return undefined
  return { code: String(error.code), message: String(error.message) }
}

/**
 * A tool's answer is byte for byte what its output schema's encode would write: no property the schema does not name,
 * no value it does not allow, its properties in the schema's order. (The gateway writes an answer whose schema neither
 * transforms nor refines as the provider's normalization built it, without encoding it again.)
 */
export const expectOwnEncoding = <T extends ToolName>(tool: T, result: HttpResult) => {
  const output = catalog[tool].output
  const decoded = Schema.decodeUnknownSync(output, { onExcessProperty: "error" })(result.body)
  expect(result.text).toBe(JSON.stringify(Schema.encodeSync(output)(decoded)))
}
