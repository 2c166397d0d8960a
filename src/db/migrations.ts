/**
 * The schema, as ordered migrations run at start-up (in one transaction, under a table lock, so many
 * processes starting at once apply each migration exactly once).
 */
import * as Migrator from "@effect/sql/Migrator"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

const init = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE orgs (
      id           text PRIMARY KEY,
      name         text NOT NULL,
      balance      bigint NOT NULL DEFAULT 0,
      held         bigint NOT NULL DEFAULT 0,
      spend_month  integer NOT NULL DEFAULT 0,
      month_spend  bigint NOT NULL DEFAULT 0,
      spend_cap    bigint,
      created_at   timestamptz NOT NULL,
      CONSTRAINT balance_covers_holds CHECK (held >= 0 AND held <= balance),
      CONSTRAINT spend_non_negative CHECK (month_spend >= 0),
      CONSTRAINT cap_non_negative CHECK (spend_cap IS NULL OR spend_cap >= 0)
    )`
  yield* sql`
    CREATE TABLE api_keys (
      id            text PRIMARY KEY,
      org_id        text NOT NULL REFERENCES orgs (id),
      name          text NOT NULL,
      key_hash      bytea NOT NULL UNIQUE,
      prefix        text NOT NULL,
      created_at    timestamptz NOT NULL,
      revoked_at    timestamptz,
      last_used_at  timestamptz
    )`
  yield* sql`CREATE INDEX api_keys_org ON api_keys (org_id)`
  yield* sql`
    CREATE TABLE holds (
      id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      org_id       text NOT NULL REFERENCES orgs (id),
      key_id       text NOT NULL,
      tool         text NOT NULL,
      request_id   text NOT NULL,
      amount       bigint NOT NULL CHECK (amount >= 0),
      status       text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'settled', 'voided')),
      charged      bigint NOT NULL DEFAULT 0,
      created_at   timestamptz NOT NULL,
      lease_until  timestamptz NOT NULL,
      resolved_at  timestamptz,
      CONSTRAINT charge_within_hold CHECK (charged >= 0 AND charged <= amount)
    )`
  yield* sql`CREATE INDEX holds_pending_lease ON holds (lease_until) WHERE status = 'pending'`
  yield* sql`CREATE INDEX holds_org ON holds (org_id, created_at)`
  yield* sql`CREATE INDEX holds_request ON holds (request_id)`
  yield* sql`
    CREATE TABLE journal (
      id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      org_id      text NOT NULL REFERENCES orgs (id),
      kind        text NOT NULL CHECK (kind IN ('grant', 'charge')),
      amount      bigint NOT NULL,
      hold_id     bigint REFERENCES holds (id),
      note        text,
      created_at  timestamptz NOT NULL
    )`
  yield* sql`CREATE INDEX journal_org ON journal (org_id)`
  yield* sql`
    CREATE TABLE org_betas (
      org_id  text NOT NULL REFERENCES orgs (id),
      tool    text NOT NULL,
      PRIMARY KEY (org_id, tool)
    )`
  yield* sql`
    CREATE TABLE idempotency (
      org_id           text NOT NULL REFERENCES orgs (id),
      key              text NOT NULL,
      fingerprint      text NOT NULL,
      status           text NOT NULL CHECK (status IN ('running', 'completed')),
      request_id       text NOT NULL,
      hold_id          bigint,
      lease_until      timestamptz NOT NULL,
      expires_at       timestamptz NOT NULL,
      response_status  integer,
      response_body    text,
      charged          bigint,
      created_at       timestamptz NOT NULL,
      PRIMARY KEY (org_id, key)
    )`
  yield* sql`CREATE INDEX idempotency_expiry ON idempotency (expires_at)`
})

// The journal is the record of every balance change: rows are only ever added.
const journalAppendOnly = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE FUNCTION journal_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      RAISE EXCEPTION 'the journal is append-only';
    END $$`
  yield* sql`
    CREATE TRIGGER journal_append_only BEFORE UPDATE OR DELETE ON journal
    FOR EACH ROW EXECUTE FUNCTION journal_append_only()`
})

