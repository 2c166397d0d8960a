/**
 * A fresh, migrated database per test file on the run's PostgreSQL server.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Layer, Redacted } from "effect"
import * as Net from "node:net"
import Pg from "pg"
import { inject } from "vitest"
import { MigrationsLive, pgLayer } from "../../src/db/Database.js"
import { base62 } from "../../src/services/random.js"

/** One statement on its own connection to `url`. */
export const adminQuery = async (url: string, text: string) => {
  const client = new Pg.Client({ connectionString: url })
  await client.connect()
  try {
    await client.query(text)
  } finally {
    await client.end()
  }
}

/** Create an empty database on the test server; dropped when the scope closes. */
export const freshDatabaseUrl = Effect.acquireRelease(
  Effect.promise(async () => {
    const admin = inject("adminDatabaseUrl")
    const name = `tg_test_${base62(10).toLowerCase()}`
    await adminQuery(admin, `CREATE DATABASE ${name}`)
    const url = new URL(admin)
    url.pathname = `/${name}`
    return { name, url: url.toString() }
  }),
  ({ name }) =>
    Effect.promise(() =>
      adminQuery(inject("adminDatabaseUrl"), `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined)
    )
).pipe(Effect.map(({ url }) => url))

/** The URL of this file's database (created once per layer build). */
export class TestDatabaseUrl extends Effect.Service<TestDatabaseUrl>()("test/TestDatabaseUrl", {
  scoped: Effect.map(freshDatabaseUrl, (url) => ({ url }))
}) {}

/** A migrated pool on a fresh database, and its URL. */
export const TestDatabaseLive = Layer.unwrapScoped(
  Effect.map(TestDatabaseUrl, ({ url }) => MigrationsLive.pipe(Layer.provideMerge(pgLayer(Redacted.make(url), { maxConnections: 30 }))))
).pipe(Layer.provideMerge(TestDatabaseUrl.Default))

export const sqlOf = SqlClient.SqlClient

/**
 * Make this file's database refuse connections (and end the open ones), or accept them again: a database
 * outage as the gateway sees it.
 */
export const blockDatabase = (allow: boolean) =>
  Effect.gen(function* () {
    const { url } = yield* TestDatabaseUrl
    const name = new URL(url).pathname.slice(1)
    yield* Effect.promise(async () => {
      const client = new Pg.Client({ connectionString: inject("adminDatabaseUrl") })
      await client.connect()
      try {
        await client.query(`ALTER DATABASE ${name} WITH ALLOW_CONNECTIONS ${allow}`)
        if (!allow) await client.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", [name])
      } finally {
        await client.end()
      }
    })
  })

/**
 * A TCP relay to the test's database that can lose a statement's answer: once `cutAfter` is set, the first client
 * message that contains it is passed on, and as the server answers it the relay closes both sides (the statement ran,
 * and committed if it was a commit; the client never hears so), clears `cutAfter` and goes `afterCut`. `down`, it
 * refuses every connection; `up`, it relays.
 */
export interface Relay {
  url: string
  readonly server: Net.Server
  mode: "up" | "down"
  cutAfter: string | null
  afterCut: "up" | "down"
  cuts: number
}

export const relay = (target: URL) =>
  Effect.acquireRelease(
    Effect.async<Relay>((resume) => {
      const state: Relay = { url: "", server: Net.createServer(), mode: "up", cutAfter: null, afterCut: "down", cuts: 0 }
      state.server.on("connection", (client) => {
        if (state.mode === "down") {
          client.destroy()
          return
        }
        // the embedded server's URL names its Unix-domain socket's directory in `host`; a server's, its address
        const socketDir = target.searchParams.get("host")
        const upstream = socketDir !== null && socketDir.startsWith("/")
          ? Net.connect(`${socketDir}/.s.PGSQL.${target.port}`)
          : Net.connect(Number(target.port), target.hostname)
        let cutting = false
        client.on("data", (data) => {
          if (state.cutAfter !== null && data.includes(state.cutAfter)) cutting = true
          upstream.write(data)
        })
        upstream.on("data", (data) => {
          if (cutting) {
            state.cutAfter = null
            state.mode = state.afterCut
            state.cuts += 1
            client.destroy()
            upstream.destroy()
            return
          }
          client.write(data)
        })
        client.on("error", () => upstream.destroy())
        client.on("close", () => upstream.destroy())
        upstream.on("error", () => client.destroy())
        upstream.on("close", () => client.destroy())
      })
      state.server.listen(0, "127.0.0.1", () => {
        const address = state.server.address()
        const url = new URL(target.toString())
        url.hostname = "127.0.0.1"
        url.port = String(typeof address === "object" && address !== null ? address.port : 0)
        // the client goes through the relay, over TCP, not to the socket
        url.searchParams.delete("host")
        state.url = url.toString()
        resume(Effect.succeed(state))
      })
    }),
    (state) => Effect.async<void>((resume) => {
      state.server.close(() => resume(Effect.void))
    })
  )

/** A read of a test's own, on the gateway's pool: its first try may get a session a fault has just ended. */
export const readAgain = <A, E, R>(statement: Effect.Effect<A, E, R>) =>
  Effect.orDie(Effect.retry(statement, { times: 3 }))

/**
 * A fault in the database itself: the first `failures` statements that `event` a row of `table` matching `when` (a
 * trigger's WHEN condition over OLD and NEW) fail and are rolled back — `terminate`, the server ends the statement's
 * session (its connection is lost); `raise`, the statement gets an error and the session lives on. Every matching
 * statement is counted, failed or not, by a sequence (which a rollback does not undo): `attempts` reads the count,
 * `remove` drops the trigger.
 */
export const failingStatements = (fault: {
  readonly name: string
  readonly table: "holds" | "idempotency"
  readonly event: "UPDATE" | "DELETE"
  readonly when: string
  readonly failures: number
  readonly how: "terminate" | "raise"
}) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const name = `fault_${fault.name.toLowerCase().replace(/[^a-z0-9]/g, "_")}`
    yield* sql.unsafe(`CREATE SEQUENCE ${name}`)
    yield* sql.unsafe(`CREATE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF nextval('${name}') <= ${fault.failures} THEN
          ${fault.how === "terminate" ? "PERFORM pg_terminate_backend(pg_backend_pid());" : "RAISE EXCEPTION 'the database is failing';"}
        END IF;
        RETURN ${fault.event === "DELETE" ? "OLD" : "NEW"};
      END $$`)
    yield* sql.unsafe(`CREATE TRIGGER ${name} BEFORE ${fault.event} ON ${fault.table} FOR EACH ROW
      WHEN (${fault.when}) EXECUTE FUNCTION ${name}()`)
    const attempts = readAgain(Effect.map(
      sql<{ readonly n: number }>`SELECT CASE WHEN is_called THEN last_value ELSE 0 END::int AS n FROM ${sql(name)}`,
      (rows) => rows[0]?.n ?? 0
    ))
    const remove = Effect.orDie(sql.unsafe(`DROP TRIGGER ${name} ON ${fault.table}`))
    return { attempts, remove }
  }).pipe(Effect.orDie)
