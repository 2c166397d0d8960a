/**
 * Beta tools are off for an org until enabled for it (by the operator's CLI, or the dashboard API).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { BetaUnavailable, NotFound } from "../domain/errors.js"
import type { OrgId } from "../domain/ids.js"
import type { ToolName } from "../domain/tools.js"

export class Betas extends Context.Tag("Betas")<Betas, {
  readonly enable: (orgId: OrgId, tool: ToolName) => Effect.Effect<void, NotFound>
  readonly disable: (orgId: OrgId, tool: ToolName) => Effect.Effect<void>
  readonly list: (orgId: OrgId) => Effect.Effect<ReadonlyArray<string>>
  readonly require: (orgId: OrgId, tool: ToolName) => Effect.Effect<void, BetaUnavailable>
}>() {}

const BetaRow = Schema.Struct({ tool: Schema.String })

export const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient

  const findBetas = SqlSchema.findAll({
    Request: Schema.String,
    Result: BetaRow,
    execute: (orgId) => sql`SELECT tool FROM org_betas WHERE org_id = ${orgId} ORDER BY tool`
  })

  const enable = (orgId: OrgId, tool: ToolName) =>
    Effect.gen(function* () {
      const rows = yield* sql`
        INSERT INTO org_betas (org_id, tool) SELECT id, ${tool} FROM orgs WHERE id = ${orgId}
        ON CONFLICT DO NOTHING RETURNING org_id`
      if (rows.length === 0) {
        const org = yield* sql`SELECT 1 FROM orgs WHERE id = ${orgId}`
        if (org.length === 0) return yield* new NotFound({ message: `no org with id ${orgId}` })
      }
    }).pipe(Effect.catchTag("SqlError", Effect.die))

  const disable = (orgId: OrgId, tool: ToolName) =>
    sql`DELETE FROM org_betas WHERE org_id = ${orgId} AND tool = ${tool}`.pipe(Effect.asVoid, Effect.orDie)

  const list = (orgId: OrgId) =>
    findBetas(orgId).pipe(
      Effect.map((rows) => rows.map((r) => r.tool)),
      Effect.orDie
    )

  const require = (orgId: OrgId, tool: ToolName) =>
    sql`SELECT 1 FROM org_betas WHERE org_id = ${orgId} AND tool = ${tool}`.pipe(
      Effect.orDie,
      Effect.flatMap((rows) =>
        rows.length > 0
          ? Effect.void
          : Effect.fail(
            new BetaUnavailable({
              message: `${tool} is in beta and not enabled for this org. A member can enable it (PUT /v1/org/betas/${tool} with {"enabled": true}), or the operator (tool-gateway beta enable).`
            })
          )
      )
    )

  return Betas.of({ enable, disable, list, require })
})

export const BetasLive = Layer.effect(Betas, make)
