/**
 * Schema decode failures, said in one line: the first problem as `field: message`.
 */
import { ParseResult } from "effect"

/** A field path as `a.b[2].c` ("" for the value itself). */
export const formatPath = (path: ReadonlyArray<PropertyKey>) =>
  path.map((p, i) => (typeof p === "number" ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`)).join("")

/** The first problem of a parse error, as `field: message`. */
export const describeParseError = (error: ParseResult.ParseError): string => {
  const issues = ParseResult.ArrayFormatter.formatErrorSync(error)
  const first = issues[0]
  if (first === undefined) return "unexpected shape"
  const more = issues.length > 1 ? ` (and ${issues.length - 1} more)` : ""
  const field = formatPath(first.path)
  return `${field === "" ? "" : `${field}: `}${first.message}${more}`
}

