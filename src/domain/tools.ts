/**
 * The tool catalog: every tool of the API contract with its input and output schema, whether it runs
 * on the caller's own provider account, whether it is beta, whether it reads or writes, and its price.
 */
import type * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import type { AccountProvider, Credentials } from "./connections.js"
import type { CredentialRequired } from "./errors.js"
import type { Price } from "./pricing.js"
import { strict } from "./schema-helpers.js"
import * as S from "./schemas.js"

export type ProviderName =
  | "alpha"
  | "beta"
  | "gamma"
  | "delta"
  | "epsilon"
  | "zeta"
  | "eta"
  | "theta"
  | "iota"
  | "kappa"
  | "lambda"
  | "mu"
  | "nu"
  | "xi"

export interface ToolDef<
  Name extends string,
  I,
  IE,
  O,
  OE,
  Account extends boolean = boolean,
  Provider extends ProviderName | "curated" = ProviderName | "curated"
> {
  readonly name: Name
  /** A short title: what it does and with which provider. */
  readonly summary: string
  /**
   * For a model choosing a tool: what it does and answers, which provider answers, and what to know before
   * calling it. The price and whether a connection or a beta is needed are added where it is shown (they
   * follow the configuration and the fields below).
   */
  readonly description: string
  readonly input: Schema.Schema<I, IE>
  readonly output: Schema.Schema<O, OE>
  /** Curated tools pick among providers at call time; provider tools name their one provider. */
  readonly provider: Provider
  /** Runs on the org's own provider account: a connection is required. */
  readonly account: Account
  /** Off unless enabled for the org. */
  readonly beta: boolean
  /** Reads are safe to retry upstream; writes are never sent twice. */
  readonly effect: "read" | "write"
  /**
   * A write that changes or removes what exists (a post replaces nothing, but it publishes; a delete removes);
   * false for writes that only add (a like, usage events). Reads are never destructive.
   */
  readonly destructive: boolean
  /** Doing it twice changes nothing more than doing it once (every read; a delete; an update to the same values). */
  readonly idempotent: boolean
  readonly price: Price
  /** Units the reservation must cover for this input (results or characters; 1 for per-call prices). */
  readonly maxUnits: (input: I) => number
  /** Units actually delivered in this output. */
  readonly units: (output: O) => number
}

const one = () => 1

const tool = <
  const Name extends string,
  I,
  IE,
  O,
  OE,
  const Account extends boolean,
  const Provider extends ProviderName | "curated"
>(
  def: ToolDef<Name, I, IE, O, OE, Account, Provider>
) => def

const providerTool = <
  const Name extends string,
  I,
  IE,
  O,
  OE,
  const Account extends boolean,
  const P extends ProviderName
>(
  name: Name,
  summary: string,
  input: Schema.Schema<I, IE>,
  output: Schema.Schema<O, OE>,
  provider: P,
  options: {
    readonly description: string
    readonly account: Account
    readonly effect: "read" | "write"
    readonly beta?: boolean
    /** A write that only adds (see `ToolDef.destructive`). */
    readonly additive?: boolean
    /** A write whose repetition changes nothing more (see `ToolDef.idempotent`). */
    readonly idempotent?: boolean
    /** Per-result pricing: the results this input may ask for. */
    readonly maxResults?: (input: I) => number
    readonly results?: (output: O) => number
  }
) =>
  tool({
    name,
    summary,
    description: options.description,
    input,
    output,
    provider,
    account: options.account,
    beta: options.beta ?? false,
    effect: options.effect,
    destructive: options.effect === "write" && options.additive !== true,
    idempotent: options.effect === "read" || options.idempotent === true,
    price: options.maxResults === undefined ? { unit: "call", credits: 1 } : { unit: "results", credits: 1, per: 10, min: 1 },
    maxUnits: options.maxResults ?? one,
    units: options.results ?? one
  })

export const DEFAULT_MAX_RESULTS = 10
export const DEFAULT_MAX_CHARS = 100_000

