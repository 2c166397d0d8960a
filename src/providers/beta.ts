/**
 * beta speaks Jina's Reader and Search as they are served by jina-ai/reader, the code behind r.jina.ai and
 * s.jina.ai (https://github.com/jina-ai/reader; https://jina.ai/reader/):
 *
 * - Reader: `POST r.jina.ai/` with the target in a JSON body, `{"url": …}` (src/api/crawler.ts,
 *   `crawlByPostingToIndex`; README "SPAs with hash-based routing"). Not `GET r.jina.ai/<url>`: Jina decodes that
 *   path (`getTargetUrl(tryDecodeURIComponent(pathname + search))`), so `%2F %26 %3D %3F` in the target change
 *   which page is read, and a `#fragment` never leaves the client. The format is the `X-Return-Format` header.
 * - Search: `POST s.jina.ai/` with `{q, num, page, …}` (src/api/searcher.ts): `num` (alias `count`) is refused
 *   outside 0–20, and `page` (from 1) pages through the results.
 *
 * Both answer `{code, status, data}` when asked for JSON (`Accept: application/json`), and take the key as a
 * Bearer token. Jina's error statuses (401 bad key, 400 `ParamValidationError`, 429, 5xx) mean what HTTP says:
 * the general rules of the provider client read them. One is an answer: Search's 422 for a query or a page with
 * no results (`JinaNoResults`), which is no results, and past page 1 the end of the paging. Another is the caller's:
 * the Reader's 422 for a page it got nothing of (`JinaNoContent`), `PageWithoutContent`.
 */
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { ProviderNotConfigured } from "../domain/errors.js"
import { DEFAULT_MAX_CHARS, DEFAULT_MAX_RESULTS, type ToolInput, type ToolOutput } from "../domain/tools.js"
import { type ProviderEndpoint, ProvidersConfig } from "../config.js"
import { bodyText, ProviderClient, type UpstreamResponse } from "../services/ProviderClient.js"
import { decodeUpstream, keepFile, NullableString, PageWithoutContent, type ProviderTool, requestJson } from "./common.js"
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

/**
 * An `AssertionFailureError` of Jina's whose message starts with `prefix`, which civkit answers as HTTP 422
 * `{data: null, code: 422, name: "AssertionFailureError", status: 42206, message, readableMessage}` (civkit
 * civ-rpc/base.ts: `@StatusCode(42206)`, `ApplicationError[RPC_MARSHAL]`).
 */
const jinaAssertionFailure = (prefix: string) =>
  Schema.Struct({
    data: Schema.optional(Schema.Null),
    code: Schema.Literal(422),
    name: Schema.Literal("AssertionFailureError"),
    message: Schema.String.pipe(Schema.startsWith(prefix))
  })

/** Whether a non-2xx answer is the 422 `schema` describes. */
const is422 = (schema: ReturnType<typeof jinaAssertionFailure>) => {
  const decode = Schema.decodeUnknownOption(Schema.parseJson(schema))
  return (response: UpstreamResponse) => response.status === 422 && Option.isSome(decode(bodyText(response)))
}

/**
 * Search's answer when the engine has nothing for the query, or nothing past the pages before: src/api/searcher.ts
 * throws `AssertionFailureError("No search results available for query …")`. Search's other 422s (no content for
 * the results, no search provider at the moment) are not this, and stay refusals.
 */
export const JinaNoResults = jinaAssertionFailure("No search results available")
const isNoResults = is422(JinaNoResults)

/**
 * The Reader's answer when it got nothing at all of the page — no snapshot before its time ran out, the page never
 * loaded for it: src/api/crawler.ts throws `AssertionFailureError("No content available for URL …")` (or, in its
 * simpler modes, "No content available"). A page that loads empty is not this: the Reader answers it 200, with
 * empty content.
 */
export const JinaNoContent = jinaAssertionFailure("No content available")
const isNoContent = is422(JinaNoContent)

/** What `beta_search` reads: Jina's results, or its answer that there are none. */
const JinaSearchOrNone = Schema.Union(JinaSearchAnswer, JinaNoResults)

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
      headers: {
        accept: "application/json",
        authorization: `Bearer ${key}`,
        ...(withContent ? {} : { "x-respond-with": "no-content" })
      },
      json: body,
      idempotent: true,
      isAnswer: isNoResults
    })
  })

