/**
 * Exa's search API: `POST /search` with `x-api-key`, JSON body `{query, numResults, contents}`.
 */
import { json, type RecordedRequest, type Reply, upstream } from "../../src/testing/harness.js"

export const EXA_KEY = "exa-test-key"

export const handleExa = (req: RecordedRequest): Reply => {
  if (req.headers["x-api-key"] !== EXA_KEY) return json(401, { error: "Invalid API key" })
  if (req.method !== "POST" || req.path !== "/search") return json(404, { error: "Not found" })
  const body = req.json
  if (typeof body !== "object" || body === null || !("query" in body) || typeof body.query !== "string") {
    return json(400, { error: "query is required" })
  }
  const n = "numResults" in body && typeof body.numResults === "number" ? body.numResults : 10
  return json(200, {
    requestId: "b5947044c4b78efa9552a7c89b306d95",
    resolvedSearchType: "neural",
    results: Array.from({ length: Math.min(n, 4) }, (_, i) => ({
      id: `https://example.com/exa/${i}`,
      title: `Exa result ${i} for ${body.query}`,
      url: `https://example.com/exa/${i}`,
      publishedDate: "2026-01-0" + (i + 1) + "T00:00:00.000Z",
      author: null,
      score: 0.9 - i * 0.1,
      text: `Text of result ${i}.`
    })),
    costDollars: { total: 0.005 }
  })
}

export const exa = upstream(handleExa)
