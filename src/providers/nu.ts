/**
 * nu: GitHub's account endpoint — `GET /user` with a Bearer token.
 */
import { Effect, Schema } from "effect"
import { ProviderRateLimited } from "../domain/errors.js"
import { ProvidersConfig } from "../config.js"
import { retryAfterSeconds, upstreamMessage, type UpstreamResponse } from "../services/ProviderClient.js"
import { type AccountTool, decodeUpstream, NullableNumber, NullableString, requestJson } from "./common.js"

/** GitHub's rate limit is a 403 (or 429) with `x-ratelimit-remaining: 0`: the token is fine. */
const gitHubStatus = (response: UpstreamResponse, now: number) => {
  if ((response.status !== 403 && response.status !== 429) || response.headers["x-ratelimit-remaining"] !== "0") return undefined
  const retryAfter = retryAfterSeconds(response.headers, now)
  return new ProviderRateLimited({
    message: `nu's rate limit for this token is used up (HTTP ${response.status}): ${upstreamMessage(response.body)}. Retry later.`,
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
