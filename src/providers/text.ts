/** Text helpers shared by the readers. */

/** Cut `text` to at most `max` characters, without splitting a surrogate pair. */
export const truncate = (text: string, max: number): { readonly text: string; readonly truncated: boolean } => {
  if (text.length <= max) return { text, truncated: false }
  let end = max
  const code = text.charCodeAt(end - 1)
  if (code >= 0xd800 && code <= 0xdbff) end -= 1
  return { text: text.slice(0, end), truncated: true }
}
