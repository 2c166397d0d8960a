/**
 * lambda: Resend — `PATCH /broadcasts/{id}` and `POST /emails/batch`, with a Bearer API key. Writes: never
 * retried.
 */
import { Effect, Schema } from "effect"
import { ProvidersConfig } from "../config.js"
import { idempotencyHeader } from "../services/ProviderClient.js"
import { type AccountTool, decodeUpstream, enc, requestJson } from "./common.js"

const IdAnswer = Schema.Struct({ id: Schema.String })
const BatchAnswer = Schema.Struct({ data: Schema.Array(IdAnswer) })

export const lambdaUpdateBroadcast: AccountTool<"lambda_update_broadcast", "lambda"> = {
  fetch: (input, credentials) =>
    Effect.flatMap(ProvidersConfig, (config) =>
      requestJson({
        provider: "lambda",
        method: "PATCH",
        url: `${config.endpoints.lambda.baseUrl}/broadcasts/${enc(input.id)}`,
        headers: { authorization: `Bearer ${credentials.api_key}` },
        json: {},
        idempotent: false
      })),
  normalize: (_input, raw) =>
    Effect.map(decodeUpstream("lambda", IdAnswer, "lambda_update_broadcast")(raw.body), (a) => ({
      provider: "lambda",
      id: a.id
    }))
}

/** The batch: the input's `emails` array, or the input itself as a single email. */
export const batchOf = (input: Readonly<Record<string, unknown>>): ReadonlyArray<unknown> => {
  const emails = input["emails"]
  return Array.isArray(emails) ? emails : [input]
}

export const lambdaBatchEmails: AccountTool<"lambda_batch_emails", "lambda"> = {
  fetch: (input, credentials) =>
    Effect.gen(function* () {
      const config = yield* ProvidersConfig
      // Resend keeps an Idempotency-Key for 24 hours: the same batch sent again is not sent twice
      const idempotency = yield* idempotencyHeader
      return yield* requestJson({
        provider: "lambda",
        method: "POST",
        url: `${config.endpoints.lambda.baseUrl}/emails/batch`,
        headers: { authorization: `Bearer ${credentials.api_key}`, ...idempotency },
        json: batchOf(input),
        idempotent: false
      })
    }),
  normalize: (_input, raw) =>
    Effect.map(decodeUpstream("lambda", BatchAnswer, "lambda_batch_emails")(raw.body), (a) => ({
      provider: "lambda",
      ids: a.data.map((e) => e.id)
    }))
}
