/**
 * Firecrawl's API v2: `POST /v2/scrape` and `POST /v2/search`, Bearer key, `{success, data}` answers and
 * `{success: false, error}` failures. Written from the API reference (https://docs.firecrawl.dev/api-reference/
 * endpoint/scrape, …/endpoint/search) and Firecrawl's own server, firecrawl/firecrawl:
 *
 * - apps/api/src/controllers/v2/types.ts: the request schemas (strict: an unknown key is a 400; `formats` are
 *   names or `{type, …}` objects, and v1's `screenshot@fullPage` is not one of them; search `limit` 1–100,
 *   default 5);
 * - apps/api/src/index.ts: a schema error is `400 {success: false, code: "BAD_REQUEST", error: "Bad Request", details}`;
 * - apps/api/src/controllers/v2/search.ts: the answer is `data: {web: [{url, title, description, position}]}`,
 *   with the scraped formats in each result when `scrapeOptions` asks for them;
 * - apps/api/src/routes/shared.ts: an account without credits is `402 {success: false, error: "Insufficient
 *   credits to perform this request. …"}` (`FIRECRAWL_NO_CREDITS`); a URL on Firecrawl's blocklist is `403
 *   {success: false, error: BLOCKLISTED_URL_MESSAGE}` (`blocklistMiddleware`, after the key and credit checks and
 *   before the body's schema; the message is apps/api/src/lib/strings.ts's). Its list is secret (hashed); here one
 *   host stands for it (`FIRECRAWL_BLOCKLISTED_HOST`).
 *
 * v1 is Firecrawl's legacy API; this stand-in does not serve it, so a module that falls back to it fails here.
 */
import { type Fault, json, type RecordedRequest, type Reply, upstream } from "../../src/testing/harness.js"
import { PNG } from "./pages.js"

export const FIRECRAWL_KEY = "fc-test-key"

/** The 402 of an account whose credits are used up, word for word (apps/api/src/routes/shared.ts). */
export const FIRECRAWL_NO_CREDITS: Fault = {
  status: 402,
  body: {
    success: false,
    error: "Insufficient credits to perform this request. For more credits, you can upgrade your plan at " +
      "https://firecrawl.dev/pricing or try changing the request limit to a lower value."
  }
}

/** A host the stand-in's blocklist holds: a scrape of a URL on it is Firecrawl's 403. */
export const FIRECRAWL_BLOCKLISTED_HOST = "blocklisted.example.com"

/** Firecrawl's refusal of a blocklisted URL, word for word (apps/api/src/lib/strings.ts `BLOCKLISTED_URL_MESSAGE`). */
export const BLOCKLISTED_URL_MESSAGE =
  "This website is no longer supported, please reach out to help@firecrawl.com for more info on how to activate it on your account."

const blocklisted = (url: unknown) =>
  typeof url === "string" && URL.canParse(url) && new URL(url).hostname === FIRECRAWL_BLOCKLISTED_HOST

const FORMATS = new Set(["markdown", "html", "rawHtml", "links", "summary", "json", "changeTracking", "screenshot"])
const SCRAPE_KEYS = new Set([
  "url", "formats", "headers", "includeTags", "excludeTags", "onlyMainContent", "timeout", "waitFor", "mobile", "parsers",
  "actions", "location", "skipTlsVerification", "removeBase64Images", "fastMode", "useMock", "blockAds", "proxy", "maxAge",
  "storeInCache", "origin", "integration", "zeroDataRetention"
])
const SEARCH_KEYS = new Set([
  "query", "limit", "tbs", "filter", "sources", "categories", "lang", "country", "location", "origin", "integration", "timeout",
  "ignoreInvalidURLs", "scrapeOptions"
])

const badRequest = (details: ReadonlyArray<Record<string, unknown>>) =>
  json(400, { success: false, code: "BAD_REQUEST", error: "Bad Request", details })

const unknownKeys = (body: object, known: ReadonlySet<string>, message: string) => {
  const keys = Object.keys(body).filter((k) => !known.has(k))
  return keys.length === 0 ? undefined : badRequest([{ code: "unrecognized_keys", keys, path: [], message }])
}

