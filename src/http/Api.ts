/**
 * The HTTP API: one `POST /v1/<tool>` per tool of the catalog, guarded by the API key. Each part declares
 * the errors it can answer — its middlewares' (the key, the body), its group's, and the API's own
 * `internal_error` — as envelopes, from the groups of `src/domain/errors.ts`: a handler that could fail
 * otherwise does not compile, and each operation documents exactly its own error statuses.
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiMiddleware from "@effect/platform/HttpApiMiddleware"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as HttpApiSecurity from "@effect/platform/HttpApiSecurity"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Context from "effect/Context"
import * as Schema from "effect/Schema"
import { AccountProviderSchema } from "../domain/connections.js"
import * as D from "../domain/dashboard.js"
import { Price } from "../domain/pricing.js"
import { Text } from "../domain/schema-helpers.js"
import * as S from "../domain/schemas.js"
import type { OrgId } from "../domain/ids.js"
import type { Caller } from "../services/KeyStore.js"
import { type Catalog, catalog, RunPayload, type ToolName } from "../domain/tools.js"
import { cleanSpec, textAlternative } from "./openapi.js"
import {
  ApiKeyErrors,
  ArtifactErrors,
  BodyErrors,
  CallErrors,
  DashboardErrors,
  IdTokenErrors,
  InvalidRequest,
  MethodNotAllowed,
  NotFound,
  ServerErrors,
  UnknownTool
} from "../domain/errors.js"
import { wireOf, wireUnion } from "./wire.js"

/** The authenticated caller, provided to tool handlers by `ApiKeyAuth`. */
export class CurrentCaller extends Context.Tag("CurrentCaller")<CurrentCaller, Caller>() {}

/** Authenticates the `X-API-Key` header (and refuses a key sent as a Bearer token), then rate-limits the key. */
export class ApiKeyAuth extends HttpApiMiddleware.Tag<ApiKeyAuth>()("ApiKeyAuth", {
  provides: CurrentCaller,
  failure: wireUnion(...ApiKeyErrors),
  security: {
    apiKey: HttpApiSecurity.apiKey({ key: "X-API-Key", in: "header" }).pipe(
      HttpApiSecurity.annotate(OpenApi.Description, "The API key (tg_…). Never send it in Authorization.")
    )
  }
}) {}

/** The signed-in dashboard user and their org, provided by `IdTokenAuth`. */
export class CurrentUser extends Context.Tag("CurrentUser")<CurrentUser, {
  readonly uid: string
  readonly orgId: OrgId
}>() {}

/** Verifies `Authorization: Bearer <ID token>` and finds the user's org; refuses API keys in either header. */
export class IdTokenAuth extends HttpApiMiddleware.Tag<IdTokenAuth>()("IdTokenAuth", {
  provides: CurrentUser,
  failure: wireUnion(...IdTokenErrors),
  security: {
    idToken: HttpApiSecurity.bearer.pipe(
      HttpApiSecurity.annotate(OpenApi.Description, "A Firebase ID token (or a dev token) of a signed-in dashboard user")
    )
  }
}) {}

/**
 * Marks an endpoint whose payload carries secrets (a connection's credentials): no answer to it repeats a value
 * that was sent.
 */
export class SecretPayload extends Context.Tag("SecretPayload")<SecretPayload, boolean>() {}

/** Checks the body of a tool call before it is decoded: JSON media type, size, well-formed, an object. */
export class JsonBody extends HttpApiMiddleware.Tag<JsonBody>()("JsonBody", { failure: wireUnion(...BodyErrors) }) {}

/**
 * `Idempotency-Key` is read by the tool handlers from the request itself rather than declared on each
 * endpoint: declared, every call of the typed client would have to pass `headers`. OpenAPI documents it as
 * a parameter of every tool operation (src/http/openapi.ts), and the client sets it with `withIdempotencyKey`.
 */
export const IDEMPOTENCY_HEADER = "idempotency-key"

