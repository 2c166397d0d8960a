/**
 * The migrations: one file per migration, named by the id and name a database records for it, ids
 * contiguous from 1 in the order they apply, the ones applied so far never renamed; each PL/pgSQL function
 * written in exactly one file, its module, never in a migration, its body the one measured; a migrated
 * database holding exactly those statements, and a database left at an older migration with older bodies
 * brought to the same ones.
 */
import { SqlClient } from "@effect/sql"
import * as Migrator from "@effect/sql/Migrator"
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Layer, Logger, Redacted } from "effect"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { pathToFileURL } from "node:url"
import { pgLayer } from "../src/db/Database.js"
import { gatewayClaimReserveBatch } from "../src/db/functions/gateway_claim_reserve_batch.js"
import { gatewayReserve } from "../src/db/functions/gateway_reserve.js"
import { gatewayReserveBatch } from "../src/db/functions/gateway_reserve_batch.js"
import { gatewayResolveBatch } from "../src/db/functions/gateway_resolve_batch.js"
import { gatewaySettle } from "../src/db/functions/gateway_settle.js"
import { gatewayVoid } from "../src/db/functions/gateway_void.js"
import { journalAppendOnly } from "../src/db/functions/journal_append_only.js"
import type { SqlFunction } from "../src/db/functions/SqlFunction.js"
import { loader, migrate, migrationCount, migrations } from "../src/db/migrations/index.js"
import { freshDatabaseUrl, TestDatabaseLive } from "./support/database.js"

const MIGRATIONS_DIR = "src/db/migrations"
const FUNCTIONS_DIR = "src/db/functions"

/** What databases migrated so far have recorded in `gateway_migrations`: never renamed, never reordered. */
const applied: ReadonlyArray<readonly [number, string]> = [
  [1, "init"],
  [2, "journal_append_only"],
  [3, "accounts"],
  [4, "artifacts"],
  [5, "ledger_fast_path"],
  [6, "key_rate_limits"],
  [7, "safe_amounts"],
  [8, "delta_sessions"],
  [9, "key_expiry"],
  [10, "artifacts_by_org"],
  [11, "ledger_batches"],
  [12, "claiming_reservations"]
]

const functions: ReadonlyArray<SqlFunction> = [
  journalAppendOnly, gatewayReserve, gatewaySettle, gatewayVoid, gatewayReserveBatch, gatewayResolveBatch,
  gatewayClaimReserveBatch
]

/**
 * SHA-256 of each body as the ledger was measured with it (`npm run bench`), whitespace included: a change
 * to a body is a change to measure again, and to record here.
 */
const measured: Record<string, string> = {
  journal_append_only: "30f29dfdcdb2c74329296873506a9433026f2c043682f9f264ee64bf661dc29c",
  gateway_reserve: "224699cc92f2041b414bc2756046249e19c0670d1e03e450ad3fcbb648795929",
  gateway_settle: "6920ea924a8e4606708649ebaf66048412d376187d2c32dae73700c60ea66562",
  gateway_void: "a697767a72c7b6f2823bb75a45c9721c6a5494632202dede4e22cc9fa19a7aa3",
  gateway_reserve_batch: "ec0eaa2833f7e3e1eb7b288c9ff8d19d13c15a84d019fbe4549256f8bdd5ea28",
  gateway_resolve_batch: "4f114ab8e8dc232101220b7e4d8488974b5d759e88695c4fa031329b01ef63d9",
  gateway_claim_reserve_batch: "9f0000578b5830137efee8f7da784c791ccbf6d8a0a7486289115f4e03cfaca5"
}

/** A function's definition split at its body's quotes: what precedes the body, and the body byte for byte. */
const split = (definition: string, quote: string) => {
  const start = definition.indexOf(quote)
  const end = definition.lastIndexOf(quote)
  expect(start, definition).toBeGreaterThanOrEqual(0)
  expect(end, definition).toBeGreaterThan(start)
  return { header: definition.slice(0, start), body: definition.slice(start + quote.length, end) }
}

/** A header as PostgreSQL prints it and as the module writes it, compared without layout or schema. */
const normalise = (header: string) =>
  header.toLowerCase().replaceAll("timestamp with time zone", "timestamptz").replaceAll("public.", "").replace(/\s+/g, "")

const sourceFiles = (dir: string): ReadonlyArray<string> =>
  Fs.readdirSync(dir, { recursive: true, encoding: "utf8" })
    .filter((file) => file.endsWith(".ts"))
    .map((file) => Path.join(dir, file))

const migrationFiles = Fs.readdirSync(MIGRATIONS_DIR).filter((file) => file !== "index.ts").sort()

