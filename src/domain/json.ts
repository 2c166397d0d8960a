/**
 * Checks on parsed JSON that `JSON.parse` does not make: how deep it nests (a value too deep costs stack in everything
 * that walks it after — `JSON.stringify` overflows at a few thousand levels), numbers it read as infinite (`1e400`,
 * which JSON.stringify then writes as `null`), and keys named `__proto__` (an own property after parsing, which
 * becomes the object's prototype — and vanishes — when the object is copied by assignment). Iterative, so a check
 * cannot overflow the stack itself.
 */

/**
 * `Array.isArray` for a value of unknown type, which it narrows to `any[]`: this says what is known, an array of
 * values of unknown type.
 */
export const isArray = (u: unknown): u is ReadonlyArray<unknown> => Array.isArray(u)

/** What is wrong with a parsed JSON value, if anything, beside its nesting past `maxDepth` levels. */
export type JsonProblem = "too_deep" | "infinite_number" | "proto_key"

/**
 * The first problem found walking a parsed JSON value: its nesting past `maxDepth` levels and, when `values` is set,
 * an infinite number or a `__proto__` key. Objects and arrays are kept on a stack beside their depths (no pair made
 * for each value, nothing pushed for a string or a number): 5 MB of an API's list is walked in ~5 ms, not ~60.
 */
const walk = (value: unknown, maxDepth: number, values: boolean): JsonProblem | undefined => {
  if (typeof value !== "object" || value === null) return values && typeof value === "number" && !Number.isFinite(value) ? "infinite_number" : undefined
  const stack: Array<object> = [value]
  const depths: Array<number> = [0]
  while (stack.length > 0) {
    const v = stack.pop()
    const depth = depths.pop()
    if (v === undefined || depth === undefined) break
    if (depth >= maxDepth) return "too_deep"
    const children: ReadonlyArray<unknown> = isArray(v) ? v : Object.values(v)
    if (values && children !== v && Object.hasOwn(v, "__proto__")) return "proto_key"
    for (const child of children) {
      if (typeof child === "object" && child !== null) {
        stack.push(child)
        depths.push(depth + 1)
      } else if (values && typeof child === "number" && !Number.isFinite(child)) {
        return "infinite_number"
      }
    }
  }
  return undefined
}

export const jsonProblem = (value: unknown, maxDepth: number): JsonProblem | undefined => walk(value, maxDepth, true)

/** Whether a parsed JSON value nests deeper than `max` levels. */
export const deeperThan = (value: unknown, max: number): boolean => walk(value, max, false) === "too_deep"

/**
 * How deep an upstream's JSON answer may nest: far past what any provider sends, well short of what overflows the
 * stack of what reads the answer next (its normalization, `JSON.stringify`).
 */
export const MAX_UPSTREAM_JSON_DEPTH = 256

/** An upstream's JSON text parsed, or `undefined` when it nests deeper than `MAX_UPSTREAM_JSON_DEPTH`; throws when it is not JSON. */
export const parseUpstreamJson = (text: string): { readonly value: unknown } | undefined => {
  const value: unknown = JSON.parse(text)
  // text that short cannot nest that deep: most answers skip the walk
  return text.length > 2 * MAX_UPSTREAM_JSON_DEPTH && deeperThan(value, MAX_UPSTREAM_JSON_DEPTH) ? undefined : { value }
}
