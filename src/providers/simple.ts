/**
 * The account providers that are one authenticated HTTP call each: zeta (a versioned Graph API), eta
 * (Monkeytype), theta (Trakt), iota (Render), kappa (Polar), lambda (Resend), mu (Notion), nu (GitHub's
 * account endpoint, `GET /user`).
 */
import { Effect, Schema } from "effect"
import type { Credentials } from "../domain/connections.js"
import type { ToolInput, ToolOutput } from "../domain/tools.js"
import { GatewayConfig } from "../services/GatewayConfig.js"
import { ProviderClient } from "../services/ProviderClient.js"
import { type Answered, decodeUpstream, type ProviderEffect } from "./common.js"

const JsonObject = Schema.Record({ key: Schema.String, value: Schema.Unknown })
const enc = encodeURIComponent
const param = (v: unknown): string => (typeof v === "string" ? v : JSON.stringify(v))

const answered = <A>(provider: string, output: A): Answered<A> => ({ provider, output })

// -- zeta: GET {base}/{version}/{path}?params, Bearer token ---------------------------------------------

export const ZETA_VERSION = "v21.0"

export const zetaRequest = (
  input: ToolInput<"zeta_request">,
  credentials: Credentials["zeta"]
): ProviderEffect<Answered<ToolOutput<"zeta_request">>> =>
  Effect.gen(function* () {
    const config = yield* GatewayConfig
    const client = yield* ProviderClient
    const path = input.path.replace(/^\/+/, "")
    const url = new URL(`${config.providers.zeta}/${enc(input.version ?? ZETA_VERSION)}/${path}`)
    for (const [k, v] of Object.entries(input.params ?? {})) url.searchParams.set(k, param(v))
    const body = yield* client.json({
      provider: "zeta",
      method: "GET",
      url: url.toString(),
      headers: { authorization: `Bearer ${credentials.access_token}` },
      idempotent: true
    })
    return answered("zeta", yield* decodeUpstream("zeta", JsonObject, "zeta_request")(body))
  })

// -- eta: Monkeytype GET /users/personalBests?mode=&mode2=, Authorization: ApeKey ------------------------

const MonkeytypeAnswer = Schema.Struct({ message: Schema.optional(Schema.String), data: Schema.Unknown })

export const etaPersonalBests = (
  input: ToolInput<"eta_personal_bests">,
  credentials: Credentials["eta"]
): ProviderEffect<Answered<ToolOutput<"eta_personal_bests">>> =>
  Effect.gen(function* () {
    const config = yield* GatewayConfig
    const client = yield* ProviderClient
    const url = new URL(`${config.providers.eta}/users/personalBests`)
    url.searchParams.set("mode", input.mode)
    if (input.mode2 !== undefined) url.searchParams.set("mode2", input.mode2)
    const body = yield* client.json({
      provider: "eta",
      method: "GET",
      url: url.toString(),
      headers: { authorization: `ApeKey ${credentials.ape_key}` },
      idempotent: true
    })
    const answer = yield* decodeUpstream("eta", MonkeytypeAnswer, "eta_personal_bests")(body)
    return answered("eta", { mode: input.mode, mode2: input.mode2 ?? null, personal_bests: answer.data ?? null })
  })

// -- theta: Trakt GET /users/me/ratings[/{type}]?page=&limit=, Bearer + trakt-api-key --------------------

export const thetaRatings = (
  input: ToolInput<"theta_ratings">,
  credentials: Credentials["theta"]
): ProviderEffect<Answered<ToolOutput<"theta_ratings">>> =>
  Effect.gen(function* () {
    const config = yield* GatewayConfig
    const client = yield* ProviderClient
    const url = new URL(`${config.providers.theta}/users/me/ratings${input.type !== undefined ? `/${enc(input.type)}` : ""}`)
    if (input.page !== undefined) url.searchParams.set("page", String(input.page))
    if (input.limit !== undefined) url.searchParams.set("limit", String(input.limit))
    const body = yield* client.json({
      provider: "theta",
      method: "GET",
      url: url.toString(),
      headers: {
        authorization: `Bearer ${credentials.access_token}`,
        "trakt-api-version": "2",
        "trakt-api-key": credentials.client_id
      },
      idempotent: true
    })
    const ratings = yield* decodeUpstream("theta", Schema.Array(JsonObject), "theta_ratings")(body)
    return answered("theta", { type: input.type ?? "all", page: input.page ?? 1, ratings })
  })

// -- iota: Render DELETE /v1/services/{id}, Bearer --------------------------------------------------------

export const iotaDeleteService = (
  input: ToolInput<"iota_delete_service">,
  credentials: Credentials["iota"]
): ProviderEffect<Answered<ToolOutput<"iota_delete_service">>> =>
  Effect.gen(function* () {
    const config = yield* GatewayConfig
    const client = yield* ProviderClient
    yield* client.request({
      provider: "iota",
      method: "DELETE",
      url: `${config.providers.iota}/v1/services/${enc(input.service_id)}`,
      headers: { authorization: `Bearer ${credentials.api_key}` },
      idempotent: false
    })
    return answered("iota", { deleted: true, service_id: input.service_id })
  })

// -- kappa: Polar DELETE /v1/benefits/{id} and POST /v1/events/ingest, Bearer ----------------------------

