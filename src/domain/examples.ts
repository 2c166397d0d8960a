/**
 * One example input and answer per tool, for the API reference (OpenAPI `example`s) and docs/tools.md.
 */
import type { ToolInputEncoded, ToolName, ToolOutputEncoded } from "./tools.js"

export const inputExamples: { readonly [K in ToolName]: ToolInputEncoded<K> } = {
  search: { query: "effect typescript", max_results: 5 },
  read: { url: "https://example.com/article", max_chars: 20000 },
  weather: { q: "Berlin" },
  mobile_app_search: { query: "notes", country: "us", limit: 5 },
  alpha_search: { query: "latest research on retrieval", numResults: 5, type: "auto" },
  beta_read: { url: "https://example.com/doc", format: "markdown" },
  beta_search: { q: "effect typescript", num: 5, gl: "us" },
  gamma_scrape: { url: "https://example.com/page", formats: ["markdown"], onlyMainContent: true },
  gamma_search: { query: "effect typescript", limit: 5 },
  xi_movie: { id: 550, append_to_response: "videos" },
  delta_post: { text: "Hello from Tool Gateway", langs: ["en"] },
  delta_like: { uri: "at://did:plc:example/app.bsky.feed.post/3kabc", cid: "bafyreib2rxk3rh6kzwq" },
  epsilon_request: { path: "/v1/items", method: "GET", query: { page: 1 } },
  zeta_request: { path: "me", params: { fields: "id,name" } },
  eta_personal_bests: { mode: "time", mode2: "60" },
  theta_ratings: { type: "movies", page: 1, limit: 10 },
  iota_delete_service: { service_id: "srv-d04a7c5b" },
  kappa_delete_benefit: { benefit_id: "8fd1d9bc-3a66-4e3d-9b0a-2f0c5a3e2e11" },
  kappa_ingest_events: { events: [{ name: "api_call", external_customer_id: "customer-1", metadata: { tokens: 120 } }] },
  lambda_update_broadcast: { id: "559ac32e-9ef5-46fb-82a1-b76b840c0f7b", subject: "March news", preview_text: "Three things we shipped" },
  lambda_batch_emails: { emails: [{ from: "team@example.com", to: ["user@example.com"], subject: "Hello", text: "Hi!" }] },
  mu_database: { database_id: "d9824bdc-8445-4327-be8b-5b47500af6ce" },
  nu_account: {}
}

