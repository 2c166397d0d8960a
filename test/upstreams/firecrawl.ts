/**
 * Firecrawl v1: `POST /v1/scrape` and `POST /v1/search`, Bearer key, `{success, data}` answers and
 * `{success:false, error}` failures.
 */
import { json, type RecordedRequest, type Reply, upstream } from "./harness.js"
import { PNG } from "./pages.js"

export const FIRECRAWL_KEY = "fc-test-key"

export const handleFirecrawl = (req: RecordedRequest): Reply => {
  // Firecrawl hosts the screenshots it takes; the URL it answers points there.
  if (req.method === "GET" && req.path.startsWith("/screenshots/")) {
    return { status: 200, body: PNG.toString("latin1"), raw: true, binary: true, headers: { "content-type": "image/png" } }
  }
  if (req.headers["authorization"] !== `Bearer ${FIRECRAWL_KEY}`) return json(401, { success: false, error: "Unauthorized: Invalid token" })
  if (req.method !== "POST") return json(404, { success: false, error: "Not found" })
  const body = req.json
  if (typeof body !== "object" || body === null) return json(400, { success: false, error: "Bad Request" })
  if (req.path === "/v1/search") {
    if (!("query" in body) || typeof body.query !== "string") return json(400, { success: false, error: "query is required" })
    return json(200, {
      success: true,
      data: [0, 1].map((i) => ({ url: `https://example.com/fc/${i}`, title: `Firecrawl ${i}`, description: `About ${i}` }))
    })
  }
  if (req.path === "/v1/scrape") {
    if (!("url" in body) || typeof body.url !== "string") return json(400, { success: false, error: "url is required" })
    const formats = "formats" in body && Array.isArray(body.formats) ? body.formats : ["markdown"]
    const origin = `http://${req.headers["host"] ?? "127.0.0.1"}`
    return json(200, {
      success: true,
      data: {
        markdown: `# Scraped\n\n${body.url}`,
        ...(formats.includes("screenshot") ? { screenshot: `${origin}/screenshots/shot-1.png` } : {}),
        metadata: { title: "Scraped page", sourceURL: body.url, statusCode: 200 }
      }
    })
  }
  return json(404, { success: false, error: "Not found" })
}

export const firecrawl = upstream(handleFirecrawl)
