/**
 * `mobile_app_search` on Apple's iTunes Search API (`GET /search?term=…&entity=software`). No key.
 */
import { Effect, Schema } from "effect"
import type { ToolInput, ToolOutput } from "../domain/tools.js"
import { GatewayConfig } from "../services/GatewayConfig.js"
import { ProviderClient } from "../services/ProviderClient.js"
import { type Answered, decodeUpstream, type ProviderEffect } from "./common.js"

export const PROVIDER = "itunes"

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

export const fetchSearch = (input: ToolInput<"mobile_app_search">) =>
  Effect.gen(function* () {
    const config = yield* GatewayConfig
    const client = yield* ProviderClient
    const url = new URL(`${config.providers.appstore}/search`)
    url.search = new URLSearchParams({
      term: input.query,
      country: (input.country ?? DEFAULT_COUNTRY).toLowerCase(),
      entity: "software",
      media: "software",
      limit: String(input.limit ?? DEFAULT_LIMIT)
    }).toString()
    return yield* client.json({ provider: PROVIDER, method: "GET", url: url.toString(), idempotent: true })
  })

export const normalize = (
  input: ToolInput<"mobile_app_search">,
  answer: typeof SearchAnswer.Type
): ToolOutput<"mobile_app_search"> => ({
  provider: PROVIDER,
  query: input.query,
  country: (input.country ?? DEFAULT_COUNTRY).toLowerCase(),
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
})

export const mobileAppSearch = (
  input: ToolInput<"mobile_app_search">
): ProviderEffect<Answered<ToolOutput<"mobile_app_search">>> =>
  Effect.gen(function* () {
    const body = yield* fetchSearch(input)
    const answer = yield* decodeUpstream(PROVIDER, SearchAnswer, "mobile_app_search")(body)
    return { provider: PROVIDER, output: normalize(input, answer) }
  })
