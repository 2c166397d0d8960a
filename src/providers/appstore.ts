/**
 * `mobile_app_search` on Apple's iTunes Search API (`GET /search?term=…&entity=software`). No key.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { ProviderRateLimited } from "../domain/errors.js"
import type { ToolInput, ToolOutput } from "../domain/tools.js"
import { ProvidersConfig } from "../config.js"
import { bodyText, type UpstreamResponse } from "../services/ProviderClient.js"
import { decodeUpstream, invalid, type ProviderTool, requestJson } from "./common.js"

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

export const DEFAULT_COUNTRY = "us"

const countryOf = (input: ToolInput<"mobile_app_search">) => (input.country ?? DEFAULT_COUNTRY).toLowerCase()

/**
 * The officially assigned ISO 3166-1 alpha-2 codes (the ISO 3166 Maintenance Agency's list, https://www.iso.org/
 * iso-3166-country-codes.html; 249 codes), lower-case as the iTunes Search API takes `country` ("The two-letter
 * country code for the store you want to search … ISO 3166-1 alpha-2", https://performance-partners.apple.com/
 * search-api). Every App Store storefront is one of them; a code outside it — a typo, `uk` (the United Kingdom is
 * `gb`), a reserved or user-assigned code such as `zz` — is refused before any request. Apple's own storefront list
 * (App Store Connect API `GET /v1/territories`, about 175) is smaller and changes; a code on this list that has no
 * storefront (Cuba's `cu`, Antarctica's `aq`, …) is refused by Apple itself, read below as the caller's error too.
 */
const ISO_3166_ALPHA_2: ReadonlyArray<string> =
  ("ad ae af ag ai al am ao aq ar as at au aw ax az ba bb bd be bf bg bh bi bj bl bm bn bo bq br bs bt bv bw by bz " +
    "ca cc cd cf cg ch ci ck cl cm cn co cr cu cv cw cx cy cz de dj dk dm do dz ec ee eg eh er es et fi fj fk fm fo fr " +
    "ga gb gd ge gf gg gh gi gl gm gn gp gq gr gs gt gu gw gy hk hm hn hr ht hu id ie il im in io iq ir is it je jm jo jp " +
    "ke kg kh ki km kn kp kr kw ky kz la lb lc li lk lr ls lt lu lv ly ma mc md me mf mg mh mk ml mm mn mo mp mq mr ms mt " +
    "mu mv mw mx my mz na nc ne nf ng ni nl no np nr nu nz om pa pe pf pg ph pk pl pm pn pr ps pt pw py qa re ro rs ru rw " +
    "sa sb sc sd se sg sh si sj sk sl sm sn so sr ss st sv sx sy sz tc td tf tg th tj tk tl tm tn to tr tt tv tw tz " +
    "ua ug um us uy uz va vc ve vg vi vn vu wf ws ye yt za zm zw").split(" ")

/**
 * The store countries taken: the ISO codes, and Kosovo's `xk` — not assigned by ISO (a user-assigned code, used for
 * Kosovo by the European Commission, SWIFT and others), but the App Store has operated there since 2020. If Apple
 * refuses it, the caller hears it from Apple's own 400, as for any code without a storefront.
 */
const STORE_COUNTRIES: ReadonlySet<string> = new Set([...ISO_3166_ALPHA_2, "xk"])

/**
 * The API's answer to a `country` it has no storefront for: HTTP 400 `{"errorMessage": "Invalid value(s) for key(s):
 * [country]", "queryParameters": {…}}` (the same shape as its other 400s, e.g. `[term]`).
 */
const ItunesInvalidCountry = Schema.parseJson(Schema.Struct({
  errorMessage: Schema.String.pipe(Schema.includes("[country]"))
}))

const isInvalidCountry = (response: UpstreamResponse) =>
  response.status === 400 && Option.isSome(Schema.decodeUnknownOption(ItunesInvalidCountry)(bodyText(response)))

const noStorefront = (country: string) =>
  invalid(`country: the App Store has no storefront for "${country}" (Apple refused it as a store country); ` +
    "give the two-letter code of a country where the App Store operates, e.g. us, gb, de")

const checkCountry = (input: ToolInput<"mobile_app_search">) => {
  const country = countryOf(input)
  return STORE_COUNTRIES.has(country)
    ? Effect.void
    : Effect.fail(invalid(
      `country: "${country}" is not an ISO 3166-1 alpha-2 country code (e.g. us, gb, de; the United Kingdom is gb, not uk)`
    ))
}

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

export const mobileAppSearch: ProviderTool<ToolInput<"mobile_app_search">, undefined, ToolOutput<"mobile_app_search">> = {
  check: checkCountry,
  fetch: (input) =>
    Effect.gen(function* () {
      yield* checkCountry(input)
      const config = yield* ProvidersConfig
      const url = new URL(`${config.endpoints.appstore.baseUrl}/search`)
      url.search = new URLSearchParams({
        term: input.query,
        country: countryOf(input),
        entity: "software",
        media: "software",
        limit: String(input.limit ?? DEFAULT_LIMIT)
      }).toString()
      const raw = yield* requestJson({
        provider: PROVIDER,
        method: "GET",
        url: url.toString(),
        idempotent: true,
        classify: itunesStatus,
        // its 400 for a store country it does not have is the caller's to fix, not a refusal of the gateway's request
        isAnswer: isInvalidCountry
      })
      return raw.status === 400 ? yield* noStorefront(countryOf(input)) : raw
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
