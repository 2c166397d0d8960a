/**
 * kappa: Polar — `DELETE /v1/benefits/{id}` (204) and `POST /v1/events/ingest`, with a Bearer access token, as
 * Polar's API reference (https://docs.polar.sh/api-reference) and its SDK (polarsource/polar-js,
 * src/funcs/benefitsDelete.ts, src/funcs/eventsIngest.ts) describe them. Writes: never retried.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { ProviderRejected } from "../domain/errors.js"
import { ProvidersConfig } from "../config.js"
import { bodyText, ProviderIdempotencyKey, type UpstreamResponse } from "../services/ProviderClient.js"
import { type AccountTool, decodeUpstream, enc, requestJson } from "./common.js"

/**
 * Polar's errors are `{"error": <name>, "detail": <text>}` (polar-js src/models/errors/*.ts; older servers
 * name it `type`, server/polar/exception_handlers.py). The classification table of this module: the names
 * that mean something other than their HTTP status, keyed by status and name.
 */
const POLAR_ERRORS: ReadonlyMap<string, (status: number, detail: string) => ProviderRejected> = new Map([
  // A 403 `NotPermitted` (server/polar/exceptions.py) is Polar refusing the action itself — a benefit that is
  // not deletable, say (server/polar/benefit/service.py) — not the token: reconnecting changes nothing.
  ["403 NotPermitted", (status: number, detail: string) =>
    new ProviderRejected({ message: `kappa does not permit this (HTTP ${status} NotPermitted): ${detail}`, upstreamStatus: status })]
])

const PolarError = Schema.parseJson(Schema.Struct({
  error: Schema.optional(Schema.String),
  type: Schema.optional(Schema.String),
  detail: Schema.optional(Schema.String)
}))

const polarStatus = (response: UpstreamResponse) =>
  Option.match(Schema.decodeUnknownOption(PolarError)(bodyText(response)), {
    onNone: () => undefined,
    onSome: (e) => POLAR_ERRORS.get(`${response.status} ${e.error ?? e.type ?? ""}`)?.(response.status, e.detail ?? "Not permitted")
  })

export const kappaDeleteBenefit: AccountTool<"kappa_delete_benefit", "kappa"> = {
  fetch: (input, credentials) =>
    Effect.flatMap(ProvidersConfig, (config) =>
      requestJson({
        provider: "kappa",
        method: "DELETE",
        url: `${config.endpoints.kappa.baseUrl}/v1/benefits/${enc(input.benefit_id)}`,
        headers: { authorization: `Bearer ${credentials.access_token}` },
        idempotent: false,
        classify: polarStatus
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
        idempotent: false,
        classify: polarStatus
      })
    }),
  normalize: (_input, raw) =>
    Effect.map(decodeUpstream("kappa", IngestAnswer, "kappa_ingest_events")(raw.body), (a) => ({
      provider: "kappa",
      inserted: a.inserted
    }))
}
