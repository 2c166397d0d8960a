/**
 * gamma speaks Firecrawl v1: `POST /v1/scrape` and `POST /v1/search`, Bearer key, answers
 * `{success, data}` (and `{success:false, error}` on failure).
 */
import { Effect, Option, Redacted, Schema } from "effect"
import { ProviderNotConfigured } from "../domain/errors.js"
import type { ToolInput, ToolOutput } from "../domain/tools.js"
import { DEFAULT_MAX_RESULTS } from "../domain/tools.js"
import { GatewayConfig } from "../services/GatewayConfig.js"
import { ProviderClient } from "../services/ProviderClient.js"
import { type Answered, decodeUpstream, type ProviderEffect } from "./common.js"
import { truncate } from "./text.js"

export const PROVIDER = "gamma"

export const FirecrawlSearchAnswer = Schema.Struct({
  success: Schema.Literal(true),
  data: Schema.Array(Schema.Struct({
    url: Schema.String,
    title: Schema.optional(Schema.NullOr(Schema.String)),
    description: Schema.optional(Schema.NullOr(Schema.String))
  }))
})

export const FirecrawlScrapeAnswer = Schema.Struct({
  success: Schema.Literal(true),
  data: Schema.Struct({
    markdown: Schema.String,
    metadata: Schema.optional(Schema.Struct({
      title: Schema.optional(Schema.NullOr(Schema.String)),
      sourceURL: Schema.optional(Schema.NullOr(Schema.String)),
      url: Schema.optional(Schema.NullOr(Schema.String))
    }))
  })
})

export const isConfigured = (config: typeof GatewayConfig.Service) => Option.isSome(config.providers.gamma.apiKey)

const post = (path: string, body: Readonly<Record<string, unknown>>) =>
  Effect.gen(function* () {
    const config = yield* GatewayConfig
    const endpoint = config.providers.gamma
    if (Option.isNone(endpoint.apiKey)) {
      return yield* new ProviderNotConfigured({ message: "gamma is not configured on this gateway (GAMMA_API_KEY)." })
    }
    const client = yield* ProviderClient
    return yield* client.json({
      provider: PROVIDER,
      method: "POST",
      url: `${endpoint.baseUrl}${path}`,
      headers: { authorization: `Bearer ${Redacted.value(endpoint.apiKey.value)}` },
      json: body,
      idempotent: true
    })
  })

export const searchRaw = (body: Readonly<Record<string, unknown>>) => post("/v1/search", body)
export const scrapeRaw = (body: Readonly<Record<string, unknown>>) => post("/v1/scrape", body)

export const search = (input: ToolInput<"search">): ProviderEffect<Answered<ToolOutput<"search">>> =>
  Effect.gen(function* () {
    const max = input.max_results ?? DEFAULT_MAX_RESULTS
    const body = yield* searchRaw({ query: input.query, limit: max })
    const answer = yield* decodeUpstream(PROVIDER, FirecrawlSearchAnswer, "search")(body)
    return {
      provider: PROVIDER,
      output: {
        provider: PROVIDER,
        query: input.query,
        results: answer.data.slice(0, max).map((r) => ({
          title: r.title ?? r.url,
          url: r.url,
          snippet: r.description ?? "",
          published_at: null
        }))
      }
    }
  })

export const read = (input: ToolInput<"read">, maxChars: number): ProviderEffect<Answered<ToolOutput<"read">>> =>
  Effect.gen(function* () {
    const body = yield* scrapeRaw({ url: input.url, formats: ["markdown"], onlyMainContent: true })
    const answer = yield* decodeUpstream(PROVIDER, FirecrawlScrapeAnswer, "read")(body)
    const { text, truncated } = truncate(answer.data.markdown, maxChars)
    const meta = answer.data.metadata
    return {
      provider: PROVIDER,
      output: {
        provider: PROVIDER,
        url: meta?.url ?? meta?.sourceURL ?? input.url,
        title: meta?.title ?? null,
        content: text,
        chars: text.length,
        truncated
      }
    }
  })
