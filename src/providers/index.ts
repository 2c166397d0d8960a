/**
 * Which provider answers which tool. Curated `search` and `read` try their configured providers in the
 * operator's order (`SEARCH_PROVIDERS`, `READ_PROVIDERS`) and move to the next one on a retryable failure;
 * the answer names the provider. Every tool is a raw call (`POST /v1/run`) and its normalization.
 */
import { Effect, Option } from "effect"
import { type InvalidRequest, ProviderNotConfigured, UrlNotAllowed } from "../domain/errors.js"
import { catalog, type CredentialFor, type ToolInput, type ToolName, type ToolOutput } from "../domain/tools.js"
import { ProvidersConfig } from "../config.js"
import type { HtmlConverter } from "../services/HtmlConverter.js"
import { makePolicy, refusedUrl } from "../services/Ssrf.js"
import * as Alpha from "./alpha.js"
import * as AppStore from "./appstore.js"
import * as Beta from "./beta.js"
import type { Answered, ProviderCallError, ProviderEffect, ProviderTool, Raw } from "./common.js"
import * as Delta from "./delta.js"
import * as Epsilon from "./epsilon.js"
import * as Eta from "./eta.js"
import * as Gamma from "./gamma.js"
import * as Iota from "./iota.js"
import * as Kappa from "./kappa.js"
import * as Lambda from "./lambda.js"
import * as Mu from "./mu.js"
import * as Nu from "./nu.js"
import * as Reader from "./reader.js"
import * as Theta from "./theta.js"
import * as Weather from "./weather.js"
import * as Xi from "./xi.js"
import * as Zeta from "./zeta.js"

export type { Answered, ProviderCallError, ProviderEffect, Raw } from "./common.js"

type Implementation<T extends ToolName> = ProviderTool<ToolInput<T>, CredentialFor<T>, ToolOutput<T>>
type Config = typeof ProvidersConfig.Service

/**
 * When a curated tool moves on to its next provider: a failure that may pass (unavailable, rate limited,
 * timed out), the operator's key refused by this provider, or a page that refused the built-in fetch (an
 * API reader may still get it).
 */
const movesOn = (e: ProviderCallError) =>
  e._tag === "ProviderUnavailable" || e._tag === "ProviderRateLimited" || e._tag === "ProviderTimeout" ||
  e._tag === "ProviderCredentialRejected" ||
  (e._tag === "ProviderRejected" && (e.upstreamStatus === 401 || e.upstreamStatus === 403))

interface Candidate<I, O> {
  readonly configured: (config: Config) => boolean
  readonly tool: ProviderTool<I, undefined, O>
}

/**
 * A curated tool over several providers: the configured ones, in the operator's order, each tried only
 * after the one before failed in a way the next one may not (see `movesOn`).
 */
const fallback = <I, O>(
  name: string,
  order: (config: Config) => ReadonlyArray<string>,
  candidates: Readonly<Record<string, Candidate<I, O>>>,
  check?: (input: I, credentials: undefined, config: Config) => Effect.Effect<void, UrlNotAllowed>
): ProviderTool<I, undefined, O> => ({
  ...(check !== undefined ? { check } : {}),
  fetch: (input) =>
    Effect.gen(function* () {
      const config = yield* ProvidersConfig
      if (check !== undefined) yield* check(input, undefined, config)
      const named = order(config)
      const usable = named.flatMap((provider) => {
        const c = candidates[provider]
        return c !== undefined && c.configured(config) ? [c.tool.fetch(input, undefined)] : []
      })
      const [first, ...rest] = usable
      if (first === undefined) {
        return yield* new ProviderNotConfigured({
          message: `No provider for ${name} is configured on this gateway (tried: ${named.join(", ") || "none"}).`
        })
      }
      return yield* rest.reduce<ProviderEffect<Raw>>((acc, next) => Effect.catchIf(acc, movesOn, () => next), first)
    }),
  normalize: (input, raw) => {
    const c = candidates[raw.provider]
    return c === undefined ? Effect.dieMessage(`no ${name} normalization for ${raw.provider}`) : c.tool.normalize(input, raw)
  }
})

const always = () => true

export const search = fallback<ToolInput<"search">, ToolOutput<"search">>("search", (c) => c.searchProviders, {
  alpha: { configured: Alpha.isConfigured, tool: Alpha.curatedSearch },
  beta: { configured: Beta.isConfigured, tool: Beta.curatedSearch },
  gamma: { configured: Gamma.isConfigured, tool: Gamma.curatedSearch }
})

