/**
 * Input and output schemas of every tool. Inputs follow the API contract's tables exactly:
 * required fields, integer ranges, and extra properties only where the contract allows them.
 */
import * as Schema from "effect/Schema"

import { HttpUrl, intBetween, JsonObject, NonEmpty, numberBetween, open, opt, PathSegment, refusedAs, refusedAsOneOf, strict } from "./schema-helpers.js"

/**
 * A JSON Schema that requires these properties (for a published rule across fields). Each is named under `properties`
 * too, as anything (the struct beside it says what each is), so that readers of the document find them defined.
 */
const requiring = (...names: ReadonlyArray<string>) => ({
  required: names,
  properties: Object.fromEntries(names.map((name) => [name, {}]))
})

// -- curated tools ------------------------------------------------------------------------------------

export const SearchInput = strict({
  query: NonEmpty.annotations({ description: "What to search for" }),
  max_results: opt(
    intBetween(1, 100).annotations({ description: "Results to return, 1 to 100; default 10. Priced per 10 results" })
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
  q: opt(NonEmpty.annotations({ description: "A place name, e.g. \"Berlin\" (or give lat and lon)" })),
  lat: opt(numberBetween(-90, 90).annotations({ description: "Latitude, -90 to 90 (give lat and lon instead of q)" })),
  lon: opt(numberBetween(-180, 180).annotations({ description: "Longitude, -180 to 180 (give lat and lon instead of q)" }))
}, "WeatherInput", "Current weather and a 7-day forecast for a place name or coordinates").pipe(
  Schema.filter((w) =>
    w.q !== undefined || (w.lat !== undefined && w.lon !== undefined)
      ? undefined
      : "give either q, or both lat and lon", {
    // published: every field is optional on its own, but not all together (under allOf: an anyOf of its own would
    // replace the struct's schema instead of adding to it)
    jsonSchema: { allOf: [{ anyOf: [requiring("q"), requiring("lat", "lon")] }] }
  })
  // named here too, so that the named schema carries the rule (not only the places that use it)
).annotations({ identifier: "WeatherInput" })

export const MobileAppSearchInput = strict({
  query: NonEmpty.annotations({ description: "App name or keywords" }),
  country: opt(
    Schema.String.pipe(Schema.pattern(/^[A-Za-z]{2}$/, { message: () => "must be a two-letter country code" }))
      .annotations({ description: "The App Store's country, its ISO 3166-1 alpha-2 code (gb for the United Kingdom, not uk); default us" })
  ),
  limit: opt(intBetween(1, 50).annotations({ description: "Apps to return, 1 to 50; default 10" }))
}, "MobileAppSearchInput", "Search the App Store")

// -- provider tools that need no connection ----------------------------------------------------------

export const AlphaSearchInput = open({
  query: NonEmpty.annotations({ description: "What to search for, in natural language or keywords" }),
  numResults: opt(intBetween(1, 1000).annotations({ description: "Results to return (Exa's numResults), 1 to 1000; default 10. Priced per 10 results" })),
  type: opt(Schema.String.annotations({ description: "Exa's search type, e.g. \"auto\" (Exa's default), \"neural\", \"fast\" or \"deep\"" })),
  // Exa answers `stream: true` with an event stream (exa-labs/exa-js src/index.ts, whose own `search` refuses it too),
  // which the gateway cannot read: refused here, before a credit is held or Exa charges for it
  stream: opt(Schema.Literal(false).annotations({
    description: "Only false: Exa's streamed answer (true) is not offered here",
    message: () => "must be false or absent: Exa's streamed answer (stream: true) is not offered here"
  }))
}, "AlphaSearchInput", "Exa search: Exa's request body; extra properties (contents, includeDomains, startPublishedDate, …) are forwarded to Exa")

export const BetaReadInput = strict({
  url: HttpUrl.annotations({ description: "The page to read (http or https)" }),
  // sent as a header: a word, so that a line break or a letter outside ASCII is the caller's 400, not the
  // HTTP client's refusal on every try
  format: opt(Schema.String.pipe(
    Schema.pattern(/^[A-Za-z0-9_-]{1,32}$/, { message: () => "must be a format name (letters, digits, - or _), e.g. markdown" })
  ).annotations({
    description: "What to return (Jina's X-Return-Format): markdown (default), html, text, screenshot or pageshot (an image, kept as a file)"
  }))
}, "BetaReadInput", "Jina Reader: a page in the format asked for")

export const BetaSearchInput = open({
  q: NonEmpty.annotations({ description: "What to search for" }),
  page: opt(Schema.Int.pipe(Schema.positive({ message: () => "must be a positive integer" })).annotations({ description: "Page of results, from 1; default 1" })),
  num: opt(intBetween(0, 20).annotations({ description: "Results per answer, 0 to 20 (the provider refuses more); default 10" })),
  gl: opt(Schema.String.annotations({ description: "Country to search from, a two-letter code, e.g. \"us\"" })),
  hl: opt(Schema.String.annotations({ description: "Language of the results, a language code, e.g. \"en\"" })),
  location: opt(Schema.String.annotations({ description: "Where the search comes from, e.g. \"Berlin, Germany\"" })),
  site: opt(Schema.Union(Schema.String, Schema.Array(Schema.String)).annotations({
    description: "Only results from this site or these sites, e.g. \"jina.ai\""
  })),
  type: opt(Schema.String.annotations({ description: "web (default), images or news" })),
  filetype: opt(Schema.String.annotations({ description: "Search operator filetype: only files of this type, e.g. \"pdf\"" })),
  intitle: opt(Schema.String.annotations({ description: "Search operator intitle: words the result's title must contain" })),
  loc: opt(Schema.String.annotations({ description: "Search operator loc: results about this location" })),
  ext: opt(Schema.String.annotations({ description: "Search operator ext: only files with this extension" })),
  nfpr: opt(Schema.Boolean.annotations({ description: "true: search the query exactly as written, without spelling correction" }))
}, "BetaSearchInput", "Jina Search: its request body; extra properties are forwarded to Jina")

export const GammaScrapeInput = open({
  url: HttpUrl.annotations({ description: "The page to scrape (http or https)" }),
  formats: opt(Schema.Array(Schema.String).annotations({
    ...refusedAs("an array of format names"),
    description: "Firecrawl v2 formats: markdown (default), html, rawHtml, links, summary, json, changeTracking, screenshot (kept as a file)"
  })),
  onlyMainContent: opt(Schema.Boolean.annotations({ description: "Only the page's main content, without headers, navigation and footers (Firecrawl's default: true)" }))
}, "GammaScrapeInput", "Firecrawl scrape: its request body; extra properties (waitFor, actions, location, …) are forwarded to Firecrawl")

export const GammaSearchInput = open({
  query: NonEmpty.annotations({ description: "What to search for" }),
  // Firecrawl's search reference: limit's required range is 1 to 100 (https://docs.firecrawl.dev/api-reference/endpoint/search)
  limit: opt(intBetween(1, 100).annotations({ description: "Results to return, 1 to 100 (Firecrawl refuses others); default 5. Priced per 10 results" }))
}, "GammaSearchInput", "Firecrawl search: its request body; extra properties (sources, tbs, scrapeOptions, …) are forwarded to Firecrawl")

export const XiMovieInput = strict({
  id: Schema.Int.pipe(Schema.positive({ message: () => "must be a positive integer" })).annotations({ description: "The movie's TMDB id, e.g. 550" }),
  append_to_response: opt(Schema.String.annotations({
    description: "Further parts to include, comma-separated, e.g. \"credits,videos,images\"; answered under appended"
  }))
}, "XiMovieInput", "TMDB movie details by TMDB movie id")

// -- account tools (connection required) -------------------------------------------------------------

/**
 * Whether a post's text is within Bluesky's limits: 300 graphemes (what a reader counts as characters: an emoji with
 * its modifiers is one) and 3000 bytes of UTF-8. The cheap checks first, and the graphemes counted only up to the
 * limit: a text of a megabyte is refused without being segmented whole.
 */
const GRAPHEMES = new Intl.Segmenter("en", { granularity: "grapheme" })
const UTF8 = new TextEncoder()
const withinPostLimits = (text: string): boolean => {
  // every UTF-16 unit is at least a byte of UTF-8
  if (text.length > 3000 || UTF8.encode(text).length > 3000) return false
  const segments = GRAPHEMES.segment(text)[Symbol.iterator]()
  for (let count = 0; !segments.next().done; count++) if (count >= 300) return false
  return true
}

/**
 * atproto's `datetime` (https://atproto.com/specs/lexicon#datetime; bluesky-social/atproto's
 * packages/syntax/src/datetime.ts `ensureValidDatetime`, which a PDS runs on a record's `createdAt` and refuses as
 * `InvalidRecord`): RFC 3339 with seconds, at most 20 digits of fraction and a time zone (`Z` or an offset, not
 * `-00:00`), at most 64 characters, a year from 0010, and a time JavaScript's `Date` reads (it rolls February 30
 * over into March, as atproto's check does).
 */
const DATETIME = /^[0-9]{4}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-6][0-9]:[0-6][0-9](\.[0-9]{1,20})?(Z|[+-][0-2][0-9]:[0-5][0-9])$/
const ATPROTO_DATETIME = "must be an atproto datetime: RFC 3339 with seconds and a time zone (e.g. 2026-11-29T12:00:00Z)"
const isAtprotoDatetime = (s: string): boolean =>
  // (atproto also refuses a time before year 0: from 0010, with an offset of at most 29:59, none is)
  s.length <= 64 && !s.endsWith("-00:00") && !s.startsWith("000") && !Number.isNaN(Date.parse(s))

