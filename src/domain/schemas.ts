/**
 * Input and output schemas of every tool. Inputs follow the API contract's tables exactly:
 * required fields, integer ranges, and extra properties only where the contract allows them.
 */
import { Schema } from "effect"

import { HttpUrl, intBetween, JsonObject, NonEmpty, numberBetween, open, opt, strict } from "./schema-helpers.js"

// -- curated tools ------------------------------------------------------------------------------------

export const SearchInput = strict({
  query: NonEmpty.annotations({ description: "What to search for" }),
  max_results: opt(
    intBetween(1, 100).annotations({ description: "1 to 100; default 10" })
  )
}, "SearchInput", "Web search across the configured search providers")

export const ReadInput = strict({
  url: HttpUrl.annotations({ description: "The page to read (http or https)" }),
  max_chars: opt(
    intBetween(500, 500000).annotations({
      description: "Largest number of characters of content to return, 500 to 500000; default 100000"
    })
  )
}, "ReadInput", "Fetch a page and return its main content as markdown")

export const WeatherInput = strict({
  q: opt(NonEmpty.annotations({ description: "A place name, e.g. \"Berlin\"" })),
  lat: opt(numberBetween(-90, 90).annotations({ description: "Latitude" })),
  lon: opt(numberBetween(-180, 180).annotations({ description: "Longitude" }))
}, "WeatherInput", "Current weather and a 7-day forecast for a place name or coordinates").pipe(
  Schema.filter((w) =>
    w.q !== undefined || (w.lat !== undefined && w.lon !== undefined)
      ? undefined
      : "give either q, or both lat and lon"
  )
)

export const MobileAppSearchInput = strict({
  query: NonEmpty.annotations({ description: "App name or keywords" }),
  country: opt(
    Schema.String.pipe(Schema.pattern(/^[A-Za-z]{2}$/, { message: () => "must be a two-letter country code" }))
      .annotations({ description: "Two-letter store country code; default us" })
  ),
  limit: opt(intBetween(1, 50).annotations({ description: "1 to 50; default 10" }))
}, "MobileAppSearchInput", "Search the App Store")

// -- provider tools that need no connection ----------------------------------------------------------

export const AlphaSearchInput = open({
  query: NonEmpty,
  numResults: opt(Schema.Int),
  type: opt(Schema.String)
}, "AlphaSearchInput", "Alpha search; extra properties are forwarded to the provider")

export const BetaReadInput = strict({
  url: HttpUrl,
  format: opt(Schema.String)
}, "BetaReadInput", "Beta reader")

export const BetaSearchInput = open({
  q: NonEmpty,
  page: opt(Schema.Int),
  num: opt(Schema.Int),
  gl: opt(Schema.String),
  hl: opt(Schema.String),
  location: opt(Schema.String),
  site: opt(Schema.Union(Schema.String, Schema.Array(Schema.String))),
  type: opt(Schema.String),
  filetype: opt(Schema.String),
  intitle: opt(Schema.String),
  loc: opt(Schema.String),
  ext: opt(Schema.String),
  nfpr: opt(Schema.Boolean)
}, "BetaSearchInput", "Beta search; extra properties are forwarded to the provider")

export const GammaScrapeInput = open({
  url: HttpUrl,
  formats: opt(Schema.Array(Schema.String)),
  onlyMainContent: opt(Schema.Boolean)
}, "GammaScrapeInput", "Gamma scrape; extra properties are forwarded to the provider")

export const GammaSearchInput = open({
  query: NonEmpty,
  limit: opt(Schema.Int)
}, "GammaSearchInput", "Gamma search; extra properties are forwarded to the provider")

export const XiMovieInput = strict({
  id: Schema.Int.pipe(Schema.positive({ message: () => "must be a positive integer" })).annotations({ description: "The movie id (required by the provider)" }),
  append_to_response: opt(Schema.String)
}, "XiMovieInput", "Xi movie details")

// -- account tools (connection required) -------------------------------------------------------------

export const DeltaPostInput = strict({
  text: Schema.String,
  langs: opt(Schema.Array(Schema.String)),
  facets: opt(Schema.Array(JsonObject)),
  embed: opt(JsonObject),
  created_at: opt(Schema.String),
  record: opt(JsonObject)
}, "DeltaPostInput", "Publish a post on the connected delta account")

export const DeltaLikeInput = strict({
  uri: NonEmpty,
  cid: NonEmpty
}, "DeltaLikeInput", "Like a post on the connected delta account")