export const tools = {
  search: tool({
    name: "search",
    summary: "Web search",
    description:
      "Search the web: titles, URLs, snippets and publication dates. Answered by the first available of the gateway's search providers, in the operator's order (by default Exa, then Jina Search, then Firecrawl); the answer's provider names which. For one provider's own options, use alpha_search (Exa), beta_search (Jina) or gamma_search (Firecrawl).",
    input: S.SearchInput,
    output: S.SearchOutput,
    provider: "curated",
    account: false,
    beta: false,
    effect: "read",
    destructive: false,
    idempotent: true,
    price: { unit: "results", credits: 1, per: 10, min: 1 },
    maxUnits: (i) => i.max_results ?? DEFAULT_MAX_RESULTS,
    units: (o) => o.results.length
  }),
  read: tool({
    name: "read",
    summary: "Read a web page as markdown",
    description:
      "Fetch a web page and return its main content as markdown (title, final URL after redirects, content cut at max_chars). Answered by the gateway's own reader, then Jina Reader, then Firecrawl, in the operator's order. A URL that is a file (a PDF, an image) comes back as the file, kept byte for byte: a resource link to read with resources/read.",
    input: S.ReadInput,
    output: S.ReadOutput,
    provider: "curated",
    account: false,
    beta: false,
    effect: "read",
    destructive: false,
    idempotent: true,
    price: { unit: "chars", credits: 1, per: 20_000, min: 1 },
    maxUnits: (i) => i.max_chars ?? DEFAULT_MAX_CHARS,
    units: (o) => o.chars
  }),
  weather: tool({
    name: "weather",
    summary: "Weather now and for 7 days (Open-Meteo)",
    description:
      "Current weather and a 7-day daily forecast for a place name (q) or coordinates (lat and lon), from Open-Meteo's geocoding and forecast APIs: temperature (°C), feels-like, humidity, precipitation (mm), wind (km/h) and a plain description.",
    input: S.WeatherInput,
    output: S.WeatherOutput,
    provider: "curated",
    account: false,
    beta: false,
    effect: "read",
    destructive: false,
    idempotent: true,
    price: { unit: "call", credits: 1 },
    maxUnits: one,
    units: one
  }),
  mobile_app_search: tool({
    name: "mobile_app_search",
    summary: "Search Apple's App Store",
    description:
      "Search Apple's App Store (the iTunes Search API) for apps by name or keywords, in one store country: each app's name, developer, bundle id, price, rating, genres, version, release date, description and store URL.",
    input: S.MobileAppSearchInput,
    output: S.MobileAppSearchOutput,
    provider: "curated",
    account: false,
    beta: false,
    effect: "read",
    destructive: false,
    idempotent: true,
    price: { unit: "call", credits: 1 },
    maxUnits: one,
    units: one
  }),
  alpha_search: providerTool("alpha_search", "Exa web search", S.AlphaSearchInput, S.AlphaSearchOutput, "alpha", {
    description:
      "Search the web with Exa, with Exa's own options: search type (auto, neural, fast, deep), result count, and any other Exa /search field (contents such as text, highlights or summary; include or exclude domains; date ranges), sent as given. Each result: URL, title, author, publication date, score, and the contents asked for.",
    account: false,
    effect: "read",
    maxResults: (i) => i.numResults ?? 10,
    results: (o) => o.results.length
  }),
  beta_read: providerTool("beta_read", "Read a page with Jina Reader", S.BetaReadInput, S.BetaReadOutput, "beta", {
    description:
      "Read a web page with Jina Reader (r.jina.ai) in the format asked for: markdown (default), html or text, with the page's title, description and publication time; or a screenshot or full-page shot, kept as an image file (a resource link).",
    account: false,
    effect: "read"
  }),
  beta_search: providerTool("beta_search", "Jina web search with page contents", S.BetaSearchInput, S.BetaSearchOutput, "beta", {
    description:
      "Search the web with Jina Search (s.jina.ai), up to 20 results a call: each result's title, URL, description and the result page's content as Jina read it (so answers are larger and slower than search). Jina's filters are passed on: country, language, location, site, file type, title words, page.",
    account: false,
    effect: "read",
    maxResults: (i) => i.num ?? 10,
    results: (o) => o.results.length
  }),
  gamma_scrape: providerTool("gamma_scrape", "Scrape a page with Firecrawl", S.GammaScrapeInput, S.GammaScrapeOutput, "gamma", {
    description:
      "Scrape one web page with Firecrawl (API v2) in the formats asked for: markdown (default), HTML, raw HTML, links, summary, JSON extraction, change tracking, or a screenshot (kept as an image file, a resource link); with the page's title, status code and metadata. Other Firecrawl scrape options (waitFor, actions, location, …) are sent as given.",
    account: false,
    effect: "read"
  }),
  gamma_search: providerTool("gamma_search", "Firecrawl web search", S.GammaSearchInput, S.GammaSearchOutput, "gamma", {
    description:
      "Search the web with Firecrawl (API v2 /search): each result's URL, title, description, and its markdown when scrapeOptions asks Firecrawl to scrape the results. Other Firecrawl search options (sources, tbs, location, …) are sent as given.",
    account: false,
    effect: "read",
    maxResults: (i) => i.limit ?? 5,
    results: (o) => o.results.length
  }),
  xi_movie: providerTool("xi_movie", "Movie details from TMDB", S.XiMovieInput, S.XiMovieOutput, "xi", {
    description:
      "Details of one movie from TMDB (The Movie Database), by its TMDB id: title, original title, overview, tagline, release date, runtime, genres, vote average and count, popularity, IMDb id, homepage, poster and backdrop URLs. append_to_response adds further parts (credits, videos, images, …) under appended.",
    account: false,
    effect: "read"
  }),
  delta_post: providerTool("delta_post", "Publish a Bluesky post", S.DeltaPostInput, S.RecordOutput, "delta", {
    description:
      "Publish a post on the org's connected Bluesky account (an app.bsky.feed.post record, AT Protocol): text, with optional languages, rich-text facets (links, mentions, tags) and an embed (images, a link card, a quoted post). Public at once. Answers the new post's at:// URI and CID.",
    account: true,
    effect: "write"
  }),
  delta_like: providerTool("delta_like", "Like a Bluesky post", S.DeltaLikeInput, S.RecordOutput, "delta", {
    description:
      "Like a post, given its at:// URI and CID, from the org's connected Bluesky account (an app.bsky.feed.like record). Answers the like's at:// URI and CID.",
    account: true,
    effect: "write",
    additive: true
  }),
  epsilon_request: providerTool("epsilon_request", "Call the connected REST API", S.EpsilonRequestInput, S.EpsilonRequestOutput, "epsilon", {
    description:
      "Send one HTTP request to the REST API the org connected (its base URL and token come from the connection): a method (GET by default; POST, PUT, PATCH, DELETE), a path under the base URL, query parameters and a JSON body. Answers the HTTP status and the body (JSON, or text). Other than GET it can change or delete data on that API.",
    account: true,
    effect: "write"
  }),
  zeta_request: providerTool("zeta_request", "Read from Meta's Graph API", S.ZetaRequestInput, S.ZetaRequestOutput, "zeta", {
    description:
      "Read from Meta's Graph API (a Graph-style API: nodes, edges and fields) with the org's connected access token: GET a path such as \"me\" or \"<page-id>/posts\" with query parameters (fields, limit, …), at an API version (default the gateway's). Answers Graph's JSON as it sent it.",
    account: true,
    effect: "read"
  }),
  eta_personal_bests: providerTool("eta_personal_bests", "Monkeytype personal bests", S.EtaPersonalBestsInput, S.EtaPersonalBestsOutput, "eta", {
    description:
      "The typing-test personal bests of the org's connected Monkeytype account, for a mode (time, words, quote, zen, custom) and optionally one length of it (mode2, e.g. 60 seconds): words per minute, accuracy, raw speed, consistency, language, difficulty, punctuation and when.",
    account: true,
    effect: "read"
  }),
  theta_ratings: providerTool("theta_ratings", "Trakt ratings", S.ThetaRatingsInput, S.ThetaRatingsOutput, "theta", {
    description:
      "The ratings (1 to 10) the org's connected Trakt account gave to movies, shows, seasons and episodes, all or one type, a page at a time: when, the rating, the title, year and ids (Trakt, IMDb, TMDB, …), with the page and item counts.",
    account: true,
    effect: "read"
  }),
  iota_delete_service: providerTool("iota_delete_service", "Delete a Render service", S.IotaDeleteServiceInput, S.IotaDeleteServiceOutput, "iota", {
    description:
      "Delete a service (a web service, worker, cron job, static site, …) from the org's connected Render account, by its id. Irreversible: Render stops and removes the service.",
    account: true,
    effect: "write",
    idempotent: true,
    beta: true
  }),
  kappa_delete_benefit: providerTool("kappa_delete_benefit", "Delete a Polar benefit", S.KappaDeleteBenefitInput, S.KappaDeleteBenefitOutput, "kappa", {
    description:
      "Delete a benefit from the org's connected Polar account, by its id. Irreversible. Polar refuses some benefits (provider_rejected).",
    account: true,
    effect: "write",
    idempotent: true,
    beta: true
  }),
  kappa_ingest_events: providerTool("kappa_ingest_events", "Send usage events to Polar", S.KappaIngestEventsInput, S.KappaIngestEventsOutput, "kappa", {
    description:
      "Send usage events to the org's connected Polar account, for usage-based billing: each event with a name, the customer (customer_id or external_customer_id) and metadata. Answers how many Polar inserted; under an Idempotency-Key a repeated batch is counted once.",
    account: true,
    effect: "write",
    additive: true,
    beta: true
  }),
  lambda_update_broadcast: providerTool("lambda_update_broadcast", "Update a Resend broadcast", S.LambdaUpdateBroadcastInput, S.LambdaUpdateBroadcastOutput, "lambda", {
    description:
      "Change a broadcast on the org's connected Resend account: its name, segment, sender, subject, reply-to addresses, preview text, HTML or plain text, or topic. Give the broadcast's id and at least one field to change; the others stay as they are. Answers the broadcast's id.",
    account: true,
    effect: "write",
    idempotent: true
  }),
  lambda_batch_emails: providerTool("lambda_batch_emails", "Send emails with Resend", S.LambdaBatchEmailsInput, S.LambdaBatchEmailsOutput, "lambda", {
    description:
      "Send a batch of emails (Resend allows up to 100) from the org's connected Resend account: {\"emails\": [...]}, each with from, to, subject and html or text (or one email as the whole input). Sent at once; with an Idempotency-Key a retried batch is sent only once. Answers the emails' ids.",
    account: true,
    effect: "write",
    beta: true
  }),
  mu_database: providerTool("mu_database", "Read a Notion database's schema", S.MuDatabaseInput, S.MuDatabaseOutput, "mu", {
    description:
      "A database of the org's connected Notion workspace, by its id: title, URL, creation and edit times, its data sources and the properties (name and type) of each. It reads the database's structure, not its pages.",
    account: true,
    effect: "read"
  }),
  nu_account: providerTool("nu_account", "The connected GitHub account", S.NuAccountInput, S.NuAccountOutput, "nu", {
    description:
      "The GitHub user the org's connection authenticates as: login, id, name, email, avatar, profile URL, number of public repositories and followers, and when the account was created. Takes an empty object.",
    account: true,
    effect: "read"
  })
} as const