export const DeltaPostInput = strict({
  text: Schema.String.pipe(Schema.filter(withinPostLimits, {
    message: () => "must be at most 300 characters (Bluesky's limit: 300 graphemes, 3000 bytes)",
    // what JSON Schema can say of it: its length counts code points, and 3000 bytes are at most 3000 of them
    jsonSchema: { maxLength: 3000 }
  })).annotations({ description: "The post's text, at most 300 characters (graphemes; 3000 bytes of UTF-8), Bluesky's limit" }),
  langs: opt(Schema.Array(Schema.String).annotations({ description: "Languages of the text, e.g. [\"en\"]", ...refusedAs("an array of language codes") })),
  facets: opt(Schema.Array(JsonObject).annotations({
    ...refusedAs("an array of objects"),
    description: "Rich-text facets (links, mentions, tags) as Bluesky's app.bsky.richtext.facet objects, with UTF-8 byte offsets into text"
  })),
  embed: opt(JsonObject.annotations({ description: "An embed (images, a link card, a quoted post) as in Bluesky's app.bsky.feed.post" })),
  created_at: opt(Schema.String.pipe(
    Schema.pattern(DATETIME, { message: () => ATPROTO_DATETIME }),
    Schema.filter(isAtprotoDatetime, { message: () => ATPROTO_DATETIME, jsonSchema: { format: "date-time" } })
  ).annotations({ description: "The post's creation time, RFC 3339 with its time zone (e.g. 2026-11-29T12:00:00Z); default now" })),
  record: opt(JsonObject.annotations({ description: "Further fields of the app.bsky.feed.post record (e.g. reply), sent as they are" }))
}, "DeltaPostInput", "Publish a post on the connected Bluesky account")

