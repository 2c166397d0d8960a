/**
 * Every tool against its provider's protocol (a fake upstream per protocol): the request the gateway sends
 * (method, path, auth, body), the normalized answer, the raw answer through `POST /v1/run`, and every
 * upstream failure class with its code and flags — the hold voided on provider failures, settled on
 * normalization failures. Writes are never sent twice.
 */
import { describe, expect, layer } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { Clock, Context, Effect, Layer, Option } from "effect"
import * as Crypto from "node:crypto"
import { type AccountProvider, accountProviders } from "../src/domain/connections.js"
import { type ToolName, toolNames, tools } from "../src/domain/tools.js"
import { Betas } from "../src/services/Betas.js"
import { DeltaSessions, DeltaSessionsLive } from "../src/services/DeltaSessions.js"
import { HtmlConverter } from "../src/services/HtmlConverter.js"
import { Encryption } from "../src/services/Encryption.js"
import { sweepOnce } from "../src/services/Sweeper.js"
import { errorOf, type ExpectedError, expectEnvelope, expectOk, expectOwnEncoding } from "./support/assert.js"
import {
  books,
  callTool,
  dashboard,
  gatewayLayer,
  givenMember,
  request,
  TestUpstreams,
  type Upstreams
} from "./support/gateway.js"
import {
  APE_KEYS,
  CREDENTIALS,
  EPSILON_TOKEN,
  exhaustApeKey,
  expireBlueskySessions,
  forgetBlueskyLogins,
  gitHubLimited,
  GRAPH_PROXY_PATH,
  GRAPH_THROTTLED,
  restoreApeKey,
  UNDELETABLE_BENEFIT,
  handleBluesky,
  revokeBlueskyRefreshTokens,
  setBlueskyPds
} from "./upstreams/accounts.js"
import { BLOCKLISTED_URL_MESSAGE, FIRECRAWL_BLOCKLISTED_HOST, FIRECRAWL_NO_CREDITS } from "./upstreams/firecrawl.js"
import { JINA_NO_CONTENT_PATH } from "./upstreams/jina.js"
import { EXA_PROHIBITED_QUERY, EXA_ROBOTS_REFUSED, EXA_TEAM_BLOCKED } from "./upstreams/exa.js"
import { UNKNOWN_FILM } from "./upstreams/tmdb.js"
import { ITUNES_THROTTLED } from "../src/testing/itunes.js"
import { type Fault, type RecordedRequest, type Upstream, upstream } from "../src/testing/harness.js"

interface Sent {
  readonly method: string
  readonly path: string | RegExp
  readonly headers?: Readonly<Record<string, string>>
  readonly query?: Readonly<Record<string, string>>
  readonly body?: object
}

interface Case {
  readonly tool: ToolName
  readonly input: (u: Upstreams) => Record<string, unknown>
  readonly upstream: (u: Upstreams) => Upstream
  readonly sent: Sent
  readonly output: Record<string, unknown>
  /** What the raw answer must contain. */
  readonly raw: Record<string, unknown>
  /** Fault classes that do not apply (an answer without a body has no shape to get wrong). */
  readonly skip?: ReadonlyArray<string>
  /** The path a write's fault targets (after a session call, say). */
  readonly writePath?: string
}

const accountProvider = (tool: ToolName): AccountProvider | undefined => {
  const p = tools[tool].provider
  return tools[tool].account ? accountProviders.find((a) => a === p) : undefined
}

const credentialsFor = (u: Upstreams, provider: AccountProvider): Record<string, unknown> =>
  provider === "epsilon" ? { base_url: u.rest.url, token: EPSILON_TOKEN } : { ...CREDENTIALS[provider] }

