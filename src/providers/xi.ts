/**
 * xi speaks TMDB's API v3: `GET /3/movie/{movie_id}?append_to_response=…`
 * (https://developer.themoviedb.org/reference/movie-details), authenticated as TMDB's application
 * authentication allows (https://developer.themoviedb.org/docs/authentication-application) with the operator's
 * key: an API Read Access Token (a JWT) as `Authorization: Bearer`, or a v3 API key as the `api_key` query
 * parameter — never both.
 *
 * TMDB's errors (https://developer.themoviedb.org/docs/errors) come with the HTTP status their meaning calls
 * for (401 code 7 invalid key and 10 suspended key, 404 code 34, 429 code 25, 503 codes 9 and 46): the general
 * rules of the provider client read them; nothing here reads them otherwise.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { ProviderNotConfigured } from "../domain/errors.js"
import type { ToolInput, ToolOutput } from "../domain/tools.js"
import { ProvidersConfig } from "../config.js"
import { decodeUpstream, JsonObject, NullableNumber, NullableString, type ProviderTool, requestJson } from "./common.js"

/** TMDB sends `""` for what it does not know (a release date, a homepage, a tagline): null, as for absent. */
const known = (value: string | null | undefined): string | null => (value === undefined || value === null || value === "" ? null : value)

export const PROVIDER = "xi"
const IMAGE_BASE = "https://image.tmdb.org/t/p/original"


export const MovieAnswer = Schema.Struct({
  id: Schema.Number,
  title: Schema.String,
  original_title: NullableString,
  overview: NullableString,
  tagline: NullableString,
  release_date: NullableString,
  runtime: NullableNumber,
  genres: Schema.optional(Schema.Array(Schema.Struct({ id: Schema.Number, name: Schema.String }))),
  vote_average: NullableNumber,
  vote_count: NullableNumber,
  popularity: NullableNumber,
  imdb_id: NullableString,
  homepage: NullableString,
  status: NullableString,
  poster_path: NullableString,
  backdrop_path: NullableString
}, JsonObject)

export const isConfigured = (config: typeof ProvidersConfig.Service) => Option.isSome(config.endpoints.xi.apiKey)

// A v4 read access token is a JWT; a v3 API key is 32 hex characters.
const isJwt = (key: string) => key.split(".").length === 3

export const xiMovie: ProviderTool<ToolInput<"xi_movie">, undefined, ToolOutput<"xi_movie">> = {
  configured: isConfigured,
  fetch: (input) =>
    Effect.gen(function* () {
      const config = yield* ProvidersConfig
      const endpoint = config.endpoints.xi
      if (Option.isNone(endpoint.apiKey)) {
        return yield* new ProviderNotConfigured({ message: "xi is not configured on this gateway (XI_API_KEY)." })
      }
      const key = Redacted.value(endpoint.apiKey.value)
      const url = new URL(`${endpoint.baseUrl}/3/movie/${input.id}`)
      if (input.append_to_response !== undefined) url.searchParams.set("append_to_response", input.append_to_response)
      if (!isJwt(key)) url.searchParams.set("api_key", key)
      return yield* requestJson({
        provider: PROVIDER,
        method: "GET",
        url: url.toString(),
        headers: isJwt(key) ? { authorization: `Bearer ${key}` } : {},
        idempotent: true
      })
    }),
  normalize: (input, raw) =>
    Effect.map(decodeUpstream(PROVIDER, MovieAnswer, "xi_movie")(raw.body), (m) => {
      const appended = Object.fromEntries(
        (input.append_to_response ?? "").split(",").map((s) => s.trim()).filter((k) => Object.hasOwn(m, k)).map((k) => [k, m[k]])
      )
      return {
        provider: PROVIDER,
        id: m.id,
        title: m.title,
        original_title: m.original_title ?? null,
        overview: known(m.overview),
        tagline: known(m.tagline),
        release_date: known(m.release_date),
        runtime: m.runtime ?? null,
        genres: (m.genres ?? []).map((g) => g.name),
        vote_average: m.vote_average ?? null,
        vote_count: m.vote_count ?? null,
        popularity: m.popularity ?? null,
        imdb_id: known(m.imdb_id),
        homepage: known(m.homepage),
        status: m.status ?? null,
        poster_url: m.poster_path ? `${IMAGE_BASE}${m.poster_path}` : null,
        backdrop_url: m.backdrop_path ? `${IMAGE_BASE}${m.backdrop_path}` : null,
        appended
      }
    })
}
