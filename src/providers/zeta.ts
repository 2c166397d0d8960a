/**
 * zeta: Meta's Graph API — `GET {base}/{version}/{path}?params` with the connection's Bearer token. The version
 * is the input's, else `ZETA_API_VERSION` (default v26.0, the newest Graph API version in Meta's changelog,
 * https://developers.facebook.com/docs/graph-api/changelog: introduced 2026-07-29; v21.0, the earlier default,
 * is available until 2027-01-21).
 *
 * Graph names what went wrong in the body's `error.code`, whatever the HTTP status (400 and 403 alike), so the
 * codes the gateway acts on are read from there: `GRAPH_CODES` below, from Meta's "Handling Errors"
 * (https://developers.facebook.com/docs/graph-api/guides/error-handling) and the "Error Codes" tables of its
 * "Rate Limits" page (https://developers.facebook.com/docs/graph-api/overview/rate-limiting). Any other code
 * follows the HTTP status.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { type ProviderError, ProviderCredentialRejected, ProviderRateLimited, ProviderUnavailable } from "../domain/errors.js"
import { ProvidersConfig } from "../config.js"
import { bodyText, retryAfterSeconds, type UpstreamResponse, withoutSecrets } from "../services/ProviderClient.js"
import type { ToolInput } from "../domain/tools.js"
import { type AccountTool, decodeUpstream, invalid, JsonObject, requestJson, urlUnder } from "./common.js"
import { isArray } from "../domain/json.js"

const param = (v: unknown): string => (typeof v === "string" ? v : JSON.stringify(v))

type GraphMeaning = "rate_limited" | "token_rejected" | "temporary"

/** Graph's error codes that mean something of their own here: the classification table of this module. */
const GRAPH_CODES: ReadonlyMap<number, { readonly meaning: GraphMeaning; readonly what: string }> = new Map([
  // Handling Errors: "Possibly a temporary issue due to downtime. Wait and retry the operation."
  [1, { meaning: "temporary", what: "API Unknown" }],
  [2, { meaning: "temporary", what: "API Service" }],
  // Rate Limits, Platform Rate Limits: throttled until the rolling hour's call count drops below the limit
  [4, { meaning: "rate_limited", what: "the app's rate limit" }],
  [17, { meaning: "rate_limited", what: "the user's rate limit" }],
  [32, { meaning: "rate_limited", what: "the Pages API rate limit of the user or app" }],
  [613, { meaning: "rate_limited", what: "a custom rate limit" }],
  // Handling Errors: "Application limit reached. Temporary issue due to downtime or throttling."
  [341, { meaning: "rate_limited", what: "the application limit" }],
  // Rate Limits, Business Use Case Rate Limits (the X-Business-Use-Case-Usage header says for how long)
  [80000, { meaning: "rate_limited", what: "the Ads Insights rate limit" }],
  [80001, { meaning: "rate_limited", what: "the Pages rate limit (Page or system user token)" }],
  [80002, { meaning: "rate_limited", what: "the Instagram rate limit" }],
  [80003, { meaning: "rate_limited", what: "the Custom Audience rate limit" }],
  [80004, { meaning: "rate_limited", what: "the Ads Management rate limit" }],
  [80005, { meaning: "rate_limited", what: "the LeadGen rate limit" }],
  [80006, { meaning: "rate_limited", what: "the Messenger rate limit" }],
  [80008, { meaning: "rate_limited", what: "the WhatsApp Business Management rate limit" }],
  [80009, { meaning: "rate_limited", what: "the Catalog Management rate limit" }],
  [80014, { meaning: "rate_limited", what: "the Catalog Batch rate limit" }],
  // Handling Errors: the access token has expired, been revoked or is otherwise invalid: get a new one
  [102, { meaning: "token_rejected", what: "API Session" }],
  [190, { meaning: "token_rejected", what: "invalid or expired" }]
])