const cases: ReadonlyArray<Case> = [
  {
    tool: "search",
    input: () => ({ query: "effect", max_results: 2 }),
    upstream: (u) => u.exa,
    sent: { method: "POST", path: "/search", headers: { "x-api-key": "exa-test-key" }, body: { query: "effect", numResults: 2 } },
    output: { provider: "alpha", query: "effect", results: [expect.objectContaining({ url: "https://example.com/exa/0" }), expect.anything()] },
    raw: { provider: "alpha", status: 200, body: expect.objectContaining({ requestId: expect.any(String) }) }
  },
  {
    tool: "read",
    input: (u) => ({ url: `${u.pages.url}/article`, max_chars: 500 }),
    upstream: (u) => u.pages,
    sent: { method: "GET", path: "/article" },
    output: { provider: "builtin", title: "The Gateway Article", chars: 500, truncated: true },
    raw: { provider: "builtin", status: 200, body: expect.stringContaining("<article>") },
    skip: ["malformed JSON", "a wrong shape"]
  },
  {
    tool: "weather",
    input: () => ({ q: "Berlin" }),
    upstream: (u) => u.openMeteo,
    sent: { method: "GET", path: "/v1/forecast", query: { latitude: "52.52437", longitude: "13.41053", timezone: "auto" } },
    output: { provider: "open-meteo", location: expect.objectContaining({ name: "Berlin" }), current: expect.objectContaining({ temperature_c: 4.2 }) },
    raw: { provider: "open-meteo", status: 200, body: { geocoding: expect.objectContaining({ results: expect.any(Array) }), forecast: expect.objectContaining({ timezone: "Europe/Berlin" }) } }
  },
  {
    tool: "mobile_app_search",
    input: () => ({ query: "notes", limit: 1 }),
    upstream: (u) => u.itunes,
    sent: { method: "GET", path: "/search", query: { term: "notes", entity: "software", limit: "1" } },
    output: { provider: "itunes", results: [expect.objectContaining({ id: 1000 })] },
    raw: { provider: "itunes", status: 200, body: expect.objectContaining({ resultCount: 1 }) }
  },
  {
    tool: "alpha_search",
    input: () => ({ query: "effect", numResults: 3, type: "neural", includeDomains: ["example.com"] }),
    upstream: (u) => u.exa,
    sent: {
      method: "POST",
      path: "/search",
      headers: { "x-api-key": "exa-test-key" },
      body: { query: "effect", numResults: 3, type: "neural", includeDomains: ["example.com"] }
    },
    output: {
      provider: "alpha",
      request_id: "b5947044c4b78efa9552a7c89b306d95",
      search_type: "neural",
      results: [expect.objectContaining({ id: "https://example.com/exa/0", score: 0.9, text: "Text of result 0." }), expect.anything(), expect.anything()]
    },
    raw: { provider: "alpha", status: 200, body: expect.objectContaining({ resolvedSearchType: "neural" }) }
  },
  {
    tool: "beta_read",
    input: () => ({ url: "https://example.com/doc", format: "text" }),
    upstream: (u) => u.jina,
    sent: { method: "POST", path: "/", headers: { authorization: "Bearer jina-test-key", "x-return-format": "text" }, body: { url: "https://example.com/doc" } },
    output: { provider: "beta", url: "https://example.com/doc", title: "Jina read", content: "Read by Jina\n\nContent of https://example.com/doc.", tokens: 42 },
    raw: { provider: "beta", status: 200, body: expect.objectContaining({ code: 200, status: 20000 }) }
  },
  {
    tool: "beta_search",
    input: () => ({ q: "effect", num: 3, gl: "de", site: ["a.com", "b.com"], nfpr: true, freshness: "week" }),
    upstream: (u) => u.jina,
    sent: {
      method: "POST",
      path: "/",
      headers: { authorization: "Bearer jina-test-key" },
      body: { q: "effect", num: 3, gl: "de", site: ["a.com", "b.com"], nfpr: true, freshness: "week" }
    },
    output: {
      provider: "beta",
      results: [expect.objectContaining({ url: "https://example.com/jina/0", description: "Description 0", content: "Content of result 0." }), expect.anything(), expect.anything()]
    },
    raw: { provider: "beta", status: 200, body: expect.objectContaining({ data: expect.any(Array) }) }
  },
  {
    tool: "gamma_scrape",
    input: () => ({ url: "https://example.com/page", formats: ["markdown"], onlyMainContent: true, waitFor: 500 }),
    upstream: (u) => u.firecrawl,
    sent: {
      method: "POST",
      path: "/v2/scrape",
      headers: { authorization: "Bearer fc-test-key" },
      body: { url: "https://example.com/page", formats: ["markdown"], onlyMainContent: true, waitFor: 500 }
    },
    output: { provider: "gamma", url: "https://example.com/page", title: "Scraped page", status_code: 200, markdown: "# Scraped\n\nhttps://example.com/page", html: null },
    raw: { provider: "gamma", status: 200, body: expect.objectContaining({ success: true }) }
  },
  {
    tool: "gamma_search",
    input: () => ({ query: "effect", limit: 2, lang: "de" }),
    upstream: (u) => u.firecrawl,
    sent: { method: "POST", path: "/v2/search", headers: { authorization: "Bearer fc-test-key" }, body: { query: "effect", limit: 2, lang: "de" } },
    output: { provider: "gamma", results: [expect.objectContaining({ url: "https://example.com/fc/0", title: "Firecrawl 0" }), expect.anything()] },
    raw: { provider: "gamma", status: 200, body: expect.objectContaining({ success: true }) }
  },
  {
    tool: "xi_movie",
    input: () => ({ id: 550, append_to_response: "videos" }),
    upstream: (u) => u.tmdb,
    sent: { method: "GET", path: "/3/movie/550", query: { append_to_response: "videos" }, headers: { authorization: expect.stringMatching(/^Bearer eyJ/) } },
    output: {
      provider: "xi",
      id: 550,
      title: "Fight Club",
      genres: ["Drama"],
      runtime: 139,
      imdb_id: "tt0137523",
      poster_url: "https://image.tmdb.org/t/p/original/pB8BM7pdSp6B6Ih7QZ4DrQ3PmJK.jpg",
      appended: { videos: expect.objectContaining({ results: expect.any(Array) }) }
    },
    raw: { provider: "xi", status: 200, body: expect.objectContaining({ budget: 63000000 }) }
  },
  {
    tool: "delta_post",
    input: () => ({ text: "hello", langs: ["en"], created_at: "2026-11-22T00:00:00.000Z" }),
    upstream: (u) => u.bluesky,
    sent: {
      method: "POST",
      path: "/xrpc/com.atproto.repo.createRecord",
      headers: { authorization: expect.stringMatching(/^Bearer [\w-]+\.[\w-]+\.sig$/) },
      body: {
        repo: "did:plc:alice",
        collection: "app.bsky.feed.post",
        record: { $type: "app.bsky.feed.post", text: "hello", langs: ["en"], createdAt: "2026-11-22T00:00:00.000Z" }
      }
    },
    output: { provider: "delta", uri: expect.stringContaining("app.bsky.feed.post"), cid: "bafyreib2rxk3rh6kzwq" },
    raw: { provider: "delta", status: 200, body: expect.objectContaining({ validationStatus: "valid" }) },
    writePath: "/xrpc/com.atproto.repo.createRecord"
  },
  {
    tool: "delta_like",
    input: () => ({ uri: "at://did:plc:bob/app.bsky.feed.post/1", cid: "bafy-bob" }),
    upstream: (u) => u.bluesky,
    sent: {
      method: "POST",
      path: "/xrpc/com.atproto.repo.createRecord",
      body: { collection: "app.bsky.feed.like", record: expect.objectContaining({ subject: { uri: "at://did:plc:bob/app.bsky.feed.post/1", cid: "bafy-bob" } }) }
    },
    output: { provider: "delta", uri: expect.stringContaining("app.bsky.feed.like") },
    raw: { provider: "delta", status: 200 },
    writePath: "/xrpc/com.atproto.repo.createRecord"
  },
  {
    tool: "epsilon_request",
    input: () => ({ path: "/v2/items", method: "PUT", query: { dry: true }, body: { name: "x" } }),
    upstream: (u) => u.rest,
    sent: { method: "PUT", path: "/v2/items", headers: { authorization: `Bearer ${EPSILON_TOKEN}` }, query: { dry: "true" }, body: { name: "x" } },
    output: { provider: "epsilon", status: 200, body: { method: "PUT", path: "/v2/items", query: { dry: "true" }, body: { name: "x" } } },
    raw: { provider: "epsilon", status: 200, body: expect.objectContaining({ method: "PUT" }) },
    // any REST API: its answer is whatever it sent, JSON or not
    skip: ["malformed JSON", "a wrong shape"],
    writePath: "/v2/items"
  },
  {
    tool: "zeta_request",
    input: () => ({ path: "me/accounts", params: { fields: "id,name" }, version: "v25.0" }),
    upstream: (u) => u.graph,
    sent: { method: "GET", path: "/v25.0/me/accounts", headers: { authorization: "Bearer zeta-token" }, query: { fields: "id,name" } },
    output: { provider: "zeta", data: expect.objectContaining({ version: "v25.0", path: "me/accounts" }) },
    raw: { provider: "zeta", status: 200, body: expect.objectContaining({ id: "1234" }) },
    // any object is a valid Graph answer; only non-objects are the wrong shape
    skip: ["a wrong shape"]
  },
  {
    tool: "eta_personal_bests",
    input: () => ({ mode: "time" }),
    upstream: (u) => u.monkeytype,
    sent: { method: "GET", path: "/users/personalBests", headers: { authorization: `ApeKey ${CREDENTIALS.eta.ape_key}` }, query: { mode: "time" } },
    output: { provider: "eta", mode: "time", mode2: null, personal_bests: [expect.objectContaining({ mode2: "60", wpm: 112.5 })] },
    raw: { provider: "eta", status: 200, body: expect.objectContaining({ message: "Personal bests retrieved" }) }
  },
  {
    tool: "theta_ratings",
    input: () => ({ page: 2, limit: 5 }),
    upstream: (u) => u.trakt,
    sent: {
      method: "GET",
      path: "/users/me/ratings",
      headers: { authorization: "Bearer trakt-token", "trakt-api-key": "trakt-client", "trakt-api-version": "2" },
      query: { page: "2", limit: "5" }
    },
    output: { provider: "theta", type: "all", page: 2, page_count: 3, item_count: 25, ratings: [expect.objectContaining({ title: "Inception", ids: { trakt: 16662 } })] },
    raw: { provider: "theta", status: 200, body: expect.any(Array) }
  },
  {
    tool: "iota_delete_service",
    input: () => ({ service_id: "srv-123" }),
    upstream: (u) => u.render,
    sent: { method: "DELETE", path: "/v1/services/srv-123", headers: { authorization: "Bearer rnd_key" } },
    output: { provider: "iota", deleted: true, service_id: "srv-123" },
    raw: { provider: "iota", status: 204, body: null },
    skip: ["malformed JSON", "a wrong shape"],
    writePath: "/v1/services/srv-123"
  },
  {
    tool: "kappa_delete_benefit",
    input: () => ({ benefit_id: "ben-1" }),
    upstream: (u) => u.polar,
    sent: { method: "DELETE", path: "/v1/benefits/ben-1", headers: { authorization: "Bearer polar_oat_1" } },
    output: { provider: "kappa", deleted: true, benefit_id: "ben-1" },
    raw: { provider: "kappa", status: 204, body: null },
    skip: ["malformed JSON", "a wrong shape"],
    writePath: "/v1/benefits/ben-1"
  },
  {
    tool: "kappa_ingest_events",
    input: () => ({ events: [{ name: "signup", external_customer_id: "customer-1" }] }),
    upstream: (u) => u.polar,
    sent: { method: "POST", path: "/v1/events/ingest", body: { events: [{ name: "signup", external_customer_id: "customer-1" }] } },
    output: { provider: "kappa", inserted: 1 },
    raw: { provider: "kappa", status: 200, body: { inserted: 1 } },
    writePath: "/v1/events/ingest"
  },
  {
    tool: "lambda_update_broadcast",
    input: () => ({ id: "bc-1", subject: "March news", reply_to: ["team@example.com"] }),
    upstream: (u) => u.resend,
    sent: { method: "PATCH", path: "/broadcasts/bc-1", headers: { authorization: "Bearer re_key" }, body: { subject: "March news", reply_to: ["team@example.com"] } },
    output: { provider: "lambda", id: "bc-1" },
    raw: { provider: "lambda", status: 200, body: { id: "bc-1", object: "broadcast" } },
    writePath: "/broadcasts/bc-1"
  },
  {
    tool: "lambda_batch_emails",
    input: () => ({ emails: [{ from: "a@example.com", to: ["b@example.com"], subject: "Hi", html: "<p>Hi</p>" }] }),
    upstream: (u) => u.resend,
    sent: { method: "POST", path: "/emails/batch", body: [{ from: "a@example.com", to: ["b@example.com"], subject: "Hi", html: "<p>Hi</p>" }] },
    output: { provider: "lambda", ids: ["email-0"] },
    raw: { provider: "lambda", status: 200, body: { data: [{ id: "email-0" }] } },
    writePath: "/emails/batch"
  },
  {
    tool: "mu_database",
    input: () => ({ database_id: "d9824bdc" }),
    upstream: (u) => u.notion,
    sent: { method: "GET", path: "/v1/databases/d9824bdc", headers: { authorization: "Bearer secret_notion", "notion-version": "2025-09-03" } },
    output: {
      provider: "mu",
      id: "d9824bdc",
      title: "Tasks",
      // the properties of both data sources, each once
      properties: [{ name: "Name", type: "title" }, { name: "Status", type: "status" }, { name: "Archived on", type: "date" }],
      data_sources: [
        { id: "d9824bdc-tasks", name: "Tasks", properties: [{ name: "Name", type: "title" }, { name: "Status", type: "status" }] },
        { id: "d9824bdc-archive", name: "Archive", properties: [{ name: "Name", type: "title" }, { name: "Archived on", type: "date" }] }
      ]
    },
    raw: {
      provider: "mu",
      status: 200,
      body: {
        database: expect.objectContaining({ object: "database", data_sources: expect.any(Array) }),
        data_sources: [expect.objectContaining({ object: "data_source" }), expect.objectContaining({ object: "data_source" })]
      }
    }
  },
  {
    tool: "nu_account",
    input: () => ({}),
    upstream: (u) => u.github,
    sent: { method: "GET", path: "/user", headers: { authorization: "Bearer ghp_token", "x-github-api-version": "2022-11-28" } },
    output: { provider: "nu", login: "alice", id: 42 },
    raw: { provider: "nu", status: 200, body: expect.objectContaining({ login: "alice" }) }
  }
]

/**
 * Each upstream attempt's deadline here. 500 ms was too little for a loaded machine: a connection reset (answered at
 * once) was retried and ran out of it on CI, a `provider_timeout` where `provider_unavailable` was due.
 */
const TIMEOUT_MS = 1_000

const faults: ReadonlyArray<{ readonly name: string; readonly fault: Fault; readonly expected: ExpectedError; readonly settled: boolean }> = [
  { name: "a timeout", fault: { delayMs: TIMEOUT_MS * 3 }, expected: { status: 504, type: "timeout", code: "provider_timeout", retryable: true, billable: false }, settled: false },
  { name: "a 5xx", fault: { status: 503 }, expected: { status: 502, type: "provider", code: "provider_unavailable", retryable: true, billable: false }, settled: false },
  { name: "a 429", fault: { status: 429, headers: { "retry-after": "12" } }, expected: { status: 502, type: "provider", code: "provider_rate_limited", retryable: true, billable: false }, settled: false },
  { name: "a 4xx", fault: { status: 422, body: { message: "field x is invalid" } }, expected: { status: 502, type: "provider", code: "provider_rejected", retryable: false, billable: false, message: "(HTTP 422): field x is invalid" }, settled: false },
  { name: "a 401", fault: { status: 401, body: { message: "bad token" } }, expected: { status: 502, type: "provider", code: "provider_credential_rejected", retryable: false, billable: false, message: "bad token" }, settled: false },
  { name: "a 403", fault: { status: 403, body: { message: "not allowed" } }, expected: { status: 502, type: "provider", code: "provider_credential_rejected", retryable: false, billable: false, message: "(HTTP 403)" }, settled: false },
  { name: "malformed JSON", fault: { malformed: true }, expected: { status: 502, type: "provider", code: "provider_unavailable", retryable: true, billable: false }, settled: false },
  { name: "a wrong shape", fault: { wrongShape: true }, expected: { status: 502, type: "normalization", code: "normalization_failed", retryable: false, billable: true, message: "/v1/run" }, settled: true },
  { name: "a connection reset", fault: { reset: true }, expected: { status: 502, type: "provider", code: "provider_unavailable", retryable: true, billable: false }, settled: false },
  { name: "an oversized body", fault: { oversizedBytes: 6 * 1024 * 1024 }, expected: { status: 502, type: "provider", code: "provider_response_too_large", retryable: false, billable: false }, settled: false }
]