export type Tools = typeof tools
export type ToolName = keyof Tools
export type ToolInput<T extends ToolName> = Schema.Schema.Type<Tools[T]["input"]>
export type ToolInputEncoded<T extends ToolName> = Schema.Schema.Encoded<Tools[T]["input"]>
export type ToolOutput<T extends ToolName> = Schema.Schema.Type<Tools[T]["output"]>
export type ToolOutputEncoded<T extends ToolName> = Schema.Schema.Encoded<Tools[T]["output"]>

/** The catalog seen per tool name, so that a generic `T extends ToolName` keeps its input and output types. */
export type Catalog = {
  readonly [K in ToolName]: ToolDef<
    K,
    ToolInput<K>,
    ToolInputEncoded<K>,
    ToolOutput<K>,
    ToolOutputEncoded<K>,
    Tools[K]["account"],
    Tools[K]["provider"]
  >
}
export const catalog: Catalog = tools
export type AccountToolName = { [K in ToolName]: Tools[K]["account"] extends true ? K : never }[ToolName]
export type ProviderOf<T extends ToolName> = Tools[T]["provider"]

/** What a missing connection adds to a tool's errors: `credential_required`, for account tools only. */
export type ConnectionError<T extends ToolName> = T extends AccountToolName ? CredentialRequired : never

