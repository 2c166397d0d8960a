/**
 * The PostgreSQL connection: `DATABASE_URL` when set, else the embedded server in the data directory.
 * Migrations run when the layer is built.
 */
import { PgClient } from "@effect/sql-pg"
import type * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import type { MigrationError } from "@effect/sql/Migrator"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Path from "node:path"
import Pg from "pg"
import { ServerConfig } from "../config.js"
import { type EmbeddedPostgresError, type EmbeddedRole, startEmbedded } from "./embedded.js"
import { migrate, requireWrites } from "./migrations/index.js"

const INT8_OID = 20

// Credits are bigint columns; their values are far below 2^53, so they are read as numbers.
const types = new Pg.TypeOverrides()
types.setTypeParser(INT8_OID, "text", (value: string) => Number(value))

export interface PoolOptions {
  readonly maxConnections?: number
  /** How long a statement given up (its caller interrupted) may keep its connection out of the pool; 10 s. */
  readonly giveBackWaitMs?: number
}

/** The connection pool's state, for `/metrics`. */
export interface PoolStats {
  readonly total: number
  readonly idle: number
  /** Queries waiting for a connection. */
  readonly waiting: number
}

export class DatabasePool extends Context.Tag("DatabasePool")<DatabasePool, {
  readonly stats: () => PoolStats
}>() {}

const CONNECT_TIMEOUT = Duration.seconds(5)

/** How long a connection given back while its statement runs waits for the statement to end before it is dropped. */
const GIVE_BACK_WAIT = Duration.seconds(10)

/**
 * The pool's connections, on which no statement is cancelled. `@effect/sql-pg` cancels an interrupted statement
 * (a request whose client hung up, a wait that timed out, a shutdown) with `pg_cancel_backend(pid)` sent on another
 * connection of the pool; when the statement ends first, its connection goes back to the pool and to the next
 * caller, and the cancel stops that caller's statement instead (Effect-TS/effect#8068; the 4.x line retires such a
 * session, #8330). Here, as in `waitAtMost`, an interrupted statement runs to its end: the connection does not show
 * the library its backend's pid (so no cancel is sent), and a connection given back while its statement still runs
 * goes back to the pool only once the statement has ended, so no caller queues behind a statement that is not its
 * own. One that has not ended within `giveBackWaitMs` (a lock that is not let go, a server that stopped answering)
 * is dropped from the pool, so that it does not hold a place in it for as long; so is one that fails meanwhile.
 * Everything else is `pg.Client`'s.
 */
const poolConnection = (giveBackWaitMs: number) =>
  class PoolConnection extends Pg.Client {
    /** `pg.Client`'s own flag (not in its declarations): no statement running or queued on the connection. */
    declare readonly readyForQuery: boolean

    constructor(config?: string | Pg.ClientConfig) {
      super(config)
      // the client sets it when the server names the connection's backend; the library reads it to cancel
      Object.defineProperty(this, "processID", { configurable: true, get: () => undefined, set: () => {} })
      // the pool sets `release` at every checkout; that checkout's release goes through `giveBack`
      let release: ((error?: Error | boolean) => void) | undefined
      Object.defineProperty(this, "release", {
        configurable: true,
        get: () => release,
        set: (poolRelease: (error?: Error | boolean) => void) => {
          release = (error) => this.giveBack(poolRelease, error)
        }
      })
    }

    private giveBack(release: (error?: Error | boolean) => void, error?: Error | boolean) {
      if (error !== undefined && error !== false) return release(error)
      if (this.readyForQuery) return release()
      const settle = (failure?: Error) => {
        clearTimeout(deadline)
        this.off("drain", onDrain)
        this.off("error", onError)
        this.off("end", onEnd)
        release(failure)
      }
      const onDrain = () => settle()
      const onError = (failure: Error) => settle(failure)
      const onEnd = () => settle(new Error("Connection ended while its statement ran"))
      const deadline = setTimeout(() => settle(new Error(`Statement still running ${giveBackWaitMs} ms after it was given up`)), giveBackWaitMs)
      deadline.unref()
      this.once("drain", onDrain)
      this.once("error", onError)
      this.once("end", onEnd)
    }
  }

/**
 * A PgClient for a given URL, with the gateway's settings, over a pool whose state `DatabasePool` reports.
 * Typed as the `SqlClient` it is used as: `PgClient`'s declarations need `pg`'s types (`@types/pg`), which the
 * package's users should not have to install.
 */
