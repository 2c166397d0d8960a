/**
 * Locks on `Idempotency-Key` records, so that no two statements wait for each other in a cycle:
 *
 * - a claim never locks an existing record (it inserts with `DO NOTHING`; one past its retention is taken
 *   over by a one-row statement), and the retention purge skips locked rows;
 * - a reservation that claims keys (`gateway_claim_reserve_batch`) inserts all its records, in (org, key)
 *   order by bytes — the order of `Idempotency.claim`'s batches — before it locks any hold, org or key row. An
 *   insert waits only while another transaction inserts, updates or deletes the same key (a claim, a
 *   settlement keeping an answer, a release, a renewal, a purge), and then it holds no ledger lock; none of
 *   those waits for an uncommitted insert, and two statements inserting the same keys insert them in one order;
 * - stored answers (`complete`) lock theirs in (org, key) order, with this condition;
 * - the lease renewal skips the records another statement holds (being completed, they need no renewal), so
 *   once it holds records it waits for nothing;
 * - a settlement that keeps an answer locks its record last, after its holds and orgs, in no particular
 *   order: of the statements above, none that could hold the record also waits for a row.
 *
 * `UPDATE … FROM unnest(…)` alone locks in whatever order its join produces.
 */
import type * as SqlClient from "@effect/sql/SqlClient"

/** One record's identity as a string (map keys): neither an org id nor a key has a line feed. */
export const recordId = (orgId: string, key: string) => `${orgId}\n${key}`

/** A condition on `alias`'s rows: those of `records`, once locked in (org, key) order (or those not held). */
export const lockedInKeyOrder = (
  sql: SqlClient.SqlClient,
  alias: string,
  records: ReadonlyArray<{ readonly orgId: string; readonly key: string }>,
  options: { readonly skipLocked?: boolean } = {}
) => sql`(${sql(alias)}.org_id, ${sql(alias)}.key) IN (
    SELECT l.org_id, l.key FROM idempotency l
      JOIN unnest(${records.map((r) => r.orgId)}::text[], ${records.map((r) => r.key)}::text[]) AS u (org_id, key)
        ON l.org_id = u.org_id AND l.key = u.key
     ORDER BY l.org_id, l.key
       FOR UPDATE OF l ${options.skipLocked === true ? sql`SKIP LOCKED` : sql``})`

/**
 * Free a claim: the record of `key`, if it is still `running` for `requestId` — only that request's (when a first
 * attempt was carried out but its answer lost, the key may have been claimed again by then, and that claim is not
 * this one's to free). One record a statement: a release locks nothing else.
 */
export const releaseClaim = (sql: SqlClient.SqlClient, claim: { readonly orgId: string; readonly key: string; readonly requestId: string }) =>
  sql`DELETE FROM idempotency WHERE org_id = ${claim.orgId} AND key = ${claim.key} AND status = 'running'
        AND request_id = ${claim.requestId}`