// Dashboard users, provider connections, per-key spend controls, the usage log, and the ledger's three
// operations as functions: each is one round trip that takes its row locks in one order (hold, org, key),
// so concurrent calls, settlements and sweeps never deadlock.
const accounts = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    ALTER TABLE api_keys
      ADD COLUMN spend_limit bigint CHECK (spend_limit IS NULL OR spend_limit >= 0),
      ADD COLUMN allowed_tools text[],
      ADD COLUMN held bigint NOT NULL DEFAULT 0 CHECK (held >= 0),
      ADD COLUMN spend_month integer NOT NULL DEFAULT 0,
      ADD COLUMN month_spend bigint NOT NULL DEFAULT 0`
  yield* sql`
    CREATE TABLE members (
      uid         text PRIMARY KEY,
      org_id      text NOT NULL REFERENCES orgs (id),
      created_at  timestamptz NOT NULL
    )`
  yield* sql`CREATE INDEX members_org ON members (org_id)`
  yield* sql`
    CREATE TABLE connections (
      id          text PRIMARY KEY,
      org_id      text NOT NULL REFERENCES orgs (id),
      provider    text NOT NULL,
      label       text,
      status      text NOT NULL CHECK (status IN ('active', 'rejected')),
      key_id      text NOT NULL,
      iv          bytea NOT NULL,
      ciphertext  bytea NOT NULL,
      tag         bytea NOT NULL,
      created_at  timestamptz NOT NULL,
      updated_at  timestamptz NOT NULL,
      UNIQUE (org_id, provider)
    )`
  yield* sql`
    CREATE TABLE usage (
      id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      org_id      text NOT NULL REFERENCES orgs (id),
      key_id      text NOT NULL,
      tool        text NOT NULL,
      request_id  text NOT NULL,
      status      integer NOT NULL,
      code        text NOT NULL,
      credits     bigint NOT NULL,
      latency_ms  integer NOT NULL,
      provider    text,
      created_at  timestamptz NOT NULL
    )`
  yield* sql`CREATE INDEX usage_org ON usage (org_id, id DESC)`

  yield* sql`
    CREATE FUNCTION gateway_reserve(
      p_org text, p_key text, p_tool text, p_request text, p_amount bigint,
      p_now timestamptz, p_month integer, p_lease timestamptz)
    RETURNS TABLE (hold_id bigint, refusal text, balance bigint, held bigint, month_spend bigint,
                   spend_cap bigint, key_month_spend bigint, key_held bigint, key_limit bigint)
    LANGUAGE plpgsql AS $$
    DECLARE
      o orgs%ROWTYPE;
      k api_keys%ROWTYPE;
      h bigint;
    BEGIN
      -- The org: one conditional update, so the check and the write cannot be separated.
      UPDATE orgs
         SET held = orgs.held + p_amount,
             month_spend = CASE WHEN orgs.spend_month = p_month THEN orgs.month_spend ELSE 0 END,
             spend_month = p_month
       WHERE orgs.id = p_org
         AND orgs.balance - orgs.held >= p_amount
         AND (orgs.spend_cap IS NULL
              OR (CASE WHEN orgs.spend_month = p_month THEN orgs.month_spend ELSE 0 END) + orgs.held + p_amount
                 <= orgs.spend_cap)
      RETURNING * INTO o;
      IF NOT FOUND THEN
        SELECT * INTO o FROM orgs WHERE orgs.id = p_org;
        RETURN QUERY SELECT NULL::bigint,
          CASE WHEN o.balance - o.held < p_amount THEN 'insufficient_credits' ELSE 'spend_cap_exceeded' END,
          o.balance, o.held, CASE WHEN o.spend_month = p_month THEN o.month_spend ELSE 0 END, o.spend_cap,
          NULL::bigint, NULL::bigint, NULL::bigint;
        RETURN;
      END IF;
      -- The key's own monthly limit, under the org's row lock (a key belongs to one org).
      UPDATE api_keys
         SET held = api_keys.held + p_amount,
             month_spend = CASE WHEN api_keys.spend_month = p_month THEN api_keys.month_spend ELSE 0 END,
             spend_month = p_month
       WHERE api_keys.id = p_key
         AND (api_keys.spend_limit IS NULL
              OR (CASE WHEN api_keys.spend_month = p_month THEN api_keys.month_spend ELSE 0 END)
                 + api_keys.held + p_amount <= api_keys.spend_limit)
      RETURNING * INTO k;
      IF NOT FOUND THEN
        SELECT * INTO k FROM api_keys WHERE api_keys.id = p_key;
        IF NOT FOUND THEN
          RAISE EXCEPTION 'gateway_reserve: no key %', p_key;
        END IF;
        UPDATE orgs SET held = orgs.held - p_amount WHERE orgs.id = p_org;
        RETURN QUERY SELECT NULL::bigint, 'key_spend_limit_exceeded', o.balance, o.held - p_amount, o.month_spend,
          o.spend_cap, CASE WHEN k.spend_month = p_month THEN k.month_spend ELSE 0 END, k.held, k.spend_limit;
        RETURN;
      END IF;
      INSERT INTO holds (org_id, key_id, tool, request_id, amount, created_at, lease_until)
      VALUES (p_org, p_key, p_tool, p_request, p_amount, p_now, p_lease)
      RETURNING id INTO h;
      RETURN QUERY SELECT h, NULL::text, o.balance, o.held, o.month_spend, o.spend_cap,
        k.month_spend, k.held, k.spend_limit;
    END $$`

  yield* sql`
    CREATE FUNCTION gateway_settle(p_hold bigint, p_charge bigint, p_now timestamptz, p_month integer)
    RETURNS boolean LANGUAGE plpgsql AS $$
    DECLARE
      h holds%ROWTYPE;
      c bigint;
    BEGIN
      UPDATE holds SET status = 'settled', charged = LEAST(GREATEST(p_charge, 0), holds.amount), resolved_at = p_now
       WHERE holds.id = p_hold AND holds.status = 'pending'
      RETURNING * INTO h;
      IF NOT FOUND THEN RETURN false; END IF;
      c := h.charged;
      UPDATE orgs
         SET balance = orgs.balance - c,
             held = orgs.held - h.amount,
             month_spend = CASE WHEN orgs.spend_month = p_month THEN orgs.month_spend ELSE 0 END + c,
             spend_month = p_month
       WHERE orgs.id = h.org_id;
      UPDATE api_keys
         SET held = GREATEST(api_keys.held - h.amount, 0),
             month_spend = CASE WHEN api_keys.spend_month = p_month THEN api_keys.month_spend ELSE 0 END + c,
             spend_month = p_month
       WHERE api_keys.id = h.key_id;
      IF c > 0 THEN
        INSERT INTO journal (org_id, kind, amount, hold_id, created_at) VALUES (h.org_id, 'charge', -c, h.id, p_now);
      END IF;
      RETURN true;
    END $$`

  yield* sql`
    CREATE FUNCTION gateway_void(p_hold bigint, p_now timestamptz)
    RETURNS boolean LANGUAGE plpgsql AS $$
    DECLARE
      h holds%ROWTYPE;
    BEGIN
      UPDATE holds SET status = 'voided', resolved_at = p_now
       WHERE holds.id = p_hold AND holds.status = 'pending'
      RETURNING * INTO h;
      IF NOT FOUND THEN RETURN false; END IF;
      UPDATE orgs SET held = orgs.held - h.amount WHERE orgs.id = h.org_id;
      UPDATE api_keys SET held = GREATEST(api_keys.held - h.amount, 0) WHERE api_keys.id = h.key_id;
      RETURN true;
    END $$`
})

// Files kept from tool answers, byte for byte.
const artifacts = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE artifacts (
      id            text PRIMARY KEY,
      org_id        text NOT NULL REFERENCES orgs (id),
      content_type  text NOT NULL,
      bytes         bigint NOT NULL,
      sha256        text NOT NULL,
      data          bytea NOT NULL,
      created_at    timestamptz NOT NULL,
      expires_at    timestamptz NOT NULL
    )`
  yield* sql`CREATE INDEX artifacts_expiry ON artifacts (expires_at)`
})