export const pgLayer = (
  url: Redacted.Redacted,
  options: PoolOptions = {}
): Layer.Layer<SqlClient.SqlClient | DatabasePool, SqlError> =>
  Layer.scopedContext(Effect.gen(function* () {
    const pool = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const pool = new Pg.Pool({
          connectionString: Redacted.value(url),
          types,
          Client: poolConnection(options.giveBackWaitMs ?? Duration.toMillis(GIVE_BACK_WAIT)),
          // a server that stops answering is found out by TCP (a statement on it, given up, is dropped anyway)
          keepAlive: true,
          application_name: "tool-gateway",
          max: options.maxConnections ?? 20,
          idleTimeoutMillis: 30_000,
          connectionTimeoutMillis: Duration.toMillis(CONNECT_TIMEOUT)
        })
        // A connection that breaks while idle is dropped by the pool; the next query opens another.
        pool.on("error", () => {})
        return pool
      }),
      // finalizers are uninterruptible: without `interruptible` the timeout could not cut a hanging end()
      (pool) => Effect.promise(() => pool.end()).pipe(Effect.interruptible, Effect.timeoutOption(Duration.seconds(1)))
    )
    // Fail fast at start-up when the database cannot be reached.
    yield* Effect.tryPromise({
      try: () => pool.query("SELECT 1"),
      catch: (cause) => new SqlError({ cause, message: "PgClient: Failed to connect" })
    }).pipe(
      Effect.timeoutFail({
        duration: CONNECT_TIMEOUT,
        onTimeout: () => new SqlError({ cause: new Error("Connection timed out"), message: "PgClient: Connection timed out" })
      })
    )
    const client = yield* Layer.build(
      PgClient.layerFromPool({ acquire: Effect.succeed(pool), applicationName: "tool-gateway", types })
    )
    return Context.add(client, DatabasePool, {
      stats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount })
    })
  }))

/**
 * What this process is to the embedded database: `serve` provides `server` (one at a time on a data directory);
 * anything else is a `command`, which joins a running server.
 */
export class EmbeddedDatabaseRole extends Context.Reference<EmbeddedDatabaseRole>()("EmbeddedDatabaseRole", {
  defaultValue: (): EmbeddedRole => "command"
}) {}

/** The database URL: the configured one, or the embedded server's (started for the life of the scope). */
export const databaseUrl = Effect.gen(function* () {
  const config = yield* ServerConfig
  if (Option.isSome(config.databaseUrl)) return config.databaseUrl.value
  const embedded = yield* startEmbedded(config.dataDir, { role: yield* EmbeddedDatabaseRole })
  // said on a first start, and to an operator whose command was given another data directory than the server's
  // (a typo, another working directory): what it does there, the server does not see
  if (embedded.created) {
    yield* Effect.logInfo(
      `Made a new, empty database in ${Path.resolve(config.dataDir)} (GATEWAY_DATA_DIR): ` +
        "a server or command given another data directory, or DATABASE_URL, does not see it"
    )
  }
  return embedded.url
})

/** The database migrated, and taking writes (the gateway's). */
export const MigrationsLive: Layer.Layer<never, SqlError | MigrationError, SqlClient.SqlClient> = Layer.effectDiscard(
  Effect.zipRight(requireWrites, migrate)
)

/** The connection pool for the configured (or embedded) database, as it is: `migrate` applies what it lacks. */
export const ConnectionLive: Layer.Layer<SqlClient.SqlClient | DatabasePool, SqlError | EmbeddedPostgresError, ServerConfig> = Layer
  .unwrapScoped(Effect.map(databaseUrl, (url) => pgLayer(url)))

/** The connection pool, migrated, for the configured (or embedded) database, which may take no writes (a standby). */
export const ReadableDatabaseLive: Layer.Layer<
  SqlClient.SqlClient | DatabasePool,
  SqlError | MigrationError | EmbeddedPostgresError,
  ServerConfig
> = Layer.provideMerge(Layer.effectDiscard(migrate), ConnectionLive)

/** The connection pool, migrated, for the configured (or embedded) database, which must take writes. */
export const DatabaseLive: Layer.Layer<
  SqlClient.SqlClient | DatabasePool,
  SqlError | MigrationError | EmbeddedPostgresError,
  ServerConfig
> = Layer.provideMerge(MigrationsLive, ConnectionLive)
