/**
 * Headers that list weighted members (RFC 9110 §12.4.2): `Accept` (which answers MCP takes, `mcp.ts`) and
 * `Accept-Encoding` (which coding a fixed document is sent in, `compression.ts`), read one way.
 */

/** `qvalue`: 0 to 1, at most three decimals. */
const QVALUE = /^(?:0(?:\.\d{0,3})?|1(?:\.0{0,3})?)$/

export interface WeightedMember {
  /** The member before its parameters, lower-cased: a media range, a content coding. */
  readonly value: string
  /** Its `q`, 1 when not given; 0 refuses it. */
  readonly weight: number
}

/**
 * The members of a weighted list, in order. Empty members are none (a list may hold them, §5.6.1: an empty header
 * names nothing), and so is a member whose `q` is not a qvalue.
 */
export const weightedMembers = (header: string): ReadonlyArray<WeightedMember> => {
  const members: Array<WeightedMember> = []
  for (const element of header.split(",")) {
    const [value = "", ...params] = element.split(";").map((part) => part.trim())
    if (value === "") continue
    let weight: number | undefined = 1
    for (const param of params) {
      const [key = "", q = ""] = param.split("=").map((part) => part.trim())
      if (key.toLowerCase() === "q") weight = QVALUE.test(q) ? Number(q) : undefined
    }
    if (weight !== undefined) members.push({ value: value.toLowerCase(), weight })
  }
  return members
}