/** The Reader with the target URL in the body, byte for byte (its query string and fragment included). */
const read = (url: string, format: string | undefined) =>
  Effect.gen(function* () {
    // the Reader fetches the caller's URL: the guard's word on it first (the Reader may be the operator's own)
    yield* Effect.flatMap(ProviderClient, (client) => client.vouch(url))
    const config = yield* ProvidersConfig
    const endpoint = config.endpoints.betaRead
    const key = yield* keyOf(endpoint)
    const raw = yield* requestJson({
      provider: PROVIDER,
      method: "POST",
      url: `${endpoint.baseUrl}/`,
      headers: {
        accept: "application/json",
        authorization: `Bearer ${key}`,
        ...(format !== undefined ? { "x-return-format": format } : {})
      },
      json: { url },
      idempotent: true,
      isAnswer: isNoContent
    })
    if (raw.status !== 422) return raw
    // the only non-2xx let through: Jina found nothing to read there
    const said = Option.match(Schema.decodeUnknownOption(JinaNoContent)(raw.body), { onNone: () => "", onSome: (none) => `: ${none.message.slice(0, 300)}` })
    return yield* new PageWithoutContent({
      message: `url: Jina Reader found no content at ${url} (HTTP 422${said}): the page did not ` +
        "load for it, or had nothing it could read. Check the URL, or read the page with another tool."
    })
  })

/**
 * `beta_search`: the input is Jina's search body, extra properties included. Jina's 422 for a query or page with no
 * results is no results (its raw answer, `POST /v1/run`, is that 422 as Jina sent it).
 */
export const betaSearch: ProviderTool<ToolInput<"beta_search">, undefined, ToolOutput<"beta_search">> = {
  configured: isConfigured,
  fetch: (input) => search(input, true),
  normalize: (_input, raw) =>
    Effect.map(decodeUpstream(PROVIDER, JinaSearchOrNone, "beta_search")(raw.body), (answer) => ({
      provider: PROVIDER,
      results: (answer.data ?? []).map((r) => ({
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

/** The most results Jina's Search gives in one answer: it refuses a larger `num` (src/api/searcher.ts). */
const JINA_MAX_NUM = 20

/** The curated `search`'s raw answer: Jina's answer to each page asked for, in order (a 422 for one with none). */
const SearchPages = Schema.Struct({ pages: Schema.Array(JinaSearchOrNone) })

/**
 * The curated `search` asks for `max_results` (up to 100) `num` at a time (at most 20, the same on every page so
 * that the pages line up) and pages through with `page` until it has them, a page comes back short or with no
 * results (Jina's 422: there are no more), or it has asked for as many pages as `max_results` needs. Results that
 * two pages share count once. The raw answer has page 1's status: 200, or Jina's 422 when it has nothing at all.
 */
const searchPages = (query: string, wanted: number) =>
  Effect.gen(function* () {
    const num = Math.min(wanted, JINA_MAX_NUM)
    const pageCount = Math.ceil(wanted / num)
    const urls = new Set<string>()
    const bodies: Array<unknown> = []
    const ask = (page: number) => search({ q: query, num, ...(page > 1 ? { page } : {}) }, false)
    const first = yield* ask(1)
    let raw = first
    for (let page = 1; ; page++) {
      bodies.push(raw.body)
      // an answer that is not Jina's results (its 422 for none, another shape) ends the paging; the normalization
      // reads the 422 as no results and names what is wrong with any other shape
      const data = Option.getOrUndefined(Schema.decodeUnknownOption(JinaSearchAnswer)(raw.body))?.data
      for (const r of data ?? []) urls.add(r.url)
      if (data === undefined || data.length < num || urls.size >= wanted || page >= pageCount) break
      raw = yield* ask(page + 1)
    }
    return { ...first, body: { pages: bodies } }
  })

export const curatedSearch: ProviderTool<ToolInput<"search">, undefined, ToolOutput<"search">> = {
  configured: isConfigured,
  fetch: (input) => searchPages(input.query, input.max_results ?? DEFAULT_MAX_RESULTS),
  normalize: (input, raw) =>
    Effect.map(decodeUpstream(PROVIDER, SearchPages, "search")(raw.body), ({ pages }) => {
      // a result two pages share is the first page's
      const unique = pages.flatMap((page) => page.data ?? []).filter((r, i, all) => all.findIndex((o) => o.url === r.url) === i)
      return {
        provider: PROVIDER,
        query: input.query,
        results: unique.slice(0, input.max_results ?? DEFAULT_MAX_RESULTS).map((r) => ({
          title: r.title ?? r.url,
          url: r.url,
          snippet: r.description ?? "",
          published_at: isoDate(r.date)
        }))
      }
    })
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
