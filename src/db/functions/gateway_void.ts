/**
 * The ledger's release of a pending hold without a charge, one round trip, taking the row locks in the
 * ledger's one order (hold, org, key). It commits without waiting for the WAL flush: a lost void leaves a
 * pending hold that the sweeper voids.
 *
 * The hold is found by its id, with the condition `gateway_settle` uses and for the same reason (see there).
 */
import { sqlFunction } from "./SqlFunction.js"

export const gatewayVoid = sqlFunction("gateway_void", `
    CREATE OR REPLACE FUNCTION gateway_void(p_hold bigint, p_now timestamptz)
    RETURNS boolean LANGUAGE plpgsql AS $$
    DECLARE
      h holds%ROWTYPE;
    BEGIN
      PERFORM set_config('synchronous_commit', 'off', true);
      UPDATE holds SET status = 'voided', resolved_at = p_now
       WHERE holds.id = p_hold AND holds.status NOT IN ('settled', 'voided')
      RETURNING * INTO h;
      IF NOT FOUND THEN RETURN false; END IF;
      UPDATE orgs SET held = orgs.held - h.amount WHERE orgs.id = h.org_id;
      UPDATE api_keys SET held = GREATEST(api_keys.held - h.amount, 0) WHERE api_keys.id = h.key_id;
      RETURN true;
    END $$`)