export const EpsilonRequestInput = strict({
  path: NonEmpty,
  method: opt(Schema.Literal("GET", "POST", "PUT", "PATCH", "DELETE")),
  query: opt(JsonObject),
  body: opt(JsonObject)
}, "EpsilonRequestInput", "A request to the connected epsilon REST API")

export const ZetaRequestInput = strict({
  path: NonEmpty,
  params: opt(JsonObject),
  version: opt(Schema.String)
}, "ZetaRequestInput", "A versioned read from the connected zeta Graph API")

export const EtaPersonalBestsInput = strict({
  mode: NonEmpty,
  mode2: opt(Schema.String)
}, "EtaPersonalBestsInput", "Personal bests of the connected eta account")

export const ThetaRatingsInput = strict({
  type: opt(Schema.String),
  page: opt(Schema.Int.pipe(Schema.positive({ message: () => "must be a positive integer" }))),
  limit: opt(Schema.Int.pipe(Schema.positive({ message: () => "must be a positive integer" })))
}, "ThetaRatingsInput", "Ratings of the connected theta account")

export const IotaDeleteServiceInput = strict({
  service_id: NonEmpty
}, "IotaDeleteServiceInput", "Delete a service on the connected iota account")

export const KappaDeleteBenefitInput = strict({
  benefit_id: NonEmpty
}, "KappaDeleteBenefitInput", "Delete a benefit on the connected kappa account")

export const KappaIngestEventsInput = strict({
  events: Schema.Array(JsonObject).pipe(Schema.minItems(1))
}, "KappaIngestEventsInput", "Ingest events into the connected kappa account")

export const LambdaUpdateBroadcastInput = strict({
  id: NonEmpty
}, "LambdaUpdateBroadcastInput", "Update a broadcast on the connected lambda account")

export const LambdaBatchEmailsInput = JsonObject.annotations({
  identifier: "LambdaBatchEmailsInput",
  description: "Any JSON object, forwarded to the connected lambda account"
})

export const MuDatabaseInput = strict({
  database_id: NonEmpty
}, "MuDatabaseInput", "Read a database of the connected mu workspace")

export const NuAccountInput = Schema.Record({
  key: Schema.String,
  value: Schema.Never.annotations({ message: () => "is unexpected: nu_account takes an empty object" })
}).annotations({ identifier: "NuAccountInput", description: "The connected nu account; takes an empty object" })

// -- outputs ------------------------------------------------------------------------------------------

/** A file in an answer, kept byte for byte: fetch it with `GET /v1/artifacts/{id}` (same org's key). */
export const ArtifactRef = Schema.Struct({
  id: Schema.String,
  content_type: Schema.String,
  bytes: Schema.Int,
  sha256: Schema.String.annotations({ description: "Hex SHA-256 of the bytes (also the ETag)" }),
  url: Schema.String.annotations({ description: "Where to fetch it: /v1/artifacts/{id}, absolute with PUBLIC_URL" })
}).annotations({ identifier: "Artifact" })

export const SearchResult = Schema.Struct({
  title: Schema.String,
  url: Schema.String,
  snippet: Schema.String,
  published_at: Schema.NullOr(Schema.String)
}).annotations({ identifier: "SearchResult" })

export const SearchOutput = Schema.Struct({
  provider: Schema.String.annotations({ description: "The provider that answered" }),
  query: Schema.String,
  results: Schema.Array(SearchResult)
}).annotations({ identifier: "SearchOutput" })

export const ReadOutput = Schema.Struct({
  provider: Schema.String.annotations({ description: "builtin, beta or gamma" }),
  url: Schema.String.annotations({ description: "The final URL, after redirects" }),
  title: Schema.NullOr(Schema.String),
  content: Schema.String.annotations({ description: "The main content, as markdown" }),
  chars: Schema.Int.annotations({ description: "Characters in content" }),
  truncated: Schema.Boolean.annotations({ description: "Whether content was cut at max_chars" }),
  artifact: Schema.NullOr(ArtifactRef).annotations({
    description: "When the URL is a file (a PDF, an image): the file, kept byte for byte; content is then empty"
  })
}).annotations({ identifier: "ReadOutput" })

export const WeatherCurrent = Schema.Struct({
  time: Schema.String,
  temperature_c: Schema.Number,
  apparent_temperature_c: Schema.NullOr(Schema.Number),
  relative_humidity_pct: Schema.NullOr(Schema.Number),
  precipitation_mm: Schema.NullOr(Schema.Number),
  wind_speed_kmh: Schema.NullOr(Schema.Number),
  wind_direction_deg: Schema.NullOr(Schema.Number),
  weather_code: Schema.Int,
  description: Schema.String
}).annotations({ identifier: "WeatherCurrent" })