export const DeltaLikeInput = strict({
  uri: NonEmpty.annotations({ description: "The post's at:// URI" }),
  cid: NonEmpty.annotations({ description: "The post's CID (the version liked)" })
}, "DeltaLikeInput", "Like a post on the connected Bluesky account")

/** The methods `epsilon_request` sends. */
export const EPSILON_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"] as const

/**
 * An allowed method in any case ("get", "Post"): sent upper-case, as the standard methods are spelled (HTTP methods
 * are case-sensitive on the wire, RFC 9110 §9.1, so "get" would be another method to the server). The same rule in
 * JSON Schema, as a pattern with each letter in either case (ECMA-262 patterns have no flags).
 */
export const EpsilonMethod = Schema.String.pipe(
  // ASCII letters only: toUpperCase maps some other letters onto them ("poſt" is "POST")
  Schema.filter((m) => /^[A-Za-z]+$/.test(m) && EPSILON_METHODS.some((allowed) => allowed === m.toUpperCase()), {
    message: () => `must be one of ${EPSILON_METHODS.join(", ")} (in any case)`,
    jsonSchema: {
      pattern: `^(?:${EPSILON_METHODS.map((m) => [...m].map((c) => `[${c}${c.toLowerCase()}]`).join("")).join("|")})$`
    }
  })
).annotations({ description: "The HTTP method: GET (default), POST, PUT, PATCH or DELETE, in any case; sent upper-case" })