export const kappaDeleteBenefit = (
  input: ToolInput<"kappa_delete_benefit">,
  credentials: Credentials["kappa"]
): ProviderEffect<Answered<ToolOutput<"kappa_delete_benefit">>> =>
  Effect.gen(function* () {
    const config = yield* GatewayConfig
    const client = yield* ProviderClient
    yield* client.request({
      provider: "kappa",
      method: "DELETE",
      url: `${config.providers.kappa}/v1/benefits/${enc(input.benefit_id)}`,
      headers: { authorization: `Bearer ${credentials.access_token}` },
      idempotent: false
    })
    return answered("kappa", { deleted: true, benefit_id: input.benefit_id })
  })

const IngestAnswer = Schema.Struct({ inserted: Schema.Number })

export const kappaIngestEvents = (
  input: ToolInput<"kappa_ingest_events">,
  credentials: Credentials["kappa"]
): ProviderEffect<Answered<ToolOutput<"kappa_ingest_events">>> =>
  Effect.gen(function* () {
    const config = yield* GatewayConfig
    const client = yield* ProviderClient
    const body = yield* client.json({
      provider: "kappa",
      method: "POST",
      url: `${config.providers.kappa}/v1/events/ingest`,
      headers: { authorization: `Bearer ${credentials.access_token}` },
      json: { events: input.events },
      idempotent: false
    })
    const answer = yield* decodeUpstream("kappa", IngestAnswer, "kappa_ingest_events")(body)
    return answered("kappa", { inserted: answer.inserted })
  })

// -- lambda: Resend PATCH /broadcasts/{id} and POST /emails/batch, Bearer --------------------------------

const IdAnswer = Schema.Struct({ id: Schema.String })
const BatchAnswer = Schema.Struct({ data: Schema.Array(IdAnswer) })

export const lambdaUpdateBroadcast = (
  input: ToolInput<"lambda_update_broadcast">,
  credentials: Credentials["lambda"]
): ProviderEffect<Answered<ToolOutput<"lambda_update_broadcast">>> =>
  Effect.gen(function* () {
    const config = yield* GatewayConfig
    const client = yield* ProviderClient
    const body = yield* client.json({
      provider: "lambda",
      method: "PATCH",
      url: `${config.providers.lambda}/broadcasts/${enc(input.id)}`,
      headers: { authorization: `Bearer ${credentials.api_key}` },
      json: {},
      idempotent: false
    })
    const answer = yield* decodeUpstream("lambda", IdAnswer, "lambda_update_broadcast")(body)
    return answered("lambda", { id: answer.id })
  })

/** The batch: the input's `emails` array, or the input itself as a single email. */
export const batchOf = (input: Readonly<Record<string, unknown>>): ReadonlyArray<unknown> => {
  const emails = input["emails"]
  return Array.isArray(emails) ? emails : [input]
}

export const lambdaBatchEmails = (
  input: ToolInput<"lambda_batch_emails">,
  credentials: Credentials["lambda"]
): ProviderEffect<Answered<ToolOutput<"lambda_batch_emails">>> =>
  Effect.gen(function* () {
    const config = yield* GatewayConfig
    const client = yield* ProviderClient
    const body = yield* client.json({
      provider: "lambda",
      method: "POST",
      url: `${config.providers.lambda}/emails/batch`,
      headers: { authorization: `Bearer ${credentials.api_key}` },
      json: batchOf(input),
      idempotent: false
    })
    const answer = yield* decodeUpstream("lambda", BatchAnswer, "lambda_batch_emails")(body)
    return answered("lambda", { data: answer.data })
  })

// -- mu: Notion GET /v1/databases/{id}, Bearer + Notion-Version --------------------------------------------

export const NOTION_VERSION = "2022-06-28"

const NotionDatabase = Schema.Struct({ object: Schema.Literal("database"), id: Schema.String }, Schema.Record({ key: Schema.String, value: Schema.Unknown }))

export const muDatabase = (
  input: ToolInput<"mu_database">,
  credentials: Credentials["mu"]
): ProviderEffect<Answered<ToolOutput<"mu_database">>> =>
  Effect.gen(function* () {
    const config = yield* GatewayConfig
    const client = yield* ProviderClient
    const body = yield* client.json({
      provider: "mu",
      method: "GET",
      url: `${config.providers.mu}/v1/databases/${enc(input.database_id)}`,
      headers: { authorization: `Bearer ${credentials.token}`, "notion-version": NOTION_VERSION },
      idempotent: true
    })
    return answered("mu", yield* decodeUpstream("mu", NotionDatabase, "mu_database")(body))
  })

// -- nu: GitHub GET /user, Bearer -------------------------------------------------------------------------

const GitHubUser = Schema.Struct({ login: Schema.String, id: Schema.Number }, Schema.Record({ key: Schema.String, value: Schema.Unknown }))

export const nuAccount = (
  _input: ToolInput<"nu_account">,
  credentials: Credentials["nu"]
): ProviderEffect<Answered<ToolOutput<"nu_account">>> =>
  Effect.gen(function* () {
    const config = yield* GatewayConfig
    const client = yield* ProviderClient
    const body = yield* client.json({
      provider: "nu",
      method: "GET",
      url: `${config.providers.nu}/user`,
      headers: {
        authorization: `Bearer ${credentials.token}`,
        accept: "application/vnd.github+json",
        "x-github-api-version": "2022-11-28"
      },
      idempotent: true
    })
    return answered("nu", yield* decodeUpstream("nu", GitHubUser, "nu_account")(body))
  })