export const WeatherDay = Schema.Struct({
  date: Schema.String,
  temperature_max_c: Schema.NullOr(Schema.Number),
  temperature_min_c: Schema.NullOr(Schema.Number),
  precipitation_mm: Schema.NullOr(Schema.Number),
  weather_code: Schema.NullOr(Schema.Int),
  description: Schema.String
}).annotations({ identifier: "WeatherDay" })

export const WeatherOutput = Schema.Struct({
  provider: Schema.String,
  location: Schema.Struct({
    name: Schema.NullOr(Schema.String),
    country: Schema.NullOr(Schema.String),
    latitude: Schema.Number,
    longitude: Schema.Number,
    timezone: Schema.String
  }),
  current: WeatherCurrent,
  daily: Schema.Array(WeatherDay)
}).annotations({ identifier: "WeatherOutput" })

export const MobileApp = Schema.Struct({
  id: Schema.Number,
  name: Schema.String,
  developer: Schema.String,
  bundle_id: Schema.NullOr(Schema.String),
  url: Schema.NullOr(Schema.String),
  icon_url: Schema.NullOr(Schema.String),
  price: Schema.NullOr(Schema.Number),
  currency: Schema.NullOr(Schema.String),
  rating: Schema.NullOr(Schema.Number),
  rating_count: Schema.NullOr(Schema.Number),
  genres: Schema.Array(Schema.String),
  version: Schema.NullOr(Schema.String),
  release_date: Schema.NullOr(Schema.String),
  description: Schema.NullOr(Schema.String)
}).annotations({ identifier: "MobileApp" })

export const MobileAppSearchOutput = Schema.Struct({
  provider: Schema.String,
  query: Schema.String,
  country: Schema.String,
  results: Schema.Array(MobileApp)
}).annotations({ identifier: "MobileAppSearchOutput" })

// -- provider tools' outputs ----------------------------------------------------------------------------

const Str = Schema.NullOr(Schema.String)
const Num = Schema.NullOr(Schema.Number)
const provider = Schema.String.annotations({ description: "The provider that answered" })

export const AlphaSearchOutput = Schema.Struct({
  provider,
  request_id: Str,
  search_type: Str,
  results: Schema.Array(Schema.Struct({
    id: Schema.String,
    url: Schema.String,
    title: Str,
    published_date: Str,
    author: Str,
    score: Num,
    text: Str,
    highlights: Schema.NullOr(Schema.Array(Schema.String)),
    summary: Str
  }))
}).annotations({ identifier: "AlphaSearchOutput" })

export const BetaReadOutput = Schema.Struct({
  provider,
  url: Schema.String,
  title: Str,
  description: Str,
  content: Schema.String,
  published_time: Str,
  tokens: Num,
  artifact: Schema.NullOr(ArtifactRef).annotations({ description: "The screenshot or pageshot, for those formats" })
}).annotations({ identifier: "BetaReadOutput" })

export const BetaSearchOutput = Schema.Struct({
  provider,
  results: Schema.Array(Schema.Struct({ title: Str, url: Schema.String, description: Str, content: Str, date: Str }))
}).annotations({ identifier: "BetaSearchOutput" })

export const GammaScrapeOutput = Schema.Struct({
  provider,
  url: Schema.String,
  title: Str,
  status_code: Num,
  markdown: Str,
  html: Str,
  raw_html: Str,
  links: Schema.NullOr(Schema.Array(Schema.String)),
  screenshot: Schema.NullOr(ArtifactRef).annotations({ description: "The page screenshot, kept byte for byte" }),
  metadata: JsonObject
}).annotations({ identifier: "GammaScrapeOutput" })

export const GammaSearchOutput = Schema.Struct({
  provider,
  results: Schema.Array(Schema.Struct({ url: Schema.String, title: Str, description: Str, markdown: Str }))
}).annotations({ identifier: "GammaSearchOutput" })

export const XiMovieOutput = Schema.Struct({
  provider,
  id: Schema.Number,
  title: Schema.String,
  original_title: Str,
  overview: Str,
  tagline: Str,
  release_date: Str,
  runtime: Num,
  genres: Schema.Array(Schema.String),
  vote_average: Num,
  vote_count: Num,
  popularity: Num,
  imdb_id: Str,
  homepage: Str,
  status: Str,
  poster_url: Str,
  backdrop_url: Str,
  appended: JsonObject.annotations({ description: "The parts asked for with append_to_response, as the provider sent them" })
}).annotations({ identifier: "XiMovieOutput" })

