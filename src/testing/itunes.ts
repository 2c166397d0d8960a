/**
 * Apple's iTunes Search API: `GET /search?term=…&entity=software&country=…&limit=…`, answered as
 * `{resultCount, results}` with `text/javascript` in the real service. Written from Apple's docs:
 * https://performance-partners.apple.com/search-api (formerly developer.apple.com/library/archive/
 * documentation/AudioVideo/Conceptual/iTuneSearchAPI/).
 *
 * Apple documents a limit of about 20 calls a minute and no status for going over it; the service answers such a
 * call 403 with an empty body (facundoolano/app-store-scraper issue #194, Vinelab/iTunes issue #5). `ITUNES_THROTTLED`
 * is that answer, as a fault: `itunes.fault(ITUNES_THROTTLED)`.
 *
 * `country` is "the two-letter country code for the store you want to search" (the docs' parameter table); a code
 * the service has no storefront for is answered 400 `{"errorMessage": "Invalid value(s) for key(s): [country]",
 * "queryParameters": {…}}`, as it answers a missing `term` with `[term]`. Apple publishes its storefronts as the App
 * Store Connect API's territories (`GET /v1/territories`) rather than as a list for this API; the stand-in knows
 * the codes it is asked about here that have none: ISO 3166-1 codes where the App Store does not operate (Cuba,
 * North Korea, Iran, Syria, Antarctica) and codes that are no country's (`uk` — the United Kingdom's storefront is
 * `gb` —, `zz`, `eu`).
 */
import { type Fault, json, type RecordedRequest, type Reply, upstream } from "./harness.js"

/** The `i`th app the fake finds for `term` (named `<term> App <i>`). */
export const app = (i: number, term: string) => ({
  wrapperType: "software",
  kind: "software",
  trackId: 1000 + i,
  trackName: `${term} App ${i}`,
  artistName: "Example Developer",
  bundleId: `com.example.app${i}`,
  trackViewUrl: `https://apps.apple.com/us/app/id${1000 + i}`,
  artworkUrl60: "https://is1-ssl.mzstatic.com/image/60.png",
  artworkUrl100: "https://is1-ssl.mzstatic.com/image/100.png",
  artworkUrl512: "https://is1-ssl.mzstatic.com/image/512.png",
  price: i % 2 === 0 ? 0 : 2.99,
  formattedPrice: i % 2 === 0 ? "Free" : "$2.99",
  currency: "USD",
  averageUserRating: 4.5,
  userRatingCount: 1234,
  genres: ["Productivity", "Utilities"],
  version: "2.1.0",
  releaseDate: "2020-01-01T08:00:00Z",
  description: "An app."
})

/** Codes the stand-in has no storefront for (see the module comment). */
export const NO_STOREFRONT: ReadonlySet<string> = new Set(["cu", "kp", "ir", "sy", "aq", "uk", "zz", "eu"])

/** The API's 400: which keys were wrong, and what its parameters are. */
const invalidValues = (key: string): Reply =>
  json(400, {
    errorMessage: `Invalid value(s) for key(s): [${key}]`,
    queryParameters: {
      output: "json",
      callback: "A javascript function to handle your search results",
      country: "ISO-2A country code",
      limit: "The number of search results to return",
      term: "A search string",
      lang: "ISO-2A language code"
    }
  })

/** The iTunes Search API's answer to a caller over its rate limit: 403, and nothing in the body. */
export const ITUNES_THROTTLED: Fault = { status: 403, text: "" }

export const handleItunes = (req: RecordedRequest): Reply => {
  if (req.method !== "GET" || req.path !== "/search") return json(404, { errorMessage: "Not Found" })
  const term = req.query.get("term")
  if (term === null || term === "") return invalidValues("term")
  const country = (req.query.get("country") ?? "us").toLowerCase()
  if (!/^[a-z]{2}$/.test(country) || NO_STOREFRONT.has(country)) return invalidValues("country")
  if (req.query.get("entity") !== "software") return json(400, { errorMessage: "entity must be software here" })
  const limit = Number(req.query.get("limit") ?? "50")
  const results = Array.from({ length: Math.min(limit, 3) }, (_, i) => app(i, term))
  return { status: 200, body: { resultCount: results.length, results }, headers: { "content-type": "text/javascript; charset=utf-8" } }
}

/** The fake iTunes Search API for the life of the scope. */
export const itunes = upstream(handleItunes)
