/**
 * Dashboard users, provider connections, per-key spend controls, the usage log, and the ledger's three
 * operations as functions: each is one round trip that takes its row locks in one order (hold, org, key),
 * so concurrent calls, settlements and sweeps never deadlock. The functions are created in their current
 * definitions (src/db/functions/).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { gatewayReserve } from "../functions/gateway_reserve.js"
import { gatewaySettle } from "../functions/gateway_settle.js"
import { gatewayVoid } from "../functions/gateway_void.js"

export default Effect.gen(function* () {
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
  yield* gatewayReserve.define
  yield* gatewaySettle.define
  yield* gatewayVoid.define
})