type FaultCase = (typeof faults)[number]

/**
 * Where a tool reads a failure class differently: a write that answered 2xx with invalid JSON has probably
 * been done (normalization_failed, settled, never retryable); a page that refuses the built-in reader refuses
 * the fetch, not a credential of the gateway's.
 */
const expectationFor = (c: Case, f: FaultCase): FaultCase => {
  // nor may its message send the caller to POST /v1/run, which would send the write again
  if (f.name === "a wrong shape" && tools[c.tool].effect === "write") {
    return { ...f, expected: { ...f.expected, message: "probably been done; check before sending it again (POST /v1/run would send it again)" } }
  }
  if (f.name === "malformed JSON" && tools[c.tool].effect === "write") {
    return { ...f, expected: { status: 502, type: "normalization", code: "normalization_failed", retryable: false, billable: true, message: "probably been done" }, settled: true }
  }
  // a write that may have reached the provider may have been carried out: not retryable, whatever broke
  if (tools[c.tool].effect === "write" && ["a timeout", "a 5xx", "a connection reset", "an oversized body"].includes(f.name)) {
    return { ...f, expected: { status: 502, type: "provider", code: "write_outcome_unknown", retryable: false, billable: false, message: "the write may have been carried out" } }
  }
  // iTunes takes no key: its 403 is its throttle, a rate limit with a minute's wait
  if (f.name === "a 403" && c.tool === "mobile_app_search") {
    return { ...f, expected: { status: 502, type: "provider", code: "provider_rate_limited", retryable: true, billable: false, message: "(HTTP 403)" } }
  }
  // Firecrawl refuses its key with a 401; its 403s refuse the URL or the request (its blocklist, its country check)
  if (f.name === "a 403" && (c.tool === "gamma_scrape" || c.tool === "gamma_search")) {
    return { ...f, expected: { status: 502, type: "provider", code: "provider_rejected", retryable: false, billable: false, message: "(HTTP 403): not allowed" } }
  }
  if ((f.name === "a 401" || f.name === "a 403") && c.tool === "read") {
    return { ...f, expected: { status: 502, type: "provider", code: "provider_rejected", retryable: false, billable: false, message: "The page refused" } }
  }
  return f
}

const caseOf = (tool: ToolName) => {
  const c = cases.find((x) => x.tool === tool)
  if (c === undefined) throw new Error(`no case for ${tool}`)
  return c
}

/** An org ready to call the tool: credits, its connection if it needs one, its beta if it is one. */
const prepare = (c: Case, credits = 100) =>
  Effect.gen(function* () {
    const u = yield* TestUpstreams
    const member = yield* givenMember({ credits })
    const provider = accountProvider(c.tool)
    if (provider !== undefined) {
      const connected = yield* dashboard("POST", "/v1/connections", member.token, { provider, credentials: credentialsFor(u, provider) })
      expect(connected.status).toBe(201)
    }
    // the new org's first delta call logs in: within the account's limit however many cases came before
    if (provider === "delta") forgetBlueskyLogins()
    if (tools[c.tool].beta) yield* Effect.orDie(Effect.flatMap(Betas, (b) => b.enable(member.orgId, c.tool)))
    return member
  })

/** `value` as an object whose properties can be read, after checking that it is one. */
const expectObject = (value: unknown): Record<string, unknown> => {
  expect(typeof value === "object" && value !== null && !Array.isArray(value), JSON.stringify(value)).toBe(true)
  return typeof value === "object" && value !== null ? Object.fromEntries(Object.entries(value)) : {}
}

const matches = (r: RecordedRequest, sent: Sent) =>
  r.method === sent.method && (typeof sent.path === "string" ? r.path === sent.path : sent.path.test(r.path))

const config = { providers: { timeoutMs: TIMEOUT_MS, searchProviders: ["alpha"], readProviders: ["builtin"], ssrfAllow: ["127.0.0.0/8"] } }

/**
 * The gateway, with its page converter's thread started before the cases: started by the first page, on a loaded
 * machine (the other test files run beside this one) it can take longer than the deadline these cases give the
 * provider phase (three times TIMEOUT_MS), and `read`'s first case would answer `normalization_failed`.
 */
const warmGateway = gatewayLayer(config).pipe(
  Layer.tap((context) => Effect.orDie(Context.get(context, HtmlConverter).convert("<p>warm</p>", "read")))
)

