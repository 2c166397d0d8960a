/**
 * theta: Trakt API version 2 — `GET /users/me/ratings[/{type}]?page=&limit=` with the connection's OAuth token
 * as a Bearer token and, on every request, the headers Trakt requires
 * (https://github.com/trakt/trakt-api, projects/developer/src/lib/guides/required-headers.md; formerly
 * trakt.docs.apiary.io "Required Headers"): `Content-Type: application/json` (even on a GET: Trakt answers 412
 * "Precondition Failed - use application/json content type" without it), `trakt-api-key` (the app's client id),
 * `trakt-api-version: 2`, and a `User-Agent` (the provider client sends the gateway's).
 *
 * Trakt's statuses (guides/status-codes.md) mean what HTTP says — 401 OAuth missing or expired, 403 invalid API
 * key or unapproved app, 412/420/422/423/426 refusals, 429 its rate limit, 502–504 and 520–522 overloaded — so the
 * general rules of the provider client read them; nothing here reads them otherwise.
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { ProvidersConfig } from "../config.js"
import { type AccountTool, decodeUpstream, enc, JsonObject, NullableNumber, NullableString, requestJson } from "./common.js"

const TraktItem = Schema.Struct({ title: NullableString, year: NullableNumber, ids: Schema.optional(JsonObject) })
/**
 * A rated item: each of its four items may be absent or null (Trakt's own contract, trakt/trakt-api
 * projects/api/src/contracts/users/schema/response/ratedItemResponseSchema.ts, declares them `.nullish()`).
 */
const RatedItem = Schema.optional(Schema.NullOr(TraktItem))
const TraktRating = Schema.Struct({
  rated_at: Schema.String,
  rating: Schema.Number,
  type: Schema.String,
  movie: RatedItem,
  show: RatedItem,
  season: RatedItem,
  episode: RatedItem
})

const count = (header: string | undefined): number | null => {
  const n = Number(header ?? "NaN")
  return Number.isInteger(n) && n >= 0 ? n : null
}

export const thetaRatings: AccountTool<"theta_ratings", "theta"> = {
  fetch: (input, credentials) =>
    Effect.gen(function* () {
      const config = yield* ProvidersConfig
      const url = new URL(`${config.endpoints.theta.baseUrl}/users/me/ratings${input.type !== undefined ? `/${enc(input.type)}` : ""}`)
      if (input.page !== undefined) url.searchParams.set("page", String(input.page))
      if (input.limit !== undefined) url.searchParams.set("limit", String(input.limit))
      return yield* requestJson({
        provider: "theta",
        method: "GET",
        url: url.toString(),
        headers: {
          authorization: `Bearer ${credentials.access_token}`,
          "content-type": "application/json",
          "trakt-api-version": "2",
          "trakt-api-key": credentials.client_id
        },
        idempotent: true
      })
    }),
  normalize: (input, raw) =>
    Effect.map(decodeUpstream("theta", Schema.Array(TraktRating), "theta_ratings")(raw.body), (ratings) => ({
      provider: "theta",
      type: input.type ?? "all",
      page: input.page ?? 1,
      // Trakt paginates in headers
      page_count: count(raw.headers?.["x-pagination-page-count"]),
      item_count: count(raw.headers?.["x-pagination-item-count"]),
      ratings: ratings.map((r) => {
        const item = r.movie ?? r.episode ?? r.season ?? r.show
        // an episode or a season is named with its show ("Show: Episode"); a season often has no title
        const own = item?.title ?? null
        const show = (r.movie === undefined || r.movie === null) && item !== r.show ? r.show?.title ?? null : null
        return {
          rated_at: r.rated_at,
          rating: r.rating,
          type: r.type,
          title: show !== null && own !== null ? `${show}: ${own}` : own ?? show,
          year: item?.year ?? r.show?.year ?? null,
          ids: item?.ids ?? {}
        }
      })
    }))
}
