/**
 * `mobile_app_search` on Apple's iTunes Search API (`GET /search?term=…&entity=software`). No key.
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { ProviderRateLimited } from "../domain/errors.js"
import type { ToolInput, ToolOutput } from "../domain/tools.js"
import { ProvidersConfig } from "../config.js"
import type { UpstreamResponse } from "../services/ProviderClient.js"
import { decodeUpstream, type ProviderTool, requestJson } from "./common.js"

export const PROVIDER = "itunes"

/** Apple's limit is about 20 calls a minute: a minute is the wait that surely ends a throttle. */
export const THROTTLE_WAIT_SECONDS = 60

/**
 * The API takes no key, so its 403 refuses no credential: it is how Apple throttles a caller over its limit, with
 * an empty body and no `Retry-After` (facundoolano/app-store-scraper issue #194, Vinelab/iTunes issue #5).
 */
const itunesStatus = (response: UpstreamResponse) =>
  response.status === 403
    ? new ProviderRateLimited({
      message: `${PROVIDER} is rate limiting the gateway (HTTP 403). Apple allows about 20 calls a minute: retry in a minute.`,
      retryAfter: THROTTLE_WAIT_SECONDS
    })
    : undefined

const opt = <S extends Schema.Schema.Any>(s: S) => Schema.optional(Schema.NullOr(s))

export const SoftwareResult = Schema.Struct({
  trackId: Schema.Number,
  trackName: Schema.String,
  artistName: Schema.String,
  bundleId: opt(Schema.String),
  trackViewUrl: opt(Schema.String),
  artworkUrl512: opt(Schema.String),
  artworkUrl100: opt(Schema.String),
  artworkUrl60: opt(Schema.String),
  price: opt(Schema.Number),
  currency: opt(Schema.String),
  averageUserRating: opt(Schema.Number),
  userRatingCount: opt(Schema.Number),
  genres: opt(Schema.Array(Schema.String)),
  version: opt(Schema.String),
  releaseDate: opt(Schema.String),
  description: opt(Schema.String)
})

export const SearchAnswer = Schema.Struct({
  resultCount: Schema.Number,
  results: Schema.Array(SoftwareResult)
})

export const DEFAULT_LIMIT = 10
export const DEFAULT_COUNTRY = "us"

const countryOf = (input: ToolInput<"mobile_app_search">) => (input.country ?? DEFAULT_COUNTRY).toLowerCase()

export const mobileAppSearch: ProviderTool<ToolInput<"mobile_app_search">, undefined, ToolOutput<"mobile_app_search">> = {
  fetch: (input) =>
    Effect.gen(function* () {
      const config = yield* ProvidersConfig
      const url = new URL(`${config.endpoints.appstore.baseUrl}/search`)
      url.search = new URLSearchParams({
        term: input.query,
        country: countryOf(input),
        entity: "software",
        media: "software",
        limit: String(input.limit ?? DEFAULT_LIMIT)
      }).toString()
      return yield* requestJson({ provider: PROVIDER, method: "GET", url: url.toString(), idempotent: true, classify: itunesStatus })
    }),
  normalize: (input, raw) =>
    Effect.map(decodeUpstream(PROVIDER, SearchAnswer, "mobile_app_search")(raw.body), (answer) => ({
      provider: PROVIDER,
      query: input.query,
      country: countryOf(input),
      results: answer.results.map((r) => ({
        id: r.trackId,
        name: r.trackName,
        developer: r.artistName,
        bundle_id: r.bundleId ?? null,
        url: r.trackViewUrl ?? null,
        icon_url: r.artworkUrl512 ?? r.artworkUrl100 ?? r.artworkUrl60 ?? null,
        price: r.price ?? null,
        currency: r.currency ?? null,
        rating: r.averageUserRating ?? null,
        rating_count: r.userRatingCount ?? null,
        genres: r.genres ?? [],
        version: r.version ?? null,
        release_date: r.releaseDate ?? null,
        description: r.description ?? null
      }))
    }))
}