layer(warmGateway, { excludeTestServices: true })("providers", (it) => {
  it.effect("every tool of the catalog has a case here", () =>
    Effect.sync(() => expect(cases.map((c) => c.tool).sort()).toEqual([...toolNames].sort())))

  for (const c of cases) {
    describe(c.tool, () => {
      it.effect("sends the provider's request and answers the normalized shape", () =>
        Effect.gen(function* () {
          const u = yield* TestUpstreams
          u.resetAll()
          const { key, orgId } = yield* prepare(c)
          const result = yield* callTool(c.tool, c.input(u), { key })
          expectOk(result)
          expect(result.body).toMatchObject(c.output)
          expectOwnEncoding(c.tool, result)
          const sent = c.upstream(u).requests.find((r) => matches(r, c.sent))
          expect(sent, `${c.tool} sent ${c.upstream(u).requests.map((r) => `${r.method} ${r.path}`).join(", ")}`).toBeDefined()
          for (const [name, value] of Object.entries(c.sent.headers ?? {})) expect(sent?.headers[name]).toEqual(value)
          for (const [name, value] of Object.entries(c.sent.query ?? {})) expect(sent?.query.get(name)).toBe(value)
          if (c.sent.body !== undefined) expect(sent?.json).toMatchObject(c.sent.body)
          const charged = Number(result.headers.get("x-credits-charged"))
          expect(yield* books(orgId)).toMatchObject({ balance: 100 - charged, held: 0, pendingHolds: 0 })
        }))

      it.effect("POST /v1/run answers the raw answer, reserved and settled like the tool", () =>
        Effect.gen(function* () {
          const u = yield* TestUpstreams
          u.resetAll()
          const { key, orgId } = yield* prepare(c)
          const result = yield* request("/v1/run", {
            body: JSON.stringify({ tool: c.tool, input: c.input(u) }),
            headers: { "content-type": "application/json", "x-api-key": key }
          })
          expectOk(result)
          expect(result.body).toMatchObject({ tool: c.tool, ...c.raw })
          const charged = Number(result.headers.get("x-credits-charged"))
          expect(charged).toBeGreaterThanOrEqual(1)
          expect(yield* books(orgId)).toMatchObject({ balance: 100 - charged, held: 0, holdsByStatus: { settled: 1 } })
          // the same charge as the tool itself for the same input
          const tool = yield* request(`/v1/${c.tool}`, {
            body: JSON.stringify(c.input(u)),
            headers: { "content-type": "application/json", "x-api-key": key }
          })
          expectOk(tool)
          expect(Number(tool.headers.get("x-credits-charged"))).toBe(charged)
        }))

      for (const fault of faults) {
        if (c.skip?.includes(fault.name)) continue
        const f = expectationFor(c, fault)
        it.effect(`${f.name} → ${f.expected.code}`, () =>
          Effect.gen(function* () {
            const u = yield* TestUpstreams
            u.resetAll()
            const { key, orgId } = yield* prepare(c)
            // a write's faults hit the write itself (not a session call before it)
            c.upstream(u).fault(c.writePath !== undefined ? { ...f.fault, path: c.writePath } : f.fault)
            const result = yield* callTool(c.tool, c.input(u), { key })
            c.upstream(u).fault()
            expectEnvelope(result, f.expected)
            if (f.name === "a 429") expect(result.headers.get("retry-after")).toBe("12")
            const b = yield* books(orgId)
            expect(b).toMatchObject({ held: 0, pendingHolds: 0, journalSum: b.balance })
            expect(b.holdsByStatus).toEqual(f.settled ? { settled: 1 } : { voided: 1 })
            expect(b.balance).toBe(f.settled ? 99 : 100)
          }))
      }

      if (tools[c.tool].effect === "write") {
        it.effect("a write is sent once, even after a 503, and its Idempotency-Key replays the unknown outcome", () =>
          Effect.gen(function* () {
            const u = yield* TestUpstreams
            u.resetAll()
            const { key, orgId } = yield* prepare(c)
            const path = c.writePath ?? (typeof c.sent.path === "string" ? c.sent.path : "/")
            c.upstream(u).fault({ status: 503, path })
            const result = yield* callTool(c.tool, c.input(u), { key, idempotencyKey: `${c.tool}-503` })
            c.upstream(u).fault()
            expectEnvelope(result, { status: 502, type: "provider", code: "write_outcome_unknown", retryable: false, billable: false, message: "(HTTP 503)" })
            expect(c.upstream(u).hits(path)).toBe(1)
            // what a retry with the same key gets: the stored answer, and no second write
            const again = yield* callTool(c.tool, c.input(u), { key, idempotencyKey: `${c.tool}-503` })
            expect(again.status).toBe(502)
            expect(again.headers.get("idempotent-replayed")).toBe("true")
            expect(again.text).toBe(result.text)
            expect(c.upstream(u).hits(path)).toBe(1)
            expect(yield* books(orgId)).toMatchObject({ balance: 100, held: 0, holdsByStatus: { voided: 1 } })
          }))
      } else {
        it.effect("a read is retried after one 503 and succeeds", () =>
          Effect.gen(function* () {
            const u = yield* TestUpstreams
            u.resetAll()
            const { key } = yield* prepare(c)
            c.upstream(u).fault({ status: 503, times: 1 })
            const result = yield* callTool(c.tool, c.input(u), { key })
            c.upstream(u).fault()
            expectOk(result)
            expect(result.body).toMatchObject(c.output)
          }))
      }
    })
  }

  describe("delta's session", () => {
    const sessionPath = "/xrpc/com.atproto.server.createSession"
    const refreshPath = "/xrpc/com.atproto.server.refreshSession"
    const recordPath = "/xrpc/com.atproto.repo.createRecord"

    it.effect("is kept: one createSession for many posts; an expired access token is renewed with refreshSession, the post sent once", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        const c = caseOf("delta_post")
        const { key, orgId } = yield* prepare(c)
        u.resetAll()
        for (let i = 0; i < 3; i++) expectOk(yield* callTool(c.tool, c.input(u), { key }))
        const opened = u.bluesky.hits(sessionPath)
        expect(opened).toBeLessThanOrEqual(1)
        expect(u.bluesky.hits(recordPath)).toBe(3)
        expireBlueskySessions()
        expectOk(yield* callTool(c.tool, c.input(u), { key }))
        // renewed, not logged in again (createSession is limited to 30 in 5 minutes per account)
        expect(u.bluesky.hits(sessionPath)).toBe(opened)
        expect(u.bluesky.hits(refreshPath)).toBe(1)
        expect(u.bluesky.requests.find((r) => r.path === refreshPath)?.headers["authorization"]).toMatch(/^Bearer .+\.sig$/)
        // the refused write (nothing written) and the write on the renewed session
        expect(u.bluesky.hits(recordPath)).toBe(5)
        expectOk(yield* callTool(c.tool, c.input(u), { key }))
        expect(u.bluesky.hits(refreshPath)).toBe(1)
        expect(yield* books(orgId)).toMatchObject({ balance: 95, held: 0 })
      }))

    it.effect("a refused refresh token means a new createSession", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        const c = caseOf("delta_post")
        const { key } = yield* prepare(c)
        expectOk(yield* callTool(c.tool, c.input(u), { key }))
        u.resetAll()
        revokeBlueskyRefreshTokens()
        expectOk(yield* callTool(c.tool, c.input(u), { key }))
        expect(u.bluesky.hits(refreshPath)).toBe(1)
        expect(u.bluesky.hits(sessionPath)).toBe(1)
        expect(u.bluesky.hits(recordPath)).toBe(2)
      }))

    it.effect("a renewal that fails posted nothing: provider_unavailable, the key freed, never write_outcome_unknown", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        const c = caseOf("delta_post")
        const { key, orgId } = yield* prepare(c)
        expectOk(yield* callTool(c.tool, c.input(u), { key }))
        const before = yield* books(orgId)
        u.resetAll()
        expireBlueskySessions()
        u.bluesky.fault({ status: 503, path: refreshPath, body: { error: "InternalServerError", message: "Internal Server Error" } })
        const failed = yield* callTool(c.tool, c.input(u), { key, idempotencyKey: "renew-1" })
        expectEnvelope(failed, { status: 502, type: "provider", code: "provider_unavailable", retryable: true, billable: false, message: "nothing was posted" })
        // the write refused for its expired token, the refresh: no record written
        expect(u.bluesky.hits(recordPath)).toBe(1)
        expect(u.bluesky.hits(refreshPath)).toBe(1)
        // the key is free: the same request again posts once
        u.bluesky.fault()
        expectOk(yield* callTool(c.tool, c.input(u), { key, idempotencyKey: "renew-1" }))
        expect(yield* books(orgId)).toMatchObject({ balance: before.balance - 1, held: 0 })
      }))

    it.effect("a post's further record fields never replace its type, text or time", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        const c = caseOf("delta_post")
        const { key } = yield* prepare(c)
        u.resetAll()
        const input = {
          text: "hello",
          created_at: "2026-11-22T00:00:00.000Z",
          record: { $type: "app.bsky.feed.like", createdAt: "yesterday", text: "other", reply: { root: { uri: "at://x", cid: "y" } } }
        }
        expectOk(yield* callTool(c.tool, input, { key }))
        expect(u.bluesky.requests.find((r) => r.path === recordPath)?.json).toMatchObject({
          collection: "app.bsky.feed.post",
          record: { $type: "app.bsky.feed.post", text: "hello", createdAt: "2026-11-22T00:00:00.000Z", reply: { root: { uri: "at://x", cid: "y" } } }
        })
      }))

    it.effect("is kept sealed in the database, where another process finds it", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        const c = caseOf("delta_post")
        const { key, orgId } = yield* prepare(c)
        u.resetAll()
        expectOk(yield* callTool(c.tool, c.input(u), { key }))
        const sql = yield* SqlClient.SqlClient
        const rows = yield* sql<{ readonly ciphertext: Uint8Array }>`SELECT ciphertext FROM delta_sessions`
        expect(rows.length).toBeGreaterThanOrEqual(1)
        const sent = u.bluesky.requests.find((r) => r.path === recordPath)?.headers["authorization"] ?? ""
        const token = sent.replace(/^Bearer /, "")
        expect(token.length).toBeGreaterThan(20)
        for (const row of rows) expect(Buffer.from(row.ciphertext).toString("latin1")).not.toContain(token.slice(0, 20))
        // a second process: its own DeltaSessions over the same database and key
        const other = yield* Layer.build(DeltaSessionsLive.pipe(Layer.provide(Layer.succeed(Encryption, yield* Encryption))))
        const sessions = Context.get(other, DeltaSessions)
        const account = { orgId, service: u.bluesky.url, identifier: CREDENTIALS.delta.identifier, appPassword: CREDENTIALS.delta.app_password }
        expect((yield* sessions.get(account))?.accessJwt).toBe(token)
      }).pipe(Effect.scoped))

    it.effect("a session's row lets no reader of the database check a guessed app password: its key is a mac under the encryption key", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        const c = caseOf("delta_post")
        const { key, orgId } = yield* prepare(c)
        expectOk(yield* callTool(c.tool, c.input(u), { key }))
        const sql = yield* SqlClient.SqlClient
        const rows = yield* sql<{ readonly key: string }>`SELECT key FROM delta_sessions`
        expect(rows.length).toBeGreaterThanOrEqual(1)
        // what a reader without the encryption key can compute from a guess: a hash of the service, the account and
        // the password (as the row's key was), with the org or without it
        const { app_password, identifier } = CREDENTIALS.delta
        const guesses = new Set([
          `${u.bluesky.url}\0${identifier}\0${app_password}`,
          `${orgId}\0${u.bluesky.url}\0${identifier}\0${app_password}`,
          JSON.stringify([orgId, u.bluesky.url, identifier, app_password])
        ].flatMap((text) => ["sha256", "sha512", "sha1", "md5"].map((hash) => Crypto.createHash(hash).update(text).digest("hex"))))
        for (const row of rows) {
          expect(guesses.has(row.key), row.key).toBe(false)
          expect(row.key).not.toContain(app_password)
        }
      }))

    it.effect("is the org's own: another org connected to the same account opens a session of its own", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        const c = caseOf("delta_post")
        const first = yield* prepare(c)
        const second = yield* prepare(c)
        u.resetAll()
        expectOk(yield* callTool(c.tool, c.input(u), { key: first.key }))
        expectOk(yield* callTool(c.tool, c.input(u), { key: second.key }))
        expect(u.bluesky.hits(sessionPath)).toBe(2)
        const sent = u.bluesky.requests.filter((r) => r.path === recordPath).map((r) => r.headers["authorization"])
        expect(sent).toHaveLength(2)
        expect(sent[0]).not.toBe(sent[1])
        const sql = yield* SqlClient.SqlClient
        const owners = yield* sql<{ readonly org_id: string }>`
          SELECT org_id FROM delta_sessions WHERE org_id IN (${first.orgId}, ${second.orgId}) ORDER BY org_id`
        expect(owners.map((r) => r.org_id)).toEqual([first.orgId, second.orgId].sort())
        // each org's next post uses its own session
        expectOk(yield* callTool(c.tool, c.input(u), { key: second.key }))
        expect(u.bluesky.hits(sessionPath)).toBe(2)
      }))

    it.effect("goes with its connection: a disconnect or a replaced connection deletes the org's sessions, and no other org's", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        const c = caseOf("delta_post")
        const sql = yield* SqlClient.SqlClient
        const sessionsOf = (orgId: string) =>
          Effect.map(sql<{ readonly n: number }>`SELECT count(*)::int AS n FROM delta_sessions WHERE org_id = ${orgId}`, (rows) => rows[0]?.n)
        const { key, orgId, token } = yield* prepare(c)
        const other = yield* prepare(c)
        expectOk(yield* callTool(c.tool, c.input(u), { key }))
        expectOk(yield* callTool(c.tool, c.input(u), { key: other.key }))
        expect(yield* sessionsOf(orgId)).toBe(1)
        // replaced (another password, or the same one again): the old session is not kept, the next call logs in
        const replaced = yield* dashboard("POST", "/v1/connections", token, { provider: "delta", credentials: { ...CREDENTIALS.delta } })
        expect(replaced.status).toBe(201)
        expect(yield* sessionsOf(orgId)).toBe(0)
        u.resetAll()
        expectOk(yield* callTool(c.tool, c.input(u), { key }))
        expect(u.bluesky.hits(sessionPath)).toBe(1)
        expect(yield* sessionsOf(orgId)).toBe(1)
        // removed: its tokens go with it
        expect((yield* dashboard("DELETE", "/v1/connections/delta", token)).status).toBe(200)
        expect(yield* sessionsOf(orgId)).toBe(0)
        // the other org's session stays, and is used
        expect(yield* sessionsOf(other.orgId)).toBe(1)
        u.resetAll()
        expectOk(yield* callTool(c.tool, c.input(u), { key: other.key }))
        expect(u.bluesky.hits(sessionPath)).toBe(0)
      }))

    it.effect("a session opened by a call that ends after its org's disconnect is not kept", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        const sessions = yield* DeltaSessions
        // an org with no delta connection (removed while the call was logging in)
        const { orgId } = yield* givenMember()
        const account = { orgId, service: u.bluesky.url, identifier: CREDENTIALS.delta.identifier, appPassword: CREDENTIALS.delta.app_password }
        const far = (yield* Clock.currentTimeMillis) + 86_400_000
        yield* sessions.set(account, { accessJwt: "a.b.c", refreshJwt: "d.e.f", did: "did:plc:alice", pds: null, accessUntil: far, refreshUntil: far })
        const sql = yield* SqlClient.SqlClient
        expect(yield* sql`SELECT 1 FROM delta_sessions WHERE org_id = ${orgId}`).toHaveLength(0)
        expect(yield* sessions.get(account)).toBeUndefined()
      }))

    it.effect("the sweeper deletes the sessions that can no longer be renewed, and only those", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        const c = caseOf("delta_post")
        const { key } = yield* prepare(c)
        u.resetAll()
        expectOk(yield* callTool(c.tool, c.input(u), { key }))
        const sql = yield* SqlClient.SqlClient
        yield* sql`INSERT INTO delta_sessions (org_id, key, key_id, iv, ciphertext, tag, refresh_until, updated_at)
                   SELECT org_id, 'expired:' || key, key_id, iv, ciphertext, tag, now() - interval '1 day', updated_at
                     FROM delta_sessions WHERE refresh_until > now()`
        const live = yield* sql<{ readonly key: string }>`SELECT key FROM delta_sessions WHERE refresh_until > now()`
        expect(live.length).toBeGreaterThanOrEqual(1)
        yield* sweepOnce
        const left = yield* sql<{ readonly key: string }>`SELECT key FROM delta_sessions`
        expect(left.map((r) => r.key).sort()).toEqual(live.map((r) => r.key).sort())
      }))

    it.effect("writes go to the PDS the session's DID document names", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        const pds = yield* upstream(handleBluesky)
        const c = caseOf("delta_post")
        const { key } = yield* prepare(c)
        // the kept session is refused: the next one is opened with a DID document naming the PDS
        revokeBlueskyRefreshTokens()
        setBlueskyPds(pds.url)
        yield* Effect.addFinalizer(() => Effect.sync(() => setBlueskyPds(undefined)))
        u.resetAll()
        expectOk(yield* callTool(c.tool, c.input(u), { key }))
        expect(u.bluesky.hits(sessionPath)).toBe(1)
        expect(pds.hits(recordPath)).toBe(1)
        expect(pds.requests.find((r) => r.path === recordPath)?.json).toMatchObject({ repo: "did:plc:alice" })
        // the next post goes straight to the PDS
        const before = u.bluesky.requests.length
        expectOk(yield* callTool(c.tool, c.input(u), { key }))
        expect(u.bluesky.requests.length).toBe(before)
        expect(pds.hits(recordPath)).toBe(2)
        // the account back on the entryway, before this PDS goes away: the session kept for the other tests names none
        setBlueskyPds(undefined)
        revokeBlueskyRefreshTokens()
        expireBlueskySessions()
        expectOk(yield* callTool(c.tool, c.input(u), { key }))
      }).pipe(Effect.scoped))
  })

  describe("theta's ratings", () => {
    it.effect("an episode is named with its show", () =>
      Effect.gen(function* () {
        const c = caseOf("theta_ratings")
        const { key } = yield* prepare(c)
        const result = yield* callTool(c.tool, { type: "episodes" }, { key })
        expectOk(result)
        expect(result.body).toMatchObject({
          type: "episodes",
          ratings: [{ type: "episode", rating: 10, title: "Severance: Good News About Hell", year: 2022, ids: { trakt: 73482 } }]
        })
      }))
  })

  describe("xi's answers", () => {
    it.effect("what TMDB sends as \"\" (a film it knows little of) is null, as what it leaves out", () =>
      Effect.gen(function* () {
        const c = caseOf("xi_movie")
        const u = yield* TestUpstreams
        u.resetAll()
        const { key } = yield* prepare(c)
        const result = yield* callTool(c.tool, { id: UNKNOWN_FILM }, { key })
        expectOk(result)
        expect(result.body).toMatchObject({
          id: UNKNOWN_FILM, title: "Untitled Project", overview: null, tagline: null, release_date: null, homepage: null,
          imdb_id: null, poster_url: null, status: "In Production"
        })
      }))


    it.effect("only the movie's own members are appended, never a name every object inherits", () =>
      Effect.gen(function* () {
        const c = caseOf("xi_movie")
        const u = yield* TestUpstreams
        u.resetAll()
        const { key } = yield* prepare(c)
        const result = yield* callTool(c.tool, { id: 550, append_to_response: "videos,__proto__,constructor,toString" }, { key })
        expectOk(result)
        expect(result.text).not.toContain("__proto__")
        expect(result.body).toEqual(expect.objectContaining({ appended: { videos: expect.objectContaining({ results: expect.any(Array) }) } }))
        expectOwnEncoding(c.tool, result)
      }))
  })

  describe("a caller's id is one segment of the provider's path", () => {
    // the field that is a segment of each tool's path, and what else its input needs
    const segments: ReadonlyArray<readonly [ToolName, string, Readonly<Record<string, unknown>>]> = [
      ["theta_ratings", "type", {}],
      ["iota_delete_service", "service_id", {}],
      ["kappa_delete_benefit", "benefit_id", {}],
      ["lambda_update_broadcast", "id", { subject: "March news" }],
      ["mu_database", "database_id", {}]
    ]
    for (const [tool, field, rest] of segments) {
      it.effect(`${tool}: a ${field} of . or .. is refused before anything is held; nothing reaches the provider`, () =>
        Effect.gen(function* () {
          const u = yield* TestUpstreams
          const c = caseOf(tool)
          u.resetAll()
          const { key, orgId } = yield* prepare(c)
          // ".." made the URL one step up (DELETE /v1/ for iota); "x/../.." does at a server that decodes %2F
          for (const value of [".", "..", "x/../.."]) {
            const result = yield* callTool(tool, { ...rest, [field]: value }, { key })
            expectEnvelope(result, { status: 400, type: "validation", code: "invalid_request", retryable: false, billable: false, message: field })
            expect(errorOf(result)?.message).toContain("must not be \".\" or \"..\"")
          }
          expect(c.upstream(u).requests.map((r) => `${r.method} ${r.path}`)).toEqual([])
          expect(yield* books(orgId)).toEqual(expect.objectContaining({ balance: 100, held: 0, holdsByStatus: {} }))
        }))
    }
  })

  describe("a provider's own error statuses", () => {
    const answerTo = (c: Case, fault: Fault) =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const { key, orgId } = yield* prepare(c)
        c.upstream(u).fault(fault)
        const result = yield* callTool(c.tool, c.input(u), { key })
        c.upstream(u).fault()
        expect(yield* books(orgId)).toEqual(expect.objectContaining({ balance: 100, held: 0, holdsByStatus: { voided: 1 } }))
        return result
      })
    const rejected = { status: 502, type: "provider", code: "provider_credential_rejected", retryable: false, billable: false } as const
    const limited = { status: 502, type: "provider", code: "provider_rate_limited", retryable: true, billable: false } as const

    /** The tool's call on a connection with `credentials` instead of the fake's own. */
    const answerWith = (c: Case, credentials: Record<string, unknown>) =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const { key, orgId, token } = yield* prepare(c)
        const replaced = yield* dashboard("POST", "/v1/connections", token, { provider: accountProvider(c.tool), credentials })
        expect(replaced.status).toBe(201)
        const result = yield* callTool(c.tool, c.input(u), { key })
        expect(yield* books(orgId)).toEqual(expect.objectContaining({ balance: 100, held: 0, holdsByStatus: { voided: 1 } }))
        return result
      })
    const retryAfterOf = (result: { readonly headers: Headers }) => Number(result.headers.get("retry-after"))

    it.effect("eta (Monkeytype): every ApeKey Monkeytype refuses is a refused key, whatever its status", () =>
      Effect.gen(function* () {
        const eta = caseOf("eta_personal_bests")
        const refusals: ReadonlyArray<readonly [string, string]> = [
          [APE_KEYS.wrongSecret, "(HTTP 470): Invalid ApeKey"],
          [APE_KEYS.inactive, "(HTTP 471): ApeKey is inactive"],
          [APE_KEYS.badId, "(HTTP 472): ApeKey is malformed"],
          [APE_KEYS.deleted, "(HTTP 404): ApeKey not found"],
          [APE_KEYS.noSecret, "(HTTP 400): Malformed ApeKey"]
        ]
        for (const [apeKey, message] of refusals) {
          expectEnvelope(yield* answerWith(eta, { ape_key: apeKey }), { ...rejected, message })
        }
        // Monkeytype's other 404s and 400s are not about the key
        expectEnvelope(yield* answerTo(eta, { status: 404, body: { message: "Unknown request URL", data: null } }), {
          status: 502, type: "provider", code: "provider_rejected", retryable: false, billable: false
        })
      }))

    it.effect("eta (Monkeytype): 479 is the ApeKey's rate limit, retried after Monkeytype's reset", () =>
      Effect.gen(function* () {
        const eta = caseOf("eta_personal_bests")
        exhaustApeKey()
        const used = yield* answerTo(eta, {}).pipe(Effect.ensuring(Effect.sync(restoreApeKey)))
        expectEnvelope(used, { ...limited, message: "(HTTP 479): ApeKey rate limit exceeded" })
        expect(retryAfterOf(used)).toBeGreaterThanOrEqual(55)
        expect(retryAfterOf(used)).toBeLessThanOrEqual(60)
        // without Retry-After, X-RateLimit-Reset (epoch seconds) says when
        const reset = String(Math.ceil(Date.now() / 1000) + 90)
        const byReset = yield* answerTo(eta, { status: 479, body: { message: "ApeKey rate limit exceeded", data: {} }, headers: { "x-ratelimit-reset": reset } })
        expectEnvelope(byReset, limited)
        expect(retryAfterOf(byReset)).toBeGreaterThanOrEqual(85)
        expect(retryAfterOf(byReset)).toBeLessThanOrEqual(91)
      }))

    it.effect("delta (Bluesky) and iota (Render): a 429's RateLimit-Reset (epoch seconds) is the wait, at least 1 s", () =>
      Effect.gen(function* () {
        const epoch = (fromNow: number) => String(Math.ceil(Date.now() / 1000) + fromNow)
        const body = { error: "RateLimitExceeded", message: "Rate Limit Exceeded" }
        const delta = caseOf("delta_post")
        const soon = yield* answerTo(delta, { status: 429, body, headers: { "ratelimit-reset": epoch(45) }, path: "/xrpc/com.atproto.repo.createRecord" })
        expectEnvelope(soon, limited)
        expect(retryAfterOf(soon)).toBeGreaterThanOrEqual(40)
        expect(retryAfterOf(soon)).toBeLessThanOrEqual(46)
        // a reset already past still means "not at once"
        const past = yield* answerTo(delta, { status: 429, body, headers: { "ratelimit-reset": epoch(-30) }, path: "/xrpc/com.atproto.repo.createRecord" })
        expectEnvelope(past, limited)
        expect(retryAfterOf(past)).toBe(1)
        // Render sends no Retry-After, only its RateLimit-* headers (api-docs.render.com, rate limiting)
        const iota = caseOf("iota_delete_service")
        const render = yield* answerTo(iota, { status: 429, body: { message: "rate limit exceeded" }, headers: { "ratelimit-limit": "30", "ratelimit-remaining": "0", "ratelimit-reset": epoch(50) } })
        expectEnvelope(render, limited)
        expect(retryAfterOf(render)).toBeGreaterThanOrEqual(45)
        expect(retryAfterOf(render)).toBeLessThanOrEqual(51)
      }))

    it.effect("nu (GitHub): secondary and primary rate limits are rate limits with GitHub's wait, not a refused token", () =>
      Effect.gen(function* () {
        const nu = caseOf("nu_account")
        const secondary = yield* answerTo(nu, gitHubLimited().secondary)
        expectEnvelope(secondary, { ...limited, message: "secondary rate limit" })
        expect(retryAfterOf(secondary)).toBe(42)
        // no retry-after: GitHub says to wait at least a minute
        const bare = yield* answerTo(nu, gitHubLimited().secondaryWithoutRetryAfter)
        expectEnvelope(bare, { ...limited, message: "secondary rate limit" })
        expect(retryAfterOf(bare)).toBe(60)
        // the primary limit: until x-ratelimit-reset
        const primary = yield* answerTo(nu, gitHubLimited().primary)
        expectEnvelope(primary, { ...limited, message: "primary rate limit" })
        expect(retryAfterOf(primary)).toBeGreaterThanOrEqual(115)
        expect(retryAfterOf(primary)).toBeLessThanOrEqual(121)
        expectEnvelope(yield* answerTo(nu, { status: 403, body: { message: "Resource not accessible by integration" } }), rejected)
      }))

    it.effect("zeta (Graph): 190 in a 400 is a refused token; 4, 17, 32, 613 and the BUC codes are rate limits", () =>
      Effect.gen(function* () {
        const zeta = caseOf("zeta_request")
        // the fake refuses a token it does not know as Graph does: OAuthException 190, HTTP 400
        expectEnvelope(yield* answerWith(zeta, { access_token: "expired-token" }), { ...rejected, message: "code 190" })
        const app = yield* answerTo(zeta, GRAPH_THROTTLED.app)
        expectEnvelope(app, { ...limited, message: "X-App-Usage: calls 100%" })
        expect(app.text).not.toContain("Reconnect")
        expectEnvelope(yield* answerTo(zeta, { status: 400, body: { error: { message: "(#17) User request limit reached", type: "OAuthException", code: 17 } } }), limited)
        expectEnvelope(yield* answerTo(zeta, GRAPH_THROTTLED.page), { ...limited, message: "Page request limit reached" })
        // Business Use Case limits say when: estimated_time_to_regain_access, in minutes
        const pages = yield* answerTo(zeta, GRAPH_THROTTLED.pages)
        expectEnvelope(pages, { ...limited, message: "code 80001" })
        expect(retryAfterOf(pages)).toBe(19 * 60)
        // and the Ads API's X-Ad-Account-Usage, in seconds
        const custom = yield* answerTo(zeta, {
          status: 400,
          body: { error: { message: "(#613) Calls to this api have exceeded the rate limit.", type: "OAuthException", code: 613 } },
          headers: { "x-ad-account-usage": JSON.stringify({ acc_id_util_pct: 100, reset_time_duration: 300 }) }
        })
        expectEnvelope(custom, limited)
        expect(retryAfterOf(custom)).toBe(300)
        const other = { error: { message: "Unsupported get request.", type: "GraphMethodException", code: 100 } }
        expectEnvelope(yield* answerTo(zeta, { status: 400, body: other }), { status: 502, type: "provider", code: "provider_rejected", retryable: false, billable: false, message: "Unsupported get request" })
      }))

    it.effect("zeta (Graph): without a version, the current one (v26.0)", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        const zeta = caseOf("zeta_request")
        u.resetAll()
        const { key } = yield* prepare(zeta)
        const result = yield* callTool("zeta_request", { path: "me" }, { key })
        expectOk(result)
        expect(u.graph.requests.map((r) => r.path)).toEqual(["/v26.0/me"])
        expect(result.body).toMatchObject({ data: { version: "v26.0" } })
      }))

    it.effect("kappa (Polar): a 403 NotPermitted is Polar refusing the action, not the token", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        const kappa = caseOf("kappa_delete_benefit")
        u.resetAll()
        const { key, orgId } = yield* prepare(kappa)
        const result = yield* callTool("kappa_delete_benefit", { benefit_id: UNDELETABLE_BENEFIT }, { key })
        expectEnvelope(result, { status: 502, type: "provider", code: "provider_rejected", retryable: false, billable: false, message: "NotPermitted): Not permitted" })
        expect(u.polar.hits(`/v1/benefits/${UNDELETABLE_BENEFIT}`)).toBe(1)
        expect(yield* books(orgId)).toMatchObject({ balance: 100, held: 0, holdsByStatus: { voided: 1 } })
        // a 403 of Polar's that is not NotPermitted is still the token's
        expectEnvelope(yield* answerTo(kappa, { status: 403, body: { error: "insufficient_scope", error_description: "The token lacks benefits:write" } }), rejected)
      }))

    it.effect("mobile_app_search (iTunes): Apple's throttle, a 403 with an empty body, is a rate limit with a minute's wait", () =>
      Effect.gen(function* () {
        const result = yield* answerTo(caseOf("mobile_app_search"), ITUNES_THROTTLED)
        expectEnvelope(result, { ...limited, message: "itunes is rate limiting the gateway (HTTP 403)" })
        expect(result.text).not.toContain("Check the provider key")
        expect(retryAfterOf(result)).toBe(60)
      }))

    it.effect("mobile_app_search (iTunes): a store country that is no country's code, or has no storefront, is the caller's 400, never billed", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const { key, orgId } = yield* prepare(caseOf("mobile_app_search"))
        const invalid = { status: 400, type: "validation", code: "invalid_request", retryable: false, billable: false } as const
        // not an ISO 3166-1 alpha-2 code: refused on its face, before anything is held or sent
        for (const country of ["uk", "ZZ", "eu"]) {
          const result = yield* callTool("mobile_app_search", { query: "notes", country }, { key })
          expectEnvelope(result, { ...invalid, message: `country: "${country.toLowerCase()}" is not an ISO 3166-1 alpha-2 country code` })
        }
        expect(u.itunes.hits()).toBe(0)
        expect(yield* books(orgId)).toEqual(expect.objectContaining({ balance: 100, held: 0, holdsByStatus: {} }))
        // a country's code with no App Store storefront: Apple's own 400 names the key, and the hold is voided
        const cuba = yield* callTool("mobile_app_search", { query: "notes", country: "CU" }, { key })
        expectEnvelope(cuba, { ...invalid, message: "country: the App Store has no storefront for \"cu\"" })
        expect(u.itunes.requests.map((r) => r.query.get("country"))).toEqual(["cu"])
        const raw = yield* request("/v1/run", {
          body: JSON.stringify({ tool: "mobile_app_search", input: { query: "notes", country: "aq" } }),
          headers: { "content-type": "application/json", "x-api-key": key }
        })
        expectEnvelope(raw, { ...invalid, message: "country: the App Store has no storefront for \"aq\"" })
        expect(yield* books(orgId)).toEqual(expect.objectContaining({ balance: 100, held: 0, holdsByStatus: { voided: 2 } }))
        // any case of a storefront's code is that storefront; Kosovo's xk (user-assigned, not ISO's) reaches Apple
        expectOk(yield* callTool("mobile_app_search", { query: "notes", country: "GB" }, { key }))
        expectOk(yield* callTool("mobile_app_search", { query: "notes", country: "XK" }, { key }))
        expect(u.itunes.requests.map((r) => r.query.get("country"))).toEqual(["cu", "aq", "gb", "xk"])
      }))

    it.effect("gamma_scrape answers every format it was asked for: a summary and change tracking are not dropped", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const { key } = yield* prepare(caseOf("gamma_scrape"))
        const result = yield* callTool("gamma_scrape", { url: "https://example.com/page", formats: ["markdown", "summary", "changeTracking"] }, { key })
        expectOk(result, 1)
        expect(result.body).toMatchObject({
          markdown: "# Scraped\n\nhttps://example.com/page",
          summary: "A page at https://example.com/page.",
          change_tracking: { changeStatus: "new", visibility: "visible" },
          json: null,
          warning: null
        })
      }))

    it.effect("gamma (Firecrawl): a blocklisted URL's 403 is Firecrawl refusing the URL, not the key", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const { key, orgId } = yield* prepare(caseOf("gamma_scrape"))
        const result = yield* callTool("gamma_scrape", { url: `https://${FIRECRAWL_BLOCKLISTED_HOST}/page` }, { key })
        expectEnvelope(result, { status: 502, type: "provider", code: "provider_rejected", retryable: false, billable: false, message: `(HTTP 403): ${BLOCKLISTED_URL_MESSAGE}` })
        expect(result.text).not.toContain("Check the provider key")
        expect(u.firecrawl.hits("/v2/scrape")).toBe(1)
        expect(yield* books(orgId)).toMatchObject({ balance: 100, held: 0, holdsByStatus: { voided: 1 } })
      }))

    it.effect("alpha (Exa): a 403 tagged for what was asked is Exa refusing the request; the account's 403 and a 401 are the key's", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        const search = caseOf("alpha_search")
        u.resetAll()
        const { key, orgId } = yield* prepare(search)
        const prohibited = yield* callTool("alpha_search", { query: EXA_PROHIBITED_QUERY }, { key })
        expectEnvelope(prohibited, { status: 502, type: "provider", code: "provider_rejected", retryable: false, billable: false, message: "PROHIBITED_CONTENT" })
        expect(prohibited.text).toContain("This request seeks prohibited content.")
        expect(prohibited.text).not.toContain("Check the provider key")
        expect(u.exa.hits("/search")).toBe(1)
        expect(yield* books(orgId)).toMatchObject({ balance: 100, held: 0, holdsByStatus: { voided: 1 } })
        expectEnvelope(yield* answerTo(search, EXA_ROBOTS_REFUSED), { status: 502, type: "provider", code: "provider_rejected", retryable: false, billable: false, message: "ROBOTS_FILTER_FAILED" })
        expectEnvelope(yield* answerTo(search, EXA_TEAM_BLOCKED), { ...rejected, message: "Check the provider key" })
        expectEnvelope(yield* answerTo(search, { status: 401, body: { error: "Invalid API key", tag: "INVALID_API_KEY" } }), { ...rejected, message: "Check the provider key" })
      }))

    it.effect("Retry-After as an HTTP date passes through as seconds", () =>
      Effect.gen(function* () {
        const search = caseOf("alpha_search")
        const inAMinute = new Date(Date.now() + 60_000).toUTCString()
        const result = yield* answerTo(search, { status: 429, headers: { "retry-after": inAMinute } })
        expectEnvelope(result, limited)
        expect(Number(result.headers.get("retry-after"))).toBeGreaterThanOrEqual(55)
        expect(Number(result.headers.get("retry-after"))).toBeLessThanOrEqual(61)
      }))

    it.effect("an upstream Retry-After of 0, a date past or an absurd delay is answered from 1 s to a day", () =>
      Effect.gen(function* () {
        const search = caseOf("alpha_search")
        const cases: ReadonlyArray<readonly [string, string]> = [
          ["0", "1"],
          ["0.2", "1"],
          [new Date(Date.now() - 3_600_000).toUTCString(), "1"],
          ["99999999999999999999", "86400"],
          ["172800", "86400"]
        ]
        for (const [sent, answered] of cases) {
          const result = yield* answerTo(search, { status: 429, headers: { "retry-after": sent } })
          expectEnvelope(result, limited)
          expect(result.headers.get("retry-after"), sent).toBe(answered)
        }
      }))
  })

  describe("epsilon's method", () => {
    it.effect("any case of an allowed method is taken and sent upper-case; another method is refused before anything is sent", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const epsilon = caseOf("epsilon_request")
        const { key, orgId } = yield* prepare(epsilon)
        for (const [asked, sent] of [["get", "GET"], ["Post", "POST"], ["pUt", "PUT"], ["patch", "PATCH"], ["delete", "DELETE"]] as const) {
          const result = yield* callTool("epsilon_request", { path: "/v2/items", method: asked }, { key, idempotencyKey: `method-${asked}` })
          expectOk(result)
          expect(result.body).toMatchObject({ provider: "epsilon", status: 200, body: { method: sent, path: "/v2/items" } })
        }
        expect(u.rest.requests.map((r) => r.method)).toEqual(["GET", "POST", "PUT", "PATCH", "DELETE"])
        // a write is a write whatever its case: it carries the call's Idempotency-Key, a GET does not
        expect(u.rest.requests.map((r) => r.headers["idempotency-key"] !== undefined)).toEqual([false, true, true, true, true])
        const before = yield* books(orgId)
        for (const method of ["trace", "TRACE", "fetch", "get ", ""]) {
          const result = yield* callTool("epsilon_request", { path: "/v2/items", method }, { key })
          expectEnvelope(result, { status: 400, type: "validation", code: "invalid_request", retryable: false, billable: false, message: "method" })
        }
        expect(u.rest.hits()).toBe(5)
        expect(yield* books(orgId)).toEqual(before)
      }))
  })

  describe("zeta's paging", () => {
    /** A member of an org with zeta connected, the stand-ins reset, and the connection's token. */
    const zetaMember = Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const { key } = yield* prepare(caseOf("zeta_request"))
      return { u, key, token: CREDENTIALS.zeta.access_token }
    })

    it.effect("Graph's paging URLs come back without the org's access token, in the answer and in the raw answer; the cursors stay", () =>
      Effect.gen(function* () {
        const { u, key, token } = yield* zetaMember
        const input = { path: "1234/posts", params: { limit: 1, fields: "message,comments" } }
        const result = yield* callTool("zeta_request", input, { key })
        expectOk(result)
        // the fake wrote the token into each paging URL (as Graph does)
        expect(u.graph.requests.map((r) => r.headers["authorization"])).toEqual([`Bearer ${token}`])
        expect(result.text).not.toContain(token)
        expect(result.text).not.toContain("access_token")
        const urlAt = (value: unknown) => new URL(typeof value === "string" ? value : "")
        const { data } = expectObject(result.body)
        const paging = expectObject(expectObject(data).paging)
        for (const [name, cursor] of [["next", "after"], ["previous", "before"]] as const) {
          const url = urlAt(paging[name])
          expect(url.pathname).toBe("/v26.0/1234/posts")
          expect(Object.fromEntries(url.searchParams)).toEqual({
            limit: "1",
            fields: "message,comments",
            [cursor]: cursor === "after" ? "MTAxNTExOTQ1MjAwNzI5NDE=" : "NDMyNzQyODI3OTQw"
          })
        }
        expect(paging.cursors).toEqual({ before: "NDMyNzQyODI3OTQw", after: "MTAxNTExOTQ1MjAwNzI5NDE=" })
        // an edge inside a field has paging of its own
        expect(JSON.stringify(expectObject(data).data)).toContain("1234_1/comments?")
        const raw = yield* request("/v1/run", {
          body: JSON.stringify({ tool: "zeta_request", input }),
          headers: { "content-type": "application/json", "x-api-key": key }
        })
        expectOk(raw)
        expect(raw.text).toContain("MTAxNTExOTQ1MjAwNzI5NDE")
        expect(raw.text).not.toContain(token)
        expect(raw.text).not.toContain("access_token")
      }))

    it.effect("the org's token anywhere else in Graph's answer is [redacted]: in a string, in a URL, in a member's name", () =>
      Effect.gen(function* () {
        const { u, key, token } = yield* zetaMember
        // an answer that echoes what the call carried (a debugging proxy in front of Graph, say), in three spellings
        u.graph.fault({
          text: JSON.stringify({ note: `sent with ${token}`, [token]: true, link: `https://example.com/?t=${encodeURIComponent(`${token}|x`)}` }),
          times: 2
        })
        for (const path of ["/v1/zeta_request", "/v1/run"]) {
          const body = path === "/v1/run" ? { tool: "zeta_request", input: { path: "me" } } : { path: "me" }
          const result = yield* request(path, { body: JSON.stringify(body), headers: { "content-type": "application/json", "x-api-key": key } })
          expectOk(result)
          expect(result.text).not.toContain(token)
          expect(result.text).toContain("[redacted]")
        }
      }))
  })

  describe("POST /v1/run", () => {
    it.effect("validates the tool and its input like the tool itself", () =>
      Effect.gen(function* () {
        const { key } = yield* givenMember()
        const send = (body: unknown) =>
          request("/v1/run", { body: JSON.stringify(body), headers: { "content-type": "application/json", "x-api-key": key } })
        const invalid = { status: 400, type: "validation", code: "invalid_request", retryable: false, billable: false } as const
        expectEnvelope(yield* send({ tool: "nope", input: {} }), { ...invalid, message: "not a tool" })
        expectEnvelope(yield* send({ tool: "read", input: { url: "https://example.com", max_chars: 5 } }), { ...invalid, message: "input.max_chars" })
        expectEnvelope(yield* send({ tool: "read" }), { ...invalid, message: "input" })
        expectEnvelope(yield* send({ tool: "nu_account", input: {} }), { status: 401, type: "auth", code: "credential_required", retryable: false, billable: false })
      }))

    it.effect("is the way to the raw answer when a curated tool cannot normalize", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const { key } = yield* givenMember()
        u.itunes.fault({ wrongShape: true })
        const failed = yield* callTool("mobile_app_search", { query: "x" }, { key })
        expectEnvelope(failed, { status: 502, type: "normalization", code: "normalization_failed", retryable: false, billable: true, message: "POST /v1/run" })
        const raw = yield* request("/v1/run", {
          body: JSON.stringify({ tool: "mobile_app_search", input: { query: "x" } }),
          headers: { "content-type": "application/json", "x-api-key": key }
        })
        u.itunes.fault()
        expectOk(raw, 1)
        expect(raw.body).toEqual({ tool: "mobile_app_search", provider: "itunes", status: 200, body: { unexpected: true, items: "none" } })
      }))

    it.effect("a provider failure voids its hold, as for the tool", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const { key, orgId } = yield* givenMember({ credits: 10 })
        u.itunes.fault({ status: 503 })
        const failed = yield* request("/v1/run", {
          body: JSON.stringify({ tool: "mobile_app_search", input: { query: "x" } }),
          headers: { "content-type": "application/json", "x-api-key": key }
        })
        u.itunes.fault()
        expectEnvelope(failed, { status: 502, type: "provider", code: "provider_unavailable", retryable: true, billable: false })
        expect(yield* books(orgId)).toEqual(expect.objectContaining({ balance: 10, held: 0, holdsByStatus: { voided: 1 } }))
      }))

    it.effect("replays with an Idempotency-Key, apart from the tool's own keys", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const { key } = yield* givenMember()
        const send = () =>
          request("/v1/run", {
            body: JSON.stringify({ tool: "weather", input: { q: "Berlin" } }),
            headers: { "content-type": "application/json", "x-api-key": key, "idempotency-key": "run-1" }
          })
        const first = yield* send()
        const again = yield* send()
        expect(again.text).toBe(first.text)
        expect(again.headers.get("idempotent-replayed")).toBe("true")
        expect(u.openMeteo.hits("/v1/forecast")).toBe(1)
        const tool = yield* callTool("weather", { q: "Berlin" }, { key, idempotencyKey: "run-1" })
        expect(tool.status).toBe(400)
      }))
  })

  describe("read falls back across its providers", () => {
    it.effect("the built-in reader fails: beta answers, one charge; all fail: the last error", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const { key, orgId } = yield* givenMember({ credits: 50 })
        // this layer reads with builtin only; the fallback order is checked on a second layer below
        u.pages.fault({ status: 503 })
        const failed = yield* callTool("read", { url: `${u.pages.url}/article` }, { key })
        u.pages.fault()
        expectEnvelope(failed, { status: 502, type: "provider", code: "provider_unavailable", retryable: true, billable: false })
        expect(yield* books(orgId)).toMatchObject({ balance: 50, held: 0 })
      }))
  })
})

