/**
 * beta speaks Jina: the Reader (`GET r.jina.ai/<url>`) and Search (`POST s.jina.ai/` with `{q, ...}`),
 * both answering `{code, status, data}` when asked for JSON, with the key as a Bearer token.
 */
import { Effect, Option, Redacted, Schema } from "effect"
import { ProviderNotConfigured } from "../domain/errors.js"
import type { ToolInput, ToolOutput } from "../domain/tools.js"
import { DEFAULT_MAX_RESULTS } from "../domain/tools.js"
import { GatewayConfig, type ProviderEndpoint } from "../services/GatewayConfig.js"
import { ProviderClient } from "../services/ProviderClient.js"
import { type Answered, decodeUpstream, type ProviderEffect } from "./common.js"
import { truncate } from "./text.js"

export const PROVIDER = "beta"

export const JinaSearchResult = Schema.Struct({
  title: Schema.optional(Schema.NullOr(Schema.String)),
  url: Schema.String,
  description: Schema.optional(Schema.NullOr(Schema.String)),
  content: Schema.optional(Schema.NullOr(Schema.String)),
  date: Schema.optional(Schema.NullOr(Schema.String))
})
export const JinaSearchAnswer = Schema.Struct({
  data: Schema.Array(JinaSearchResult)
})

export const JinaReadAnswer = Schema.Struct({
  data: Schema.Struct({
    title: Schema.optional(Schema.NullOr(Schema.String)),
    url: Schema.optional(Schema.NullOr(Schema.String)),
    content: Schema.String
  })
})

const needKey = (endpoint: ProviderEndpoint) =>
  Option.isNone(endpoint.apiKey)
    ? Effect.fail(new ProviderNotConfigured({ message: "beta is not configured on this gateway (BETA_API_KEY)." }))
    : Effect.succeed({ baseUrl: endpoint.baseUrl, apiKey: Redacted.value(endpoint.apiKey.value) })

export const isConfigured = (config: typeof GatewayConfig.Service) => Option.isSome(config.providers.betaSearch.apiKey)

export const searchRaw = (body: Readonly<Record<string, unknown>>) =>
  Effect.gen(function* () {
    const config = yield* GatewayConfig
    const { apiKey, baseUrl } = yield* needKey(config.providers.betaSearch)
    const client = yield* ProviderClient
    return yield* client.json({
      provider: PROVIDER,
      method: "POST",
      url: `${baseUrl}/`,
      headers: { authorization: `Bearer ${apiKey}`, "x-respond-with": "no-content" },
      json: body,
      idempotent: true
    })
  })

export const readRaw = (url: string, headers: Readonly<Record<string, string>> = {}) =>
  Effect.gen(function* () {
    const config = yield* GatewayConfig
    const { apiKey, baseUrl } = yield* needKey(config.providers.betaRead)
    const client = yield* ProviderClient
    return yield* client.json({
      provider: PROVIDER,
      method: "GET",
      url: `${baseUrl}/${url}`,
      headers: { authorization: `Bearer ${apiKey}`, ...headers },
      idempotent: true
    })
  })

export const search = (input: ToolInput<"search">): ProviderEffect<Answered<ToolOutput<"search">>> =>
  Effect.gen(function* () {
    const max = input.max_results ?? DEFAULT_MAX_RESULTS
    const body = yield* searchRaw({ q: input.query, num: max })
    const answer = yield* decodeUpstream(PROVIDER, JinaSearchAnswer, "search")(body)
    return {
      provider: PROVIDER,
      output: {
        provider: PROVIDER,
        query: input.query,
        results: answer.data.slice(0, max).map((r) => ({
          title: r.title ?? r.url,
          url: r.url,
          snippet: r.description ?? "",
          published_at: r.date ?? null
        }))
      }
    }
  })

export const read = (input: ToolInput<"read">, maxChars: number): ProviderEffect<Answered<ToolOutput<"read">>> =>
  Effect.gen(function* () {
    const body = yield* readRaw(input.url, { "x-return-format": "markdown" })
    const answer = yield* decodeUpstream(PROVIDER, JinaReadAnswer, "read")(body)
    const { text, truncated } = truncate(answer.data.content, maxChars)
    return {
      provider: PROVIDER,
      output: {
        provider: PROVIDER,
        url: answer.data.url ?? input.url,
        title: answer.data.title ?? null,
        content: text,
        chars: text.length,
        truncated
      }
    }
  })
