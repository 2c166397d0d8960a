/**
 * eta: Monkeytype — `GET /users/personalBests?mode=&mode2=` with `Authorization: ApeKey <key>`.
 */
import { Effect, Schema } from "effect"
import { ProviderCredentialRejected, ProviderRateLimited } from "../domain/errors.js"
import { ProvidersConfig } from "../config.js"
import { upstreamMessage, type UpstreamResponse } from "../services/ProviderClient.js"
import { type AccountTool, decodeUpstream, NullableNumber, NullableString, requestJson } from "./common.js"

/**
 * Monkeytype's own statuses: 470 invalid, 471 inactive, 472 malformed ApeKey (the connection's key is
 * refused), 479 the ApeKey's rate limit.
 */
const monkeytypeStatus = (response: UpstreamResponse) => {
  const message = upstreamMessage(response.body)
  if (response.status >= 470 && response.status <= 472) {
    return new ProviderCredentialRejected({ message: `eta rejected the ApeKey (HTTP ${response.status}): ${message}. Reconnect the account.` })
  }
  if (response.status === 479) {
    return new ProviderRateLimited({ message: `eta is rate limiting this ApeKey (HTTP 479): ${message}. Retry later.` })
  }
  return undefined
}

const PersonalBest = Schema.Struct({
  wpm: Schema.Number,
  acc: NullableNumber,
  raw: NullableNumber,
  consistency: NullableNumber,
  language: NullableString,
  difficulty: NullableString,
  punctuation: Schema.optional(Schema.NullOr(Schema.Boolean)),
  timestamp: NullableNumber
})
// `data` is keyed by mode2 ("15", "60", …) when no mode2 is given, else the list for that mode2.
const MonkeytypeAnswer = Schema.Struct({
  message: Schema.optional(Schema.String),
  data: Schema.NullOr(Schema.Union(Schema.Record({ key: Schema.String, value: Schema.Array(PersonalBest) }), Schema.Array(PersonalBest)))
})

export const etaPersonalBests: AccountTool<"eta_personal_bests", "eta"> = {
  fetch: (input, credentials) =>
    Effect.gen(function* () {
      const config = yield* ProvidersConfig
      const url = new URL(`${config.endpoints.eta.baseUrl}/users/personalBests`)
      url.searchParams.set("mode", input.mode)
      if (input.mode2 !== undefined) url.searchParams.set("mode2", input.mode2)
      return yield* requestJson({
        provider: "eta",
        method: "GET",
        url: url.toString(),
        headers: { authorization: `ApeKey ${credentials.ape_key}` },
        idempotent: true,
        classify: monkeytypeStatus
      })
    }),
  normalize: (input, raw) =>
    Effect.map(decodeUpstream("eta", MonkeytypeAnswer, "eta_personal_bests")(raw.body), ({ data }) => {
      const groups: ReadonlyArray<readonly [string, ReadonlyArray<typeof PersonalBest.Type>]> = data === null
        ? []
        : Array.isArray(data)
        ? [[input.mode2 ?? "", data]]
        : Object.entries(data)
      return {
        provider: "eta",
        mode: input.mode,
        mode2: input.mode2 ?? null,
        personal_bests: groups.flatMap(([mode2, bests]) =>
          bests.map((b) => ({
            mode2,
            wpm: b.wpm,
            acc: b.acc ?? null,
            raw: b.raw ?? null,
            consistency: b.consistency ?? null,
            language: b.language ?? null,
            difficulty: b.difficulty ?? null,
            punctuation: b.punctuation ?? null,
            timestamp: b.timestamp ?? null
          }))
        )
      }
    })
}
