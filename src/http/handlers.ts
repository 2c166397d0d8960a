/**
 * Tool handlers: thin adapters from a decoded request to `Gateway.run` and from its outcome to a response.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { InvalidRequest, UnknownTool } from "../domain/errors.js"
import { isToolName, type ToolInput, type ToolName } from "../domain/tools.js"
import { Gateway, type Outcome } from "../services/Gateway.js"
import { Api, ApiKeyAuth, CurrentCaller, IDEMPOTENCY_HEADER, JsonBody } from "./Api.js"
import { currentRequest, wrongMethodFor } from "./envelope.js"
import { builtIn } from "./narrowContext.js"

const respond = <A>(outcome: Outcome<A>): HttpServerResponse.HttpServerResponse =>
  outcome._tag === "Fresh"
    ? HttpServerResponse.text(outcome.body, {
      status: 200,
      contentType: "application/json",
      headers: { "x-credits-charged": String(outcome.charged) }
    })
    : HttpServerResponse.text(outcome.body, {
      status: outcome.status,
      contentType: "application/json",
      // A replay charges nothing: the credits were charged by the call that produced the answer (which it names).
      headers: { "idempotent-replayed": "true", "x-credits-charged": "0", "x-original-request-id": outcome.originalRequestId }
    })

export const ToolsLive = builtIn(HttpApiBuilder.group(Api, "tools", (handlers) =>
  Effect.gen(function* () {
    const gateway = yield* Gateway
    const handle = <T extends ToolName>(tool: T) =>
    ({ payload, request }: { readonly payload: ToolInput<T>; readonly request: HttpServerRequest.HttpServerRequest }) =>
      Effect.gen(function* () {
        const caller = yield* CurrentCaller
        const { requestId } = yield* currentRequest
        const outcome = yield* gateway.run(caller, tool, payload, { idempotencyKey: request.headers[IDEMPOTENCY_HEADER], requestId })
        return respond(outcome)
      })
    return handlers
      .handle("search", handle("search"))
      .handle("read", handle("read"))
      .handle("weather", handle("weather"))
      .handle("mobile_app_search", handle("mobile_app_search"))
      .handle("alpha_search", handle("alpha_search"))
      .handle("beta_read", handle("beta_read"))
      .handle("beta_search", handle("beta_search"))
      .handle("gamma_scrape", handle("gamma_scrape"))
      .handle("gamma_search", handle("gamma_search"))
      .handle("xi_movie", handle("xi_movie"))
      .handle("delta_post", handle("delta_post"))
      .handle("delta_like", handle("delta_like"))
      .handle("epsilon_request", handle("epsilon_request"))
      .handle("zeta_request", handle("zeta_request"))
      .handle("eta_personal_bests", handle("eta_personal_bests"))
      .handle("theta_ratings", handle("theta_ratings"))
      .handle("iota_delete_service", handle("iota_delete_service"))
      .handle("kappa_delete_benefit", handle("kappa_delete_benefit"))
      .handle("kappa_ingest_events", handle("kappa_ingest_events"))
      .handle("lambda_update_broadcast", handle("lambda_update_broadcast"))
      .handle("lambda_batch_emails", handle("lambda_batch_emails"))
      .handle("mu_database", handle("mu_database"))
      .handle("nu_account", handle("nu_account"))
      .handle("run", ({ payload, request }) =>
        Effect.gen(function* () {
          const caller = yield* CurrentCaller
          const { requestId } = yield* currentRequest
          const tool = payload.tool
          if (!isToolName(tool)) {
            return yield* new InvalidRequest({ message: `Invalid request: tool: ${tool.slice(0, 100)} is not a tool.` })
          }
          const outcome = yield* gateway.runRaw(caller, tool, payload.input, {
            idempotencyKey: request.headers[IDEMPOTENCY_HEADER],
            requestId
          })
          return respond(outcome)
        }))
  })), Context.pick(Gateway, ApiKeyAuth, JsonBody))

export const UnknownToolLive = HttpApiBuilder.group(Api, "unknownTool", (handlers) =>
  handlers.handle("unknownTool", ({ path }) => {
    // a route of another method (`GET /v1/tools`, `/v1/org`, `/v1/usage`, …): the method is what is wrong
    const wrong = wrongMethodFor("POST", `/v1/${path.tool}`)
    return Effect.fail(
      wrong ?? new UnknownTool({ message: `There is no tool named "${path.tool.slice(0, 100)}". GET /v1/tools lists the tools (docs/tools.md describes each).` })
    )
  }))

export const HandlersLive = Layer.mergeAll(ToolsLive, UnknownToolLive)