export const RecordOutput = Schema.Struct({ provider, uri: Schema.String, cid: Schema.String }).annotations({
  identifier: "RecordOutput",
  description: "The record created in the account's repository"
})

export const EpsilonRequestOutput = Schema.Struct({
  provider,
  status: Schema.Int,
  body: Schema.Unknown.annotations({ description: "The API's answer: JSON when it answered JSON, else text" })
}).annotations({ identifier: "EpsilonRequestOutput" })

export const ZetaRequestOutput = Schema.Struct({ provider, data: JsonObject }).annotations({ identifier: "ZetaRequestOutput" })

export const EtaPersonalBestsOutput = Schema.Struct({
  provider,
  mode: Schema.String,
  mode2: Str,
  personal_bests: Schema.Array(Schema.Struct({
    mode2: Schema.String,
    wpm: Schema.Number,
    acc: Num,
    raw: Num,
    consistency: Num,
    language: Str,
    difficulty: Str,
    punctuation: Schema.NullOr(Schema.Boolean),
    timestamp: Num
  }))
}).annotations({ identifier: "EtaPersonalBestsOutput" })

export const ThetaRatingsOutput = Schema.Struct({
  provider,
  type: Schema.String,
  page: Schema.Int,
  page_count: Schema.NullOr(Schema.Int).annotations({ description: "Pages in all (Trakt's X-Pagination-Page-Count)" }),
  item_count: Schema.NullOr(Schema.Int).annotations({ description: "Ratings in all (Trakt's X-Pagination-Item-Count)" }),
  ratings: Schema.Array(Schema.Struct({
    rated_at: Schema.String,
    rating: Schema.Number,
    type: Schema.String,
    title: Str,
    year: Num,
    ids: JsonObject
  }))
}).annotations({ identifier: "ThetaRatingsOutput" })

export const IotaDeleteServiceOutput = Schema.Struct({ provider, deleted: Schema.Literal(true), service_id: Schema.String })
  .annotations({ identifier: "IotaDeleteServiceOutput" })
export const KappaDeleteBenefitOutput = Schema.Struct({ provider, deleted: Schema.Literal(true), benefit_id: Schema.String })
  .annotations({ identifier: "KappaDeleteBenefitOutput" })
export const KappaIngestEventsOutput = Schema.Struct({ provider, inserted: Schema.Int })
  .annotations({ identifier: "KappaIngestEventsOutput" })
export const LambdaUpdateBroadcastOutput = Schema.Struct({ provider, id: Schema.String })
  .annotations({ identifier: "LambdaUpdateBroadcastOutput" })
export const LambdaBatchEmailsOutput = Schema.Struct({ provider, ids: Schema.Array(Schema.String) })
  .annotations({ identifier: "LambdaBatchEmailsOutput" })

export const MuDatabaseOutput = Schema.Struct({
  provider,
  id: Schema.String,
  title: Schema.String,
  url: Str,
  created_time: Str,
  last_edited_time: Str,
  properties: Schema.Array(Schema.Struct({ name: Schema.String, type: Schema.String }))
}).annotations({ identifier: "MuDatabaseOutput" })

export const NuAccountOutput = Schema.Struct({
  provider,
  id: Schema.Number,
  login: Schema.String,
  name: Str,
  email: Str,
  avatar_url: Str,
  html_url: Str,
  public_repos: Num,
  followers: Num,
  created_at: Str
}).annotations({ identifier: "NuAccountOutput" })

// -- POST /v1/run and GET /v1/tools ---------------------------------------------------------------------

export const RunRequest = strict({
  tool: Schema.String.annotations({ description: "The tool whose provider to call" }),
  input: JsonObject.annotations({ description: "The tool's input, validated against its schema" })
}, "RunRequest", "Call a tool's provider and answer its raw, unnormalized answer")

export const RunOutput = Schema.Struct({
  tool: Schema.String,
  provider: Schema.String,
  status: Schema.Int.annotations({ description: "The upstream's HTTP status" }),
  body: Schema.Unknown.annotations({ description: "The upstream's answer as it sent it (JSON, or text)" }),
  artifacts: Schema.optional(Schema.Record({ key: Schema.String, value: ArtifactRef })).annotations({
    description: "Files the call kept (a screenshot, say), by name; present only when there are some"
  })
}).annotations({ identifier: "RunOutput" })
