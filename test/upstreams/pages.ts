/**
 * Web pages for the built-in reader: an article, plain text, JSON, a binary file, and redirects.
 */
import { type RecordedRequest, type Reply, upstream } from "./harness.js"

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

/** A small PNG and a PDF, byte for byte what the tests expect back. */
export const PNG = Buffer.from(
  "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8cfc0f01f0005fe02fea72d3a0d0000000049454e44ae426082",
  "hex"
)
export const PDF = Buffer.concat([Buffer.from("%PDF-1.4\n"), Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 37) % 256)), Buffer.from("\n%%EOF\n")])

export const handlePages = (req: RecordedRequest): Reply => {
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
