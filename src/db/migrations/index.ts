/**
 * The schema, as ordered migrations run at start-up (in one transaction, under a table lock, so many
 * processes starting at once apply each migration exactly once). One file per migration, named
 * `<id>_<name>.ts` as recorded in `gateway_migrations`, each exporting its effect as the default export;
 * an id, once applied anywhere, never changes its name, and a new migration takes the next id.
 *
 * The PL/pgSQL functions are written once each, in src/db/functions/, as their current
 * `CREATE OR REPLACE FUNCTION` statement. Every migration that created or changed a function applies
 * that one statement, not the body the function had when the migration was first written:
 * - the end state is the same from any start: a fresh database, or one migrated by an earlier build to
 *   any id, gets each function from the last migration that applies it, which is the current statement;
 * - no build ever runs against an intermediate state: the pending migrations are applied together, in one
 *   transaction;
 * - every version of each function has had the same signature and result type (0005 drops
 *   gateway_reserve by that signature and recreates it at once), and a PL/pgSQL body is checked only for
 *   its syntax and its declared row types when it is created, and those tables exist from 0001.
 * Changing a function: edit its module and add a migration that applies it (a database that is past every
 * migration applying it gets the change only so). If a change alters a function's signature or result
 * type, or makes its body depend on something a later migration creates, the earlier migrations can no
 * longer apply the current statement: freeze the statement they applied in those migrations first.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Migrator from "@effect/sql/Migrator"
import { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { causeChain } from "../../domain/causes.js"
import init from "./0001_init.js"
import journalAppendOnly from "./0002_journal_append_only.js"
import accounts from "./0003_accounts.js"
import artifacts from "./0004_artifacts.js"
import ledgerFastPath from "./0005_ledger_fast_path.js"
import keyRateLimits from "./0006_key_rate_limits.js"
import safeAmounts from "./0007_safe_amounts.js"
import deltaSessions from "./0008_delta_sessions.js"
import keyExpiry from "./0009_key_expiry.js"
import artifactsByOrg from "./0010_artifacts_by_org.js"
import ledgerBatches from "./0011_ledger_batches.js"
import claimingReservations from "./0012_claiming_reservations.js"
import ledgerBatchOfOne from "./0013_ledger_batch_of_one.js"
import pendingHoldIndexes from "./0014_pending_hold_indexes.js"
import spendMonthNeverBackwards from "./0015_spend_month_never_backwards.js"
import keyExpiryInReservation from "./0016_key_expiry_in_reservation.js"
import usageIdKey from "./0017_usage_id_key.js"
import abandonedClaims from "./0018_abandoned_claims.js"
import artifactsQuota from "./0019_artifacts_quota.js"
import reserveDecidedUnderLock from "./0020_reserve_decided_under_lock.js"
import deltaSessionsByOrg from "./0021_delta_sessions_by_org.js"
import artifactReaders from "./0022_artifact_readers.js"

/** Each migration under its file's name, which is its id and name in `gateway_migrations`. */
export const migrations = {
  "0001_init": init,
  "0002_journal_append_only": journalAppendOnly,
  "0003_accounts": accounts,
  "0004_artifacts": artifacts,
  "0005_ledger_fast_path": ledgerFastPath,
  "0006_key_rate_limits": keyRateLimits,
  "0007_safe_amounts": safeAmounts,
  "0008_delta_sessions": deltaSessions,
  "0009_key_expiry": keyExpiry,
  "0010_artifacts_by_org": artifactsByOrg,
  "0011_ledger_batches": ledgerBatches,
  "0012_claiming_reservations": claimingReservations,
  "0013_ledger_batch_of_one": ledgerBatchOfOne,
  "0014_pending_hold_indexes": pendingHoldIndexes,
  "0015_spend_month_never_backwards": spendMonthNeverBackwards,
  "0016_key_expiry_in_reservation": keyExpiryInReservation,
  "0017_usage_id_key": usageIdKey,
  "0018_abandoned_claims": abandonedClaims,
  "0019_artifacts_quota": artifactsQuota,
  "0020_reserve_decided_under_lock": reserveDecidedUnderLock,
  "0021_delta_sessions_by_org": deltaSessionsByOrg,
  "0022_artifact_readers": artifactReaders
}

export const loader = Migrator.fromRecord(migrations)

/** How many migrations this build applies (`/readyz` checks that the database has them all). */
export const migrationCount = Object.keys(migrations).length

/**
 * The migrations a database has that this build does not know: a newer build migrated it (this one was left running
 * beside it, or rolled back to). Said at WARN, not refused: a rolling upgrade runs the older build beside the newer
 * schema for a while, and migrations add to the schema before anything stops using what was there.
 */
export const unknownMigrations = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ readonly migration_id: number; readonly name: string }>`
    SELECT migration_id, name FROM gateway_migrations WHERE migration_id > ${migrationCount} ORDER BY migration_id`
  return rows.map((row) => `${String(row.migration_id).padStart(4, "0")}_${row.name}`)
})

/** The deepest message down an error's causes (a `SqlError`'s is the statement's, its cause's the database's). */
const deepestMessage = (error: unknown): string =>
  causeChain(error).reduce((message: string, at) => {
    const said = typeof at === "object" && at !== null && "message" in at ? at.message : undefined
    return typeof said === "string" && said !== "" ? said : message
  }, "")

/**
 * The Migrator makes a migration that fails a defect (a stack trace, status 1): here it is the typed error a start
 * refuses with — one line, status 2 — naming the migration as its file is named and quoting the database.
 */
const failedMigration = (defect: unknown) =>
  defect instanceof Migrator.MigrationError
    ? Option.some(Effect.fail(new Migrator.MigrationError({
      reason: defect.reason,
      cause: defect.cause,
      message: `${defect.message.replace(/^Migration "(\d+)_(.*)" failed$/, (_, id: string, name: string) => `${id.padStart(4, "0")}_${name}`)}: ${
        deepestMessage(defect.cause) || "failed"
      }`
    })))
    : Option.none()

/**
 * A database that takes no writes (a hot standby, `default_transaction_read_only`) is refused when the gateway starts
 * on it: the migrations' checks only read, so it started, said it was ready, and answered every call 500. (The admin
 * CLI's reading commands do not ask for it: they work on a standby.)
 */
export const requireWrites = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const [row] = yield* sql<{ readonly read_only: string }>`SELECT current_setting('transaction_read_only') AS read_only`
  if (row?.read_only === "on") {
    return yield* new SqlError({
      cause: undefined,
      message: "the database takes no writes (a standby, or default_transaction_read_only = on), and the gateway writes to it"
    })
  }
})

/** Apply every pending migration; safe to run from many processes at once. */
export const migrate = Migrator.make({})({ loader, table: "gateway_migrations" }).pipe(
  // Two processes creating the bookkeeping table at the same instant: the loser retries and finds it.
  Effect.retry({ times: 3 }),
  Effect.catchSomeDefect(failedMigration),
  Effect.tap(() =>
    Effect.flatMap(unknownMigrations, (unknown) =>
      unknown.length === 0
        ? Effect.void
        : Effect.logWarning(
          `The database has ${unknown.length === 1 ? "a migration" : "migrations"} this build does not know (${unknown.join(", ")}): ` +
            `a newer build migrated it. This build (migrations up to ${String(migrationCount).padStart(4, "0")}) may not work ` +
            "with that schema; run the newer build."
        )))
)
