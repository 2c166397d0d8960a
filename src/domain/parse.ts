/**
 * Schema decode failures, said in one line: the first problem as `field: message`.
 */
import * as ParseResult from "effect/ParseResult"

/** A field path as `a.b[2].c` ("" for the value itself). */
export const formatPath = (path: ReadonlyArray<PropertyKey>) =>
  path.map((p, i) => (typeof p === "number" ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`)).join("")

/**
 * A problem's message without the value that was sent ("Expected string, actual 123" → "Expected string"):
 * for secrets, which an answer must never carry back.
 */
export const withoutValue = (message: string): string => message.replace(/,?\s*actual[\s\S]*$/, "").trim()

/**
 * The issues worth saying: a field that may be null (`NullOr`) and is neither null nor valid fails both members,
 * and "Expected null" beside what the value should have been says nothing more (`limit: must be a whole number;
 * limit: Expected null, actual -1`).
 */
export const meaningfulIssues = <I extends { readonly path: ReadonlyArray<PropertyKey>; readonly message: string }>(
  issues: ReadonlyArray<I>
): ReadonlyArray<I> => {
  const key = (issue: I) => formatPath(issue.path)
  const isNullBranch = (issue: I) => /^Expected null\b/.test(issue.message)
  // the members of a union whose message overrides theirs each say it: once is enough
  const repeated = (issue: I, at: number) => issues.findIndex((other) => key(other) === key(issue) && other.message === issue.message) < at
  return issues.filter((issue, at) =>
    !repeated(issue, at) &&
    (!isNullBranch(issue) || !issues.some((other) => other !== issue && !isNullBranch(other) && key(other) === key(issue))))
}

/** `s` cut after `max` characters, with an ellipsis to say so. */
export const clip = (s: string, max: number): string => (s.length > max ? `${s.slice(0, max)}…` : s)

/**
 * The longest part of a message about one issue: a value sent (a caller's input, a provider's answer) is quoted
 * only in part — "Expected number, actual" and the value's first characters, not the 60 KB string it was.
 */
export const MAX_QUOTED_ISSUE = 300

/** One problem as `field: message`, at most `MAX_QUOTED_ISSUE` characters (without the value sent, for a secret). */
export const describeIssue = (
  issue: { readonly path: ReadonlyArray<PropertyKey>; readonly message: string },
  secret: boolean
): string => {
  const field = formatPath(issue.path)
  return clip(`${field === "" ? "" : `${field}: `}${secret ? withoutValue(issue.message) : issue.message}`, MAX_QUOTED_ISSUE)
}

/** The first problem of a parse error, as `field: message` (without the value sent, when it is a secret). */
export const describeParseError = (error: ParseResult.ParseError, options: { readonly secret?: boolean } = {}): string => {
  const issues = meaningfulIssues(ParseResult.ArrayFormatter.formatErrorSync(error))
  const first = issues[0]
  if (first === undefined) return "unexpected shape"
  const more = issues.length > 1 ? ` (and ${issues.length - 1} more)` : ""
  return `${describeIssue(first, options.secret === true)}${more}`
}

