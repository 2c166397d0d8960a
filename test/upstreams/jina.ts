/**
 * Jina's Reader and Search on one server, as jina-ai/reader serves r.jina.ai and s.jina.ai
 * (https://github.com/jina-ai/reader): Bearer key, `{code, status, data}` answers when asked for JSON, and
 * `{data: null, code, name, status, message}` errors. The Reader and Search live on two hosts; here one server
 * tells them apart by the body: a `url` is for the Reader, a `q` for Search.
 *
 * Reader (src/api/crawler.ts `crawl`, `getTargetUrl`):
 * - `POST /` with `{"url": …}` reads that URL as given — its query string and `#fragment` included (README
 *   "SPAs with hash-based routing": the documented way to send a fragment);
 * - `GET /<url>` reads the target from the path after decoding it (`tryDecodeURIComponent(pathname + search)`),
 *   so an encoded `%2F %26 %3D %3F` in the target arrives decoded, and a fragment never arrives at all.
 *
 * Search (src/api/searcher.ts `search`): `num` (alias `count`) must be 0–20 — anything else is a 400
 * `ParamValidationError` — default 10; `page` (from 1) is the page of `num` results. Like a web search engine,
 * a page may repeat the last result of the page before it. A query or a page with no results is not an empty
 * list: searcher.ts throws `AssertionFailureError("No search results available for query …")`, which civkit
 * (civ-rpc `AssertionFailureError`, `@StatusCode(42206)`: HTTP 422; `ApplicationError[RPC_MARSHAL]`) answers as
 * `{data: null, code: 422, name: "AssertionFailureError", status: 42206, message, readableMessage}`.
 */
import { json, type RecordedRequest, type Reply, upstream } from "../../src/testing/harness.js"
import { PNG } from "./pages.js"

export const JINA_KEY = "jina-test-key"

/** How many results the engine has for a query: `<n> results …` has n, any other query 50. */
const resultsFor = (query: string): number => {
  const counted = /^(\d+) results\b/.exec(query)
  return counted?.[1] !== undefined ? Number(counted[1]) : 50
}

/** Jina's answer to a query or a page the engine has no results for (see the module comment). */
const noResults = (query: string): Reply => {
  const message = `No search results available for query ${query}`
  return json(422, { data: null, code: 422, name: "AssertionFailureError", status: 42206, message, readableMessage: `AssertionFailureError: ${message}` })
}

/**
 * A page the Reader gets nothing of (it never loads for Jina's browser), whatever its host: src/api/crawler.ts throws
 * `AssertionFailureError("No content available for URL <url>")` when no snapshot came before its time ran out, which
 * civkit answers as HTTP 422 (status 42206), shaped as Search's no-results answer.
 */
export const JINA_NO_CONTENT_PATH = "/nothing-for-jina"

/** The Reader's answer for `url`, in the format `X-Return-Format` asks for. */
const readPage = (target: string, req: RecordedRequest): Reply => {
  // normalized as getTargetUrl does: `new URL(url).href` keeps the query string and the fragment as they are
  const url = URL.canParse(target) ? new URL(target).href : target
  if (URL.canParse(target) && new URL(target).pathname === JINA_NO_CONTENT_PATH) {
    const message = `No content available for URL ${url}`
    return json(422, { data: null, code: 422, name: "AssertionFailureError", status: 42206, message, readableMessage: `AssertionFailureError: ${message}` })
  }
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
  const body: unknown = req.json
  if (req.method === "POST" && req.path === "/" && typeof body === "object" && body !== null && "url" in body) {
    return typeof body.url === "string" && body.url !== ""
      ? readPage(body.url, req)
      : json(400, { data: null, code: 400, name: "ParamValidationError", status: 40001, message: "No URL provided" })
  }
  if (req.method === "POST" && req.path === "/") {
    if (typeof body !== "object" || body === null || !("q" in body) || typeof body.q !== "string") {
      return json(400, { data: null, code: 400, name: "ParamValidationError", status: 40001, message: "q is required" })
    }
    const num: unknown = "num" in body ? body.num : "count" in body ? body.count : 10
    if (typeof num !== "number" || !Number.isInteger(num) || num < 0 || num > 20) {
      return json(400, {
        data: null,
        code: 400,
        name: "ParamValidationError",
        status: 40001,
        message: `Validation failed for param num: ${JSON.stringify(num)}. Expected a number from 0 to 20.`
      })
    }
    const page: unknown = "page" in body ? body.page : 1
    const p = typeof page === "number" && Number.isInteger(page) && page > 1 ? page : 1
    // the page of `num` results from the engine's list, repeating the last result of the page before it; a page
    // past the end of the list has no results of its own, and is Jina's 422
    const total = resultsFor(body.q)
    const first = (p - 1) * num
    if (num > 0 && first >= total) return noResults(body.q)
    const start = p === 1 ? 0 : first - 1
    const indexes = Array.from({ length: Math.max(0, Math.min(num, total - start)) }, (_, i) => start + i)
    return json(200, {
      code: 200,
      status: 20000,
      data: indexes.map((i) => ({
        title: `Jina result ${i} for ${body.q}`,
        url: `https://example.com/jina/${i}`,
        description: `Description ${i}`,
        date: "Jan 1, 2026",
        ...(req.headers["x-respond-with"] === "no-content" ? {} : { content: `Content of result ${i}.` }),
        usage: { tokens: 1000 }
      })),
      meta: { usage: { tokens: 1000 * indexes.length } }
    })
  }
  if (req.method === "GET" && /^\/https?:\/\//.test(req.path)) {
    // the path as Jina reads it: decoded, query string and all (the harness has decoded the path already)
    const query = [...req.query].length > 0 ? `?${decodeURIComponent(req.query.toString())}` : ""
    return readPage(`${req.path.slice(1)}${query}`, req)
  }
  return json(404, { data: null, code: 404, status: 40400, message: "Not found" })
}

export const jina = upstream(handleJina)
