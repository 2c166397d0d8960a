/**
 * Providers as their own documentation says they speak, against fakes that enforce the same rules: Jina's
 * Search refuses more than 20 results an answer (the curated `search` pages through), Jina's Reader takes the
 * target URL in a JSON body (path-encoded targets are decoded, fragments lost), Trakt refuses a request without
 * its required headers, Resend's broadcast update takes the fields to change and its batch an Idempotency-Key,
 * TMDB takes a v3 `api_key` in the query.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Option, Redacted } from "effect"
import { Betas } from "../src/services/Betas.js"
import { type ExpectedError, expectEnvelope, expectOk, expectOwnEncoding } from "./support/assert.js"
import { books, callTool, dashboard, gatewayLayer, givenMember, request, TestUpstreams } from "./support/gateway.js"
import { CREDENTIALS, resendBatchesSent, resendBroadcast } from "./upstreams/accounts.js"
import type { RecordedRequest } from "../src/testing/harness.js"
import { JINA_KEY } from "./upstreams/jina.js"
import { TMDB_API_KEY, TMDB_TOKEN } from "./upstreams/tmdb.js"

const invalid: ExpectedError = { status: 400, type: "validation", code: "invalid_request", retryable: false, billable: false }

/** A request straight to a fake, as any client would send it (to show what the fake refuses). */
const send = (url: string, init: { readonly method?: string; readonly headers?: Record<string, string>; readonly body?: unknown }) =>
  Effect.promise(async () => {
    const response = await fetch(url, {
      method: init.method ?? "GET",
      headers: init.headers ?? {},
      ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {})
    })
    const text = await response.text()
    let body: unknown = text
    try {
      body = JSON.parse(text)
    } catch {
      // not JSON: the text
    }
    return { status: response.status, body }
  })

const jsonBody = (r: RecordedRequest): Record<string, unknown> =>
  typeof r.json === "object" && r.json !== null && !Array.isArray(r.json) ? { ...r.json } : {}

/** A member's org with credits, connected to `provider` and with `beta` enabled when given. */
const member = (options: { readonly credits?: number; readonly connect?: "theta" | "lambda"; readonly beta?: "lambda_batch_emails" } = {}) =>
  Effect.gen(function* () {
    const m = yield* givenMember({ credits: options.credits ?? 100 })
    if (options.connect !== undefined) {
      const connected = yield* dashboard("POST", "/v1/connections", m.token, { provider: options.connect, credentials: CREDENTIALS[options.connect] })
      expect(connected.status).toBe(201)
    }
    if (options.beta !== undefined) yield* Effect.orDie(Effect.flatMap(Betas, (b) => b.enable(m.orgId, options.beta ?? "lambda_batch_emails")))
    return m
  })

// search and read through beta only; TMDB with a v3 API key rather than a read access token
const config = gatewayLayer((u) => ({
  providers: {
    timeoutMs: 1_500,
    searchProviders: ["beta"],
    readProviders: ["beta"],
    endpoints: { xi: { baseUrl: u.tmdb.url, apiKey: Option.some(Redacted.make(TMDB_API_KEY)) } }
  }
}))

