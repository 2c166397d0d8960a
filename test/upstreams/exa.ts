/**
 * Exa's search API: `POST /search` with `x-api-key`, JSON body `{query, numResults, contents}`. Failures are
 * `{requestId, error, tag}` with the HTTP status (https://exa.ai/docs/reference/error-codes): a 403's tag says why —
 * `PROHIBITED_CONTENT` (https://exa.ai/docs/reference/content-policy) and `ROBOTS_FILTER_FAILED` refuse what was
 * asked for, `TEAM_BLOCKED`, `ACCESS_DENIED` and `FEATURE_DISABLED` the account behind the key. `stream: true` is a
 * documented field of `/search` (exa-labs/exa-js src/index.ts `BaseSearchOptions.stream`, `streamSearch`): the answer
 * is then a `text/event-stream` of OpenAI-style chat completion chunks, `data: {…}` lines ended by `data: [DONE]`.
 */
import { type Fault, json, type RecordedRequest, type Reply, upstream } from "../../src/testing/harness.js"

export const EXA_KEY = "exa-test-key"

const REQUEST_ID = "b5947044c4b78efa9552a7c89b306d95"

/** A query Exa's content policy refuses, here (the stand-in's own stand-in for one). */
export const EXA_PROHIBITED_QUERY = "prohibited example query"

/** Exa's 403 for a team suspended under its content policy: the key stops working (exa.ai/docs/reference/content-policy). */
export const EXA_TEAM_BLOCKED: Fault = {
  status: 403,
  body: { requestId: REQUEST_ID, error: "This team has been blocked. Contact support@exa.ai.", tag: "TEAM_BLOCKED" }
}

/** Exa's 403 for a URL whose robots.txt does not allow Exa (the `ROBOTS_FILTER_FAILED` tag of its error codes). */
export const EXA_ROBOTS_REFUSED: Fault = {
  status: 403,
  body: { requestId: REQUEST_ID, error: "The URL is disallowed by its robots.txt.", tag: "ROBOTS_FILTER_FAILED" }
}

const streamed = (query: string): Reply => {
  const chunk = (content: string) =>
    `data: ${JSON.stringify({ id: REQUEST_ID, object: "chat.completion.chunk", choices: [{ index: 0, delta: { content } }] })}\n\n`
  return {
    status: 200,
    raw: true,
    body: `${chunk(`Results for ${query}`)}data: [DONE]\n\n`,
    headers: { "content-type": "text/event-stream" }
  }
}

export const handleExa = (req: RecordedRequest): Reply => {
  if (req.headers["x-api-key"] !== EXA_KEY) return json(401, { requestId: REQUEST_ID, error: "Invalid API key", tag: "INVALID_API_KEY" })
  if (req.method !== "POST" || req.path !== "/search") return json(404, { error: "Not found" })
  const body = req.json
  if (typeof body !== "object" || body === null || !("query" in body) || typeof body.query !== "string") {
    return json(400, { requestId: REQUEST_ID, error: "query is required", tag: "INVALID_REQUEST_BODY" })
  }
  if (body.query === EXA_PROHIBITED_QUERY) {
    return json(403, { requestId: REQUEST_ID, error: "This request seeks prohibited content.", tag: "PROHIBITED_CONTENT" })
  }
  if ("stream" in body && body.stream === true) return streamed(body.query)
  const n = "numResults" in body && typeof body.numResults === "number" ? body.numResults : 10
  return json(200, {
    requestId: REQUEST_ID,
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