layer(gatewayLayer({ providers: { ...config.providers, readProviders: ["builtin", "beta", "gamma"] } }), { excludeTestServices: true })(
  "read fallback",
  (it) => {
    it.effect("a page Jina Reader gets no content of: beta_read is the caller's 400, not billed; read moves on to its next provider", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const { key, orgId } = yield* givenMember({ credits: 50 })
        const url = `https://example.com${JINA_NO_CONTENT_PATH}`
        const alone = yield* callTool("beta_read", { url }, { key })
        expectEnvelope(alone, {
          status: 400,
          type: "validation",
          code: "invalid_request",
          retryable: false,
          billable: false,
          message: `url: Jina Reader found no content at ${url} (HTTP 422: No content available for URL ${url})`
        })
        expect(u.jina.hits()).toBe(1)
        expect(yield* books(orgId)).toMatchObject({ balance: 50, held: 0, holdsByStatus: { voided: 1 } })
        // read: the built-in reader is down, Jina has nothing, Firecrawl reads it; charged once
        u.pages.fault({ status: 503 })
        const page = `${u.pages.url}${JINA_NO_CONTENT_PATH}`
        const read = yield* callTool("read", { url: page }, { key })
        u.pages.fault()
        expectOk(read, 1)
        expect(read.body).toMatchObject({ provider: "gamma" })
        expect(u.jina.hits()).toBe(2)
        expect(u.firecrawl.hits("/v2/scrape")).toBe(1)
        expect(yield* books(orgId)).toMatchObject({ balance: 49, held: 0, holdsByStatus: { voided: 1, settled: 1 } })
      }))

    it.effect("first provider down → the second answers, one charge; all down → the last error", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const { key, orgId } = yield* givenMember({ credits: 50 })
        u.pages.fault({ status: 503 })
        const fellBack = yield* callTool("read", { url: `${u.pages.url}/article` }, { key })
        expectOk(fellBack, 1)
        expect(fellBack.body).toMatchObject({ provider: "beta" })
        expect(u.jina.hits()).toBe(1)
        expect(yield* books(orgId)).toMatchObject({ balance: 49, held: 0, holdsByStatus: { settled: 1 } })
        u.jina.fault({ status: 500 })
        u.firecrawl.fault({ status: 429, headers: { "retry-after": "3" } })
        const allDown = yield* callTool("read", { url: `${u.pages.url}/article` }, { key })
        expectEnvelope(allDown, { status: 502, type: "provider", code: "provider_rate_limited", retryable: true, billable: false })
        expect(yield* books(orgId)).toMatchObject({ balance: 49, held: 0 })
        u.resetAll()
      }))
  }
)

