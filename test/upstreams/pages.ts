/**
 * Web pages for the built-in reader: an article, plain text, JSON, a binary file, redirects, and HTML that is
 * not a whole document.
 */
import { type RecordedRequest, type Reply, upstream } from "../../src/testing/harness.js"

export const ARTICLE = `<!doctype html>
<html><head><title>The Gateway Article</title></head>
<body>
  <nav><a href="/">Home</a> | <a href="/about">About</a></nav>
  <article>
    <h1>How gateways meter tools</h1>
    <p>A gateway reserves credits <strong>before</strong> it calls a provider, and settles the real charge after.
    This paragraph is long enough for the extractor to treat it as the main content of the page, which matters
    because navigation and footers are not content.</p>
    <p>Idempotency keys make retries safe: the same key with the same input replays the first answer instead of
    calling the provider again. That is how a client that lost a response can retry without paying twice.</p>
    <ul><li>Reserve</li><li>Call</li><li>Settle</li></ul>
  </article>
  <footer>Copyright footer text</footer>
  <script>var tracking = true;</script>
</body></html>`

/**
 * `text/html` answers that are not a whole document: text with no tags, a doctype and text, nothing, a comment,
 * fragments, and a minimal HTML5 page (no `<html>`, `<head>` or `<body>` tag). Served at /fragment/<name>.
 */
export const FRAGMENTS: Readonly<Record<string, string>> = {
  "text": "hello world",
  "doctype-text": "<!doctype html>hi",
  "empty": "",
  "comment": "<!-- only a comment -->",
  "paragraph": "<p>hi there</p>",
  "heading": "<h1>Title</h1><p>Some text</p>",
  "minimal": "<!doctype html><title>Minimal</title><p>A page with no html, head or body tag.</p>"
}

/** A small PNG and a PDF, byte for byte what the tests expect back. */
export const PNG = Buffer.from(
  "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8cfc0f01f0005fe02fea72d3a0d0000000049454e44ae426082",
  "hex"
)
export const PDF = Buffer.concat([Buffer.from("%PDF-1.4\n"), Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 37) % 256)), Buffer.from("\n%%EOF\n")])

const deep = (tag: string, depth: number, inner: string) => `<${tag}>`.repeat(depth) + inner + `</${tag}>`.repeat(depth)
const page = (body: string) => `<!doctype html><html><head><title>hostile</title></head><body>${body}</body></html>`

/**
 * Small pages that cost an HTML converter far more than their size: deep nesting (the 11 KB page of 1,000
 * nested divs, 20 KB of them, 2,000 nested <b>), unclosed tags, and pages that stay under any depth limit
 * but make a readability scorer work for seconds (hundreds of deep combs of links, tens of thousands of
 * links in one block).
 */
export const HOSTILE: Readonly<Record<string, string>> = {
  "divs-1000": page(deep("div", 1000, "x")),
  "divs-20kb": page(deep("div", 1800, "x")),
  "bold-2000": page(deep("b", 2000, "x")),
  "unclosed": page("<div><span>".repeat(5000)),
  "lists": page(deep("ul><li", 600, "x")),
  "combs": page(Array.from({ length: 100 }, () => deep("div", 100, "<a href='x'>l</a>".repeat(20))).join("")),
  "links": page(`<div>${"<a href='#'>link text</a> ".repeat(10_000)}</div>`),
  "forest": page(deep("div", 120, `<p>${"word ".repeat(20)}</p>`.repeat(100)).repeat(10))
}

/**
 * A page certain to outlast a 1 s conversion budget: three times the combs (432 KB). The combs alone take
 * 0.7–1.1 s once the converter is warm, too close to the budget to test it with; this one took 2.1–2.4 s on
 * the same machine. Served at /hostile/past-budget; not one of HOSTILE's shapes.
 */
export const PAST_BUDGET = page(Array.from({ length: 300 }, () => deep("div", 100, "<a href='x'>l</a>".repeat(20))).join(""))

export const handlePages = (req: RecordedRequest): Reply => {
  const shape = req.path.startsWith("/hostile/") ? req.path.slice("/hostile/".length) : undefined
  const hostile = shape === "past-budget" ? PAST_BUDGET : shape === undefined ? undefined : HOSTILE[shape]
  if (hostile !== undefined) return { status: 200, body: hostile, raw: true, headers: { "content-type": "text/html; charset=utf-8" } }
  const fragment = req.path.startsWith("/fragment/") ? FRAGMENTS[req.path.slice("/fragment/".length)] : undefined
  if (fragment !== undefined) return { status: 200, body: fragment, raw: true, headers: { "content-type": "text/html; charset=utf-8" } }
  switch (req.path) {
    case "/article":
      return { status: 200, body: ARTICLE, raw: true, headers: { "content-type": "text/html; charset=utf-8" } }
    case "/plain":
      return { status: 200, body: "Just some plain text.", raw: true, headers: { "content-type": "text/plain" } }
    case "/data.json":
      return { status: 200, body: { hello: "world" } }
    case "/doc.pdf":
      return { status: 200, body: PDF.toString("latin1"), raw: true, binary: true, headers: { "content-type": "application/pdf" } }
    case "/shot.png":
      return { status: 200, body: PNG.toString("latin1"), raw: true, binary: true, headers: { "content-type": "image/png" } }
    case "/file.bin":
      return { status: 200, body: "\u0000\u0001binary", raw: true, headers: { "content-type": "application/octet-stream" } }
    case "/redirect": {
      const to = req.query.get("to") ?? "/article"
      return { status: 302, body: "", raw: true, headers: { location: to } }
    }
    case "/missing":
      return { status: 404, body: "<h1>Not found</h1>", raw: true, headers: { "content-type": "text/html" } }
    default:
      return { status: 404, body: "not found", raw: true, headers: { "content-type": "text/plain" } }
  }
}

/** Pages on 127.0.0.2 (loopback too): tests allow-list that address only, so 127.0.0.1 stays refused. */
export const PAGES_HOST = "127.0.0.2"
export const pages = upstream(handlePages, PAGES_HOST)