layer(config, { excludeTestServices: true })("providers as documented", (it) => {
  describe("beta (Jina) search", () => {
    const searches = (requests: ReadonlyArray<RecordedRequest>) =>
      requests.filter((r) => r.method === "POST" && r.path === "/" && "q" in jsonBody(r)).map(jsonBody)

    it.effect("max_results 45: three pages of at most 20, the results two pages share counted once, 45 results charged", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const { key, orgId } = yield* member()
        const result = yield* callTool("search", { query: "paging", max_results: 45 }, { key })
        expectOk(result, 5)
        expectOwnEncoding("search", result)
        const sent = searches(u.jina.requests)
        expect(sent).toEqual([
          expect.objectContaining({ q: "paging", num: 20 }),
          expect.objectContaining({ q: "paging", num: 20, page: 2 }),
          expect.objectContaining({ q: "paging", num: 20, page: 3 })
        ])
        expect(sent[0]).not.toHaveProperty("page")
        const body = result.body
        const urls = typeof body === "object" && body !== null && "results" in body && Array.isArray(body.results)
          ? body.results.map((r: unknown) => (typeof r === "object" && r !== null && "url" in r ? r.url : undefined))
          : []
        expect(body).toMatchObject({ provider: "beta", query: "paging" })
        expect(urls).toHaveLength(45)
        expect(new Set(urls).size).toBe(45)
        expect(urls.slice(0, 3)).toEqual(["https://example.com/jina/0", "https://example.com/jina/1", "https://example.com/jina/2"])
        expect(urls[44]).toBe("https://example.com/jina/44")
        expect(yield* books(orgId)).toMatchObject({ balance: 95, held: 0 })
      }))

    it.effect("a page that comes back short ends the paging: 100 asked, the engine has 50, 50 charged", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const { key, orgId } = yield* member()
        const result = yield* callTool("search", { query: "few", max_results: 100 }, { key })
        expectOk(result, 5)
        expect(searches(u.jina.requests).map((b) => [b["num"], b["page"]])).toEqual([[20, undefined], [20, 2], [20, 3]])
        expect(result.body).toMatchObject({ results: expect.any(Array) })
        const body = result.body
        expect(typeof body === "object" && body !== null && "results" in body && Array.isArray(body.results) ? body.results.length : 0).toBe(50)
        expect(yield* books(orgId)).toMatchObject({ balance: 95, held: 0 })
      }))

    it.effect("twenty results or fewer: one request, num as asked", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const { key } = yield* member()
        expectOk(yield* callTool("search", { query: "few", max_results: 7 }, { key }), 1)
        expect(searches(u.jina.requests)).toEqual([expect.objectContaining({ num: 7 })])
      }))

    it.effect("Jina refuses num above 20 with a 400; beta_search refuses it before any call", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const headers = { authorization: `Bearer ${JINA_KEY}`, accept: "application/json", "content-type": "application/json" }
        const refused = yield* send(`${u.jina.url}/`, { method: "POST", headers, body: { q: "x", num: 21 } })
        expect(refused).toMatchObject({ status: 400, body: { code: 400, name: "ParamValidationError" } })
        expect(yield* send(`${u.jina.url}/`, { method: "POST", headers, body: { q: "x", num: 20 } })).toMatchObject({ status: 200 })
        u.resetAll()
        const { key, orgId } = yield* member()
        expectEnvelope(yield* callTool("beta_search", { q: "x", num: 21 }, { key }), { ...invalid, message: "num" })
        expect(u.jina.hits()).toBe(0)
        expect(yield* books(orgId)).toMatchObject({ balance: 100, held: 0, holdsByStatus: {} })
      }))
  })

  describe("beta (Jina) search with no results: Jina's 422", () => {
    const headers = { authorization: `Bearer ${JINA_KEY}`, accept: "application/json", "content-type": "application/json" }
    const resultsOf = (body: unknown) =>
      typeof body === "object" && body !== null && "results" in body && Array.isArray(body.results) ? body.results : undefined
    const run = (key: string, tool: string, input: unknown) =>
      request("/v1/run", { body: JSON.stringify({ tool, input }), headers: { "content-type": "application/json", "x-api-key": key } })
    const noResults = { code: 422, name: "AssertionFailureError", status: 42206, message: "No search results available for query 0 results here" }

    it.effect("a query Jina has no results for (its 422): search and beta_search answer 200 with none, at the least price", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        // the stand-in answers as Jina does: a 422 AssertionFailureError, not an empty list
        expect(yield* send(`${u.jina.url}/`, { method: "POST", headers, body: { q: "0 results here" } }))
          .toEqual({ status: 422, body: { data: null, ...noResults, readableMessage: `AssertionFailureError: ${noResults.message}` } })
        u.resetAll()
        const { key, orgId } = yield* member()
        const search = yield* callTool("search", { query: "0 results here" }, { key })
        expectOk(search, 1)
        expect(search.body).toEqual({ provider: "beta", query: "0 results here", results: [] })
        const beta = yield* callTool("beta_search", { q: "0 results here" }, { key })
        expectOk(beta, 1)
        expect(beta.body).toEqual({ provider: "beta", results: [] })
        // the raw answers are Jina's: its 422 as sent (search: as the answer to its one page)
        const rawBeta = yield* run(key, "beta_search", { q: "0 results here" })
        expectOk(rawBeta, 1)
        expect(rawBeta.body).toMatchObject({ tool: "beta_search", provider: "beta", status: 422, body: noResults })
        const rawSearch = yield* run(key, "search", { query: "0 results here" })
        expectOk(rawSearch, 1)
        expect(rawSearch.body).toMatchObject({ tool: "search", provider: "beta", status: 422, body: { pages: [noResults] } })
        expect(u.jina.hits()).toBe(4)
        expect(yield* books(orgId)).toMatchObject({ balance: 96, held: 0 })
      }))

    it.effect("Jina has exactly 20: search with max_results 30 answers the 20, page 2's 422 ends the paging", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const { key, orgId } = yield* member()
        const result = yield* callTool("search", { query: "20 results exactly", max_results: 30 }, { key })
        expectOk(result, 2)
        expect(u.jina.requests.map(jsonBody).map((b) => [b["num"], b["page"]])).toEqual([[20, undefined], [20, 2]])
        const results = resultsOf(result.body)
        expect(results).toHaveLength(20)
        expect(results?.[19]).toMatchObject({ url: "https://example.com/jina/19" })
        // the raw answer: page 1's status, and Jina's answer to each page, its 422 for page 2 included
        const raw = yield* run(key, "search", { query: "20 results exactly", max_results: 30 })
        expectOk(raw, 2)
        expect(raw.body).toMatchObject({
          status: 200,
          body: { pages: [{ data: expect.any(Array) }, { ...noResults, message: "No search results available for query 20 results exactly" }] }
        })
        expect(yield* books(orgId)).toMatchObject({ balance: 96, held: 0 })
      }))

    it.effect("Jina has exactly 20: beta_search's page 2 of 20 answers 200 with none", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const { key } = yield* member()
        const first = yield* callTool("beta_search", { q: "20 results exactly", num: 20 }, { key })
        expectOk(first, 2)
        expect(resultsOf(first.body)).toHaveLength(20)
        const second = yield* callTool("beta_search", { q: "20 results exactly", num: 20, page: 2 }, { key })
        expectOk(second, 1)
        expect(second.body).toEqual({ provider: "beta", results: [] })
      }))

    it.effect("Jina's other 422s stay refusals: no content for the results is 502 provider_rejected, nothing charged", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        // searcher.ts: `AssertionFailureError("No content available for query …")`, the same 422 with another message
        u.jina.fault({ status: 422, body: { data: null, code: 422, name: "AssertionFailureError", status: 42206, message: "No content available for query x" } })
        const { key, orgId } = yield* member()
        expectEnvelope(yield* callTool("beta_search", { q: "x" }, { key }), {
          status: 502, type: "provider", code: "provider_rejected", retryable: false, billable: false, message: "No content available for query x"
        })
        expect(yield* books(orgId)).toMatchObject({ balance: 100, held: 0 })
        u.resetAll()
      }))
  })

  describe("beta (Jina) reader", () => {
    // a target whose encoded characters and fragment matter to which page it is
    const target = "https://example.com/a%2Fb?x=1%262&y=%3D%3F#section-2"

    it.effect("the target URL goes to POST / in a JSON body and arrives intact, query string and fragment included", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const { key } = yield* member()
        const read = yield* callTool("read", { url: target }, { key })
        expectOk(read)
        expect(read.body).toMatchObject({ provider: "beta", url: target, content: `# Read by Jina\n\nContent of ${target}.` })
        const betaRead = yield* callTool("beta_read", { url: target, format: "text" }, { key })
        expectOk(betaRead)
        expect(betaRead.body).toMatchObject({ provider: "beta", url: target })
        expect(u.jina.requests.map((r) => ({ method: r.method, path: r.path, json: r.json }))).toEqual([
          { method: "POST", path: "/", json: { url: target } },
          { method: "POST", path: "/", json: { url: target } }
        ])
        expect(u.jina.requests[1]?.headers["x-return-format"]).toBe("text")
        expect(u.jina.requests[1]?.headers["accept"]).toBe("application/json")
      }))

    it.effect("in the path, the same target would be read decoded and without its fragment (as Jina reads paths)", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        const headers = { authorization: `Bearer ${JINA_KEY}`, accept: "application/json" }
        const inPath = yield* send(`${u.jina.url}/${target}`, { headers })
        expect(inPath).toMatchObject({ status: 200, body: { data: { url: "https://example.com/a/b?x=1&2&y==?" } } })
      }))
  })

  describe("theta (Trakt)", () => {
    it.effect("every request carries Content-Type: application/json, trakt-api-key, trakt-api-version: 2 and a User-Agent", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const { key } = yield* member({ connect: "theta" })
        expectOk(yield* callTool("theta_ratings", {}, { key }))
        expectOk(yield* callTool("theta_ratings", { type: "episodes", page: 2, limit: 5 }, { key }))
        expect(u.trakt.requests).toHaveLength(2)
        for (const r of u.trakt.requests) {
          expect(r.method).toBe("GET")
          expect(r.headers["content-type"]).toBe("application/json")
          expect(r.headers["trakt-api-key"]).toBe(CREDENTIALS.theta.client_id)
          expect(r.headers["trakt-api-version"]).toBe("2")
          expect(r.headers["user-agent"]).toMatch(/\S/)
          expect(r.headers["authorization"]).toBe(`Bearer ${CREDENTIALS.theta.access_token}`)
        }
      }))

    it.effect("Trakt refuses a request without them as it documents: 412 without Content-Type, 403 without the key, 401 without OAuth", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        const url = `${u.trakt.url}/users/me/ratings`
        const all = {
          "content-type": "application/json",
          "user-agent": "test/1",
          "trakt-api-key": CREDENTIALS.theta.client_id,
          "trakt-api-version": "2",
          authorization: `Bearer ${CREDENTIALS.theta.access_token}`
        }
        const { "content-type": _type, ...withoutType } = all
        const { "trakt-api-key": _key, ...withoutKey } = all
        const { authorization: _auth, ...withoutOAuth } = all
        expect(yield* send(url, { headers: all })).toMatchObject({ status: 200 })
        expect(yield* send(url, { headers: withoutType })).toEqual({ status: 412, body: { error: "Precondition Failed - use application/json content type" } })
        expect(yield* send(url, { headers: withoutKey })).toMatchObject({ status: 403 })
        expect(yield* send(url, { headers: withoutOAuth })).toMatchObject({ status: 401 })
      }))
  })

  describe("lambda (Resend)", () => {
    it.effect("an update sends the fields to change under Resend's names, and Resend keeps them", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const { key } = yield* member({ connect: "lambda" })
        const changes = {
          name: "March newsletter",
          segment_id: "78261eea-8f8b-4381-83c6-79fa7120f1cf",
          from: "Acme <team@example.com>",
          subject: "What is new in March",
          reply_to: ["support@example.com"],
          preview_text: "Three things",
          html: "<p>Three things</p>",
          text: "Three things",
          topic_id: null
        }
        const result = yield* callTool("lambda_update_broadcast", { id: "bc-7", ...changes }, { key })
        expectOk(result, 1)
        expect(result.body).toEqual({ provider: "lambda", id: "bc-7" })
        expect(u.resend.requests.map((r) => ({ method: r.method, path: r.path, json: r.json }))).toEqual([
          { method: "PATCH", path: "/broadcasts/bc-7", json: changes }
        ])
        expect(resendBroadcast("bc-7")).toEqual(changes)
      }))

    it.effect("an update with nothing to change is invalid_request: no provider call, nothing held", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const { key, orgId } = yield* member({ connect: "lambda" })
        expectEnvelope(yield* callTool("lambda_update_broadcast", { id: "bc-8" }, { key }), { ...invalid, message: "give at least one field to change" })
        expect(u.resend.hits()).toBe(0)
        expect(yield* books(orgId)).toMatchObject({ balance: 100, held: 0, holdsByStatus: {} })
      }))

    it.effect("a batch carries the call's Idempotency-Key (derived, 1–256 characters); Resend replays it and refuses it for another body", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const { key } = yield* member({ connect: "lambda", beta: "lambda_batch_emails" })
        const emails = [{ from: "a@example.com", to: ["b@example.com"], subject: "Hi", text: "Hello" }]
        expectOk(yield* callTool("lambda_batch_emails", { emails }, { key, idempotencyKey: "welcome-batch-1" }), 1)
        const sent = u.resend.requests[0]
        const providerKey = sent?.headers["idempotency-key"]
        expect(providerKey).toMatch(/^tg-[0-9a-f]{64}$/)
        expect(typeof providerKey === "string" ? providerKey.length : 0).toBeLessThanOrEqual(256)
        expect(sent?.headers["user-agent"]).toMatch(/\S/)
        // Resend's side of that key: the same body again is the same answer and no second send
        const before = resendBatchesSent()
        const headers = { authorization: `Bearer ${CREDENTIALS.lambda.api_key}`, "content-type": "application/json", "idempotency-key": String(providerKey) }
        const again = yield* send(`${u.resend.url}/emails/batch`, { method: "POST", headers, body: emails })
        expect(again).toEqual({ status: 200, body: { data: [{ id: "email-0" }] } })
        expect(resendBatchesSent()).toBe(before)
        const other = yield* send(`${u.resend.url}/emails/batch`, { method: "POST", headers, body: [{ ...emails[0], subject: "Other" }] })
        expect(other).toMatchObject({ status: 409, body: { statusCode: 409, name: "invalid_idempotent_request" } })
        const tooLong = yield* send(`${u.resend.url}/emails/batch`, { method: "POST", headers: { ...headers, "idempotency-key": "k".repeat(257) }, body: emails })
        expect(tooLong).toMatchObject({ status: 400, body: { name: "invalid_idempotency_key" } })
      }))

    it.effect("Resend's own errors: a 409 concurrent_idempotent_requests is retryable, a 403 validation_error a refusal (not the key)", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const { key, orgId } = yield* member({ connect: "lambda", beta: "lambda_batch_emails" })
        const emails = { emails: [{ from: "a@example.com", to: ["b@example.com"], subject: "Hi", text: "Hello" }] }
        u.resend.fault({
          status: 409,
          times: 1,
          body: { statusCode: 409, name: "concurrent_idempotent_requests", message: "Same idempotency key used while original request is still in progress." }
        })
        const busy = yield* callTool("lambda_batch_emails", emails, { key, idempotencyKey: "busy-1" })
        expectEnvelope(busy, { status: 502, type: "provider", code: "provider_unavailable", retryable: true, billable: false, message: "still in progress" })
        // the key was not kept for that answer: the retry runs, and is sent
        expectOk(yield* callTool("lambda_batch_emails", emails, { key, idempotencyKey: "busy-1" }), 1)
        u.resend.fault({
          status: 403,
          times: 1,
          body: { statusCode: 403, name: "validation_error", message: "The example.com domain is not verified. Please, add and verify your domain." }
        })
        const unverified = yield* callTool("lambda_batch_emails", emails, { key })
        expectEnvelope(unverified, { status: 502, type: "provider", code: "provider_rejected", retryable: false, billable: false, message: "domain is not verified" })
        u.resend.fault()
        expect(yield* books(orgId)).toMatchObject({ balance: 99, held: 0 })
      }))

    it.effect("Resend refuses a request without a User-Agent (403, error code 1010)", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        // undici's fetch sends a User-Agent of its own unless told otherwise: an empty one stands for none
        const refused = yield* send(`${u.resend.url}/broadcasts/bc-1`, {
          method: "PATCH",
          headers: { "user-agent": "", authorization: `Bearer ${CREDENTIALS.lambda.api_key}`, "content-type": "application/json" },
          body: { subject: "x" }
        })
        expect(refused).toEqual({ status: 403, body: "error code: 1010" })
      }))
  })

  describe("xi (TMDB) with a v3 API key", () => {
    it.effect("the key goes as api_key in the query, with no Authorization header", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const { key } = yield* member()
        const result = yield* callTool("xi_movie", { id: 550, append_to_response: "credits" }, { key })
        expectOk(result, 1)
        expect(result.body).toMatchObject({ provider: "xi", id: 550, title: "Fight Club", appended: { credits: expect.any(Object) } })
        const sent = u.tmdb.requests[0]
        expect(sent?.path).toBe("/3/movie/550")
        expect(sent?.query.get("api_key")).toBe(TMDB_API_KEY)
        expect(sent?.query.get("append_to_response")).toBe("credits")
        expect(sent?.headers["authorization"]).toBeUndefined()
      }))

    it.effect("TMDB takes either way of authenticating and refuses a wrong key with its 401 status_code 7", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        const url = `${u.tmdb.url}/3/movie/550`
        const refusal = { status: 401, body: { status_code: 7, status_message: "Invalid API key: You must be granted a valid key.", success: false } }
        expect(yield* send(`${url}?api_key=${TMDB_API_KEY}`, {})).toMatchObject({ status: 200, body: { id: 550 } })
        expect(yield* send(url, { headers: { authorization: `Bearer ${TMDB_TOKEN}` } })).toMatchObject({ status: 200, body: { id: 550 } })
        expect(yield* send(`${url}?api_key=ffffffffffffffffffffffffffffffff`, {})).toEqual(refusal)
        expect(yield* send(url, { headers: { authorization: "Bearer not-a-token" } })).toEqual(refusal)
        expect(yield* send(url, {})).toEqual(refusal)
      }))
  })
})
