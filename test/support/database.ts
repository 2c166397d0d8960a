/**
 * A fresh, migrated database per test file on the run's PostgreSQL server.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Layer, Redacted } from "effect"
import Pg from "pg"
import { inject } from "vitest"
import { MigrationsLive, pgLayer } from "../../src/db/Database.js"
import { base62 } from "../../src/services/random.js"

const adminQuery = async (url: string, text: string) => {
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
