/**
 * gamma speaks Firecrawl's API v2 (v1 is its legacy API): `POST /v2/scrape` and `POST /v2/search`, Bearer key;
 * answers `{success: true, data}`, and `{success: false, error}` with a 4xx or 5xx on failure. Followed: the
 * API reference (https://docs.firecrawl.dev/api-reference/endpoint/scrape, …/endpoint/search) and the v2 SDK
 * (firecrawl/firecrawl apps/js-sdk/firecrawl/src/v2/methods/scrape.ts, search.ts, types.ts); the server's
 * request schemas are apps/api/src/controllers/v2/types.ts.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { ProviderNotConfigured, ProviderRejected, ProviderTimeout } from "../domain/errors.js"
import { DEFAULT_MAX_CHARS, DEFAULT_MAX_RESULTS, type ToolInput, type ToolOutput } from "../domain/tools.js"
import { ProvidersConfig } from "../config.js"
import { ProviderClient, upstreamMessage, type UpstreamResponse } from "../services/ProviderClient.js"
import { decodeUpstream, JsonObject, keepFile, NullableString, type ProviderTool, requestJson } from "./common.js"
import { truncate } from "./text.js"

export const PROVIDER = "gamma"

/**
 * The classification table of this module: Firecrawl's statuses that mean more than HTTP says.
 *
 * - 402: the operator's Firecrawl account has no credits left ("Insufficient credits to perform this request",
 *   apps/api/src/routes/shared.ts). Not the caller's doing and no retry helps soon: `provider_rejected` with
 *   `upstreamStatus` 402, on which curated `search` and `read` move on to their next provider.
 * - 403: Firecrawl refusing the request, not the key (which it refuses with a 401, apps/api/src/controllers/auth.ts):
 *   a URL on its blocklist (`blocklistMiddleware`, `BLOCKLISTED_URL_MESSAGE` "This website is no longer supported, …")
 *   or headers, actions or its agent from a restricted country (`countryCheck`), both apps/api/src/routes/shared.ts.
 *   `provider_rejected` with Firecrawl's message and `upstreamStatus` 403, on which curated `read` moves on.
 * - 408: Firecrawl's own scrape of the page timed out (`SCRAPE_TIMEOUT`, apps/api/src/controllers/v2/scrape.ts).
 */
type Reading = (response: UpstreamResponse) => ProviderRejected | ProviderTimeout
const FIRECRAWL_STATUSES: ReadonlyMap<number, Reading> = new Map<number, Reading>([
  [402, (r) =>
    new ProviderRejected({
      message: `gamma's account has no credits left (HTTP 402): ${upstreamMessage(r.body)}. The gateway's operator must top it up.`,
      upstreamStatus: 402
    })],
  [403, (r) => new ProviderRejected({ message: `gamma refused the request (HTTP 403): ${upstreamMessage(r.body)}`, upstreamStatus: 403 })],
  [408, (r) => new ProviderTimeout({ message: `gamma timed out scraping the page (HTTP 408): ${upstreamMessage(r.body)}` })]
])

const firecrawlStatus = (response: UpstreamResponse) => FIRECRAWL_STATUSES.get(response.status)?.(response)

/** A v2 search result: `web` and `news` results carry the page's URL, `images` results the page's too. */
const SearchResult = Schema.Struct({
  url: Schema.optional(Schema.NullOr(Schema.String)),
  title: NullableString,
  description: NullableString,
  snippet: NullableString,
  markdown: NullableString
})

/** v2 answers its results per source: `data: {web?, news?, images?}` (v1 answered one array). */
export const FirecrawlSearchAnswer = Schema.Struct({
  success: Schema.Literal(true),
  data: Schema.Struct({
    web: Schema.optional(Schema.Array(SearchResult)),
    news: Schema.optional(Schema.Array(SearchResult)),
    images: Schema.optional(Schema.Array(SearchResult))
  })
})

/** Every result with a URL, web first, then news, then images. */
const searchResults = (data: typeof FirecrawlSearchAnswer.Type["data"]) =>
  [...data.web ?? [], ...data.news ?? [], ...data.images ?? []].flatMap((r) =>
    typeof r.url === "string" ? [{ ...r, url: r.url, description: r.description ?? r.snippet ?? null }] : []
  )

export const FirecrawlScrapeAnswer = Schema.Struct({
  success: Schema.Literal(true),
  data: Schema.Struct({
    markdown: NullableString,
    html: NullableString,
    rawHtml: NullableString,
    links: Schema.optional(Schema.NullOr(Schema.Array(Schema.String))),
    screenshot: NullableString,
    // the SDK's Document (apps/js-sdk/firecrawl/src/v2/types.ts): what the summary, json and changeTracking formats
    // and the request's actions give, and a warning
    summary: NullableString,
    json: Schema.optional(Schema.Unknown),
    changeTracking: Schema.optional(Schema.NullOr(JsonObject)),
    actions: Schema.optional(Schema.NullOr(JsonObject)),
    warning: NullableString,
    metadata: Schema.optional(Schema.Struct({
      title: NullableString,
      sourceURL: NullableString,
      url: NullableString,
      statusCode: Schema.optional(Schema.NullOr(Schema.Number))
    }, JsonObject))
  })
})

export const isConfigured = (config: typeof ProvidersConfig.Service) => Option.isSome(config.endpoints.gamma.apiKey)

