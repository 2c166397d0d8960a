/**
 * iota: Render — `DELETE /v1/services/{id}` with a Bearer API key (204, no body). A write: never retried.
 */
import * as Effect from "effect/Effect"
import { ProvidersConfig } from "../config.js"
import { type AccountTool, enc, requestJson } from "./common.js"

export const iotaDeleteService: AccountTool<"iota_delete_service", "iota"> = {
  fetch: (input, credentials) =>
    Effect.flatMap(ProvidersConfig, (config) =>
      requestJson({
        provider: "iota",
        method: "DELETE",
        url: `${config.endpoints.iota.baseUrl}/v1/services/${enc(input.service_id)}`,
        headers: { authorization: `Bearer ${credentials.api_key}` },
        idempotent: false
      })),
  normalize: (input) => Effect.succeed({ provider: "iota", deleted: true, service_id: input.service_id })
}
