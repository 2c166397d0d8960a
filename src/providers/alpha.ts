/**
 * alpha speaks the Exa search API: `POST /search` with the key in `x-api-key`.
 */
import { Effect, Option, Redacted, Schema } from "effect"
import { ProviderNotConfigured } from "../domain/errors.js"
import type { ToolInput, ToolOutput } from "../domain/tools.js"
import { DEFAULT_MAX_RESULTS } from "../domain/tools.js"
import { GatewayConfig } from "../services/GatewayConfig.js"
import { ProviderClient } from "../services/ProviderClient.js"
import { type Answered, decodeUpstream, type ProviderEffect } from "./common.js"

export const PROVIDER = "alpha"

export const ExaResult = Schema.Struct({
  title: Schema.optional(Schema.NullOr(Schema.String)),
  url: Schema.String,
  publishedDate: Schema.optional(Schema.NullOr(Schema.String)),
  author: Schema.optional(Schema.NullOr(Schema.String)),
  text: Schema.optional(Schema.NullOr(Schema.String)),
  summary: Schema.optional(Schema.NullOr(Schema.String)),
  highlights: Schema.optional(Schema.NullOr(Schema.Array(Schema.String)))
})

export const ExaSearchAnswer = Schema.Struct({
  results: Schema.Array(ExaResult)
})

const SNIPPET_CHARS = 400

export const credentials = Effect.gen(function* () {
  const config = yield* GatewayConfig
  const endpoint = config.providers.alpha
  if (Option.isNone(endpoint.apiKey)) {
    return yield* new ProviderNotConfigured({ message: "alpha is not configured on this gateway (ALPHA_API_KEY)." })
  }
  return { baseUrl: endpoint.baseUrl, apiKey: Redacted.value(endpoint.apiKey.value) }
})

export const isConfigured = (config: typeof GatewayConfig.Service) => Option.isSome(config.providers.alpha.apiKey)

/** `POST /search` with a body; the raw answer. */
export const searchRaw = (body: Readonly<Record<string, unknown>>) =>
  Effect.gen(function* () {
    const { apiKey, baseUrl } = yield* credentials
    const client = yield* ProviderClient
    return yield* client.json({
      provider: PROVIDER,
      method: "POST",
      url: `${baseUrl}/search`,
      headers: { "x-api-key": apiKey },
      json: body,
      idempotent: true
    })
  })

/** The curated `search` on alpha. */
export const search = (input: ToolInput<"search">): ProviderEffect<Answered<ToolOutput<"search">>> =>
  Effect.gen(function* () {
    const body = yield* searchRaw({
      query: input.query,
      numResults: input.max_results ?? DEFAULT_MAX_RESULTS,
      contents: { text: { maxCharacters: SNIPPET_CHARS } }
    })
    const answer = yield* decodeUpstream(PROVIDER, ExaSearchAnswer, "search")(body)
    return {
      provider: PROVIDER,
      output: {
        provider: PROVIDER,
        query: input.query,
        results: answer.results.slice(0, input.max_results ?? DEFAULT_MAX_RESULTS).map((r) => ({
          title: r.title ?? r.url,
          url: r.url,
          snippet: r.highlights?.[0] ?? r.summary ?? r.text ?? "",
          published_at: r.publishedDate ?? null
        }))
      }
    }
  })