export const EpsilonRequestInput = strict({
  path: NonEmpty.annotations({ description: "The path under the connection's base URL, e.g. \"/v1/items\"" }),
  method: opt(EpsilonMethod),
  query: opt(JsonObject.annotations({ description: "Query parameters, name to value (non-strings sent as JSON)" })),
  body: opt(JsonObject.annotations({ description: "A JSON body to send" }))
}, "EpsilonRequestInput", "A request to the connected REST API")

/** A Graph API version: the input's `version` and `ZETA_API_VERSION` alike. */
export const GRAPH_API_VERSION = /^v\d+\.\d+$/

export const ZetaRequestInput = strict({
  // where the path leads is checked against the gateway's Graph base URL (src/providers/zeta.ts); a query or a
  // fragment in it would be taken for part of the URL rather than of the path
  path: NonEmpty.pipe(Schema.pattern(/^[^?#]*$/, { message: () => "must not contain ? or #: give query parameters in params" }))
    .annotations({ description: "The Graph path, e.g. \"me\" or \"<page-id>/posts\"; query parameters go in params" }),
  params: opt(JsonObject.annotations({ description: "Query parameters, e.g. {\"fields\": \"id,name\"}" })),
  version: opt(Schema.String.pipe(Schema.pattern(GRAPH_API_VERSION, { message: () => "must be a Graph API version such as v26.0" }))
    .annotations({ description: "The Graph API version, e.g. \"v26.0\"; default the gateway's (ZETA_API_VERSION)" }))
}, "ZetaRequestInput", "A versioned read from the connected Graph API")

export const EtaPersonalBestsInput = strict({
  mode: Schema.Literal("time", "words", "quote", "zen", "custom").annotations({
    description: "Monkeytype mode: time, words, quote, zen or custom",
    ...refusedAsOneOf(["time", "words", "quote", "zen", "custom"])
  }),
  mode2: opt(Schema.String.annotations({ description: "One length of that mode, e.g. \"60\" (seconds) for time; default all" }))
}, "EtaPersonalBestsInput", "Personal bests of the connected Monkeytype account")

export const ThetaRatingsInput = strict({
  type: opt(PathSegment.annotations({ description: "movies, shows, seasons, episodes or all (default)" })),
  page: opt(Schema.Int.pipe(Schema.positive({ message: () => "must be a positive integer" })).annotations({ description: "Page, from 1; default 1" })),
  limit: opt(Schema.Int.pipe(Schema.positive({ message: () => "must be a positive integer" })).annotations({ description: "Ratings per page; default Trakt's (10)" }))
}, "ThetaRatingsInput", "Ratings of the connected Trakt account")

export const IotaDeleteServiceInput = strict({
  service_id: PathSegment.annotations({ description: "The Render service's id, e.g. \"srv-…\"" })
}, "IotaDeleteServiceInput", "Delete a service on the connected Render account")

export const KappaDeleteBenefitInput = strict({
  benefit_id: PathSegment.annotations({ description: "The Polar benefit's id" })
}, "KappaDeleteBenefitInput", "Delete a benefit on the connected Polar account")

/**
 * One event as Polar's `POST /v1/events/ingest` takes it (https://docs.polar.sh/api-reference/events/ingest: each event
 * is an `EventCreateCustomer`, with `customer_id`, or an `EventCreateExternalCustomer`, with `external_customer_id`;
 * `name` is required in both). Its other fields (metadata, timestamp, external_id, …) are Polar's to check.
 */
export const PolarEvent = Schema.Struct({
  name: NonEmpty.annotations({ description: "The event's name, e.g. \"api_call\"" }),
  customer_id: opt(NonEmpty.annotations({ description: "The Polar customer's id" })),
  external_customer_id: opt(NonEmpty.annotations({ description: "The customer's id in your system" }))
}, Schema.Record({ key: Schema.String, value: Schema.Unknown })).pipe(
  Schema.filter((e) =>
    e.customer_id !== undefined || e.external_customer_id !== undefined
      ? undefined
      : { path: ["customer_id"], message: "give customer_id or external_customer_id (whose event it is)" }, {
    jsonSchema: { allOf: [{ anyOf: [requiring("customer_id"), requiring("external_customer_id")] }] }
  })
).annotations({
  identifier: "PolarEvent",
  description: "An event: name, and customer_id or external_customer_id; metadata, timestamp, external_id and Polar's other fields as Polar takes them"
})

export const KappaIngestEventsInput = strict({
  events: Schema.Array(PolarEvent).pipe(Schema.minItems(1)).annotations({
    ...refusedAs("an array of at least one event"),
    description: "The events, at least one, as Polar takes them: name, customer_id or external_customer_id, and metadata"
  })
}, "KappaIngestEventsInput", "Ingest events into the connected Polar account")

/** What Resend's `PATCH /broadcasts/{id}` can change (resend/resend-openapi `UpdateBroadcastOptions`). */
const broadcastChanges = {
  name: opt(Schema.String.annotations({ description: "Name of the broadcast" })),
  segment_id: opt(Schema.String.annotations({ description: "The segment the broadcast is sent to" })),
  audience_id: opt(Schema.String.annotations({ description: "Deprecated by the provider: use segment_id" })),
  from: opt(Schema.String.annotations({ description: "Sender, e.g. \"Acme <team@example.com>\"" })),
  subject: opt(Schema.String.annotations({ description: "Subject line" })),
  reply_to: opt(Schema.Array(Schema.String).annotations({ description: "Addresses replies go to", ...refusedAs("an array of addresses") })),
  preview_text: opt(Schema.String.annotations({ description: "Preview text" })),
  html: opt(Schema.String.annotations({ description: "The HTML version of the message" })),
  text: opt(Schema.String.annotations({ description: "The plain text version of the message" })),
  topic_id: opt(Schema.NullOr(Schema.String).annotations({ description: "The topic the broadcast is scoped to; null for none" }))
}
const broadcastFields = Object.keys(broadcastChanges)

export const LambdaUpdateBroadcastInput = strict({
  id: PathSegment.annotations({ description: "The broadcast to update" }),
  ...broadcastChanges
}, "LambdaUpdateBroadcastInput", "Update a broadcast on the connected Resend account: its id and the fields to change").pipe(
  Schema.filter((b) =>
    broadcastFields.some((field) => Object.hasOwn(b, field))
      ? undefined
      : `give at least one field to change besides id (${broadcastFields.join(", ")})`, {
    // the struct takes no other property, so "id and one more" is two properties at least
    jsonSchema: { minProperties: 2 }
  })
).annotations({ identifier: "LambdaUpdateBroadcastInput" })

/**
 * Resend's batch endpoint sends 1 to 100 emails (https://resend.com/docs/api-reference/emails/send-batch-emails), each
 * with `from`, `to` and `subject` (https://resend.com/docs/api-reference/emails/send-email): what cannot be sent is
 * refused here, before any credit is held. The rest of each email is Resend's to check.
 */
export const MAX_BATCH_EMAILS = 100

/** The rest of an email or of the batch: Resend's to check. */
const ResendRest = Schema.Record({ key: Schema.String, value: Schema.Unknown })

/** One email: Resend's `from`, `to` (one address or a list) and `subject`, and whatever else Resend takes. */
const BatchEmail = Schema.Struct({
  from: Schema.String.annotations({ description: "Sender, e.g. \"Acme <team@example.com>\"" }),
  to: Schema.Union(Schema.String, Schema.Array(Schema.String)).annotations({ description: "Recipient address or addresses" }),
  subject: Schema.String.annotations({ description: "Subject line" })
}, ResendRest).annotations({ identifier: "BatchEmail" })

export const LambdaBatchEmailsInput = Schema.Union(
  Schema.Struct({
    emails: Schema.propertySignature(Schema.Array(BatchEmail).pipe(
      Schema.minItems(1, { message: () => `must hold 1 to ${MAX_BATCH_EMAILS} emails (Resend's batch limit)` }),
      Schema.maxItems(MAX_BATCH_EMAILS, { message: () => `must hold 1 to ${MAX_BATCH_EMAILS} emails (Resend's batch limit)` })
    ).annotations({ description: "The emails to send, 1 to 100, each with from, to, subject and html or text (or give one email's fields instead)" }))
      .annotations({ missingMessage: () => "is missing: give an array of 1 to 100 emails, or one email with from, to and subject" })
  }, ResendRest),
  BatchEmail
).annotations({
  identifier: "LambdaBatchEmailsInput",
  description: "Resend's batch request, forwarded to the connected Resend account: {\"emails\": [...]} with 1 to 100 emails (or one email), " +
    "each email with from, to, subject and html or text"
})

export const MuDatabaseInput = strict({
  database_id: PathSegment.annotations({ description: "The Notion database's id (from its URL), with or without dashes" })
}, "MuDatabaseInput", "Read a database of the connected Notion workspace")

export const NuAccountInput = Schema.Record({
  key: Schema.String,
  value: Schema.Never.annotations({ message: () => "is unexpected: nu_account takes an empty object" })
}).annotations({ identifier: "NuAccountInput", description: "The connected GitHub account; takes an empty object" })

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
  // null where Open-Meteo has no data for the place and time, as for every value below but the time
  temperature_c: Schema.NullOr(Schema.Number),
  apparent_temperature_c: Schema.NullOr(Schema.Number),
  relative_humidity_pct: Schema.NullOr(Schema.Number),
  precipitation_mm: Schema.NullOr(Schema.Number),
  wind_speed_kmh: Schema.NullOr(Schema.Number),
  wind_direction_deg: Schema.NullOr(Schema.Number),
  weather_code: Schema.NullOr(Schema.Int),
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
  summary: Str.annotations({ description: "The page's summary, for the summary format" }),
  json: Schema.Unknown.annotations({ description: "What the json format extracted, as Firecrawl answered it; null without it" }),
  change_tracking: Schema.NullOr(JsonObject).annotations({ description: "Firecrawl's changeTracking, for that format" }),
  actions: Schema.NullOr(JsonObject).annotations({ description: "The results of the request's actions (screenshots, scrapes, …), as Firecrawl answered them" }),
  warning: Str.annotations({ description: "Firecrawl's warning about the scrape, if any" }),
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
  properties: Schema.Array(Schema.Struct({ name: Schema.String, type: Schema.String })).annotations({
    description: "The database's properties: those of all its data sources, each name and type once"
  }),
  data_sources: Schema.Array(Schema.Struct({
    id: Schema.String,
    name: Schema.String,
    properties: Schema.Array(Schema.Struct({ name: Schema.String, type: Schema.String }))
  })).annotations({ description: "The database's data sources, each with its own properties (empty under a Notion-Version before 2025-09-03)" })
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