const post = (path: string, body: Readonly<Record<string, unknown>>) =>
  Effect.gen(function* () {
    const config = yield* ProvidersConfig
    const endpoint = config.endpoints.gamma
    if (Option.isNone(endpoint.apiKey)) {
      return yield* new ProviderNotConfigured({ message: "gamma is not configured on this gateway (GAMMA_API_KEY)." })
    }
    return yield* requestJson({
      provider: PROVIDER,
      method: "POST",
      url: `${endpoint.baseUrl}${path}`,
      headers: { authorization: `Bearer ${Redacted.value(endpoint.apiKey.value)}` },
      json: body,
      idempotent: true,
      classify: firecrawlStatus
    })
  })

const Screenshot = Schema.Struct({ data: Schema.Struct({ screenshot: Schema.String }) })

/**
 * v2 formats are names or objects; v1's `screenshot@fullPage` is v2's `{type: "screenshot", fullPage: true}`
 * (the mapping Firecrawl's own v1-to-v2 conversion makes, apps/api/src/controllers/v2/types.ts).
 */
const v2Formats = (input: ToolInput<"gamma_scrape">): Readonly<Record<string, unknown>> =>
  input.formats === undefined
    ? input
    : { ...input, formats: input.formats.map((f) => (f === "screenshot@fullPage" ? { type: "screenshot", fullPage: true } : f)) }

/** `gamma_scrape`: the input is Firecrawl's scrape body, extra properties included; a screenshot is kept as an artifact. */
export const gammaScrape: ProviderTool<ToolInput<"gamma_scrape">, undefined, ToolOutput<"gamma_scrape">> = {
  configured: isConfigured,
  fetch: (input) =>
    Effect.gen(function* () {
      // Firecrawl fetches the caller's URL: the guard's word on it first (Firecrawl may be the operator's own)
      yield* Effect.flatMap(ProviderClient, (client) => client.vouch(input.url))
      const raw = yield* post("/v2/scrape", v2Formats(input))
      const shot = Schema.decodeUnknownOption(Screenshot)(raw.body)
      if (Option.isNone(shot)) return raw
      return { ...raw, artifacts: { screenshot: yield* keepFile(PROVIDER, shot.value.data.screenshot) } }
    }),
  normalize: (input, raw) =>
    Effect.map(decodeUpstream(PROVIDER, FirecrawlScrapeAnswer, "gamma_scrape")(raw.body), ({ data }) => {
      const { sourceURL, statusCode, title, url, ...rest } = data.metadata ?? {}
      return {
        provider: PROVIDER,
        url: url ?? sourceURL ?? input.url,
        title: title ?? null,
        status_code: statusCode ?? null,
        markdown: data.markdown ?? null,
        html: data.html ?? null,
        raw_html: data.rawHtml ?? null,
        links: data.links ?? null,
        screenshot: raw.artifacts?.["screenshot"] ?? null,
        summary: data.summary ?? null,
        json: data.json ?? null,
        change_tracking: data.changeTracking ?? null,
        actions: data.actions ?? null,
        warning: data.warning ?? null,
        metadata: { ...rest, ...(sourceURL !== undefined ? { sourceURL } : {}) }
      }
    })
}

/** `gamma_search`: the input is Firecrawl's search body, extra properties included. */
export const gammaSearch: ProviderTool<ToolInput<"gamma_search">, undefined, ToolOutput<"gamma_search">> = {
  configured: isConfigured,
  fetch: (input) => post("/v2/search", input),
  normalize: (_input, raw) =>
    Effect.map(decodeUpstream(PROVIDER, FirecrawlSearchAnswer, "gamma_search")(raw.body), (answer) => ({
      provider: PROVIDER,
      results: searchResults(answer.data).map((r) => ({
        url: r.url,
        title: r.title ?? null,
        description: r.description ?? null,
        markdown: r.markdown ?? null
      }))
    }))
}

export const curatedSearch: ProviderTool<ToolInput<"search">, undefined, ToolOutput<"search">> = {
  configured: isConfigured,
  fetch: (input) => post("/v2/search", { query: input.query, limit: input.max_results ?? DEFAULT_MAX_RESULTS }),
  normalize: (input, raw) =>
    Effect.map(decodeUpstream(PROVIDER, FirecrawlSearchAnswer, "search")(raw.body), (answer) => ({
      provider: PROVIDER,
      query: input.query,
      results: searchResults(answer.data).slice(0, input.max_results ?? DEFAULT_MAX_RESULTS).map((r) => ({
        title: r.title ?? r.url,
        url: r.url,
        snippet: r.description ?? "",
        published_at: null
      }))
    }))
}

const ScrapedMarkdown = Schema.Struct({
  success: Schema.Literal(true),
  data: Schema.Struct({
    markdown: Schema.String,
    metadata: Schema.optional(Schema.Struct({ title: NullableString, sourceURL: NullableString, url: NullableString }))
  })
})

export const curatedRead: ProviderTool<ToolInput<"read">, undefined, ToolOutput<"read">> = {
  configured: isConfigured,
  fetch: (input) =>
    Effect.zipRight(
      Effect.flatMap(ProviderClient, (client) => client.vouch(input.url)),
      post("/v2/scrape", { url: input.url, formats: ["markdown"], onlyMainContent: true })
    ),
  normalize: (input, raw) =>
    Effect.map(decodeUpstream(PROVIDER, ScrapedMarkdown, "read")(raw.body), ({ data }) => {
      const { text, truncated } = truncate(data.markdown, input.max_chars ?? DEFAULT_MAX_CHARS)
      return {
        provider: PROVIDER,
        url: data.metadata?.url ?? data.metadata?.sourceURL ?? input.url,
        title: data.metadata?.title ?? null,
        content: text,
        chars: text.length,
        truncated,
        artifact: null
      }
    })
}