/** The formats asked for, by name, or a 400 as v2's schema gives it for one it does not know. */
const formatsOf = (value: unknown): { readonly names: ReadonlyArray<string> } | { readonly refused: Reply } => {
  if (value === undefined) return { names: ["markdown"] }
  if (!Array.isArray(value)) return { refused: badRequest([{ code: "invalid_type", expected: "array", path: ["formats"], message: "Expected array" }]) }
  const names: Array<string> = []
  for (const [i, f] of value.entries()) {
    const name: unknown = typeof f === "object" && f !== null && "type" in f ? f.type : f
    if (typeof name !== "string" || !FORMATS.has(name)) {
      return { refused: badRequest([{ code: "invalid_union", path: ["formats", i], message: "Invalid input" }]) }
    }
    names.push(name)
  }
  return { names }
}

export const handleFirecrawl = (req: RecordedRequest): Reply => {
  // Firecrawl hosts the screenshots it takes; the URL it answers points there.
  if (req.method === "GET" && req.path.startsWith("/screenshots/")) {
    return { status: 200, body: PNG.toString("latin1"), raw: true, binary: true, headers: { "content-type": "image/png" } }
  }
  if (req.headers["authorization"] !== `Bearer ${FIRECRAWL_KEY}`) return json(401, { success: false, error: "Unauthorized: Invalid token" })
  if (req.method !== "POST" || (req.path !== "/v2/search" && req.path !== "/v2/scrape")) {
    return json(404, { success: false, error: `Cannot ${req.method} ${req.path}` })
  }
  const body = req.json
  if (typeof body !== "object" || body === null || Array.isArray(body)) return badRequest([{ code: "invalid_type", expected: "object", path: [], message: "Expected object" }])
  if ("url" in body && blocklisted(body.url)) return json(403, { success: false, error: BLOCKLISTED_URL_MESSAGE })
  if (req.path === "/v2/search") {
    const refused = unknownKeys(body, SEARCH_KEYS, "Unrecognized key in body -- please review the v1 API documentation for request body changes")
    if (refused !== undefined) return refused
    if (!("query" in body) || typeof body.query !== "string") return badRequest([{ code: "invalid_type", expected: "string", path: ["query"], message: "Required" }])
    const limit: unknown = "limit" in body ? body.limit : 5
    if (typeof limit !== "number" || !Number.isInteger(limit) || limit < 1 || limit > 100) {
      return badRequest([{ code: "too_big", maximum: 100, path: ["limit"], message: "Number must be less than or equal to 100" }])
    }
    const scrape: unknown = "scrapeOptions" in body ? body.scrapeOptions : undefined
    const asked = typeof scrape === "object" && scrape !== null && "formats" in scrape ? formatsOf(scrape.formats) : { names: [] }
    if ("refused" in asked) return asked.refused
    const formats = asked.names
    return json(200, {
      success: true,
      data: {
        web: Array.from({ length: limit }, (_, i) => ({
          url: `https://example.com/fc/${i}`,
          title: `Firecrawl ${i}`,
          description: `About ${i}`,
          position: i + 1,
          ...(formats.includes("markdown") ? { markdown: `# Firecrawl ${i}` } : {})
        }))
      },
      creditsUsed: limit
    })
  }
  const refused = unknownKeys(body, SCRAPE_KEYS, "Unrecognized key in body -- please review the v2 API documentation for request body changes")
  if (refused !== undefined) return refused
  if (!("url" in body) || typeof body.url !== "string") return badRequest([{ code: "invalid_type", expected: "string", path: ["url"], message: "Required" }])
  const asked = formatsOf("formats" in body ? body.formats : undefined)
  if ("refused" in asked) return asked.refused
  const formats = asked.names
  const origin = `http://${req.headers["host"] ?? "127.0.0.1"}`
  return json(200, {
    success: true,
    data: {
      ...(formats.includes("markdown") ? { markdown: `# Scraped\n\n${body.url}` } : {}),
      ...(formats.includes("screenshot") ? { screenshot: `${origin}/screenshots/shot-1.png` } : {}),
      ...(formats.includes("summary") ? { summary: `A page at ${body.url}.` } : {}),
      ...(formats.includes("changeTracking") ? { changeTracking: { previousScrapeAt: null, changeStatus: "new", visibility: "visible" } } : {}),
      metadata: { title: "Scraped page", sourceURL: body.url, url: body.url, statusCode: 200 }
    }
  })
}

export const firecrawl = upstream(handleFirecrawl)
