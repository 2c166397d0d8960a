/**
 * kappa: Polar — `DELETE /v1/benefits/{id}` (204) and `POST /v1/events/ingest`, with a Bearer access token.
 * Writes: never retried.
 */
import { Effect, Schema } from "effect"
import { ProvidersConfig } from "../config.js"
import { ProviderIdempotencyKey } from "../services/ProviderClient.js"
import { type AccountTool, decodeUpstream, enc, requestJson } from "./common.js"

export const kappaDeleteBenefit: AccountTool<"kappa_delete_benefit", "kappa"> = {
  fetch: (input, credentials) =>
    Effect.flatMap(ProvidersConfig, (config) =>
      requestJson({
        provider: "kappa",
        method: "DELETE",
        url: `${config.endpoints.kappa.baseUrl}/v1/benefits/${enc(input.benefit_id)}`,
        headers: { authorization: `Bearer ${credentials.access_token}` },
        idempotent: false
      })),
  normalize: (input) => Effect.succeed({ provider: "kappa", deleted: true, benefit_id: input.benefit_id })
}

const IngestAnswer = Schema.Struct({ inserted: Schema.Int })

/**
 * Polar deduplicates events on their `external_id` (per organization): under an Idempotency-Key, each event
 * without one gets one derived from the call's key and its place in the batch, so a batch that reaches Polar
 * twice is counted once. An `external_id` the caller set is left alone.
 */
const withExternalIds = (events: ReadonlyArray<Readonly<Record<string, unknown>>>, key: string | undefined) =>
  key === undefined ? events : events.map((e, i) => ("external_id" in e ? e : { ...e, external_id: `${key}-${i}` }))

export const kappaIngestEvents: AccountTool<"kappa_ingest_events", "kappa"> = {
  fetch: (input, credentials) =>
    Effect.gen(function* () {
      const config = yield* ProvidersConfig
      const key = yield* ProviderIdempotencyKey
      return yield* requestJson({
        provider: "kappa",
        method: "POST",
        url: `${config.endpoints.kappa.baseUrl}/v1/events/ingest`,
        headers: { authorization: `Bearer ${credentials.access_token}` },
        json: { events: withExternalIds(input.events, key) },
        idempotent: false
      })
    }),
  normalize: (_input, raw) =>
    Effect.map(decodeUpstream("kappa", IngestAnswer, "kappa_ingest_events")(raw.body), (a) => ({
      provider: "kappa",
      inserted: a.inserted
    }))
}
