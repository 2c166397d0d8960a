/**
 * Dashboard handlers: thin adapters over the services, scoped to the signed-in user's org.
 */
import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect, Layer, Option, Redacted } from "effect"
import { NotFound } from "../domain/errors.js"
import { KeyId } from "../domain/ids.js"
import { isToolName } from "../domain/tools.js"
import { Betas } from "../services/Betas.js"
import { Connections } from "../services/Connections.js"
import { Identity } from "../services/Identity.js"
import { KeyStore } from "../services/KeyStore.js"
import { Ledger } from "../services/Ledger.js"
import { Usage } from "../services/Usage.js"
import { connectionView, keyView, orgView } from "../views.js"
import { Api, CurrentUser } from "./Api.js"

const iso = (d: Date) => d.toISOString()

export const DashboardLive = HttpApiBuilder.group(Api, "dashboard", (handlers) =>
  Effect.gen(function* () {
    const connections = yield* Connections
    const keys = yield* KeyStore
    const ledger = yield* Ledger
    const betas = yield* Betas
    const usage = yield* Usage

    const currentOrg = Effect.gen(function* () {
      const { orgId } = yield* CurrentUser
      const org = yield* ledger.getOrg(orgId).pipe(Effect.orDie)
      return orgView(org, yield* betas.list(orgId))
    })

    return handlers
      .handle("connect", ({ payload }) =>
        Effect.gen(function* () {
          const { orgId } = yield* CurrentUser
          const connection = yield* connections.connect(orgId, payload.provider, payload.credentials, payload.label ?? null)
          return connectionView(connection)
        }))
      .handle("listConnections", () =>
        Effect.gen(function* () {
          const { orgId } = yield* CurrentUser
          return { data: (yield* connections.list(orgId)).map(connectionView) }
        }))
      .handle("disconnect", ({ path }) =>
        Effect.gen(function* () {
          const { orgId } = yield* CurrentUser
          return connectionView(yield* connections.disconnect(orgId, path.provider))
        }))
      .handle("createKey", ({ payload }) =>
        Effect.gen(function* () {
          const { orgId } = yield* CurrentUser
          const created = yield* keys.create(orgId, {
            name: payload.name,
            spendLimit: payload.monthly_spend_limit ?? null,
            allowedTools: payload.allowed_tools ?? null,
            rateLimit: payload.rate_limit === undefined || payload.rate_limit === null
              ? null
              : { perSecond: payload.rate_limit.per_second, burst: payload.rate_limit.burst }
          }).pipe(Effect.catchTag("NotFound", Effect.die))
          return { ...keyView(created), key: Redacted.value(created.key) }
        }))
      .handle("listKeys", () =>
        Effect.gen(function* () {
          const { orgId } = yield* CurrentUser
          return { data: (yield* keys.list(orgId)).map(keyView) }
        }))
      .handle("revokeKey", ({ path }) =>
        Effect.gen(function* () {
          const { orgId } = yield* CurrentUser
          // Another org's key is "not found": its existence is not disclosed.
          return keyView(yield* keys.revoke(KeyId.make(path.id), orgId))
        }))
      .handle("getOrg", () => currentOrg)
      .handle("setSpendCap", ({ payload }) =>
        Effect.gen(function* () {
          const { orgId } = yield* CurrentUser
          yield* ledger.setSpendCap(orgId, payload.spend_cap).pipe(Effect.catchTag("NotFound", Effect.die))
          return yield* currentOrg
        }))
      .handle("setBeta", ({ path, payload }) =>
        Effect.gen(function* () {
          const { orgId } = yield* CurrentUser
          if (!isToolName(path.tool)) return yield* new NotFound({ message: `There is no tool named ${path.tool}.` })
          if (payload.enabled) yield* betas.enable(orgId, path.tool).pipe(Effect.orDie)
          else yield* betas.disable(orgId, path.tool)
          return yield* currentOrg
        }))
      .handle("usage", ({ urlParams }) =>
        Effect.gen(function* () {
          const { orgId } = yield* CurrentUser
          const page = yield* usage.page(orgId, {
            limit: urlParams.limit ?? 50,
            cursor: urlParams.cursor === undefined ? undefined : Number(urlParams.cursor),
            keyId: urlParams.key_id,
            tool: urlParams.tool
          })
          return {
            data: page.records.map((r) => ({
              id: String(r.id),
              time: iso(r.time),
              key_id: r.keyId,
              tool: r.tool,
              status: r.status,
              code: r.code,
              credits: r.credits,
              latency_ms: r.latencyMs,
              provider: r.provider,
              request_id: r.requestId
            })),
            next_cursor: page.nextCursor
          }
        }))
  }))

export const DevLive = HttpApiBuilder.group(Api, "dev", (handlers) =>
  Effect.gen(function* () {
    const identity = yield* Identity
    return handlers.handle("jwks", () =>
      Option.match(identity.devJwks, {
        onNone: () => Effect.fail(new NotFound({ message: "No route GET /dev/jwks.json." })),
        onSome: (jwks) => Effect.succeed(HttpServerResponse.unsafeJson(jwks))
      }))
  }))

export const DashboardHandlersLive = Layer.mergeAll(DashboardLive, DevLive)
