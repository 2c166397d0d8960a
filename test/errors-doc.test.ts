/**
 * The documented error tables stay true: docs/errors.md lists every error of the code's one table
 * (`envelopeOf`, over `gatewayErrors`) with its code, type, HTTP status, retryable, billable and headers —
 * row for row, nothing more — and each row of the README's short table is an entry of that table.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as HttpApiError from "@effect/platform/HttpApiError"
import { type EnvelopeSpec, envelopeOf, type ErrorHeader, gatewayErrors, isGatewayError, NotFound } from "../src/domain/errors.js"

/** How the documentation names each header an error's answer carries. */
const headerNames: { readonly [H in ErrorHeader]: ReadonlyArray<string> } = {
  "retry-after": ["Retry-After"],
  ratelimit: ["RateLimit-Policy", "RateLimit"],
  allow: ["Allow"],
  "content-range": ["Content-Range"],
  "connection-close": ["Connection: close"],
  "credits-charged": ["X-Credits-Charged"],
  "www-authenticate": ["WWW-Authenticate"]
}

/** The rows of the first markdown table under `heading` (or of the first table, without one), as cells. */
const tableRows = (markdown: string, heading?: string): ReadonlyArray<ReadonlyArray<string>> => {
  const from = heading === undefined ? markdown : markdown.split(heading)[1] ?? ""
  const lines = from.split("\n")
  const start = lines.findIndex((line) => line.startsWith("|"))
  if (start < 0) return []
  const end = lines.findIndex((line, i) => i > start && !line.startsWith("|"))
  return lines
    .slice(start + 2, end < 0 ? undefined : end)
    .map((line) => line.slice(1, -1).split(/(?<!\\)\|/).map((cell) => cell.trim()))
}

const unquote = (cell: string) => cell.replace(/^`|`$/g, "")
const yesNo = (cell: string): boolean => {
  const word = cell.replace(/\*/g, "")
  if (word !== "yes" && word !== "no") throw new Error(`"${cell}" is neither yes nor no`)
  return word === "yes"
}
const headersOf = (cell: string): ReadonlyArray<string> =>
  cell === "" ? [] : cell.split(",").map((h) => unquote(h.trim()))

/** What a row documents, in the code's terms. */
interface Documented {
  readonly code: string
  readonly type: string
  readonly status: number
  readonly retryable: boolean
  readonly billable: boolean
}

const fromCode = (spec: EnvelopeSpec): Documented => ({
  code: spec.code,
  type: spec.type,
  status: spec.status,
  retryable: spec.retryable,
  billable: spec.billable
})

describe("docs/errors.md", () => {
  const doc = Fs.readFileSync("docs/errors.md", "utf8")
  const rows = tableRows(doc, "## Every error")
  // code | class | type | HTTP | retryable | billable | headers | when
  const documented = new Map(rows.map((cells) => [unquote(cells[1] ?? ""), cells] as const))

  it("has one row per error class, and a row for no class that does not exist", () => {
    const tags = gatewayErrors.map((cls) => cls._tag)
    expect(rows.length).toBe(documented.size)
    expect([...documented.keys()].sort()).toEqual([...tags].sort())
    // the code's list and the table's keys are the same errors
    expect(Object.keys(envelopeOf).sort()).toEqual([...tags].sort())
  })

  for (const { _tag: tag } of gatewayErrors) {
    it(`${tag}: code, type, status, retryable, billable and headers as the code's table says`, () => {
      const spec = envelopeOf[tag]
      const cells = documented.get(tag)
      expect(cells, `docs/errors.md has no row for ${tag}`).toBeDefined()
      const [code = "", , type = "", status = "", retryable = "", billable = "", headers = "", when = ""] = cells ?? []
      expect({
        code: unquote(code),
        type,
        status: Number(status),
        retryable: yesNo(retryable),
        billable: yesNo(billable)
      }).toEqual(fromCode(spec))
      expect(headersOf(headers)).toEqual((spec.headers ?? []).flatMap((h) => headerNames[h]))
      expect(when.length, `the row of ${tag} says when it happens`).toBeGreaterThan(0)
    })
  }

  it("documents write_outcome_unknown, not_ready, request_timeout, and the 431 of headers too large", () => {
    const codes = rows.map((cells) => `${unquote(cells[0] ?? "")} ${cells[3] ?? ""}`)
    expect(codes).toEqual(expect.arrayContaining([
      `${envelopeOf.WriteOutcomeUnknown.code} 502`,
      `${envelopeOf.NotReady.code} 503`,
      `${envelopeOf.RequestTimeout.code} 408`,
      `${envelopeOf.HeadersTooLarge.code} 431`
    ]))
  })
})

describe("the README's short error table", () => {
  const readme = Fs.readFileSync("README.md", "utf8")
  // code | HTTP | retryable | billable | when
  const rows = tableRows(readme, "## Errors")
  const entries = Object.values(envelopeOf).map(fromCode)

  it("lists the common codes", () => {
    expect(rows.length).toBeGreaterThanOrEqual(10)
    expect(rows.map((cells) => unquote(cells[0] ?? ""))).toEqual(
      expect.arrayContaining(["invalid_key", "insufficient_credits", "normalization_failed", "write_outcome_unknown"])
    )
  })

  it("each row's code, status, retryable and billable are an entry of the code's table", () => {
    for (const [code = "", status = "", retryable = "", billable = ""] of rows) {
      const row = { code: unquote(code), status: Number(status), retryable: yesNo(retryable), billable: yesNo(billable) }
      const matches = entries.filter((e) =>
        e.code === row.code && e.status === row.status && e.retryable === row.retryable && e.billable === row.billable
      )
      expect(matches, `README: ${JSON.stringify(row)}`).not.toEqual([])
    }
  })
})

describe("isGatewayError", () => {
  it("is an instance of one of the gateway's classes, not another library's error of the same tag", () => {
    for (const error of gatewayErrors) expect(isGatewayError(Object.create(error.prototype)), error._tag).toBe(true)
    expect(isGatewayError(new NotFound({ message: "gone" }))).toBe(true)
    // the platform's NotFound has the tag, not the message an envelope says
    expect(isGatewayError(new HttpApiError.NotFound())).toBe(false)
    expect(isGatewayError(Object.assign(new Error("x"), { _tag: "InvalidRequest" }))).toBe(false)
    expect(isGatewayError({ _tag: "InternalError", message: "x" })).toBe(false)
  })
})
