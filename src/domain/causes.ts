/**
 * An error and its causes, outermost first (`cause` after `cause`, six at most): what a wrapped error's layers say.
 */
export const causeChain = (cause: unknown): ReadonlyArray<unknown> => {
  const out: Array<unknown> = []
  let current: unknown = cause
  for (let i = 0; i < 6 && typeof current === "object" && current !== null; i++) {
    out.push(current)
    current = "cause" in current ? current.cause : undefined
  }
  return out
}