const GraphErrorBody = Schema.parseJson(
  Schema.Struct({ error: Schema.Struct({ code: Schema.Number, message: Schema.optional(Schema.String) }) })
)

/** `X-Business-Use-Case-Usage`: per business object, `estimated_time_to_regain_access` in minutes. */
const BusinessUseCaseUsage = Schema.parseJson(Schema.Record({
  key: Schema.String,
  value: Schema.Array(Schema.Struct({ estimated_time_to_regain_access: Schema.optional(Schema.Number) }))
}))
/** `X-Ad-Account-Usage` (Ads API v3.3 and older): `reset_time_duration` in seconds. */
const AdAccountUsage = Schema.parseJson(Schema.Struct({ reset_time_duration: Schema.optional(Schema.Number) }))
/** `X-App-Usage`: percentages of the app's hourly allowance; no time. */
const AppUsage = Schema.parseJson(Schema.Struct({
  call_count: Schema.optional(Schema.Number),
  total_cputime: Schema.optional(Schema.Number),
  total_time: Schema.optional(Schema.Number)
}))

const header = <A, I>(schema: Schema.Schema<A, I>, value: string | undefined) =>
  value === undefined ? Option.none() : Schema.decodeUnknownOption(schema)(value)

/** When Graph says the limit lifts: the usage headers' own time, else a Retry-After. */
const graphRetryAfter = (headers: Readonly<Record<string, string>>, now: number): number | undefined => {
  const minutes = Option.match(header(BusinessUseCaseUsage, headers["x-business-use-case-usage"]), {
    onNone: () => 0,
    onSome: (usage) => Math.max(0, ...Object.values(usage).flatMap((entries) => entries.map((e) => e.estimated_time_to_regain_access ?? 0)))
  })
  if (minutes > 0) return Math.ceil(minutes * 60)
  const reset = Option.getOrUndefined(header(AdAccountUsage, headers["x-ad-account-usage"]))?.reset_time_duration ?? 0
  if (reset > 0) return Math.ceil(reset)
  return retryAfterSeconds(headers, now)
}

const appUsage = (headers: Readonly<Record<string, string>>): string =>
  Option.match(header(AppUsage, headers["x-app-usage"]), {
    onNone: () => "",
    onSome: (u) => ` (X-App-Usage: calls ${u.call_count ?? "?"}%, CPU time ${u.total_cputime ?? "?"}%, total time ${u.total_time ?? "?"}%)`
  })

/** A Graph error body read against `GRAPH_CODES`; undefined leaves it to the HTTP status. */
const graphError = (response: UpstreamResponse, now: number): ProviderError | undefined => {
  const parsed = Schema.decodeUnknownOption(GraphErrorBody)(bodyText(response))
  if (Option.isNone(parsed)) return undefined
  const { code, message } = parsed.value.error
  const entry = GRAPH_CODES.get(code)
  if (entry === undefined) return undefined
  const said = message ?? entry.what
  switch (entry.meaning) {
    case "token_rejected":
      return new ProviderCredentialRejected({ message: `zeta rejected the access token (code ${code}): ${said}. Reconnect the account.` })
    case "temporary":
      return new ProviderUnavailable({ message: `zeta failed for the time being (code ${code}, ${entry.what}): ${said}` })
    case "rate_limited": {
      const retryAfter = graphRetryAfter(response.headers, now)
      return new ProviderRateLimited({
        message: `zeta is throttling the call: ${entry.what} is reached (code ${code}, HTTP ${response.status}): ${said}` +
          `${appUsage(response.headers)}. The connection is fine; retry later.`,
        ...(retryAfter !== undefined ? { retryAfter } : {})
      })
    }
  }
}

/**
 * Query parameters of a Graph URL that carry a secret: the access token, and the proof of the app secret with its
 * time (https://developers.facebook.com/docs/graph-api/securing-requests).
 */
const SECRET_PARAMETERS: ReadonlySet<string> = new Set(["access_token", "appsecret_proof", "appsecret_time"])

