/**
 * The tool catalog: every tool of the API contract with its input and output schema, whether it runs
 * on the caller's own provider account, whether it is beta, whether it reads or writes, and its price.
 */
import type { Schema } from "effect"
import type { AccountProvider, Credentials } from "./connections.js"
import type { CredentialRequired } from "./errors.js"
import type { Price } from "./pricing.js"
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
  readonly summary: string
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
    summary: "Web search across the configured search providers",
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
    summary: "Fetch a page and return its main content as markdown",
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
    summary: "Current weather and a 7-day forecast",
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
    summary: "Search the App Store",
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
  alpha_search: providerTool("alpha_search", "Alpha search", S.AlphaSearchInput, S.AlphaSearchOutput, "alpha", {
    account: false,
    effect: "read",
    maxResults: (i) => i.numResults ?? 10,
    results: (o) => o.results.length
  }),
  beta_read: providerTool("beta_read", "Beta reader", S.BetaReadInput, S.BetaReadOutput, "beta", { account: false, effect: "read" }),
  beta_search: providerTool("beta_search", "Beta search", S.BetaSearchInput, S.BetaSearchOutput, "beta", {
    account: false,
    effect: "read",
    maxResults: (i) => i.num ?? 10,
    results: (o) => o.results.length
  }),
  gamma_scrape: providerTool("gamma_scrape", "Gamma scrape", S.GammaScrapeInput, S.GammaScrapeOutput, "gamma", { account: false, effect: "read" }),
  gamma_search: providerTool("gamma_search", "Gamma search", S.GammaSearchInput, S.GammaSearchOutput, "gamma", {
    account: false,
    effect: "read",
    maxResults: (i) => i.limit ?? 5,
    results: (o) => o.results.length
  }),
  xi_movie: providerTool("xi_movie", "Xi movie details", S.XiMovieInput, S.XiMovieOutput, "xi", { account: false, effect: "read" }),
  delta_post: providerTool("delta_post", "Publish a post", S.DeltaPostInput, S.RecordOutput, "delta", { account: true, effect: "write" }),
  delta_like: providerTool("delta_like", "Like a post", S.DeltaLikeInput, S.RecordOutput, "delta", { account: true, effect: "write", additive: true }),
  epsilon_request: providerTool("epsilon_request", "Generic REST request", S.EpsilonRequestInput, S.EpsilonRequestOutput, "epsilon", {
    account: true,
    effect: "write"
  }),
  zeta_request: providerTool("zeta_request", "Versioned Graph read", S.ZetaRequestInput, S.ZetaRequestOutput, "zeta", {
    account: true,
    effect: "read"
  }),
  eta_personal_bests: providerTool("eta_personal_bests", "Personal bests", S.EtaPersonalBestsInput, S.EtaPersonalBestsOutput, "eta", {
    account: true,
    effect: "read"
  }),
  theta_ratings: providerTool("theta_ratings", "Ratings", S.ThetaRatingsInput, S.ThetaRatingsOutput, "theta", { account: true, effect: "read" }),
  iota_delete_service: providerTool("iota_delete_service", "Delete a service", S.IotaDeleteServiceInput, S.IotaDeleteServiceOutput, "iota", {
    account: true,
    effect: "write",
    idempotent: true,
    beta: true
  }),
  kappa_delete_benefit: providerTool("kappa_delete_benefit", "Delete a benefit", S.KappaDeleteBenefitInput, S.KappaDeleteBenefitOutput, "kappa", {
    account: true,
    effect: "write",
    idempotent: true,
    beta: true
  }),
  kappa_ingest_events: providerTool("kappa_ingest_events", "Ingest events", S.KappaIngestEventsInput, S.KappaIngestEventsOutput, "kappa", {
    account: true,
    effect: "write",
    additive: true,
    beta: true
  }),
  lambda_update_broadcast: providerTool("lambda_update_broadcast", "Update a broadcast", S.LambdaUpdateBroadcastInput, S.LambdaUpdateBroadcastOutput, "lambda", {
    account: true,
    effect: "write",
    idempotent: true
  }),
  lambda_batch_emails: providerTool("lambda_batch_emails", "Send a batch of emails", S.LambdaBatchEmailsInput, S.LambdaBatchEmailsOutput, "lambda", {
    account: true,
    effect: "write",
    beta: true
  }),
  mu_database: providerTool("mu_database", "Read a database", S.MuDatabaseInput, S.MuDatabaseOutput, "mu", { account: true, effect: "read" }),
  nu_account: providerTool("nu_account", "The connected account", S.NuAccountInput, S.NuAccountOutput, "nu", { account: true, effect: "read" })
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
