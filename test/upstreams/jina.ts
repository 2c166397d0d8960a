/**
 * Jina on one server: the Reader (`GET /<url>`) and Search (`POST /` with `{q, num}`), Bearer key,
 * `{code, status, data}` answers when asked for JSON.
 */
import { json, type RecordedRequest, type Reply, upstream } from "./harness.js"
import { PNG } from "./pages.js"

export const JINA_KEY = "jina-test-key"

export const handleJina = (req: RecordedRequest): Reply => {
  if (req.method === "GET" && req.path.startsWith("/screenshots/")) {
    return { status: 200, body: PNG.toString("latin1"), raw: true, binary: true, headers: { "content-type": "image/png" } }
  }
  if (req.headers["authorization"] !== `Bearer ${JINA_KEY}`) {
    return json(401, { data: null, code: 401, name: "AuthenticationRequiredError", status: 40103, message: "Invalid API key" })
  }
  // Jina answers JSON only when asked for it; otherwise the page or the results as plain text
  if (!(req.headers["accept"] ?? "").includes("application/json")) {
    return { status: 200, body: "Title: Jina read\n\nMarkdown Content:\nplain text, not JSON", raw: true, headers: { "content-type": "text/plain; charset=utf-8" } }
  }
  if (req.method === "POST" && req.path === "/") {
    const body = req.json
    if (typeof body !== "object" || body === null || !("q" in body) || typeof body.q !== "string") {
      return json(400, { data: null, code: 400, status: 40001, message: "q is required" })
    }
    return json(200, {
      code: 200,
      status: 20000,
      data: [0, 1, 2].map((i) => ({
        title: `Jina result ${i} for ${body.q}`,
        url: `https://example.com/jina/${i}`,
        description: `Description ${i}`,
        date: "Jan 1, 2026",
        ...(req.headers["x-respond-with"] === "no-content" ? {} : { content: `Content of result ${i}.` }),
        usage: { tokens: 1000 }
      })),
      meta: { usage: { tokens: 3000 } }
    })
  }
  if (req.method === "GET" && /^\/https?:\/\//.test(req.path)) {
    const url = req.path.slice(1)
    const format = req.headers["x-return-format"]
    if (format === "screenshot" || format === "pageshot") {
      const shot = `http://${req.headers["host"] ?? "127.0.0.1"}/screenshots/page.png`
      return json(200, {
        code: 200,
        status: 20000,
        data: { title: "Jina read", url, ...(format === "screenshot" ? { screenshotUrl: shot } : { pageshotUrl: shot }), usage: { tokens: 1 } }
      })
    }
    // as Jina's formatter answers: markdown in `content`, the other formats in a field of their own
    const page = format === "html"
      ? { html: `<h1>Read by Jina</h1><p>Content of ${url}.</p>` }
      : format === "text"
      ? { text: `Read by Jina\n\nContent of ${url}.` }
      : { content: `# Read by Jina\n\nContent of ${url}.` }
    return json(200, {
      code: 200,
      status: 20000,
      data: { title: "Jina read", description: "", url, ...page, usage: { tokens: 42 } }
    })
  }
  return json(404, { data: null, code: 404, status: 40400, message: "Not found" })
}

export const jina = upstream(handleJina)
