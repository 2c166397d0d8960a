/**
 * lambda: Resend's REST API (https://resend.com/docs/api-reference/introduction; request and answer shapes as
 * resend/resend-openapi `resend.yaml` and the official SDK resend/resend-node describe them), with the
 * connection's API key as a Bearer token and a `User-Agent` on every request (Resend refuses a request without
 * one with a 403; the provider client always sends the gateway's).
 *
 * - `PATCH /broadcasts/{id}` with the fields to change, named as the REST API names them (`UpdateBroadcastOptions`;
 *   src/broadcasts/broadcasts.ts `update` in the SDK): `name`, `segment_id`, `audience_id` (deprecated),
 *   `from`, `subject`, `reply_to`, `preview_text`, `html`, `text`, `topic_id`.
 * - `POST /emails/batch` with an `Idempotency-Key` when the call has one
 *   (https://resend.com/docs/dashboard/emails/idempotency-keys: 1–256 characters, kept 24 hours).
 *
 * Writes: never retried.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { ProviderRejected, ProviderUnavailable } from "../domain/errors.js"
import { ProvidersConfig } from "../config.js"
import { bodyText, idempotencyHeader, upstreamMessage, type UpstreamResponse } from "../services/ProviderClient.js"
import type { ToolInput } from "../domain/tools.js"
import { type AccountTool, decodeUpstream, enc, requestJson } from "./common.js"

/** Resend's error body (https://resend.com/docs/api-reference/errors): `{statusCode, name, message}`. */
const ResendError = Schema.parseJson(Schema.Struct({ name: Schema.String }))

/**
 * Resend's errors where they mean something else than HTTP's general rules say
 * (https://resend.com/docs/api-reference/errors):
 *
 * | status | name                           | here                                                          |
 * | 403    | validation_error               | provider_rejected: an unverified domain or a testing address, |
 * |        |                                | not a refused key (403 `invalid_api_key` stays one)           |
 * | 409    | concurrent_idempotent_requests | provider_unavailable: the first request with this key is      |
 * |        |                                | still running; a retry later gets its answer                  |
 *
 * Every other status (400 `validation_error` and `invalid_idempotency_key`, 401 `missing_api_key` and
 * `restricted_api_key`, 403 `invalid_api_key`, 404, 409 `invalid_idempotent_request`, 422, 429 rate limit and
 * quotas, 5xx) goes by the general rules.
 */
const resendStatus = (response: UpstreamResponse) => {
  const name = Option.getOrUndefined(Schema.decodeUnknownOption(ResendError)(bodyText(response)))?.name
  const message = upstreamMessage(response.body)
  if (response.status === 403 && name === "validation_error") {
    return new ProviderRejected({ message: `lambda refused the email (HTTP 403): ${message}`, upstreamStatus: 403 })
  }
  if (response.status === 409 && name === "concurrent_idempotent_requests") {
    return new ProviderUnavailable({ message: `lambda is still sending the first request with this idempotency key (HTTP 409): ${message}. Retry later.` })
  }
  return undefined
}

const IdAnswer = Schema.Struct({ id: Schema.String })
const BatchAnswer = Schema.Struct({ data: Schema.Array(IdAnswer) })

/** The body of the update: every field of the input but the broadcast's id, under Resend's own names. */
const changesOf = ({ id: _id, ...changes }: ToolInput<"lambda_update_broadcast">) => changes

export const lambdaUpdateBroadcast: AccountTool<"lambda_update_broadcast", "lambda"> = {
  fetch: (input, credentials) =>
    Effect.flatMap(ProvidersConfig, (config) =>
      requestJson({
        provider: "lambda",
        method: "PATCH",
        url: `${config.endpoints.lambda.baseUrl}/broadcasts/${enc(input.id)}`,
        headers: { authorization: `Bearer ${credentials.api_key}` },
        json: changesOf(input),
        idempotent: false,
        classify: resendStatus
      })),
  normalize: (_input, raw) =>
    Effect.map(decodeUpstream("lambda", IdAnswer, "lambda_update_broadcast")(raw.body), (a) => ({
      provider: "lambda",
      id: a.id
    }))
}

/** The batch: the input's `emails` array, or the input itself as a single email. */
const batchOf = (input: ToolInput<"lambda_batch_emails">): ReadonlyArray<unknown> =>
  "emails" in input && Array.isArray(input.emails) ? input.emails : [input]

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
        idempotent: false,
        classify: resendStatus
      })
    }),
  normalize: (_input, raw) =>
    Effect.map(decodeUpstream("lambda", BatchAnswer, "lambda_batch_emails")(raw.body), (a) => ({
      provider: "lambda",
      ids: a.data.map((e) => e.id)
    }))
}
