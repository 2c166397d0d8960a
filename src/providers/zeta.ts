/**
 * zeta: a versioned Graph-style API — `GET {base}/{version}/{path}?params` with the connection's Bearer token.
 */
import { Effect } from "effect"
import { GatewayConfig } from "../services/GatewayConfig.js"
import { type AccountTool, decodeUpstream, enc, JsonObject, requestJson } from "./common.js"

const param = (v: unknown): string => (typeof v === "string" ? v : JSON.stringify(v))

export const ZETA_VERSION = "v21.0"

export const zetaRequest: AccountTool<"zeta_request", "zeta"> = {
  fetch: (input, credentials) =>
    Effect.gen(function* () {
      const config = yield* GatewayConfig
      const path = input.path.replace(/^\/+/, "")
      const url = new URL(`${config.providers.zeta}/${enc(input.version ?? ZETA_VERSION)}/${path}`)
      for (const [k, v] of Object.entries(input.params ?? {})) url.searchParams.set(k, param(v))
      return yield* requestJson({
        provider: "zeta",
        method: "GET",
        url: url.toString(),
        headers: { authorization: `Bearer ${credentials.access_token}` },
        idempotent: true
      })
    }),
  normalize: (_input, raw) =>
    Effect.map(decodeUpstream("zeta", JsonObject, "zeta_request")(raw.body), (data) => ({ provider: "zeta", data }))
}