export const read = fallback<ToolInput<"read">, ToolOutput<"read">>(
  "read",
  (c) => c.readProviders,
  {
    builtin: { configured: always, tool: Reader.builtinRead },
    beta: { configured: Beta.isConfigured, tool: Beta.curatedRead },
    gamma: { configured: Gamma.isConfigured, tool: Gamma.curatedRead }
  },
  // The caller's URL is checked once, whichever provider fetches it: before the reservation, and again here
  // for library callers of the provider layer.
  (input, _credentials, config) => {
    const reason = refusedUrl(makePolicy(config.ssrfAllow), new URL(input.url))
    return reason === undefined ? Effect.void : Effect.fail(new UrlNotAllowed({ message: `The URL is not allowed: ${reason}.` }))
  }
)

export const implementations: { readonly [K in ToolName]: Implementation<K> } = {
  search,
  read,
  weather: Weather.weather,
  mobile_app_search: AppStore.mobileAppSearch,
  alpha_search: Alpha.alphaSearch,
  beta_read: Beta.betaRead,
  beta_search: Beta.betaSearch,
  gamma_scrape: Gamma.gammaScrape,
  gamma_search: Gamma.gammaSearch,
  xi_movie: Xi.xiMovie,
  delta_post: Delta.post,
  delta_like: Delta.like,
  epsilon_request: Epsilon.request,
  zeta_request: Zeta.zetaRequest,
  eta_personal_bests: Eta.etaPersonalBests,
  theta_ratings: Theta.thetaRatings,
  iota_delete_service: Iota.iotaDeleteService,
  kappa_delete_benefit: Kappa.kappaDeleteBenefit,
  kappa_ingest_events: Kappa.kappaIngestEvents,
  lambda_update_broadcast: Lambda.lambdaUpdateBroadcast,
  lambda_batch_emails: Lambda.lambdaBatchEmails,
  mu_database: Mu.muDatabase,
  nu_account: Nu.nuAccount
}

/** What the tool's provider refuses from the input alone, before any credit is reserved. */
export const preflight = <T extends ToolName>(
  tool: T,
  input: ToolInput<T>,
  credentials: CredentialFor<T>,
  config: Config
): Effect.Effect<void, UrlNotAllowed | InvalidRequest> => {
  const impl: Implementation<T> = implementations[tool]
  return impl.check === undefined ? Effect.void : impl.check(input, credentials, config)
}

/** Call a tool's provider(s) and normalize the answer. */
export const callProvider = <T extends ToolName>(
  tool: T,
  input: ToolInput<T>,
  credentials: CredentialFor<T>
): ProviderEffect<Answered<ToolOutput<T>>> => {
  const impl: Implementation<T> = implementations[tool]
  return Effect.flatMap(impl.fetch(input, credentials), (raw) =>
    Effect.map(impl.normalize(input, raw), (output) => ({ provider: raw.provider, output })))
}

/** Call a tool's provider(s) and answer the raw upstream answer (`POST /v1/run`). */
export const callProviderRaw = <T extends ToolName>(
  tool: T,
  input: ToolInput<T>,
  credentials: CredentialFor<T>
): ProviderEffect<Answered<Raw>> => {
  const impl: Implementation<T> = implementations[tool]
  return Effect.map(impl.fetch(input, credentials), (raw) => ({ provider: raw.provider, output: raw }))
}

/**
 * What a raw answer delivered, in the tool's price units: what its normalization would count (results,
 * characters), so that `POST /v1/run` is charged as the tool would be; an answer the tool could not
 * normalize counts nothing (the minimum charge, as for `normalization_failed`).
 */
export const rawUnits = <T extends ToolName>(tool: T, input: ToolInput<T>, raw: Raw): Effect.Effect<number, never, HtmlConverter> => {
  const impl: Implementation<T> = implementations[tool]
  const def: { readonly units: (output: ToolOutput<T>) => number } = catalog[tool]
  return Effect.match(impl.normalize(input, raw), { onFailure: () => 0, onSuccess: (output) => def.units(output) })
}

/** Whether this gateway can run a tool: its provider is configured (account tools also need the org's connection). */
export const isConfigured = (tool: ToolName, config: Config): boolean => {
  switch (tool) {
    case "search":
      return config.searchProviders.some((p) =>
        (p === "alpha" && Alpha.isConfigured(config)) || (p === "beta" && Beta.isConfigured(config)) ||
        (p === "gamma" && Gamma.isConfigured(config))
      )
    case "read":
      return config.readProviders.some((p) =>
        p === "builtin" || (p === "beta" && Beta.isConfigured(config)) || (p === "gamma" && Gamma.isConfigured(config))
      )
    case "alpha_search":
      return Alpha.isConfigured(config)
    case "beta_read":
      return Option.isSome(config.endpoints.betaRead.apiKey)
    case "beta_search":
      return Beta.isConfigured(config)
    case "gamma_scrape":
    case "gamma_search":
      return Gamma.isConfigured(config)
    case "xi_movie":
      return Xi.isConfigured(config)
    default:
      return true
  }
}