// (the description, with the tool's price, is written by src/http/openapi.ts: the price is the gateway's)
const toolEndpoint = <T extends ToolName>(def: Catalog[T]) =>
  HttpApiEndpoint.post(def.name, `/v1/${def.name}`)
    .setPayload(def.input)
    .addSuccess(def.output)
    .annotate(OpenApi.Summary, `${def.name}: ${def.summary}`)

const c = catalog

export class ToolsGroup extends HttpApiGroup.make("tools")
  .add(toolEndpoint<"search">(c.search))
  .add(toolEndpoint<"read">(c.read))
  .add(toolEndpoint<"weather">(c.weather))
  .add(toolEndpoint<"mobile_app_search">(c.mobile_app_search))
  .add(toolEndpoint<"alpha_search">(c.alpha_search))
  .add(toolEndpoint<"beta_read">(c.beta_read))
  .add(toolEndpoint<"beta_search">(c.beta_search))
  .add(toolEndpoint<"gamma_scrape">(c.gamma_scrape))
  .add(toolEndpoint<"gamma_search">(c.gamma_search))
  .add(toolEndpoint<"xi_movie">(c.xi_movie))
  .add(toolEndpoint<"delta_post">(c.delta_post))
  .add(toolEndpoint<"delta_like">(c.delta_like))
  .add(toolEndpoint<"epsilon_request">(c.epsilon_request))
  .add(toolEndpoint<"zeta_request">(c.zeta_request))
  .add(toolEndpoint<"eta_personal_bests">(c.eta_personal_bests))
  .add(toolEndpoint<"theta_ratings">(c.theta_ratings))
  .add(toolEndpoint<"iota_delete_service">(c.iota_delete_service))
  .add(toolEndpoint<"kappa_delete_benefit">(c.kappa_delete_benefit))
  .add(toolEndpoint<"kappa_ingest_events">(c.kappa_ingest_events))
  .add(toolEndpoint<"lambda_update_broadcast">(c.lambda_update_broadcast))
  .add(toolEndpoint<"lambda_batch_emails">(c.lambda_batch_emails))
  .add(toolEndpoint<"mu_database">(c.mu_database))
  .add(toolEndpoint<"nu_account">(c.nu_account))
  .add(
    HttpApiEndpoint.post("run", "/v1/run")
      .setPayload(RunPayload)
      .addSuccess(S.RunOutput)
      .annotate(OpenApi.Summary, "run: call a tool's provider and answer its raw answer")
  )
  .addError(wireUnion(...CallErrors))
  .middleware(JsonBody)
  .middleware(ApiKeyAuth)
  .annotate(
    OpenApi.Description,
    "The tools: `POST /v1/<tool>` with the API key (`X-API-Key`) and a JSON body, answered with the tool's normalized " +
      "answer and what it cost (`X-Credits-Charged`); `POST /v1/run` for a provider's raw answer. An `Idempotency-Key` makes a retry safe."
  )
{}

/**
 * `POST /v1/<anything else>`: authenticated first, then `unknown_tool` (so an unknown tool never hides a bad key),
 * or `method_not_allowed` for a path that is a route of another method (`POST /v1/tools`).
 */
export class UnknownToolGroup extends HttpApiGroup.make("unknownTool")
  .add(
    HttpApiEndpoint.post("unknownTool", "/v1/:tool").setPath(Schema.Struct({ tool: Schema.String }))
  )
  .addError(wireOf(UnknownTool))
  .addError(wireOf(MethodNotAllowed))
  .middleware(ApiKeyAuth)
  .annotate(OpenApi.Exclude, true)
{}

