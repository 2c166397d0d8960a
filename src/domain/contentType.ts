/**
 * What a `Content-Type` header says: its media type and its charset parameter.
 */

/** The media type, lower case, without parameters ("" when there is none). */
export const mediaTypeOf = (contentType: string): string => (contentType.split(";")[0] ?? "").trim().toLowerCase()

/** The charset a `Content-Type` names, lower case and unquoted; undefined when it names none. */
export const charsetOf = (contentType: string): string | undefined => {
  const parameters = contentType.split(";")
  for (let i = 1; i < parameters.length; i++) {
    const [name = "", ...value] = (parameters[i] ?? "").split("=")
    if (name.trim().toLowerCase() === "charset") return value.join("=").trim().replace(/^"(.*)"$/, "$1").trim().toLowerCase()
  }
  return undefined
}

/** JSON's media types (`application/json`, `…+json`): UTF-8 whatever charset they name (RFC 8259 §8.1, §11). */
export const isJsonMediaType = (contentType: string): boolean => {
  const type = mediaTypeOf(contentType)
  return type === "application/json" || type.endsWith("+json")
}

const TOKEN = "[!#$%&'*+.^_`|~0-9A-Za-z-]+"
const QUOTED = '"(?:[\\t \\x21\\x23-\\x5B\\x5D-\\x7E\\x80-\\xFF]|\\\\[\\t \\x20-\\x7E\\x80-\\xFF])*"'
// (a parameter may be empty: `text/html;`, `a/b; ; c=d`, as RFC 9110 writes `*( OWS ";" OWS [ parameter ] )`)
const MEDIA_TYPE = new RegExp(`^${TOKEN}/${TOKEN}(?:[ \\t]*;[ \\t]*(?:${TOKEN}=(?:${TOKEN}|${QUOTED}))?)*$`)

/**
 * The `Content-Type` a file is kept and served with: the media type given, as RFC 9110 §8.3.1 writes one
 * (`type/subtype`, then `; name=value` parameters, a value a token or a quoted string, a parameter may be empty), its surrounding space
 * trimmed; anything else (a line break, a character outside Latin-1, a missing subtype, nothing) is
 * `application/octet-stream`. What a provider names is never sent as a header unchecked.
 */
export const checkedContentType = (given: string): string => {
  const trimmed = given.trim()
  return trimmed.length <= 256 && MEDIA_TYPE.test(trimmed) ? trimmed : "application/octet-stream"
}
