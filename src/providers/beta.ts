/**
 * beta speaks Jina: the Reader (`GET r.jina.ai/<url>`) and Search (`POST s.jina.ai/` with `{q, …}`), both
 * answering `{code, status, data}` when asked for JSON, with the key as a Bearer token.
 */
import { DateTime, Effect, Option, Redacted, Schema } from "effect"
import { ProviderNotConfigured } from "../domain/errors.js"
import { DEFAULT_MAX_CHARS, DEFAULT_MAX_RESULTS, type ToolInput, type ToolOutput } from "../domain/tools.js"
import { type ProviderEndpoint, ProvidersConfig } from "../config.js"
import { decodeUpstream, keepFile, NullableString, type ProviderTool, requestJson } from "./common.js"
import { truncate } from "./text.js"

export const PROVIDER = "beta"

/** Jina's dates are written for people ("Jan 1, 2026"): the curated answer has ISO 8601, or null. */
const isoDate = (date: string | null | undefined): string | null =>
  date === null || date === undefined ? null : Option.getOrNull(Option.map(DateTime.make(date), DateTime.formatIso))


export const JinaSearchAnswer = Schema.Struct({
  data: Schema.Array(Schema.Struct({
    title: NullableString,
    url: Schema.String,
    description: NullableString,
    content: NullableString,
    date: NullableString
  }))
})

export const JinaReadAnswer = Schema.Struct({
  data: Schema.Struct({
    screenshotUrl: NullableString,
    pageshotUrl: NullableString,
    title: NullableString,
    description: NullableString,
    url: NullableString,
    // the page as asked for: `content` (markdown, the default), `html` (format html), `text` (format text)
    content: NullableString,
    html: NullableString,
    text: NullableString,
    publishedTime: NullableString,
    usage: Schema.optional(Schema.Struct({ tokens: Schema.optional(Schema.Number) }))
  })
})

const keyOf = (endpoint: ProviderEndpoint) =>
  Option.isNone(endpoint.apiKey)
    ? Effect.fail(new ProviderNotConfigured({ message: "beta is not configured on this gateway (BETA_API_KEY)." }))
    : Effect.succeed(Redacted.value(endpoint.apiKey.value))

export const isConfigured = (config: typeof ProvidersConfig.Service) => Option.isSome(config.endpoints.betaSearch.apiKey)

/**
 * `withContent`: Jina reads every result page and answers its content too (slower, more tokens); the
 * curated `search` needs only titles and snippets, so it asks for `X-Respond-With: no-content`.
 */
const search = (body: Readonly<Record<string, unknown>>, withContent: boolean) =>
  Effect.gen(function* () {
    const config = yield* ProvidersConfig
    const endpoint = config.endpoints.betaSearch
    const key = yield* keyOf(endpoint)
    return yield* requestJson({
      provider: PROVIDER,
      method: "POST",
      url: `${endpoint.baseUrl}/`,
      headers: { authorization: `Bearer ${key}`, ...(withContent ? {} : { "x-respond-with": "no-content" }) },
      json: body,
      idempotent: true
    })
  })

const read = (url: string, format: string | undefined) =>
  Effect.gen(function* () {
    const config = yield* ProvidersConfig
    const endpoint = config.endpoints.betaRead
    const key = yield* keyOf(endpoint)
    return yield* requestJson({
      provider: PROVIDER,
      method: "GET",
      url: `${endpoint.baseUrl}/${url}`,
      headers: { authorization: `Bearer ${key}`, ...(format !== undefined ? { "x-return-format": format } : {}) },
      idempotent: true
    })
  })

/** `beta_search`: the input is Jina's search body, extra properties included. */
export const betaSearch: ProviderTool<ToolInput<"beta_search">, undefined, ToolOutput<"beta_search">> = {
  configured: isConfigured,
  fetch: (input) => search(input, true),
  normalize: (_input, raw) =>
    Effect.map(decodeUpstream(PROVIDER, JinaSearchAnswer, "beta_search")(raw.body), (answer) => ({
      provider: PROVIDER,
      results: answer.data.map((r) => ({
        title: r.title ?? null,
        url: r.url,
        description: r.description ?? null,
        content: r.content ?? null,
        date: r.date ?? null
      }))
    }))
}

/** The screenshot or pageshot URL of a Reader answer, if it has one. */
const ShotUrl = Schema.Struct({
  data: Schema.Struct({ screenshotUrl: NullableString, pageshotUrl: NullableString })
})

/**
 * `beta_read`: `format` is the Reader's `X-Return-Format` (markdown, html, text, screenshot, pageshot). A
 * screenshot or pageshot is kept as an artifact.
 */
export const betaRead: ProviderTool<ToolInput<"beta_read">, undefined, ToolOutput<"beta_read">> = {
  configured: (config) => Option.isSome(config.endpoints.betaRead.apiKey),
  fetch: (input) =>
    Effect.gen(function* () {
      const raw = yield* read(input.url, input.format)
      const shot = Schema.decodeUnknownOption(ShotUrl)(raw.body).pipe(
        Option.flatMap(({ data }) => Option.fromNullable(data.screenshotUrl ?? data.pageshotUrl))
      )
      if (Option.isNone(shot)) return raw
      return { ...raw, artifacts: { file: yield* keepFile(PROVIDER, shot.value) } }
    }),
  normalize: (input, raw) =>
    Effect.map(decodeUpstream(PROVIDER, JinaReadAnswer, "beta_read")(raw.body), ({ data }) => ({
      provider: PROVIDER,
      url: data.url ?? input.url,
      title: data.title ?? null,
      description: data.description ?? null,
      content: data.content ?? data.text ?? data.html ?? "",
      published_time: data.publishedTime ?? null,
      tokens: data.usage?.tokens ?? null,
      artifact: raw.artifacts?.["file"] ?? null
    }))
}

export const curatedSearch: ProviderTool<ToolInput<"search">, undefined, ToolOutput<"search">> = {
  configured: isConfigured,
  fetch: (input) => search({ q: input.query, num: input.max_results ?? DEFAULT_MAX_RESULTS }, false),
  normalize: (input, raw) =>
    Effect.map(decodeUpstream(PROVIDER, JinaSearchAnswer, "search")(raw.body), (answer) => ({
      provider: PROVIDER,
      query: input.query,
      results: answer.data.slice(0, input.max_results ?? DEFAULT_MAX_RESULTS).map((r) => ({
        title: r.title ?? r.url,
        url: r.url,
        snippet: r.description ?? "",
        published_at: isoDate(r.date)
      }))
    }))
}

export const curatedRead: ProviderTool<ToolInput<"read">, undefined, ToolOutput<"read">> = {
  configured: isConfigured,
  fetch: (input) => read(input.url, "markdown"),
  normalize: (input, raw) =>
    Effect.map(decodeUpstream(PROVIDER, JinaReadAnswer, "read")(raw.body), ({ data }) => {
      const { text, truncated } = truncate(data.content ?? "", input.max_chars ?? DEFAULT_MAX_CHARS)
      return {
        provider: PROVIDER,
        url: data.url ?? input.url,
        title: data.title ?? null,
        content: text,
        chars: text.length,
        truncated,
        artifact: null
      }
    })
}
