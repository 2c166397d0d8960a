/**
 * TMDB's API v3: `GET /3/movie/{id}?append_to_response=…` (https://developer.themoviedb.org/reference/movie-details)
 * and TMDB's `{status_code, status_message, success}` errors (https://developer.themoviedb.org/docs/errors).
 *
 * Application authentication, as https://developer.themoviedb.org/docs/authentication-application describes it:
 * either the API Read Access Token as `Authorization: Bearer`, or the v3 API key as the `api_key` query
 * parameter. A wrong one is a 401 with status_code 7.
 */
import { json, type RecordedRequest, type Reply, upstream } from "../../src/testing/harness.js"

/** A v4 read access token is a JWT. */
export const TMDB_TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJhdWQiOiJ0ZXN0In0.c2lnbmF0dXJl"
/** A v3 API key is 32 hex characters. */
export const TMDB_API_KEY = "0123456789abcdef0123456789abcdef"

/** A film whose details are mostly unknown to TMDB. */
export const UNKNOWN_FILM = 1_190_000

const invalidKey = json(401, { status_code: 7, status_message: "Invalid API key: You must be granted a valid key.", success: false })

export const handleTmdb = (req: RecordedRequest): Reply => {
  const bearer = req.headers["authorization"]
  const apiKey = req.query.get("api_key")
  // a key given is checked, whichever way it came
  if (bearer !== undefined && bearer !== `Bearer ${TMDB_TOKEN}`) return invalidKey
  if (apiKey !== null && apiKey !== TMDB_API_KEY) return invalidKey
  if (bearer === undefined && apiKey === null) return invalidKey
  const match = /^\/3\/movie\/(\d+)$/.exec(req.path)
  if (req.method !== "GET" || match === null) {
    return json(404, { status_code: 34, status_message: "The resource you requested could not be found.", success: false })
  }
  const id = Number(match[1])
  // a film TMDB knows little of: what it does not know is "" (or null), not absent
  if (id === UNKNOWN_FILM) {
    return json(200, {
      adult: false, backdrop_path: null, budget: 0, genres: [], homepage: "", id, imdb_id: null, original_language: "en",
      original_title: "Untitled Project", overview: "", popularity: 0.6, poster_path: null, release_date: "", revenue: 0,
      runtime: 0, status: "In Production", tagline: "", title: "Untitled Project", video: false, vote_average: 0, vote_count: 0
    })
  }
  if (id !== 550) return json(404, { status_code: 34, status_message: "The resource you requested could not be found.", success: false })
  const appended: Record<string, unknown> = {}
  for (const part of (req.query.get("append_to_response") ?? "").split(",").filter((p) => p.length > 0)) {
    if (part === "videos") appended["videos"] = { results: [{ key: "SUXWAEX2jlg", site: "YouTube", type: "Trailer" }] }
    if (part === "credits") appended["credits"] = { cast: [{ name: "Edward Norton" }], crew: [] }
  }
  return json(200, {
    adult: false,
    backdrop_path: "/hZkgoQYus5vegHoetLkCJzb17zJ.jpg",
    budget: 63000000,
    genres: [{ id: 18, name: "Drama" }],
    homepage: "http://www.foxmovies.com/movies/fight-club",
    id: 550,
    imdb_id: "tt0137523",
    original_language: "en",
    original_title: "Fight Club",
    overview: "A ticking-time-bomb insomniac and a slippery soap salesman channel primal male aggression...",
    popularity: 61.416,
    poster_path: "/pB8BM7pdSp6B6Ih7QZ4DrQ3PmJK.jpg",
    release_date: "1999-10-15",
    revenue: 100853753,
    runtime: 139,
    status: "Released",
    tagline: "Mischief. Mayhem. Soap.",
    title: "Fight Club",
    video: false,
    vote_average: 8.433,
    vote_count: 26280,
    ...appended
  })
}

export const tmdb = upstream(handleTmdb)
