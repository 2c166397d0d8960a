/**
 * nu: GitHub's account endpoint — `GET /user` with a Bearer token, REST API version 2022-11-28
 * (https://docs.github.com/en/rest/users/users#get-the-authenticated-user).
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { ProviderRateLimited } from "../domain/errors.js"
import { ProvidersConfig } from "../config.js"
import { rateLimitResetSeconds, retryAfterSeconds, upstreamMessage, type UpstreamResponse } from "../services/ProviderClient.js"
import { type AccountTool, decodeUpstream, NullableNumber, NullableString, requestJson } from "./common.js"

/** GitHub's advice when a secondary limit names no time: "wait for at least one minute before retrying". */
const SECONDARY_FALLBACK_SECONDS = 60

/**
 * The classification table of this module: GitHub's rate limits, as "Rate limits for the REST API" describes
 * them (https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api#exceeding-the-rate-limit)
 * and octokit/plugin-throttling.js (src/index.ts) reads them. A 403 or 429 is a rate limit, not a refused token:
 *
 * - a secondary limit: the message says "secondary rate limit", or a `retry-after` is present — wait
 *   `retry-after` seconds, else until `x-ratelimit-reset` when `x-ratelimit-remaining` is 0, else a minute;
 * - the primary limit: `x-ratelimit-remaining: 0` — wait until `x-ratelimit-reset`.
 *
 * Any other 401 or 403 is the token's (the general rule).
 */
const gitHubStatus = (response: UpstreamResponse, now: number) => {
  if (response.status !== 403 && response.status !== 429) return undefined
  const message = upstreamMessage(response.body)
  const headers = response.headers
  const used = headers["x-ratelimit-remaining"] === "0"
  const secondary = /\bsecondary rate\b/i.test(message) || (!used && headers["retry-after"] !== undefined)
  if (!secondary && !used) return undefined
  const retryAfter = retryAfterSeconds(headers, now) ?? (used ? rateLimitResetSeconds(headers, now) : SECONDARY_FALLBACK_SECONDS)
  return new ProviderRateLimited({
    message: `nu's ${secondary ? "secondary" : "primary"} rate limit for this token is reached (HTTP ${response.status}): ${message}. ` +
      "The token is fine; retry later.",
    ...(retryAfter !== undefined ? { retryAfter } : {})
  })
}

const GitHubUser = Schema.Struct({
  login: Schema.String,
  id: Schema.Number,
  name: NullableString,
  email: NullableString,
  avatar_url: NullableString,
  html_url: NullableString,
  public_repos: NullableNumber,
  followers: NullableNumber,
  created_at: NullableString
})

export const nuAccount: AccountTool<"nu_account", "nu"> = {
  fetch: (_input, credentials) =>
    Effect.flatMap(ProvidersConfig, (config) =>
      requestJson({
        provider: "nu",
        method: "GET",
        url: `${config.endpoints.nu.baseUrl}/user`,
        headers: {
          authorization: `Bearer ${credentials.token}`,
          accept: "application/vnd.github+json",
          "x-github-api-version": "2022-11-28"
        },
        idempotent: true,
        classify: gitHubStatus
      })),
  normalize: (_input, raw) =>
    Effect.map(decodeUpstream("nu", GitHubUser, "nu_account")(raw.body), (u) => ({
      provider: "nu",
      id: u.id,
      login: u.login,
      name: u.name ?? null,
      email: u.email ?? null,
      avatar_url: u.avatar_url ?? null,
      html_url: u.html_url ?? null,
      public_repos: u.public_repos ?? null,
      followers: u.followers ?? null,
      created_at: u.created_at ?? null
    }))
}
