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
