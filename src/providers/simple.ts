/**
 * The account providers that are one authenticated HTTP call each: zeta (a versioned Graph API), eta
 * (Monkeytype), theta (Trakt), iota (Render), kappa (Polar), lambda (Resend), mu (Notion), nu (GitHub's
 * account endpoint, `GET /user`).
 */
import { Effect, Schema } from "effect"
import type { Credentials } from "../domain/connections.js"
import type { ToolInput, ToolName, ToolOutput } from "../domain/tools.js"
import { GatewayConfig } from "../services/GatewayConfig.js"
import { decodeUpstream, JsonObject, type ProviderTool, requestJson } from "./common.js"

const enc = encodeURIComponent
const param = (v: unknown): string => (typeof v === "string" ? v : JSON.stringify(v))
const NullableString = Schema.optional(Schema.NullOr(Schema.String))
const NullableNumber = Schema.optional(Schema.NullOr(Schema.Number))

type AccountTool<T extends ToolName, P extends keyof Credentials> = ProviderTool<ToolInput<T>, Credentials[P], ToolOutput<T>>

// -- zeta: GET {base}/{version}/{path}?params, Bearer token ---------------------------------------------

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

// -- eta: Monkeytype GET /users/personalBests?mode=&mode2=, Authorization: ApeKey ------------------------

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
      const config = yield* GatewayConfig
      const url = new URL(`${config.providers.eta}/users/personalBests`)
      url.searchParams.set("mode", input.mode)
      if (input.mode2 !== undefined) url.searchParams.set("mode2", input.mode2)
      return yield* requestJson({
        provider: "eta",
        method: "GET",
        url: url.toString(),
        headers: { authorization: `ApeKey ${credentials.ape_key}` },
        idempotent: true
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

// -- theta: Trakt GET /users/me/ratings[/{type}]?page=&limit=, Bearer + trakt-api-key --------------------

const TraktItem = Schema.Struct({ title: NullableString, year: NullableNumber, ids: Schema.optional(JsonObject) })
const TraktRating = Schema.Struct({
  rated_at: Schema.String,
  rating: Schema.Number,
  type: Schema.String,
  movie: Schema.optional(TraktItem),
  show: Schema.optional(TraktItem),
  season: Schema.optional(TraktItem),
  episode: Schema.optional(TraktItem)
})

export const thetaRatings: AccountTool<"theta_ratings", "theta"> = {
  fetch: (input, credentials) =>
    Effect.gen(function* () {
      const config = yield* GatewayConfig
      const url = new URL(`${config.providers.theta}/users/me/ratings${input.type !== undefined ? `/${enc(input.type)}` : ""}`)
      if (input.page !== undefined) url.searchParams.set("page", String(input.page))
      if (input.limit !== undefined) url.searchParams.set("limit", String(input.limit))
      return yield* requestJson({
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
    }),
  normalize: (input, raw) =>
    Effect.map(decodeUpstream("theta", Schema.Array(TraktRating), "theta_ratings")(raw.body), (ratings) => ({
      provider: "theta",
      type: input.type ?? "all",
      page: input.page ?? 1,
      ratings: ratings.map((r) => {
        const item = r.movie ?? r.episode ?? r.season ?? r.show
        return {
          rated_at: r.rated_at,
          rating: r.rating,
          type: r.type,
          title: item?.title ?? null,
          year: item?.year ?? null,
          ids: item?.ids ?? {}
        }
      })
    }))
}

// -- iota: Render DELETE /v1/services/{id}, Bearer (204, no body) ----------------------------------------

export const iotaDeleteService: AccountTool<"iota_delete_service", "iota"> = {
  fetch: (input, credentials) =>
    Effect.flatMap(GatewayConfig, (config) =>
      requestJson({
        provider: "iota",
        method: "DELETE",
        url: `${config.providers.iota}/v1/services/${enc(input.service_id)}`,
        headers: { authorization: `Bearer ${credentials.api_key}` },
        idempotent: false
      })),
  normalize: (input) => Effect.succeed({ provider: "iota", deleted: true, service_id: input.service_id })
}

// -- kappa: Polar DELETE /v1/benefits/{id} (204) and POST /v1/events/ingest, Bearer ----------------------

export const kappaDeleteBenefit: AccountTool<"kappa_delete_benefit", "kappa"> = {
  fetch: (input, credentials) =>
    Effect.flatMap(GatewayConfig, (config) =>
      requestJson({
        provider: "kappa",
        method: "DELETE",
        url: `${config.providers.kappa}/v1/benefits/${enc(input.benefit_id)}`,
        headers: { authorization: `Bearer ${credentials.access_token}` },
        idempotent: false
      })),
  normalize: (input) => Effect.succeed({ provider: "kappa", deleted: true, benefit_id: input.benefit_id })
}

const IngestAnswer = Schema.Struct({ inserted: Schema.Int })

export const kappaIngestEvents: AccountTool<"kappa_ingest_events", "kappa"> = {
  fetch: (input, credentials) =>
    Effect.flatMap(GatewayConfig, (config) =>
      requestJson({
        provider: "kappa",
        method: "POST",
        url: `${config.providers.kappa}/v1/events/ingest`,
        headers: { authorization: `Bearer ${credentials.access_token}` },
        json: { events: input.events },
        idempotent: false
      })),
  normalize: (_input, raw) =>
    Effect.map(decodeUpstream("kappa", IngestAnswer, "kappa_ingest_events")(raw.body), (a) => ({
      provider: "kappa",
      inserted: a.inserted
    }))
}

// -- lambda: Resend PATCH /broadcasts/{id} and POST /emails/batch, Bearer --------------------------------

const IdAnswer = Schema.Struct({ id: Schema.String })
const BatchAnswer = Schema.Struct({ data: Schema.Array(IdAnswer) })

export const lambdaUpdateBroadcast: AccountTool<"lambda_update_broadcast", "lambda"> = {
  fetch: (input, credentials) =>
    Effect.flatMap(GatewayConfig, (config) =>
      requestJson({
        provider: "lambda",
        method: "PATCH",
        url: `${config.providers.lambda}/broadcasts/${enc(input.id)}`,
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
    Effect.flatMap(GatewayConfig, (config) =>
      requestJson({
        provider: "lambda",
        method: "POST",
        url: `${config.providers.lambda}/emails/batch`,
        headers: { authorization: `Bearer ${credentials.api_key}` },
        json: batchOf(input),
        idempotent: false
      })),
  normalize: (_input, raw) =>
    Effect.map(decodeUpstream("lambda", BatchAnswer, "lambda_batch_emails")(raw.body), (a) => ({
      provider: "lambda",
      ids: a.data.map((e) => e.id)
    }))
}

// -- mu: Notion GET /v1/databases/{id}, Bearer + Notion-Version --------------------------------------------

export const NOTION_VERSION = "2022-06-28"

const NotionDatabase = Schema.Struct({
  object: Schema.Literal("database"),
  id: Schema.String,
  title: Schema.optional(Schema.Array(Schema.Struct({ plain_text: Schema.String }))),
  url: NullableString,
  created_time: NullableString,
  last_edited_time: NullableString,
  properties: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Struct({ type: Schema.String }) }))
})

export const muDatabase: AccountTool<"mu_database", "mu"> = {
  fetch: (input, credentials) =>
    Effect.flatMap(GatewayConfig, (config) =>
      requestJson({
        provider: "mu",
        method: "GET",
        url: `${config.providers.mu}/v1/databases/${enc(input.database_id)}`,
        headers: { authorization: `Bearer ${credentials.token}`, "notion-version": NOTION_VERSION },
        idempotent: true
      })),
  normalize: (_input, raw) =>
    Effect.map(decodeUpstream("mu", NotionDatabase, "mu_database")(raw.body), (db) => ({
      provider: "mu",
      id: db.id,
      title: (db.title ?? []).map((t) => t.plain_text).join(""),
      url: db.url ?? null,
      created_time: db.created_time ?? null,
      last_edited_time: db.last_edited_time ?? null,
      properties: Object.entries(db.properties ?? {}).map(([name, p]) => ({ name, type: p.type }))
    }))
}

// -- nu: GitHub GET /user, Bearer -------------------------------------------------------------------------

const GitHubUser = Schema.Struct({
  login: Schema.String,
  id: Schema.Number,
  name: NullableString,
  email: NullableString,
  avatar_url: NullableString,
  html_url: NullableString,
  public_repos: NullableNumber,
  followers: NullableNumber,
  created_at: NullableString
})

export const nuAccount: AccountTool<"nu_account", "nu"> = {
  fetch: (_input, credentials) =>
    Effect.flatMap(GatewayConfig, (config) =>
      requestJson({
        provider: "nu",
        method: "GET",
        url: `${config.providers.nu}/user`,
        headers: {
          authorization: `Bearer ${credentials.token}`,
          accept: "application/vnd.github+json",
          "x-github-api-version": "2022-11-28"
        },
        idempotent: true
      })),
  normalize: (_input, raw) =>
    Effect.map(decodeUpstream("nu", GitHubUser, "nu_account")(raw.body), (u) => ({
      provider: "nu",
      id: u.id,
      login: u.login,
      name: u.name ?? null,
      email: u.email ?? null,
      avatar_url: u.avatar_url ?? null,
      html_url: u.html_url ?? null,
      public_repos: u.public_repos ?? null,
      followers: u.followers ?? null,
      created_at: u.created_at ?? null
    }))
}