layer(
  gatewayLayer({
    providers: {
      ...config.providers,
      // no deadline is tested here: room for the built-in reader's conversion on a loaded machine
      timeoutMs: 3_000,
      searchProviders: ["gamma", "alpha"],
      readProviders: ["gamma", "builtin"],
      zetaApiVersion: "v24.0",
      muApiVersion: "2022-06-28"
    }
  }),
  { excludeTestServices: true }
)("gamma first; API versions from the configuration", (it) => {
  it.effect("gamma answers search and read through Firecrawl v2", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const { key } = yield* givenMember({ credits: 50 })
      const search = yield* callTool("search", { query: "effect", max_results: 3 }, { key })
      expectOk(search, 1)
      expect(search.body).toMatchObject({
        provider: "gamma",
        results: [0, 1, 2].map((i) => ({ url: `https://example.com/fc/${i}`, title: `Firecrawl ${i}`, snippet: `About ${i}` }))
      })
      expectOwnEncoding("search", search)
      const read = yield* callTool("read", { url: `${u.pages.url}/article` }, { key })
      expectOk(read, 1)
      expect(read.body).toMatchObject({ provider: "gamma", title: "Scraped page" })
      expect(u.firecrawl.requests.map((r) => [r.path, r.json])).toEqual([
        ["/v2/search", { query: "effect", limit: 3 }],
        ["/v2/scrape", { url: `${u.pages.url}/article`, formats: ["markdown"], onlyMainContent: true }]
      ])
      expect(u.exa.hits() + u.pages.hits()).toBe(0)
    }))

  it.effect("gamma's 402 (its account out of credits) moves search and read on to the next provider, charged once", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const { key, orgId } = yield* givenMember({ credits: 50 })
      u.firecrawl.fault(FIRECRAWL_NO_CREDITS)
      const search = yield* callTool("search", { query: "effect", max_results: 2 }, { key })
      expectOk(search, 1)
      expect(search.body).toMatchObject({ provider: "alpha" })
      const read = yield* callTool("read", { url: `${u.pages.url}/article` }, { key })
      expectOk(read, 1)
      expect(read.body).toMatchObject({ provider: "builtin" })
      expect(u.firecrawl.hits("/v2/search")).toBe(1)
      expect(u.firecrawl.hits("/v2/scrape")).toBe(1)
      // gamma's own tools: the 402 as it is, not retryable
      const scrape = yield* callTool("gamma_scrape", { url: "https://example.com/page" }, { key })
      u.firecrawl.fault()
      expectEnvelope(scrape, { status: 502, type: "provider", code: "provider_rejected", retryable: false, billable: false, message: "no credits left (HTTP 402): Insufficient credits" })
      expect(yield* books(orgId)).toMatchObject({ balance: 48, held: 0, holdsByStatus: { settled: 2, voided: 1 } })
    }))

  it.effect("a v1 format is sent as v2's, and a format v2 does not know is Firecrawl's 400", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const { key } = yield* givenMember({ credits: 50 })
      const full = yield* callTool("gamma_scrape", { url: "https://example.com/page", formats: ["markdown", "screenshot@fullPage"] }, { key })
      expectOk(full)
      expect(u.firecrawl.requests[0]?.json).toMatchObject({ formats: ["markdown", { type: "screenshot", fullPage: true }] })
      expect(full.body).toMatchObject({ screenshot: expect.objectContaining({ content_type: "image/png" }) })
      const unknown = yield* callTool("gamma_scrape", { url: "https://example.com/page", formats: ["extract"] }, { key })
      expectEnvelope(unknown, { status: 502, type: "provider", code: "provider_rejected", retryable: false, billable: false, message: "(HTTP 400): Bad Request" })
    }))

  it.effect("ZETA_API_VERSION and MU_API_VERSION set the versions sent; Notion refuses a two-source database to 2022-06-28", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const zeta = yield* givenMember()
      expect((yield* dashboard("POST", "/v1/connections", zeta.token, { provider: "zeta", credentials: CREDENTIALS.zeta })).status).toBe(201)
      const graph = yield* callTool("zeta_request", { path: "me" }, { key: zeta.key })
      expectOk(graph)
      expect(u.graph.requests.map((r) => r.path)).toEqual(["/v24.0/me"])
      const mu = yield* givenMember()
      expect((yield* dashboard("POST", "/v1/connections", mu.token, { provider: "mu", credentials: CREDENTIALS.mu })).status).toBe(201)
      const notion = yield* callTool("mu_database", { database_id: "d9824bdc" }, { key: mu.key })
      expectEnvelope(notion, { status: 502, type: "provider", code: "provider_rejected", retryable: false, billable: false, message: "(HTTP 400): Database d9824bdc has more than one data source" })
      expect(u.notion.requests.map((r) => [r.path, r.headers["notion-version"]])).toEqual([["/v1/databases/d9824bdc", "2022-06-28"]])
    }))
})

