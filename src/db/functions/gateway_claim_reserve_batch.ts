/**
 * Reservations whose calls carry an `Idempotency-Key`, each claiming its key in the same statement: one round
 * trip and one commit for what were two. The keys are claimed first, all of them, in (org, key) order by bytes
 * (`COLLATE "C"`: the order in which `Idempotency.claim`'s batches insert theirs, whatever the database's
 * collation, so that two statements inserting the same keys wait for each other in one order), each with a
 * `running` record unless one exists; then the reservations are made in the ledger's one lock order, as
 * `gateway_reserve_batch` makes them, for the calls without a key and those whose key was new. A call whose key
 * was not new gets no row: nothing was reserved for it. A key twice in the arrays is the first one's: the
 * others get no row.
 *
 * `DO NOTHING` neither locks an existing record nor waits for a settled one; it waits only while another
 * transaction inserts, updates or deletes the same key (to learn whether the key exists), and every record is
 * inserted before any hold, org or key row is locked, so the statement holds no ledger lock while it waits
 * (src/services/recordLocks.ts).
 *
 * A statement that claimed a key commits with the server's `synchronous_commit`, as a claim always has: a
 * claim forgotten by a database crash would let a retry send a write to the provider twice.
 */
import { sqlFunction } from "./SqlFunction.js"

export const gatewayClaimReserveBatch = sqlFunction("gateway_claim_reserve_batch", `
    CREATE OR REPLACE FUNCTION gateway_claim_reserve_batch(
      p_orgs text[], p_keys text[], p_tools text[], p_requests text[], p_amounts bigint[],
      p_nows timestamptz[], p_months integer[], p_leases timestamptz[],
      p_idempotency_keys text[], p_fingerprints text[], p_expiries timestamptz[])
    RETURNS TABLE (ord integer, hold_id bigint, refusal text, balance bigint, held bigint, month_spend bigint,
                   spend_cap bigint, key_month_spend bigint, key_held bigint, key_limit bigint)
    LANGUAGE plpgsql AS $$
    DECLARE
      sync text := current_setting('synchronous_commit');
      won integer[];
      n integer;
    BEGIN
      WITH firsts AS (
        SELECT DISTINCT ON (x.o, x.k) x.o, x.k, x.n::integer AS n
          FROM unnest(p_orgs, p_idempotency_keys) WITH ORDINALITY AS x(o, k, n)
         WHERE x.k IS NOT NULL ORDER BY x.o, x.k, x.n
      ), claimed AS (
        INSERT INTO idempotency (org_id, key, fingerprint, status, request_id, lease_until, expires_at, created_at)
        SELECT f.o, f.k, p_fingerprints[f.n], 'running', p_requests[f.n], p_leases[f.n], p_expiries[f.n], p_nows[f.n]
          FROM firsts f ORDER BY f.o COLLATE "C", f.k COLLATE "C"
        ON CONFLICT (org_id, key) DO NOTHING
        RETURNING org_id, key)
      SELECT coalesce(array_agg(f.n), '{}') INTO won
        FROM firsts f JOIN claimed c ON c.org_id = f.o AND c.key = f.k;
      FOR n IN SELECT x.n::integer FROM unnest(p_orgs, p_keys) WITH ORDINALITY AS x(o, k, n) ORDER BY x.o, x.k, x.n LOOP
        IF p_idempotency_keys[n] IS NULL OR n = ANY(won) THEN
          RETURN QUERY SELECT n, r.* FROM gateway_reserve(p_orgs[n], p_keys[n], p_tools[n], p_requests[n],
            p_amounts[n], p_nows[n], p_months[n], p_leases[n]) AS r;
        END IF;
      END LOOP;
      IF cardinality(won) > 0 THEN
        PERFORM set_config('synchronous_commit', sync, true);
      END IF;
    END $$`)