/** The dashboard API: the signed-in user's org, its connections, keys, spend cap, betas and usage. */
export class DashboardGroup extends HttpApiGroup.make("dashboard")
  .add(
    HttpApiEndpoint.post("connect", "/v1/connections")
      .setPayload(D.CreateConnection)
      .addSuccess(D.ConnectionView, { status: 201 })
      .annotate(OpenApi.Summary, "Connect (or reconnect) a provider account")
      .annotate(SecretPayload, true)
  )
  .add(
    HttpApiEndpoint.get("listConnections", "/v1/connections")
      .addSuccess(D.ConnectionList)
      .annotate(OpenApi.Summary, "List the org's connections (never their credentials)")
  )
  .add(
    HttpApiEndpoint.del("disconnect", "/v1/connections/:provider")
      .setPath(Schema.Struct({ provider: AccountProviderSchema }))
      .addSuccess(D.ConnectionView)
      .annotate(OpenApi.Summary, "Disconnect a provider account and delete its credentials")
  )
  .add(
    HttpApiEndpoint.post("createKey", "/v1/keys")
      .setPayload(D.CreateKey)
      .addSuccess(D.CreatedKeyView, { status: 201 })
      .annotate(OpenApi.Summary, "Create an API key (the full key is in this answer only)")
  )
  .add(
    HttpApiEndpoint.get("listKeys", "/v1/keys")
      .addSuccess(D.KeyList)
      .annotate(OpenApi.Summary, "List the org's API keys (prefixes only)")
  )
  .add(
    HttpApiEndpoint.patch("updateKey", "/v1/keys/:id")
      .setPath(Schema.Struct({ id: Text }))
      .setPayload(D.UpdateKey)
      .addSuccess(D.KeyView)
      .annotate(OpenApi.Summary, "Change a key's name, spend limit, allowed tools, rate limit or expiry")
  )
  .add(
    HttpApiEndpoint.del("revokeKey", "/v1/keys/:id")
      .setPath(Schema.Struct({ id: Text }))
      .addSuccess(D.KeyView)
      .annotate(OpenApi.Summary, "Revoke a key, effective at once")
  )
  .add(
    HttpApiEndpoint.get("getOrg", "/v1/org")
      .addSuccess(D.OrgView)
      .annotate(OpenApi.Summary, "The org: balance, credits held, month spend, spend cap and betas")
  )
  .add(
    HttpApiEndpoint.put("setSpendCap", "/v1/org/spend-cap")
      .setPayload(D.SetSpendCap)
      .addSuccess(D.OrgView)
      .annotate(OpenApi.Summary, "Set or remove the org's monthly spend cap")
  )
  .add(
    HttpApiEndpoint.put("setBeta", "/v1/org/betas/:tool")
      .setPath(Schema.Struct({ tool: D.BetaToolSchema }))
      .setPayload(D.SetBeta)
      .addSuccess(D.OrgView)
      .annotate(OpenApi.Summary, "Turn a beta tool on or off for the org")
  )
  .add(
    HttpApiEndpoint.get("usage", "/v1/usage")
      .setUrlParams(D.UsageQuery)
      .addSuccess(D.UsagePageView)
      .addSuccess(
        Schema.String.pipe(HttpApiSchema.withEncoding({ kind: "Text", contentType: "text/csv" })).annotations({
          description: `With format=csv: a header line (${D.USAGE_CSV_COLUMNS.join(",")}), then one line per record`
        })
      )
      .annotate(OpenApi.Summary, "The org's calls, newest first: a page (cursor), or every match as CSV")
      // a CSV export cut at its limit names the cursor of the rest
      .annotate(OpenApi.Transform, textAlternative("text/csv", ["X-Next-Cursor"]))
  )
  .add(
    HttpApiEndpoint.get("usageSummary", "/v1/usage/summary")
      .setUrlParams(D.UsageSummaryQuery)
      .addSuccess(D.UsageSummaryView)
      .annotate(OpenApi.Summary, "Calls, errors and credits per UTC day or per tool over a range")
  )
  .addError(wireUnion(...DashboardErrors))
  .middleware(JsonBody)
  .middleware(IdTokenAuth)
  .annotate(
    OpenApi.Description,
    "The dashboard API, for a signed-in user (`Authorization: Bearer <ID token>`, never an API key): the org's " +
      "connections, API keys, spend cap, betas and usage."
  )
{}