describe("migration files", () => {
  it("one file per migration, named <id>_<name>.ts, ids contiguous from 1", () => {
    const parsed = migrationFiles.map((file) => {
      const match = /^(\d{4})_([a-z0-9_]+)\.ts$/.exec(file)
      expect(match, `${MIGRATIONS_DIR}/${file} is not named <4-digit id>_<name>.ts`).not.toBeNull()
      return { id: Number(match?.[1]), key: file.slice(0, -".ts".length) }
    })
    expect(parsed.map(({ id }) => id)).toEqual(parsed.map((_, i) => i + 1))
    // the index loads every file, under its own name, in file order
    expect(Object.keys(migrations)).toEqual(parsed.map(({ key }) => key))
    expect(migrationCount).toBe(parsed.length)
  })

  it.effect("the migrator applies them in id order, the ones applied so far under their recorded names", () =>
    Effect.gen(function* () {
      const resolved = (yield* loader).map(([id, name]) => [id, name])
      expect(resolved.slice(0, applied.length)).toEqual(applied)
      expect(resolved.map(([id]) => id)).toEqual(resolved.map((_, i) => i + 1))
      expect(resolved.map(([id, name]) => `${String(id).padStart(4, "0")}_${name}.ts`)).toEqual(migrationFiles)
    }))

  it.effect("each key of the index is the default export of the file of that name", () =>
    Effect.forEach(Object.entries(migrations), ([key, migration]) =>
      Effect.gen(function* () {
        const module: unknown = yield* Effect.promise(() =>
          import(pathToFileURL(Path.resolve(MIGRATIONS_DIR, `${key}.ts`)).href)
        )
        expect(typeof module === "object" && module !== null && "default" in module ? module.default : undefined, key)
          .toBe(migration)
      })))

  it("each function is created in exactly one file, its module, and its body is written nowhere else", () => {
    const sources = new Map(sourceFiles("src").map((file) => [file, Fs.readFileSync(file, "utf8")]))
    const creators = new Map<string, Array<string>>()
    for (const [file, text] of sources) {
      for (const match of text.matchAll(/CREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+([a-z_][a-z0-9_]*)\s*\(/gi)) {
        const name = match[1]?.toLowerCase() ?? ""
        creators.set(name, [...(creators.get(name) ?? []), file])
      }
    }
    expect([...creators.keys()].sort()).toEqual(functions.map((f) => f.name).sort())
    for (const f of functions) {
      const module = Path.join(FUNCTIONS_DIR, `${f.name}.ts`)
      expect(creators.get(f.name), f.name).toEqual([module])
      expect(f.statement).toMatch(new RegExp(`^\\s*CREATE OR REPLACE FUNCTION ${f.name}\\(`))
      const { body } = split(f.statement, "$$")
      expect(Crypto.createHash("sha256").update(body).digest("hex"), `${f.name}'s body is not the one measured`)
        .toBe(measured[f.name])
      expect([...sources].filter(([, text]) => text.includes(body)).map(([file]) => file), f.name).toEqual([module])
    }
    for (const file of migrationFiles) {
      expect(sources.get(Path.join(MIGRATIONS_DIR, file)), file).not.toContain("$$")
    }
  })
})

/** Every function of the database's public schema, as PostgreSQL prints its definition. */
const definitions = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql<{ readonly name: string; readonly definition: string }>`
    SELECT p.proname AS name, pg_get_functiondef(p.oid) AS definition
    FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace ORDER BY p.proname`)

const expectCurrentDefinitions = Effect.gen(function* () {
  const rows = yield* definitions
  expect(rows.map((row) => row.name)).toEqual(functions.map((f) => f.name).sort())
  for (const f of functions) {
    const stored = split(rows.find((row) => row.name === f.name)?.definition ?? "", "$function$")
    const written = split(f.statement, "$$")
    expect(stored.body, f.name).toBe(written.body)
    expect(normalise(stored.header), f.name).toBe(normalise(written.header))
  }
})