/** The connection credentials an account tool runs with; `undefined` for every other tool. */
export type CredentialFor<T extends ToolName> = T extends AccountToolName
  ? Credentials[Extract<ProviderOf<T>, AccountProvider>]
  : undefined

export const toolNames: ReadonlyArray<ToolName> = Object.keys(tools).filter(isToolName)

export function isToolName(name: string): name is ToolName {
  return Object.hasOwn(tools, name)
}

const toolNameList: ReadonlyArray<string> = toolNames

/** The value a refinement refused, quoted and cut short, for a message. */
const refused = (issue: ParseResult.ParseIssue): string => JSON.stringify(issue.actual)?.slice(0, 100) ?? "the value"

/** A tool's name: one of the catalog's (published as an enum). */
export const ToolNameSchema = Schema.String.pipe(
  Schema.filter((s) => toolNameList.includes(s), {
    message: (issue) => `${refused(issue)} is not a tool`,
    jsonSchema: { enum: toolNameList }
  })
).annotations({ identifier: "ToolName", description: "A tool's name" })

/**
 * `POST /v1/run`'s body over HTTP: `S.RunRequest` with `tool` one of the catalog's, so that the published schema says
 * which names it takes (a name that is no tool is refused as the body's decode refuses any other field).
 */
export const RunPayload = strict({
  tool: ToolNameSchema.annotations({ description: "The tool whose provider to call" }),
  input: S.RunRequest.fields.input
}, "RunRequest", "Call a tool's provider and answer its raw, unnormalized answer")