// The reservation also confirms the key (a key verified from a process's cache is checked here, in the
// same statement), and reservations and voids commit without waiting for the WAL flush: neither moves a
// credit, so a database crash that loses one loses nothing (a lost hold has nothing to settle, and a lost
// void leaves a pending hold that the sweeper voids). Settlements, which charge, still wait for it.
const ledgerFastPath = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`DROP FUNCTION gateway_reserve(text, text, text, text, bigint, timestamptz, integer, timestamptz)`
  yield* sql`
    CREATE FUNCTION gateway_reserve(
      p_org text, p_key text, p_tool text, p_request text, p_amount bigint,
      p_now timestamptz, p_month integer, p_lease timestamptz)
    RETURNS TABLE (hold_id bigint, refusal text, balance bigint, held bigint, month_spend bigint,
                   spend_cap bigint, key_month_spend bigint, key_held bigint, key_limit bigint)
    LANGUAGE plpgsql AS $$
    DECLARE
      o orgs%ROWTYPE;
      k api_keys%ROWTYPE;
      h bigint;
    BEGIN
      PERFORM set_config('synchronous_commit', 'off', true);
      PERFORM 1 FROM api_keys WHERE api_keys.id = p_key AND api_keys.revoked_at IS NULL;
      IF NOT FOUND THEN
        RETURN QUERY SELECT NULL::bigint, 'invalid_key', NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint,
          NULL::bigint, NULL::bigint, NULL::bigint;
        RETURN;
      END IF;
      -- The org: one conditional update, so the check and the write cannot be separated.
      UPDATE orgs
         SET held = orgs.held + p_amount,
             month_spend = CASE WHEN orgs.spend_month = p_month THEN orgs.month_spend ELSE 0 END,
             spend_month = p_month
       WHERE orgs.id = p_org
         AND orgs.balance - orgs.held >= p_amount
         AND (orgs.spend_cap IS NULL
              OR (CASE WHEN orgs.spend_month = p_month THEN orgs.month_spend ELSE 0 END) + orgs.held + p_amount
                 <= orgs.spend_cap)
      RETURNING * INTO o;
      IF NOT FOUND THEN
        SELECT * INTO o FROM orgs WHERE orgs.id = p_org;
        RETURN QUERY SELECT NULL::bigint,
          CASE WHEN o.balance - o.held < p_amount THEN 'insufficient_credits' ELSE 'spend_cap_exceeded' END,
          o.balance, o.held, CASE WHEN o.spend_month = p_month THEN o.month_spend ELSE 0 END, o.spend_cap,
          NULL::bigint, NULL::bigint, NULL::bigint;
        RETURN;
      END IF;
      -- The key's own monthly limit, under the org's row lock (a key belongs to one org).
      UPDATE api_keys
         SET held = api_keys.held + p_amount,
             month_spend = CASE WHEN api_keys.spend_month = p_month THEN api_keys.month_spend ELSE 0 END,
             spend_month = p_month
       WHERE api_keys.id = p_key
         AND (api_keys.spend_limit IS NULL
              OR (CASE WHEN api_keys.spend_month = p_month THEN api_keys.month_spend ELSE 0 END)
                 + api_keys.held + p_amount <= api_keys.spend_limit)
      RETURNING * INTO k;
      IF NOT FOUND THEN
        SELECT * INTO k FROM api_keys WHERE api_keys.id = p_key;
        UPDATE orgs SET held = orgs.held - p_amount WHERE orgs.id = p_org;
        RETURN QUERY SELECT NULL::bigint, 'key_spend_limit_exceeded', o.balance, o.held - p_amount, o.month_spend,
          o.spend_cap, CASE WHEN k.spend_month = p_month THEN k.month_spend ELSE 0 END, k.held, k.spend_limit;
        RETURN;
      END IF;
      INSERT INTO holds (org_id, key_id, tool, request_id, amount, created_at, lease_until)
      VALUES (p_org, p_key, p_tool, p_request, p_amount, p_now, p_lease)
      RETURNING id INTO h;
      RETURN QUERY SELECT h, NULL::text, o.balance, o.held, o.month_spend, o.spend_cap,
        k.month_spend, k.held, k.spend_limit;
    END $$`
  yield* sql`
    CREATE OR REPLACE FUNCTION gateway_void(p_hold bigint, p_now timestamptz)
    RETURNS boolean LANGUAGE plpgsql AS $$
    DECLARE
      h holds%ROWTYPE;
    BEGIN
      PERFORM set_config('synchronous_commit', 'off', true);
      UPDATE holds SET status = 'voided', resolved_at = p_now
       WHERE holds.id = p_hold AND holds.status = 'pending'
      RETURNING * INTO h;
      IF NOT FOUND THEN RETURN false; END IF;
      UPDATE orgs SET held = orgs.held - h.amount WHERE orgs.id = h.org_id;
      UPDATE api_keys SET held = GREATEST(api_keys.held - h.amount, 0) WHERE api_keys.id = h.key_id;
      RETURN true;
    END $$`
})

