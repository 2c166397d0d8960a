/**
 * TMDB's v3 API: `GET /3/movie/{id}?append_to_response=…`, with a v4 read access token as a Bearer token
 * (or a v3 `api_key`), and TMDB's `{status_code, status_message, success}` errors.
 */
import { json, type RecordedRequest, type Reply, upstream } from "./harness.js"

/** A v4 read access token is a JWT. */
export const TMDB_TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJhdWQiOiJ0ZXN0In0.c2lnbmF0dXJl"

export const handleTmdb = (req: RecordedRequest): Reply => {
  if (req.headers["authorization"] !== `Bearer ${TMDB_TOKEN}`) {
    return json(401, { status_code: 7, status_message: "Invalid API key: You must be granted a valid key.", success: false })
  }
  const match = /^\/3\/movie\/(\d+)$/.exec(req.path)
  if (req.method !== "GET" || match === null) {
    return json(404, { status_code: 34, status_message: "The resource you requested could not be found.", success: false })
  }
  const id = Number(match[1])
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
