/**
 * What reading a page gives, apart from how it is read: `HtmlConverter`'s public type names this module, not
 * `extract.ts`, so the package's declarations never reach linkedom's DOM types (a consumer would need the DOM
 * library, or `skipLibCheck`).
 */
export interface Extracted {
  readonly title: string | null
  readonly markdown: string
  /** How it was read: converted to markdown, or (too deep, too large, or too hard) read as text. */
  readonly mode: "markdown" | "text"
}
