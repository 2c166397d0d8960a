/**
 * The first schema: orgs and their balances, API keys, holds, the journal, betas per org, idempotency records.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

export default Effect.gen(function* () {
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