/** A key's own request rate (null: the gateway's default). */
const keyRateLimits = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    ALTER TABLE api_keys
      ADD COLUMN rate_limit_per_second integer CHECK (rate_limit_per_second IS NULL OR rate_limit_per_second > 0),
      ADD COLUMN rate_limit_burst integer CHECK (rate_limit_burst IS NULL OR rate_limit_burst > 0)`
})

/**
 * Amounts stay below 2^53 (see src/domain/credits.ts): no column of credits can hold more, and a
 * reservation that would take the month's spend past it is refused like one past a cap. The constraints
 * are NOT VALID so that a database holding such a value already still starts (new writes are checked).
 */
const safeAmounts = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    ALTER TABLE orgs
      ADD CONSTRAINT balance_safe CHECK (balance <= 9007199254740991) NOT VALID,
      ADD CONSTRAINT month_spend_safe CHECK (month_spend + held <= 9007199254740991) NOT VALID,
      ADD CONSTRAINT spend_cap_safe CHECK (spend_cap <= 9007199254740991) NOT VALID`
  yield* sql`
    ALTER TABLE api_keys
      ADD CONSTRAINT spend_limit_safe CHECK (spend_limit <= 9007199254740991) NOT VALID`
  yield* sql`
    CREATE OR REPLACE FUNCTION gateway_reserve(
      p_org text, p_key text, p_tool text, p_request text, p_amount bigint,
      p_now timestamptz, p_month integer, p_lease timestamptz)
    RETURNS TABLE (hold_id bigint, refusal text, balance bigint, held bigint, month_spend bigint,
                   spend_cap bigint, key_month_spend bigint, key_held bigint, key_limit bigint)
    LANGUAGE plpgsql AS $$
    DECLARE
      o orgs%ROWTYPE;
      k api_keys%ROWTYPE;
      h bigint;
    BEGIN
      PERFORM set_config('synchronous_commit', 'off', true);
      PERFORM 1 FROM api_keys WHERE api_keys.id = p_key AND api_keys.revoked_at IS NULL;
      IF NOT FOUND THEN
        RETURN QUERY SELECT NULL::bigint, 'invalid_key', NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint,
          NULL::bigint, NULL::bigint, NULL::bigint;
        RETURN;
      END IF;
      -- The org: one conditional update, so the check and the write cannot be separated. Without a cap,
      -- the month's spend is still bounded by the largest amount a number carries exactly.
      UPDATE orgs
         SET held = orgs.held + p_amount,
             month_spend = CASE WHEN orgs.spend_month = p_month THEN orgs.month_spend ELSE 0 END,
             spend_month = p_month
       WHERE orgs.id = p_org
         AND orgs.balance - orgs.held >= p_amount
         AND (CASE WHEN orgs.spend_month = p_month THEN orgs.month_spend ELSE 0 END) + orgs.held + p_amount
             <= coalesce(orgs.spend_cap, 9007199254740991)
      RETURNING * INTO o;
      IF NOT FOUND THEN
        SELECT * INTO o FROM orgs WHERE orgs.id = p_org;
        RETURN QUERY SELECT NULL::bigint,
          CASE WHEN o.balance - o.held < p_amount THEN 'insufficient_credits' ELSE 'spend_cap_exceeded' END,
          o.balance, o.held, CASE WHEN o.spend_month = p_month THEN o.month_spend ELSE 0 END, o.spend_cap,
          NULL::bigint, NULL::bigint, NULL::bigint;
        RETURN;
      END IF;
      -- The key's own monthly limit, under the org's row lock (a key belongs to one org).
      UPDATE api_keys
         SET held = api_keys.held + p_amount,
             month_spend = CASE WHEN api_keys.spend_month = p_month THEN api_keys.month_spend ELSE 0 END,
             spend_month = p_month
       WHERE api_keys.id = p_key
         AND (api_keys.spend_limit IS NULL
              OR (CASE WHEN api_keys.spend_month = p_month THEN api_keys.month_spend ELSE 0 END)
                 + api_keys.held + p_amount <= api_keys.spend_limit)
      RETURNING * INTO k;
      IF NOT FOUND THEN
        SELECT * INTO k FROM api_keys WHERE api_keys.id = p_key;
        UPDATE orgs SET held = orgs.held - p_amount WHERE orgs.id = p_org;
        RETURN QUERY SELECT NULL::bigint, 'key_spend_limit_exceeded', o.balance, o.held - p_amount, o.month_spend,
          o.spend_cap, CASE WHEN k.spend_month = p_month THEN k.month_spend ELSE 0 END, k.held, k.spend_limit;
        RETURN;
      END IF;
      INSERT INTO holds (org_id, key_id, tool, request_id, amount, created_at, lease_until)
      VALUES (p_org, p_key, p_tool, p_request, p_amount, p_now, p_lease)
      RETURNING id INTO h;
      RETURN QUERY SELECT h, NULL::text, o.balance, o.held, o.month_spend, o.spend_cap,
        k.month_spend, k.held, k.spend_limit;
    END $$`
})

const migrations = {
  "0001_init": init,
  "0002_journal_append_only": journalAppendOnly,
  "0003_accounts": accounts,
  "0004_artifacts": artifacts,
  "0005_ledger_fast_path": ledgerFastPath,
  "0006_key_rate_limits": keyRateLimits,
  "0007_safe_amounts": safeAmounts
}

export const loader = Migrator.fromRecord(migrations)

/** How many migrations this build applies (`/readyz` checks that the database has them all). */
export const migrationCount = Object.keys(migrations).length

/** Apply every pending migration; safe to run from many processes at once. */
export const migrate = Migrator.make({})({ loader, table: "gateway_migrations" }).pipe(
  // Two processes creating the bookkeeping table at the same instant: the loser retries and finds it.
  Effect.retry({ times: 3 })
)