layer(TestDatabaseLive, { excludeTestServices: true })("a migrated database", (it) => {
  it.effect("holds each function exactly as its module writes it", () => expectCurrentDefinitions)

  it.effect("indexes the holds by what the ledger looks for: the pending ones, by lease and by request", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const indexes = yield* sql<{ readonly name: string; readonly definition: string }>`
        SELECT indexname AS name, indexdef AS definition FROM pg_indexes WHERE tablename = 'holds' ORDER BY indexname`
      expect(indexes.map((index) => index.name)).toEqual(["holds_pending_lease", "holds_pending_request", "holds_pkey"])
      expect(indexes.find((index) => index.name === "holds_pending_request")?.definition)
        .toMatch(/\(request_id\) WHERE \(status = 'pending'::text\)$/)
      // the statement by which Ledger.voidRequest finds a request's hold, planned with sequential scans off (the
      // table is small here): the partial index serves it
      const plan = yield* sql.withTransaction(Effect.zipRight(
        sql`SET LOCAL enable_seqscan = off`,
        sql<Record<string, string>>`EXPLAIN SELECT id FROM holds WHERE status = 'pending' AND org_id = ${"org_1"}
          AND request_id = ${"req_1"} ORDER BY key_id, id FOR UPDATE SKIP LOCKED`
      ))
      expect(plan.flatMap((row) => Object.values(row)).join("\n")).toContain("holds_pending_request")
    }))

  // a rolling upgrade: a process of the build before 0021 still running beside the newer one keeps its delta
  // sessions with the statement it has (no org, its key the conflict target), rather than failing after its post
  it.effect("takes a delta session as the build before 0021 writes it", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const bytes = new Uint8Array([1, 2, 3])
      for (let i = 0; i < 2; i++) {
        yield* sql`
          INSERT INTO delta_sessions (key, key_id, iv, ciphertext, tag, refresh_until, updated_at)
          VALUES (${"an-earlier-build-key"}, ${"k"}, ${bytes}, ${bytes}, ${bytes}, now(), now())
          ON CONFLICT (key) DO UPDATE SET key_id = EXCLUDED.key_id, iv = EXCLUDED.iv, ciphertext = EXCLUDED.ciphertext,
            tag = EXCLUDED.tag, refresh_until = EXCLUDED.refresh_until, updated_at = EXCLUDED.updated_at`
      }
      const rows = yield* sql<{ readonly n: number }>`SELECT count(*)::int AS n FROM delta_sessions WHERE key = 'an-earlier-build-key'`
      expect(rows[0]?.n).toBe(1)
    }))

  it.effect("started again, applies nothing", () =>
    Effect.gen(function* () {
      expect(yield* migrate).toEqual([])
    }))
})

describe("a database an earlier build left behind", () => {
  it.scopedLive("left at 0004 with older bodies, ends with the current ones", () =>
    Effect.gen(function* () {
      const url = yield* freshDatabaseUrl
      const upTo = (last: number) =>
        Migrator.make({})({
          loader: Effect.map(loader, (all) => all.filter(([id]) => id <= last)),
          table: "gateway_migrations"
        })
      yield* Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        expect((yield* upTo(4)).map(([id]) => id)).toEqual([1, 2, 3, 4])
        // what an earlier build had: the same signatures, other bodies
        for (const f of [gatewayReserve, gatewayVoid]) {
          const { body } = split(f.statement, "$$")
          yield* sql.unsafe(f.statement.replace(body, "\n    BEGIN\n      RAISE EXCEPTION 'an older body';\n    END "))
        }
        const stale = yield* definitions
        expect(stale.find((row) => row.name === "gateway_void")?.definition).toContain("an older body")
        expect((yield* migrate).map(([id]) => id)).toEqual(Array.from({ length: migrationCount - 4 }, (_, i) => i + 5))
        yield* expectCurrentDefinitions
      }).pipe(Effect.provide(pgLayer(Redacted.make(url), { maxConnections: 2 })))
    }))
})

describe("a database a newer build migrated", () => {
  it.scopedLive("is served with a warning naming the migrations this build does not know", () =>
    Effect.gen(function* () {
      const url = yield* freshDatabaseUrl
      const logged: Array<string> = []
      const capture = Logger.replace(Logger.defaultLogger, Logger.make(({ logLevel, message }) => {
        logged.push(`${logLevel.label} ${Array.isArray(message) ? message.join(" ") : String(message)}`)
      }))
      yield* Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        yield* migrate
        expect(logged).toEqual([])
        const next = migrationCount + 1
        yield* sql`INSERT INTO gateway_migrations (migration_id, name) VALUES (${next}, 'future_thing')`
        expect(yield* migrate).toEqual([])
        expect(logged).toEqual([
          `WARN The database has a migration this build does not know (${String(next).padStart(4, "0")}_future_thing): a newer ` +
            `build migrated it. This build (migrations up to ${String(migrationCount).padStart(4, "0")}) may not work with ` +
            "that schema; run the newer build."
        ])
      }).pipe(Effect.provide(Layer.merge(pgLayer(Redacted.make(url), { maxConnections: 2 }), capture)))
    }))
})
