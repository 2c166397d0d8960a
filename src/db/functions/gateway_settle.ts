/**
 * The ledger's settlement of a pending hold, one round trip: charges at most the held amount, releases the
 * hold on the org and the key, and journals the charge, taking the row locks in the ledger's one order
 * (hold, org, key). It moves credits, so it waits for the WAL flush.
 *
 * The hold is found by its id: "not settled or voided" is "pending" (the table's check allows no other status),
 * but unlike "status = 'pending'" it does not match the partial index of pending holds, which the planner
 * otherwise scans whole when its statistics saw few pending holds (with 5,000 calls in flight and statistics
 * not yet updated, a settlement took 1.3–1.5 ms instead of 0.46 ms; docs/performance.md, ninth round).
 *
 * A charge carrying a month older than the row's `spend_month` counts in the row's month, as a reservation does
 * (gateway_reserve.ts): the month's spend never moves back.
 */
import { sqlFunction } from "./SqlFunction.js"

export const gatewaySettle = sqlFunction("gateway_settle", `
    CREATE OR REPLACE FUNCTION gateway_settle(p_hold bigint, p_charge bigint, p_now timestamptz, p_month integer)
    RETURNS boolean LANGUAGE plpgsql AS $$
    DECLARE
      h holds%ROWTYPE;
      c bigint;
    BEGIN
      UPDATE holds SET status = 'settled', charged = LEAST(GREATEST(p_charge, 0), holds.amount), resolved_at = p_now
       WHERE holds.id = p_hold AND holds.status NOT IN ('settled', 'voided')
      RETURNING * INTO h;
      IF NOT FOUND THEN RETURN false; END IF;
      c := h.charged;
      UPDATE orgs
         SET balance = orgs.balance - c,
             held = orgs.held - h.amount,
             month_spend = CASE WHEN orgs.spend_month >= p_month THEN orgs.month_spend ELSE 0 END + c,
             spend_month = GREATEST(orgs.spend_month, p_month)
       WHERE orgs.id = h.org_id;
      UPDATE api_keys
         SET held = GREATEST(api_keys.held - h.amount, 0),
             month_spend = CASE WHEN api_keys.spend_month >= p_month THEN api_keys.month_spend ELSE 0 END + c,
             spend_month = GREATEST(api_keys.spend_month, p_month)
       WHERE api_keys.id = h.key_id;
      IF c > 0 THEN
        INSERT INTO journal (org_id, kind, amount, hold_id, created_at) VALUES (h.org_id, 'charge', -c, h.id, p_now);
      END IF;
      RETURN true;
    END $$`)