/** Files kept from tool answers: the org's API key. */
export class ArtifactsGroup extends HttpApiGroup.make("artifacts")
  .add(
    HttpApiEndpoint.get("get", "/v1/artifacts/:id")
      .setPath(Schema.Struct({ id: Text }))
      .setHeaders(Schema.Struct({
        range: Schema.optional(Schema.String).annotations({ description: "One byte range, e.g. bytes=0-1023" }),
        "if-range": Schema.optional(Schema.String).annotations({ description: "Serve the range only if the ETag still matches" }),
        "if-none-match": Schema.optional(Schema.String).annotations({ description: "The ETag you have: 304 if unchanged" })
      }))
      .addSuccess(
        HttpApiSchema.Uint8Array().annotations({ description: "The file's bytes, exactly as they were received (its own Content-Type)" })
      )
      .addSuccess(HttpApiSchema.Uint8Array().annotations({ description: "The requested range (Content-Range)" }), { status: 206 })
      .addSuccess(HttpApiSchema.Empty(304).annotations({ description: "Not modified: the ETag sent in If-None-Match is the file's" }))
      .annotate(OpenApi.Summary, "Download a file kept from a tool answer (Range supported; the ETag is its SHA-256)")
  )
  .addError(wireUnion(...ArtifactErrors))
  .middleware(ApiKeyAuth)
  .annotate(
    OpenApi.Description,
    "Files kept from tool answers (a PDF, an image, a screenshot), byte for byte, for the org's API key while they are retained."
  )
{}

/** The tool catalog: public, no key needed. */
export class CatalogGroup extends HttpApiGroup.make("catalog")
  .add(
    HttpApiEndpoint.get("list", "/v1/tools")
      .addSuccess(Schema.Struct({ data: Schema.Array(Schema.Struct({
        name: Schema.String,
        summary: Schema.String,
        /** What the tool does, for a model choosing one: the text of its OpenAPI operation and, with its price, of MCP's tool. */
        description: Schema.String,
        provider: Schema.String,
        account: Schema.Boolean,
        beta: Schema.Boolean,
        effect: Schema.Literal("read", "write"),
        configured: Schema.Boolean,
        price: Price,
        input_schema: Schema.Unknown,
        output_schema: Schema.Unknown
      })) }).annotations({ description: "The catalog: every tool" }))
      .annotate(OpenApi.Summary, "Every tool, its schemas, price, and whether this gateway can run it")
  )
  .annotate(OpenApi.Description, "The tool catalog, public (no key needed): each tool's schemas, its price on this gateway and whether it can run here.")
{}

/**
 * The dev issuer (404 unless `DEV_IDENTITY` is on): its public keys, and a dev ID token for a user id, for the
 * dashboard's dev sign-in on a loopback gateway.
 */
export class DevGroup extends HttpApiGroup.make("dev")
  .add(HttpApiEndpoint.get("jwks", "/dev/jwks.json").addSuccess(Schema.Struct({ keys: Schema.Array(Schema.Unknown) })))
  .add(
    HttpApiEndpoint.post("token", "/dev/token")
      .setPayload(D.DevTokenRequest)
      .addSuccess(D.DevTokenView)
  )
  .addError(wireOf(NotFound))
  .addError(wireOf(InvalidRequest))
  // its body is JSON as every other (the platform would take a form's fields too: a page of another site could post one)
  .middleware(JsonBody)
  .annotate(OpenApi.Exclude, true)
{}

export class Api extends HttpApi.make("tool-gateway")
  .add(ToolsGroup)
  .add(DashboardGroup)
  .add(CatalogGroup)
  .add(ArtifactsGroup)
  .add(DevGroup)
  .add(UnknownToolGroup)
  .addError(wireUnion(...ServerErrors))
  .annotate(OpenApi.Title, "Tool Gateway")
  .annotate(OpenApi.Version, "v1")
  // relative to where the document is served (its root); GET /openapi.json names PUBLIC_URL instead when it is set
  .annotate(OpenApi.Servers, [{ url: "/", description: "This gateway" }])
  .annotate(OpenApi.Transform, cleanSpec)
{}
