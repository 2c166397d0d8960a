/**
 * eta: Monkeytype — `GET /users/personalBests?mode=&mode2=` with `Authorization: ApeKey <key>`, as the API
 * reference (https://api.monkeytype.com/docs) and its contract (monkeytypegame/monkeytype,
 * packages/contracts/src/users.ts `getPersonalBests`) describe it.
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { type ProviderError, ProviderCredentialRejected, ProviderRateLimited } from "../domain/errors.js"
import { ProvidersConfig } from "../config.js"
import { rateLimitResetSeconds, retryAfterSeconds, upstreamMessage, type UpstreamResponse } from "../services/ProviderClient.js"
import { type AccountTool, decodeUpstream, NullableNumber, NullableString, requestJson } from "./common.js"
import { isArray } from "../domain/json.js"

const keyRefused = (status: number, message: string) =>
  new ProviderCredentialRejected({ message: `eta rejected the ApeKey (HTTP ${status}): ${message}. Reconnect the account with a working ApeKey.` })

const limited = (response: UpstreamResponse, now: number, message: string) => {
  const retryAfter = retryAfterSeconds(response.headers, now) ?? rateLimitResetSeconds(response.headers, now)
  return new ProviderRateLimited({
    message: `eta is rate limiting ${response.status === 479 ? "this ApeKey" : "the gateway"} (HTTP ${response.status}): ${message}. Retry later.`,
    ...(retryAfter !== undefined ? { retryAfter } : {})
  })
}

/**
 * The classification table of this module, from Monkeytype's backend (monkeytypegame/monkeytype):
 *
 * - backend/src/constants/monkey-status-codes.ts: 470 "Invalid ApeKey", 471 "ApeKey is inactive",
 *   472 "ApeKey is malformed" — the connection's key is refused; 479 "ApeKey rate limit exceeded". Its source
 *   assigns no other code from 470 to 479; one would follow the general rule.
 * - backend/src/middlewares/auth.ts `authenticateWithApeKey`: 404 "ApeKey not found" (the key was deleted) and
 *   400 "Malformed ApeKey" (no `<id>.<secret>` in it) refuse the key too.
 * - backend/src/middlewares/rate-limit.ts: its limiters are express-rate-limit's, which send `Retry-After`
 *   (seconds) and `X-RateLimit-Reset` (epoch seconds) with 479 and with the 429 of the other limits.
 */
type Reading = (response: UpstreamResponse, now: number, message: string) => ProviderError | undefined
const refused: Reading = (r, _now, m) => keyRefused(r.status, m)
const MONKEYTYPE_STATUSES: ReadonlyMap<number, Reading> = new Map<number, Reading>([
  [470, refused],
  [471, refused],
  [472, refused],
  [404, (r, now, m) => (m === "ApeKey not found" ? refused(r, now, m) : undefined)],
  [400, (r, now, m) => (m === "Malformed ApeKey" ? refused(r, now, m) : undefined)],
  [479, limited],
  [429, limited]
])

const monkeytypeStatus = (response: UpstreamResponse, now: number) =>
  MONKEYTYPE_STATUSES.get(response.status)?.(response, now, upstreamMessage(response.body))

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
        : isArray(data)
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
