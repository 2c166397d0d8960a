/**
 * The PostgreSQL connection: `DATABASE_URL` when set, else the embedded server in the data directory.
 * Migrations run when the layer is built.
 */
import { PgClient } from "@effect/sql-pg"
import type { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import type { MigrationError } from "@effect/sql/Migrator"
import { Duration, Effect, Layer, Option, type Redacted } from "effect"
import Pg from "pg"
import { GatewayConfig } from "../services/GatewayConfig.js"
import { type EmbeddedPostgresError, startEmbedded } from "./embedded.js"
import { migrate } from "./migrations.js"

const INT8_OID = 20

// Credits are bigint columns; their values are far below 2^53, so they are read as numbers.
const types = new Pg.TypeOverrides()
types.setTypeParser(INT8_OID, "text", (value: string) => Number(value))

export interface PoolOptions {
  readonly maxConnections?: number
}

/** A PgClient for a given URL, with the gateway's settings. */
export const pgLayer = (url: Redacted.Redacted, options: PoolOptions = {}) =>
  PgClient.layer({
    url,
    types,
    applicationName: "tool-gateway",
    maxConnections: options.maxConnections ?? 20,
    idleTimeout: Duration.seconds(30),
    connectTimeout: Duration.seconds(5)
  })

/** The database URL: the configured one, or the embedded server's (started for the life of the scope). */
export const databaseUrl = Effect.gen(function* () {
  const config = yield* GatewayConfig
  if (Option.isSome(config.databaseUrl)) return config.databaseUrl.value
  const embedded = yield* startEmbedded(config.dataDir)
  return embedded.url
})

export const MigrationsLive: Layer.Layer<never, SqlError | MigrationError, SqlClient.SqlClient> = Layer.effectDiscard(
  migrate
)

/** The connection pool, migrated, for the configured (or embedded) database. */
export const DatabaseLive: Layer.Layer<
  PgClient.PgClient | SqlClient.SqlClient,
  SqlError | MigrationError | EmbeddedPostgresError,
  GatewayConfig
> = Layer.provideMerge(MigrationsLive, Layer.unwrapScoped(Effect.map(databaseUrl, (url) => pgLayer(url))))