/** A query's `name=value` pair's name, decoded as a form's (`URLSearchParams`, which never throws). */
const nameOf = (pair: string) => new URLSearchParams(pair).keys().next().value ?? ""

/**
 * A URL (absolute or not) without `SECRET_PARAMETERS` in its query; the rest of it as it was, each other pair
 * spelled as Graph wrote it (`fields=id,message` stays so).
 */
const withoutSecretParameters = (url: string): string => {
  const q = url.indexOf("?")
  if (q < 0) return url
  const hash = url.indexOf("#", q)
  const pairs = url.slice(q + 1, hash < 0 ? undefined : hash).split("&")
  const kept = pairs.filter((pair) => !SECRET_PARAMETERS.has(nameOf(pair)))
  if (kept.length === pairs.length) return url
  return url.slice(0, q) + (kept.length === 0 ? "" : `?${kept.join("&")}`) + (hash < 0 ? "" : url.slice(hash))
}

/**
 * Graph's answer without the org's secrets. A paginated edge answers `paging.previous` and `paging.next`, Graph URLs
 * for the pages around this one (https://developers.facebook.com/docs/graph-api/results), which repeat the call's
 * access token as `access_token` (and an `appsecret_proof` with it): those parameters are taken out, wherever a
 * `paging` is in the answer (an edge nested in a field has its own), and the page is asked for with the rest of the
 * URL's query (`after`/`before` and the others) in `params`. Any other place the org's token appears, in any spelling
 * an error answer is searched for (an app token's `|` percent-encoded in a URL, say), is `[redacted]`
 * (ProviderClient's `withoutSecrets`).
 */
const withoutGraphSecrets = (body: unknown, token: string): unknown => {
  const walk = (value: unknown, paging: boolean): unknown => {
    if (isArray(value)) return value.map((v) => walk(v, false))
    if (typeof value !== "object" || value === null) return value
    // fromEntries defines each key as the object's own, a `__proto__` too
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [
      k,
      paging && (k === "next" || k === "previous") && typeof v === "string" ? withoutSecretParameters(v) : walk(v, k === "paging")
    ]))
  }
  return withoutSecrets(walk(body, false), [token])
}

/**
 * The URL a call goes to: `{base}/{version}/{path}`, which must stay under `{base}/{version}/` (the base URL may be an
 * operator's proxy with a path of its own; `..` segments, spelled, percent-encoded or behind an encoded slash, are
 * resolved before the check). The input's schema has already refused a version that is not one, and `?` and `#`.
 */
const targetOf = (input: ToolInput<"zeta_request">, config: typeof ProvidersConfig.Service) => {
  const versioned = `${config.endpoints.zeta.baseUrl}/${input.version ?? config.zetaApiVersion}`
  const url = urlUnder(versioned, `/${input.path.replace(/^\/+/, "")}`)
  return url === undefined
    ? Effect.fail(invalid("path must stay under the Graph API version: give the version in version, not in path"))
    : Effect.succeed(url)
}

export const zetaRequest: AccountTool<"zeta_request", "zeta"> = {
  check: (input, _credentials, config) => Effect.asVoid(targetOf(input, config)),
  fetch: (input, credentials) =>
    Effect.gen(function* () {
      const url = yield* targetOf(input, yield* ProvidersConfig)
      for (const [k, v] of Object.entries(input.params ?? {})) url.searchParams.set(k, param(v))
      const raw = yield* requestJson({
        provider: "zeta",
        method: "GET",
        url: url.toString(),
        headers: { authorization: `Bearer ${credentials.access_token}` },
        idempotent: true,
        classify: graphError
      })
      // the raw answer (`POST /v1/run`) and the tool's alike: neither shows the org's token
      return { ...raw, body: withoutGraphSecrets(raw.body, credentials.access_token) }
    }),
  normalize: (_input, raw) =>
    Effect.map(decodeUpstream("zeta", JsonObject, "zeta_request")(raw.body), (data) => ({ provider: "zeta", data }))
}
