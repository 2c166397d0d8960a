/**
 * Many reservations in one round trip and one commit (the ledger's group commit): each is
 * `gateway_reserve`, in the ledger's one lock order (org, then key, then arrival), so two batches, or a
 * batch and a settlement, never wait for each other in a cycle. The calls of one org in a batch take its
 * row lock once. Each call gets its own row, `ord` being its place in the arrays. A batch of one call (a call
 * alone) skips the ordering query, which has nothing to order.
 */
import { sqlFunction } from "./SqlFunction.js"

export const gatewayReserveBatch = sqlFunction("gateway_reserve_batch", `
    CREATE OR REPLACE FUNCTION gateway_reserve_batch(
      p_orgs text[], p_keys text[], p_tools text[], p_requests text[], p_amounts bigint[],
      p_nows timestamptz[], p_months integer[], p_leases timestamptz[])
    RETURNS TABLE (ord integer, hold_id bigint, refusal text, balance bigint, held bigint, month_spend bigint,
                   spend_cap bigint, key_month_spend bigint, key_held bigint, key_limit bigint)
    LANGUAGE plpgsql AS $$
    DECLARE
      n integer;
      ords integer[];
    BEGIN
      IF cardinality(p_orgs) = 1 THEN
        ords := ARRAY[1];
      ELSE
        ords := ARRAY(SELECT x.n::integer FROM unnest(p_orgs, p_keys) WITH ORDINALITY AS x(o, k, n) ORDER BY x.o, x.k, x.n);
      END IF;
      FOREACH n IN ARRAY ords LOOP
        RETURN QUERY SELECT n, r.* FROM gateway_reserve(p_orgs[n], p_keys[n], p_tools[n], p_requests[n],
          p_amounts[n], p_nows[n], p_months[n], p_leases[n]) AS r;
      END LOOP;
    END $$`)
