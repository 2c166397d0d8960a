/**
 * zeta: a versioned Graph-style API — `GET {base}/{version}/{path}?params` with the connection's Bearer token.
 */
import { Effect, Option, Schema } from "effect"
import { ProviderCredentialRejected } from "../domain/errors.js"
import { ProvidersConfig } from "../config.js"
import type { UpstreamResponse } from "../services/ProviderClient.js"
import { type AccountTool, decodeUpstream, enc, JsonObject, requestJson } from "./common.js"

const param = (v: unknown): string => (typeof v === "string" ? v : JSON.stringify(v))

/** A Graph OAuthException with code 190 is an invalid or expired token, whatever the HTTP status (often 400). */
const GraphError = Schema.Struct({ error: Schema.Struct({ code: Schema.Number, message: Schema.optional(Schema.String) }) })
const graphStatus = (response: UpstreamResponse) => {
  const parsed = Schema.decodeUnknownOption(Schema.parseJson(GraphError))(new TextDecoder().decode(response.body))
  return Option.isSome(parsed) && parsed.value.error.code === 190
    ? new ProviderCredentialRejected({
      message: `zeta rejected the access token (code 190): ${parsed.value.error.message ?? "invalid or expired"}. Reconnect the account.`
    })
    : undefined
}

export const ZETA_VERSION = "v21.0"

export const zetaRequest: AccountTool<"zeta_request", "zeta"> = {
  fetch: (input, credentials) =>
    Effect.gen(function* () {
      const config = yield* ProvidersConfig
      const path = input.path.replace(/^\/+/, "")
      const url = new URL(`${config.endpoints.zeta.baseUrl}/${enc(input.version ?? ZETA_VERSION)}/${path}`)
      for (const [k, v] of Object.entries(input.params ?? {})) url.searchParams.set(k, param(v))
      return yield* requestJson({
        provider: "zeta",
        method: "GET",
        url: url.toString(),
        headers: { authorization: `Bearer ${credentials.access_token}` },
        idempotent: true,
        classify: graphStatus
      })
    }),
  normalize: (_input, raw) =>
    Effect.map(decodeUpstream("zeta", JsonObject, "zeta_request")(raw.body), (data) => ({ provider: "zeta", data }))
}
