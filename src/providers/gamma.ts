/**
 * gamma speaks Firecrawl v1: `POST /v1/scrape` and `POST /v1/search`, Bearer key; answers
 * `{success: true, data}` (and `{success: false, error}` with a 4xx or 5xx on failure).
 */
import { Effect, Option, Redacted, Schema } from "effect"
import { ProviderNotConfigured } from "../domain/errors.js"
import { DEFAULT_MAX_CHARS, DEFAULT_MAX_RESULTS, type ToolInput, type ToolOutput } from "../domain/tools.js"
import { ProvidersConfig } from "../config.js"
import { decodeUpstream, JsonObject, keepFile, NullableString, type ProviderTool, requestJson } from "./common.js"
import { truncate } from "./text.js"

export const PROVIDER = "gamma"


export const FirecrawlSearchAnswer = Schema.Struct({
  success: Schema.Literal(true),
  data: Schema.Array(Schema.Struct({
    url: Schema.String,
    title: NullableString,
    description: NullableString,
    markdown: NullableString
  }))
})

export const FirecrawlScrapeAnswer = Schema.Struct({
  success: Schema.Literal(true),
  data: Schema.Struct({
    markdown: NullableString,
    html: NullableString,
    rawHtml: NullableString,
    links: Schema.optional(Schema.NullOr(Schema.Array(Schema.String))),
    screenshot: NullableString,
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
      idempotent: true
    })
  })

const Screenshot = Schema.Struct({ data: Schema.Struct({ screenshot: Schema.String }) })

/** `gamma_scrape`: the input is Firecrawl's scrape body, extra properties included; a screenshot is kept as an artifact. */
export const gammaScrape: ProviderTool<ToolInput<"gamma_scrape">, undefined, ToolOutput<"gamma_scrape">> = {
  configured: isConfigured,
  fetch: (input) =>
    Effect.gen(function* () {
      const raw = yield* post("/v1/scrape", input)
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
        metadata: { ...rest, ...(sourceURL !== undefined ? { sourceURL } : {}) }
      }
    })
}

/** `gamma_search`: the input is Firecrawl's search body, extra properties included. */
export const gammaSearch: ProviderTool<ToolInput<"gamma_search">, undefined, ToolOutput<"gamma_search">> = {
  configured: isConfigured,
  fetch: (input) => post("/v1/search", input),
  normalize: (_input, raw) =>
    Effect.map(decodeUpstream(PROVIDER, FirecrawlSearchAnswer, "gamma_search")(raw.body), (answer) => ({
      provider: PROVIDER,
      results: answer.data.map((r) => ({
        url: r.url,
        title: r.title ?? null,
        description: r.description ?? null,
        markdown: r.markdown ?? null
      }))
    }))
}

export const curatedSearch: ProviderTool<ToolInput<"search">, undefined, ToolOutput<"search">> = {
  configured: isConfigured,
  fetch: (input) => post("/v1/search", { query: input.query, limit: input.max_results ?? DEFAULT_MAX_RESULTS }),
  normalize: (input, raw) =>
    Effect.map(decodeUpstream(PROVIDER, FirecrawlSearchAnswer, "search")(raw.body), (answer) => ({
      provider: PROVIDER,
      query: input.query,
      results: answer.data.slice(0, input.max_results ?? DEFAULT_MAX_RESULTS).map((r) => ({
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
  fetch: (input) => post("/v1/scrape", { url: input.url, formats: ["markdown"], onlyMainContent: true }),
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
