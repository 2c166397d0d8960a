/**
 * Which provider answers which tool. Curated `search` and `read` try their configured providers in the
 * operator's order (`SEARCH_PROVIDERS`, `READ_PROVIDERS`) and move to the next one on a retryable failure;
 * the answer names the provider, and so does a failure (the provider whose failure decided it: `ProviderFailure`).
 * Every tool is a raw call (`POST /v1/run`) and its normalization.
 */
import * as Effect from "effect/Effect"
import { ProvidersConfig } from "../config.js"
import type { AccountProvider, Credentials } from "../domain/connections.js"
import { type CredentialRequired, ProviderNotConfigured, UrlNotAllowed } from "../domain/errors.js"
import type { OrgId } from "../domain/ids.js"
import {
  type AccountToolName,
  type ConnectionError,
  type CredentialFor,
  type ToolInput,
  type ToolName,
  type ToolOutput
} from "../domain/tools.js"
import type { Connections } from "../services/Connections.js"
import { makePolicy, refusedUrl } from "../services/Ssrf.js"
import * as Alpha from "./alpha.js"
import * as AppStore from "./appstore.js"
import * as Beta from "./beta.js"
import {
  failedAt,
  PageWithoutContent,
  type ProviderCallError,
  ProviderFailure,
  type ProviderServices,
  type ProviderTool,
  type Raw
} from "./common.js"
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
export { ProviderFailure } from "./common.js"

/**
 * A tool as the gateway runs it: a provider tool (or a curated tool's several, see `fallback`) whose raw call's
 * failure says which provider it is put down to.
 */
export interface NamedTool<I, C, O> extends Omit<ProviderTool<I, C, O>, "fetch"> {
  readonly fetch: (input: I, credentials: C) => Effect.Effect<Raw, ProviderFailure, ProviderServices>
}

export type Implementation<T extends ToolName> = NamedTool<ToolInput<T>, CredentialFor<T>, ToolOutput<T>>
type Config = typeof ProvidersConfig.Service

/**
 * When a curated tool moves on to its next provider: a failure that may pass (unavailable, rate limited,
 * timed out), the operator's key refused by this provider, the operator's account there out of credits (a
 * 402: Firecrawl's "Insufficient credits", say), a page that refused the built-in fetch, or one a reader found no
 * content at (`PageWithoutContent`: another reader may still get it). Never after the SSRF guard refused the URL
 * (`url_not_allowed`) or could not resolve its host name (`ProviderUnavailable.hostUnresolved`): an operator's
 * self-hosted reader may reach, inside its network, what the guard refused or could not check.
 */
const movesOn = (e: ProviderCallError) =>
  (e._tag === "ProviderUnavailable" && e.hostUnresolved !== true) || e._tag === "ProviderRateLimited" || e._tag === "ProviderTimeout" ||
  e._tag === "ProviderCredentialRejected" ||
  (e._tag === "ProviderRejected" && (e.upstreamStatus === 401 || e.upstreamStatus === 402 || e.upstreamStatus === 403)) ||
  e instanceof PageWithoutContent

/** Whether a provider tool can run on this gateway (no predicate: always). */
export const configured = (
  tool: { readonly configured?: ((config: Config) => boolean) | undefined } | undefined,
  config: Config
): boolean =>
  tool !== undefined && (tool.configured === undefined || tool.configured(config))

/** A tool on one provider (named as its answers name it, `Raw.provider`): a failure of its call is put down to it. */
const on = <I, C, O>(provider: string, tool: ProviderTool<I, C, O>): NamedTool<I, C, O> => ({
  ...tool,
  fetch: (input, credentials) => failedAt(provider, tool.fetch(input, credentials))
})

/**
 * A curated tool over several providers: the configured ones, in the operator's order, each tried only
 * after the one before failed in a way the next one may not (see `movesOn`). A failure is put down to the last
 * one tried; to none when none is configured, or the caller's URL is refused.
 */
const fallback = <I, O>(
  name: string,
  order: (config: Config) => ReadonlyArray<string>,
  candidates: Readonly<Record<string, ProviderTool<I, undefined, O>>>,
  check?: (input: I, credentials: undefined, config: Config) => Effect.Effect<void, UrlNotAllowed>
): NamedTool<I, undefined, O> => ({
  ...(check !== undefined ? { check } : {}),
  configured: (config) => order(config).some((provider) => configured(candidates[provider], config)),
  fetch: (input) =>
    Effect.gen(function* () {
      const config = yield* ProvidersConfig
      if (check !== undefined) yield* failedAt(undefined, check(input, undefined, config))
      const named = order(config)
      const usable = named.flatMap((provider) => {
        const c = candidates[provider]
        return c !== undefined && configured(c, config) ? [failedAt(provider, c.fetch(input, undefined))] : []
      })
      const [first, ...rest] = usable
      if (first === undefined) {
        return yield* new ProviderFailure({
          provider: undefined,
          error: new ProviderNotConfigured({
            message: `No provider for ${name} is configured on this gateway (tried: ${named.join(", ") || "none"}).`
          })
        })
      }
      return yield* rest.reduce((acc, next) => Effect.catchIf(acc, (failure) => movesOn(failure.error), () => next), first)
    }),
  normalize: (input, raw) => {
    const c = candidates[raw.provider]
    return c === undefined ? Effect.dieMessage(`no ${name} normalization for ${raw.provider}`) : c.normalize(input, raw)
  }
})

