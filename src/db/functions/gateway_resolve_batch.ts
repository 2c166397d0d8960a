/**
 * Many settlements and voids in one round trip and one commit (the ledger's group commit). A null charge
 * voids the hold (`gateway_void`), any other settles it (`gateway_settle`). The holds are locked first, in
 * id order; then each is resolved in the ledger's one lock order (org, then key), so batches never wait for
 * each other in a cycle, and a sweeper (which skips locked holds and takes orgs in the same order) never
 * waits for a batch that waits for it. Each hold gets its own row, `ord` being its place in the arrays.
 *
 * A batch of one hold (a call alone) skips the locking pass and the ordering query, which cost a lone settlement
 * about a third of its time in the database and have nothing to order (docs/performance.md, ninth round): its
 * own statements lock the hold, then its org, then its key, the order the batch keeps.
 *
 * The commit waits for the WAL flush when the batch settled anything, unless `p_relaxed` (`LEDGER_SYNC=relaxed`):
 * a batch of voids only, like a void, does not wait.
 */
import { sqlFunction } from "./SqlFunction.js"

export const gatewayResolveBatch = sqlFunction("gateway_resolve_batch", `
    CREATE OR REPLACE FUNCTION gateway_resolve_batch(
      p_holds bigint[], p_charges bigint[], p_nows timestamptz[], p_months integer[], p_relaxed boolean)
    RETURNS TABLE (ord integer, done boolean)
    LANGUAGE plpgsql AS $$
    DECLARE
      sync text := current_setting('synchronous_commit');
      settling boolean := false;
      n integer;
      ords integer[];
    BEGIN
      IF cardinality(p_holds) = 1 THEN
        ords := ARRAY[1];
      ELSE
        PERFORM 1 FROM holds WHERE holds.id = ANY(p_holds) ORDER BY holds.id FOR UPDATE;
        ords := ARRAY(SELECT x.n::integer FROM unnest(p_holds) WITH ORDINALITY AS x(h, n)
                        LEFT JOIN holds ON holds.id = x.h ORDER BY holds.org_id, holds.key_id, x.n);
      END IF;
      FOREACH n IN ARRAY ords LOOP
        ord := n;
        IF p_charges[n] IS NULL THEN
          done := gateway_void(p_holds[n], p_nows[n]);
        ELSE
          done := gateway_settle(p_holds[n], p_charges[n], p_nows[n], p_months[n]);
          settling := true;
        END IF;
        RETURN NEXT;
      END LOOP;
      PERFORM set_config('synchronous_commit', CASE WHEN settling AND NOT p_relaxed THEN sync ELSE 'off' END, true);
    END $$`)
