/**
 * Which provider answers which tool. Curated `search` and `read` try their configured providers in the
 * operator's order and fall back to the next one on a retryable failure; the answer names the provider.
 */
import { Effect } from "effect"
import { ProviderNotConfigured } from "../domain/errors.js"
import { type CredentialFor, DEFAULT_MAX_CHARS, type ToolInput, type ToolName, type ToolOutput } from "../domain/tools.js"
import { GatewayConfig } from "../services/GatewayConfig.js"
import { refusedUrl, makePolicy } from "../services/Ssrf.js"
import { UrlNotAllowed } from "../domain/errors.js"
import * as Alpha from "./alpha.js"
import * as AppStore from "./appstore.js"
import * as Beta from "./beta.js"
import * as Delta from "./delta.js"
import * as Epsilon from "./epsilon.js"
import * as Simple from "./simple.js"
import type { Answered, ProviderCallError, ProviderEffect } from "./common.js"
import * as Gamma from "./gamma.js"
import * as Reader from "./reader.js"
import * as Weather from "./weather.js"

export type { Answered, ProviderCallError, ProviderEffect } from "./common.js"

type Implementation<T extends ToolName> = (
  input: ToolInput<T>,
  credentials: CredentialFor<T>
) => ProviderEffect<Answered<ToolOutput<T>>>
type Implementations = { readonly [K in ToolName]: Implementation<K> }

interface Candidate<A> {
  readonly name: string
  readonly configured: boolean
  readonly call: ProviderEffect<A>
}

const retryable = (e: ProviderCallError) =>
  e._tag === "ProviderUnavailable" || e._tag === "ProviderRateLimited" || e._tag === "ProviderTimeout"

/** Try each configured candidate in order; move on only after a retryable failure. */
const firstAnswer = <A>(tool: string, candidates: ReadonlyArray<Candidate<A>>): ProviderEffect<A> => {
  const configured = candidates.filter((c) => c.configured)
  const [first, ...rest] = configured
  if (first === undefined) {
    return Effect.fail(
      new ProviderNotConfigured({
        message: `No provider for ${tool} is configured on this gateway (tried: ${
          candidates.map((c) => c.name).join(", ") || "none"
        }).`
      })
    )
  }
  return rest.reduce<ProviderEffect<A>>(
    (acc, next) => Effect.catchIf(acc, retryable, () => next.call),
    first.call
  )
}

const search: Implementation<"search"> = (input) =>
  Effect.gen(function* () {
    const config = yield* GatewayConfig
    const available: Record<string, Omit<Candidate<Answered<ToolOutput<"search">>>, "name">> = {
      alpha: { configured: Alpha.isConfigured(config), call: Alpha.search(input) },
      beta: { configured: Beta.isConfigured(config), call: Beta.search(input) },
      gamma: { configured: Gamma.isConfigured(config), call: Gamma.search(input) }
    }
    return yield* firstAnswer(
      "search",
      config.searchProviders.flatMap((name) => {
        const c = available[name]
        return c === undefined ? [] : [{ name, ...c }]
      })
    )
  })

const read: Implementation<"read"> = (input) =>
  Effect.gen(function* () {
    const config = yield* GatewayConfig
    // The caller's URL is checked once, whichever provider fetches it.
    const reason = refusedUrl(makePolicy(config.ssrfAllow), new URL(input.url))
    if (reason !== undefined) return yield* new UrlNotAllowed({ message: `The URL is not allowed: ${reason}.` })
    const maxChars = input.max_chars ?? DEFAULT_MAX_CHARS
    const available: Record<string, Omit<Candidate<Answered<ToolOutput<"read">>>, "name">> = {
      builtin: { configured: true, call: Reader.read(input, maxChars) },
      beta: { configured: Beta.isConfigured(config), call: Beta.read(input, maxChars) },
      gamma: { configured: Gamma.isConfigured(config), call: Gamma.read(input, maxChars) }
    }
    return yield* firstAnswer(
      "read",
      config.readProviders.flatMap((name) => {
        const c = available[name]
        return c === undefined ? [] : [{ name, ...c }]
      })
    )
  })

const notYet = (tool: ToolName): ProviderEffect<never> =>
  Effect.fail(new ProviderNotConfigured({ message: `${tool} is not configured on this gateway.` }))

export const implementations: Implementations = {
  search,
  read,
  weather: Weather.weather,
  mobile_app_search: AppStore.mobileAppSearch,
  alpha_search: () => notYet("alpha_search"),
  beta_read: () => notYet("beta_read"),
  beta_search: () => notYet("beta_search"),
  gamma_scrape: () => notYet("gamma_scrape"),
  gamma_search: () => notYet("gamma_search"),
  xi_movie: () => notYet("xi_movie"),
  delta_post: Delta.post,
  delta_like: Delta.like,
  epsilon_request: Epsilon.request,
  zeta_request: Simple.zetaRequest,
  eta_personal_bests: Simple.etaPersonalBests,
  theta_ratings: Simple.thetaRatings,
  iota_delete_service: Simple.iotaDeleteService,
  kappa_delete_benefit: Simple.kappaDeleteBenefit,
  kappa_ingest_events: Simple.kappaIngestEvents,
  lambda_update_broadcast: Simple.lambdaUpdateBroadcast,
  lambda_batch_emails: Simple.lambdaBatchEmails,
  mu_database: Simple.muDatabase,
  nu_account: Simple.nuAccount
}

/** Call the provider(s) of a tool, with the org's connection credentials for account tools. */
export const callProvider = <T extends ToolName>(
  tool: T,
  input: ToolInput<T>,
  credentials: CredentialFor<T>
): ProviderEffect<Answered<ToolOutput<T>>> => implementations[tool](input, credentials)