/** One example answer per tool (docs/tools.md shows the same ones; a test keeps them equal). */
export const outputExamples: { readonly [K in ToolName]: ToolOutputEncoded<K> } = {
  search: {
    provider: "alpha",
    query: "effect",
    results: [
      {
        title: "Exa result 0 for effect",
        url: "https://example.com/exa/0",
        snippet: "Text of result 0.",
        published_at: "2026-01-01T00:00:00.000Z"
      },
      {
        title: "Exa result 1 for effect",
        url: "https://example.com/exa/1",
        snippet: "Text of result 1.",
        published_at: "2026-01-02T00:00:00.000Z"
      }
    ]
  },
  read: {
    provider: "builtin",
    url: "https://example.com/article",
    title: "The Gateway Article",
    content: "## How gateways meter tools\n\nA gateway reserves credits **before** it calls a provider, and settles the real charge after. This paragraph is long enough for the extractor to treat it as the main content of the page, which matters because navigation and footers are not content.\n\nIdempotency keys make retries safe: the same key with the same input replays the first answer instead of calling the provider again. That is how a client that lost a response can retry without paying twice.\n\n-   Reserve\n-",
    chars: 500,
    truncated: true,
    artifact: null
  },
  weather: {
    provider: "open-meteo",
    location: {
      name: "Berlin",
      country: "Germany",
      latitude: 52.52437,
      longitude: 13.41053,
      timezone: "Europe/Berlin"
    },
    current: {
      time: "2026-11-22T10:00",
      temperature_c: 4.2,
      apparent_temperature_c: 1.1,
      relative_humidity_pct: 81,
      precipitation_mm: 0,
      wind_speed_kmh: 11.5,
      wind_direction_deg: 240,
      weather_code: 3,
      description: "Overcast"
    },
    daily: [
      {
        date: "2026-11-22",
        temperature_max_c: 6.1,
        temperature_min_c: 1.2,
        precipitation_mm: 0,
        weather_code: 3,
        description: "Overcast"
      },
      {
        date: "2026-11-23",
        temperature_max_c: 7,
        temperature_min_c: 2.9,
        precipitation_mm: 3.2,
        weather_code: 61,
        description: "Slight rain"
      },
      {
        date: "2026-11-24",
        temperature_max_c: 5.2,
        temperature_min_c: 1.1,
        precipitation_mm: 8.1,
        weather_code: 63,
        description: "Moderate rain"
      },
      {
        date: "2026-11-25",
        temperature_max_c: 4.8,
        temperature_min_c: -0.4,
        precipitation_mm: 0,
        weather_code: 2,
        description: "Partly cloudy"
      },
      {
        date: "2026-11-26",
        temperature_max_c: 3.9,
        temperature_min_c: -1.5,
        precipitation_mm: 0,
        weather_code: 0,
        description: "Clear sky"
      },
      {
        date: "2026-11-27",
        temperature_max_c: 1,
        temperature_min_c: -3,
        precipitation_mm: 1.4,
        weather_code: 71,
        description: "Slight snowfall"
      },
      {
        date: "2026-11-28",
        temperature_max_c: 2.2,
        temperature_min_c: -2.1,
        precipitation_mm: 0,
        weather_code: 45,
        description: "Fog"
      }
    ]
  },
  mobile_app_search: {
    provider: "itunes",
    query: "notes",
    country: "us",
    results: [
      {
        id: 1000,
        name: "notes App 0",
        developer: "Example Developer",
        bundle_id: "com.example.app0",
        url: "https://apps.apple.com/us/app/id1000",
        icon_url: "https://is1-ssl.mzstatic.com/image/512.png",
        price: 0,
        currency: "USD",
        rating: 4.5,
        rating_count: 1234,
        genres: ["Productivity", "Utilities"],
        version: "2.1.0",
        release_date: "2020-01-01T08:00:00Z",
        description: "An app."
      }
    ]
  },
  alpha_search: {
    provider: "alpha",
    request_id: "b5947044c4b78efa9552a7c89b306d95",
    search_type: "neural",
    results: [
      {
        id: "https://example.com/exa/0",
        url: "https://example.com/exa/0",
        title: "Exa result 0 for effect",
        published_date: "2026-01-01T00:00:00.000Z",
        author: null,
        score: 0.9,
        text: "Text of result 0.",
        highlights: null,
        summary: null
      },
      {
        id: "https://example.com/exa/1",
        url: "https://example.com/exa/1",
        title: "Exa result 1 for effect",
        published_date: "2026-01-02T00:00:00.000Z",
        author: null,
        score: 0.8,
        text: "Text of result 1.",
        highlights: null,
        summary: null
      },
      {
        id: "https://example.com/exa/2",
        url: "https://example.com/exa/2",
        title: "Exa result 2 for effect",
        published_date: "2026-01-03T00:00:00.000Z",
        author: null,
        score: 0.7,
        text: "Text of result 2.",
        highlights: null,
        summary: null
      }
    ]
  },
  beta_read: {
    provider: "beta",
    url: "https://example.com/doc",
    title: "Jina read",
    description: "",
    content: "Read by Jina\n\nContent of https://example.com/doc.",
    published_time: null,
    tokens: 42,
    artifact: null
  },
  beta_search: {
    provider: "beta",
    results: [
      {
        title: "Jina result 0 for effect",
        url: "https://example.com/jina/0",
        description: "Description 0",
        content: "Content of result 0.",
        date: "Jan 1, 2026"
      },
      {
        title: "Jina result 1 for effect",
        url: "https://example.com/jina/1",
        description: "Description 1",
        content: "Content of result 1.",
        date: "Jan 1, 2026"
      },
      {
        title: "Jina result 2 for effect",
        url: "https://example.com/jina/2",
        description: "Description 2",
        content: "Content of result 2.",
        date: "Jan 1, 2026"
      }
    ]
  },
  gamma_scrape: {
    provider: "gamma",
    url: "https://example.com/page",
    title: "Scraped page",
    status_code: 200,
    markdown: "# Scraped\n\nhttps://example.com/page",
    html: null,
    raw_html: null,
    links: null,
    screenshot: null,
    summary: null,
    json: null,
    change_tracking: null,
    actions: null,
    warning: null,
    metadata: { sourceURL: "https://example.com/page" }
  },
  gamma_search: {
    provider: "gamma",
    results: [
      {
        url: "https://example.com/fc/0",
        title: "Firecrawl 0",
        description: "About 0",
        markdown: null
      },
      {
        url: "https://example.com/fc/1",
        title: "Firecrawl 1",
        description: "About 1",
        markdown: null
      }
    ]
  },
  xi_movie: {
    provider: "xi",
    id: 550,
    title: "Fight Club",
    original_title: "Fight Club",
    overview: "A ticking-time-bomb insomniac and a slippery soap salesman channel primal male aggression...",
    tagline: "Mischief. Mayhem. Soap.",
    release_date: "1999-10-15",
    runtime: 139,
    genres: ["Drama"],
    vote_average: 8.433,
    vote_count: 26280,
    popularity: 61.416,
    imdb_id: "tt0137523",
    homepage: "http://www.foxmovies.com/movies/fight-club",
    status: "Released",
    poster_url: "https://image.tmdb.org/t/p/original/pB8BM7pdSp6B6Ih7QZ4DrQ3PmJK.jpg",
    backdrop_url: "https://image.tmdb.org/t/p/original/hZkgoQYus5vegHoetLkCJzb17zJ.jpg",
    appended: { videos: { results: [{ key: "SUXWAEX2jlg", site: "YouTube", type: "Trailer" }] } }
  },
  delta_post: {
    provider: "delta",
    uri: "at://did:plc:alice/app.bsky.feed.post/3kabc624410",
    cid: "bafyreib2rxk3rh6kzwq"
  },
  delta_like: {
    provider: "delta",
    uri: "at://did:plc:alice/app.bsky.feed.like/3kabc181823",
    cid: "bafyreib2rxk3rh6kzwq"
  },
  epsilon_request: {
    provider: "epsilon",
    status: 200,
    body: { method: "PUT", path: "/v2/items", query: { dry: "true" }, body: { name: "x" } }
  },
  zeta_request: {
    provider: "zeta",
    data: { id: "1234", name: "Alice", version: "v25.0", path: "me/accounts", fields: "id,name" }
  },
  eta_personal_bests: {
    provider: "eta",
    mode: "time",
    mode2: null,
    personal_bests: [
      {
        mode2: "60",
        wpm: 112.5,
        acc: 97.2,
        raw: 118,
        consistency: null,
        language: null,
        difficulty: null,
        punctuation: null,
        timestamp: 1700000000000
      }
    ]
  },
  theta_ratings: {
    provider: "theta",
    type: "all",
    page: 2,
    page_count: 3,
    item_count: 25,
    ratings: [
      {
        rated_at: "2026-01-01T00:00:00.000Z",
        rating: 9,
        type: "movie",
        title: "Inception",
        year: 2010,
        ids: { trakt: 16662 }
      }
    ]
  },
  iota_delete_service: { provider: "iota", deleted: true, service_id: "srv-123" },
  kappa_delete_benefit: { provider: "kappa", deleted: true, benefit_id: "ben-1" },
  kappa_ingest_events: { provider: "kappa", inserted: 1 },
  lambda_update_broadcast: { provider: "lambda", id: "bc-1" },
  lambda_batch_emails: { provider: "lambda", ids: ["email-0"] },
  mu_database: {
    provider: "mu",
    id: "d9824bdc",
    title: "Tasks",
    url: "https://www.notion.so/d9824bdc",
    created_time: "2026-01-05T09:30:00.000Z",
    last_edited_time: "2026-11-20T16:45:00.000Z",
    properties: [{ name: "Name", type: "title" }, { name: "Status", type: "status" }, { name: "Archived on", type: "date" }],
    data_sources: [
      { id: "d9824bdc-tasks", name: "Tasks", properties: [{ name: "Name", type: "title" }, { name: "Status", type: "status" }] },
      { id: "d9824bdc-archive", name: "Archive", properties: [{ name: "Name", type: "title" }, { name: "Archived on", type: "date" }] }
    ]
  },
  nu_account: {
    provider: "nu",
    id: 42,
    login: "alice",
    name: "Alice",
    email: null,
    avatar_url: null,
    html_url: null,
    public_repos: 7,
    followers: null,
    created_at: null
  }
}
