/**
 * alpha speaks the Exa search API: `POST /search` with the key in `x-api-key`; answers
 * `{requestId, resolvedSearchType, results: [{id, url, title, publishedDate, author, score, text?, …}]}`.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { ProviderNotConfigured, ProviderRejected } from "../domain/errors.js"
import { DEFAULT_MAX_RESULTS, type ToolInput, type ToolOutput } from "../domain/tools.js"
import { ProvidersConfig } from "../config.js"
import { bodyText, upstreamMessage, type UpstreamResponse } from "../services/ProviderClient.js"
import { decodeUpstream, NullableString, type ProviderTool, requestJson } from "./common.js"

export const PROVIDER = "alpha"

/**
 * Exa's failures are `{requestId, error, tag}` (https://exa.ai/docs/reference/error-codes). A 403's tag says whose it
 * is: these refuse the account behind the key (a plan without the feature, a team suspended under its content policy,
 * https://exa.ai/docs/reference/content-policy) and stay the key's, as an untagged 403 and every 401 do. Any other
 * tag — `PROHIBITED_CONTENT`, `ROBOTS_FILTER_FAILED`, and the tags Exa adds (its set is open-ended) — refuses what was
 * asked for: `provider_rejected`, with Exa's message and tag.
 */
const ACCOUNT_TAGS: ReadonlySet<string> = new Set(["ACCESS_DENIED", "FEATURE_DISABLED", "TEAM_BLOCKED"])

const ExaError = Schema.parseJson(Schema.Struct({ tag: Schema.optional(Schema.String) }))

const exaStatus = (response: UpstreamResponse) => {
  if (response.status !== 403) return undefined
  const tag = Schema.decodeUnknownOption(ExaError)(bodyText(response)).pipe(
    Option.flatMap((e) => Option.fromNullable(e.tag))
  )
  if (Option.isNone(tag) || ACCOUNT_TAGS.has(tag.value)) return undefined
  return new ProviderRejected({
    message: `alpha refused the request (HTTP 403 ${tag.value}): ${upstreamMessage(response.body)}`,
    upstreamStatus: 403
  })
}

export const ExaResult = Schema.Struct({
  id: Schema.optional(Schema.String),
  title: NullableString,
  url: Schema.String,
  publishedDate: NullableString,
  author: NullableString,
  score: Schema.optional(Schema.NullOr(Schema.Number)),
  text: NullableString,
  summary: NullableString,
  highlights: Schema.optional(Schema.NullOr(Schema.Array(Schema.String)))
})

export const ExaSearchAnswer = Schema.Struct({
  requestId: NullableString,
  resolvedSearchType: NullableString,
  results: Schema.Array(ExaResult)
})

const SNIPPET_CHARS = 400

export const isConfigured = (config: typeof ProvidersConfig.Service) => Option.isSome(config.endpoints.alpha.apiKey)

/** `POST /search` with a body; the raw answer. */
const search = (body: Readonly<Record<string, unknown>>) =>
  Effect.gen(function* () {
    const config = yield* ProvidersConfig
    const endpoint = config.endpoints.alpha
    if (Option.isNone(endpoint.apiKey)) {
      return yield* new ProviderNotConfigured({ message: "alpha is not configured on this gateway (ALPHA_API_KEY)." })
    }
    return yield* requestJson({
      provider: PROVIDER,
      method: "POST",
      url: `${endpoint.baseUrl}/search`,
      headers: { "x-api-key": Redacted.value(endpoint.apiKey.value) },
      json: body,
      idempotent: true,
      classify: exaStatus
    })
  })

/** `alpha_search`: the input is Exa's request body, extra properties included. */
export const alphaSearch: ProviderTool<ToolInput<"alpha_search">, undefined, ToolOutput<"alpha_search">> = {
  configured: isConfigured,
  fetch: (input) => search(input),
  normalize: (_input, raw) =>
    Effect.map(decodeUpstream(PROVIDER, ExaSearchAnswer, "alpha_search")(raw.body), (answer) => ({
      provider: PROVIDER,
      request_id: answer.requestId ?? null,
      search_type: answer.resolvedSearchType ?? null,
      results: answer.results.map((r) => ({
        id: r.id ?? r.url,
        url: r.url,
        title: r.title ?? null,
        published_date: r.publishedDate ?? null,
        author: r.author ?? null,
        score: r.score ?? null,
        text: r.text ?? null,
        highlights: r.highlights ?? null,
        summary: r.summary ?? null
      }))
    }))
}

/** The curated `search` on alpha. */
export const curatedSearch: ProviderTool<ToolInput<"search">, undefined, ToolOutput<"search">> = {
  configured: isConfigured,
  fetch: (input) =>
    search({
      query: input.query,
      numResults: input.max_results ?? DEFAULT_MAX_RESULTS,
      contents: { text: { maxCharacters: SNIPPET_CHARS } }
    }),
  normalize: (input, raw) =>
    Effect.map(decodeUpstream(PROVIDER, ExaSearchAnswer, "search")(raw.body), (answer) => ({
      provider: PROVIDER,
      query: input.query,
      results: answer.results.slice(0, input.max_results ?? DEFAULT_MAX_RESULTS).map((r) => ({
        title: r.title ?? r.url,
        url: r.url,
        snippet: r.highlights?.[0] ?? r.summary ?? r.text ?? "",
        published_at: r.publishedDate ?? null
      }))
    }))
}