export const search = fallback<ToolInput<"search">, ToolOutput<"search">>("search", (c) => c.searchProviders, {
  alpha: Alpha.curatedSearch,
  beta: Beta.curatedSearch,
  gamma: Gamma.curatedSearch
})

export const read = fallback<ToolInput<"read">, ToolOutput<"read">>(
  "read",
  (c) => c.readProviders,
  {
    builtin: Reader.builtinRead,
    beta: Beta.curatedRead,
    gamma: Gamma.curatedRead
  },
  // The caller's URL is checked once, whichever provider fetches it: before the reservation, and again here
  // for library callers of the provider layer.
  (input, _credentials, config) => {
    const reason = refusedUrl(makePolicy(config.ssrfAllow), new URL(input.url))
    return reason === undefined ? Effect.void : Effect.fail(new UrlNotAllowed({ message: `The URL is not allowed: ${reason}.` }))
  }
)

/** Needs no connection: the operator's key (if any) is in the configuration. */
const noConnection = (): Effect.Effect<undefined> => Effect.succeed(undefined)

/** Runs on the org's own account at `provider`: its connection's credentials, or `credential_required`. */
const connection =
  <P extends AccountProvider>(tool: AccountToolName, provider: P) =>
  (connections: typeof Connections.Service, orgId: OrgId): Effect.Effect<Credentials[P], CredentialRequired> =>
    connections.credentials(orgId, provider, tool)

/** A tool's binding to its provider: the calls (check, fetch, normalize) and the credentials they run with. */
export interface Binding<T extends ToolName> {
  readonly tool: Implementation<T>
  readonly credentials: (connections: typeof Connections.Service, orgId: OrgId) => Effect.Effect<CredentialFor<T>, ConnectionError<T>>
}

/** A tool on the operator's key (if any) at `provider`. */
const operated = <I, O>(provider: string, tool: ProviderTool<I, undefined, O>) => ({ tool: on(provider, tool), credentials: noConnection })

/** A tool on the org's own account at `provider`: that connection's credentials, a failure put down to that provider. */
const account = <P extends AccountProvider, I, O>(name: AccountToolName, provider: P, tool: ProviderTool<I, Credentials[P], O>) => ({
  tool: on(provider, tool),
  credentials: connection(name, provider)
})

/**
 * Every tool of the catalog, bound to its provider. Typed per tool: a tool added to the catalog without a
 * binding, or with the credentials of another provider, does not compile.
 */
export const bindings: { readonly [K in ToolName]: Binding<K> } = {
  search: { tool: search, credentials: noConnection },
  read: { tool: read, credentials: noConnection },
  weather: operated(Weather.PROVIDER, Weather.weather),
  mobile_app_search: operated(AppStore.PROVIDER, AppStore.mobileAppSearch),
  alpha_search: operated(Alpha.PROVIDER, Alpha.alphaSearch),
  beta_read: operated(Beta.PROVIDER, Beta.betaRead),
  beta_search: operated(Beta.PROVIDER, Beta.betaSearch),
  gamma_scrape: operated(Gamma.PROVIDER, Gamma.gammaScrape),
  gamma_search: operated(Gamma.PROVIDER, Gamma.gammaSearch),
  xi_movie: operated(Xi.PROVIDER, Xi.xiMovie),
  delta_post: account("delta_post", "delta", Delta.post),
  delta_like: account("delta_like", "delta", Delta.like),
  epsilon_request: account("epsilon_request", "epsilon", Epsilon.request),
  zeta_request: account("zeta_request", "zeta", Zeta.zetaRequest),
  eta_personal_bests: account("eta_personal_bests", "eta", Eta.etaPersonalBests),
  theta_ratings: account("theta_ratings", "theta", Theta.thetaRatings),
  iota_delete_service: account("iota_delete_service", "iota", Iota.iotaDeleteService),
  kappa_delete_benefit: account("kappa_delete_benefit", "kappa", Kappa.kappaDeleteBenefit),
  kappa_ingest_events: account("kappa_ingest_events", "kappa", Kappa.kappaIngestEvents),
  lambda_update_broadcast: account("lambda_update_broadcast", "lambda", Lambda.lambdaUpdateBroadcast),
  lambda_batch_emails: account("lambda_batch_emails", "lambda", Lambda.lambdaBatchEmails),
  mu_database: account("mu_database", "mu", Mu.muDatabase),
  nu_account: account("nu_account", "nu", Nu.nuAccount)
}