layer(
  gatewayLayer((u) => ({
    providers: { ...config.providers, endpoints: { zeta: { baseUrl: `${u.graph.url}${GRAPH_PROXY_PATH}`, apiKey: Option.none() } } }
  })),
  { excludeTestServices: true }
)("zeta behind an operator's proxy (ZETA_BASE_URL with a path)", (it) => {
  it.effect("a path or version that leaves {base}/{version}/ is refused before anything is held; the token goes nowhere else", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const { key, orgId, token } = yield* givenMember({ credits: 100 })
      expect((yield* dashboard("POST", "/v1/connections", token, { provider: "zeta", credentials: CREDENTIALS.zeta })).status).toBe(201)
      const invalid = { status: 400, type: "validation", code: "invalid_request", retryable: false, billable: false } as const
      const refused: ReadonlyArray<readonly [Record<string, unknown>, string]> = [
        // each reached the proxy outside /graph/v26.0/ with the org's token: /echo, /graph/echo, /echo, /graph/v25.0/me
        [{ path: "../../echo" }, "path must stay under the Graph API version"],
        [{ version: "..", path: "echo" }, "version: must be a Graph API version such as v26.0"],
        [{ path: "%2e%2e/%2e%2e/echo" }, "path must stay under the Graph API version"],
        [{ path: "me/../../v25.0/me" }, "path must stay under the Graph API version"],
        // at a server that decodes %2F (and %5C) before routing
        [{ path: "..%2F..%2Fecho" }, "path must stay under the Graph API version"],
        [{ path: "..%5C..%5Cecho" }, "path must stay under the Graph API version"],
        // a query or a fragment in the path: params is where query parameters go
        [{ path: "me?fields=id" }, "path: must not contain ? or #"],
        [{ path: "me#/../../echo" }, "path: must not contain ? or #"]
      ]
      for (const [input, message] of refused) {
        const result = yield* callTool("zeta_request", input, { key })
        expectEnvelope(result, { ...invalid, message })
      }
      expect(u.graph.requests.map((r) => r.path)).toEqual([])
      expect(yield* books(orgId)).toEqual(expect.objectContaining({ balance: 100, held: 0, holdsByStatus: {} }))
      // a path that steps back without leaving the version is sent resolved, under the proxy's path
      expectOk(yield* callTool("zeta_request", { path: "me" }, { key }))
      expectOk(yield* callTool("zeta_request", { path: "1234/../me", version: "v25.0", params: { fields: "id" } }, { key }))
      expect(u.graph.requests.map((r) => r.path)).toEqual([`${GRAPH_PROXY_PATH}/v26.0/me`, `${GRAPH_PROXY_PATH}/v25.0/me`])
      expect(u.graph.requests.every((r) => r.headers["authorization"] === `Bearer ${CREDENTIALS.zeta.access_token}`)).toBe(true)
    }))
})
