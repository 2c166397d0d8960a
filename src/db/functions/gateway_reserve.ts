/**
 * The ledger's reservation, one round trip: it confirms the key — not revoked, not expired — (a key verified from
 * a process's cache is checked here, in the same statement, so a revocation or an earlier expiry made on another
 * process binds at once), then holds the amount on the org (within its balance, and within
 * its spend cap or, without one, the largest amount a number carries exactly) and on the key (within its
 * monthly limit), taking the row locks in the ledger's one order (org, key). It commits without waiting
 * for the WAL flush: a lost hold has nothing to settle.
 *
 * A refusal is decided again on the row under its lock (`FOR NO KEY UPDATE`, the lock the update takes: `FOR UPDATE`
 * would also wait for the key-share locks other transactions' inserts take on the org through their foreign keys —
 * an Idempotency-Key claim, a usage flush — and closed cycles with them): the conditional update that refused it read the row as it
 * stood, and a plain read after it sees another moment (a hold voided between the two made an org with no cap and
 * too few credits read as `spend_cap_exceeded`, "wait for the next month"). A reservation of 0 credits (a free
 * tool) fits under any cap or limit, one lowered below the month's spend included.
 *
 * The month's spend never moves to an older month: a call whose process's clock is behind carries an older
 * `p_month` than the row's `spend_month`, and counts in the row's month (a counter reset by it would let calls
 * alternating between two processes around a month's turn past every cap).
 */
import { sqlFunction } from "./SqlFunction.js"

export const gatewayReserve = sqlFunction("gateway_reserve", `
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
      PERFORM 1 FROM api_keys
        WHERE api_keys.id = p_key AND api_keys.revoked_at IS NULL
          AND (api_keys.expires_at IS NULL OR api_keys.expires_at > p_now);
      IF NOT FOUND THEN
        RETURN QUERY SELECT NULL::bigint, 'invalid_key', NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint,
          NULL::bigint, NULL::bigint, NULL::bigint;
        RETURN;
      END IF;
      -- The org: one conditional update, so the check and the write cannot be separated. Without a cap,
      -- the month's spend is still bounded by the largest amount a number carries exactly. A reservation of
      -- nothing (a free tool) fits under any cap, one lowered below the month's spend too.
      UPDATE orgs
         SET held = orgs.held + p_amount,
             month_spend = CASE WHEN orgs.spend_month >= p_month THEN orgs.month_spend ELSE 0 END,
             spend_month = GREATEST(orgs.spend_month, p_month)
       WHERE orgs.id = p_org
         AND orgs.balance - orgs.held >= p_amount
         AND (p_amount = 0
              OR (CASE WHEN orgs.spend_month >= p_month THEN orgs.month_spend ELSE 0 END) + orgs.held + p_amount
                 <= coalesce(orgs.spend_cap, 9007199254740991))
      RETURNING * INTO o;
      IF NOT FOUND THEN
        -- Refused as the row stood then; it is read again under its lock, so that the reason given is the one
        -- the row shows (a hold freed or credits added since would otherwise read as the cap, or a cap raised
        -- as the balance), and a call that fits by now is held.
        SELECT * INTO o FROM orgs WHERE orgs.id = p_org FOR NO KEY UPDATE;
        IF o.balance - o.held < p_amount
           OR (p_amount > 0 AND (CASE WHEN o.spend_month >= p_month THEN o.month_spend ELSE 0 END) + o.held + p_amount
                                > coalesce(o.spend_cap, 9007199254740991)) THEN
          RETURN QUERY SELECT NULL::bigint,
            CASE WHEN o.balance - o.held < p_amount THEN 'insufficient_credits' ELSE 'spend_cap_exceeded' END,
            o.balance, o.held, CASE WHEN o.spend_month >= p_month THEN o.month_spend ELSE 0 END, o.spend_cap,
            NULL::bigint, NULL::bigint, NULL::bigint;
          RETURN;
        END IF;
        UPDATE orgs
           SET held = orgs.held + p_amount,
               month_spend = CASE WHEN orgs.spend_month >= p_month THEN orgs.month_spend ELSE 0 END,
               spend_month = GREATEST(orgs.spend_month, p_month)
         WHERE orgs.id = p_org
        RETURNING * INTO o;
      END IF;
      -- The key's own monthly limit, under the org's row lock (a key belongs to one org).
      UPDATE api_keys
         SET held = api_keys.held + p_amount,
             month_spend = CASE WHEN api_keys.spend_month >= p_month THEN api_keys.month_spend ELSE 0 END,
             spend_month = GREATEST(api_keys.spend_month, p_month)
       WHERE api_keys.id = p_key
         AND (api_keys.spend_limit IS NULL OR p_amount = 0
              OR (CASE WHEN api_keys.spend_month >= p_month THEN api_keys.month_spend ELSE 0 END)
                 + api_keys.held + p_amount <= api_keys.spend_limit)
      RETURNING * INTO k;
      IF NOT FOUND THEN
        -- as for the org: decided again on the row under its lock (its limit may have been raised meanwhile)
        SELECT * INTO k FROM api_keys WHERE api_keys.id = p_key FOR NO KEY UPDATE;
        IF k.spend_limit IS NOT NULL AND p_amount > 0
           AND (CASE WHEN k.spend_month >= p_month THEN k.month_spend ELSE 0 END) + k.held + p_amount > k.spend_limit THEN
          UPDATE orgs SET held = orgs.held - p_amount WHERE orgs.id = p_org;
          RETURN QUERY SELECT NULL::bigint, 'key_spend_limit_exceeded', o.balance, o.held - p_amount, o.month_spend,
            o.spend_cap, CASE WHEN k.spend_month >= p_month THEN k.month_spend ELSE 0 END, k.held, k.spend_limit;
          RETURN;
        END IF;
        UPDATE api_keys
           SET held = api_keys.held + p_amount,
               month_spend = CASE WHEN api_keys.spend_month >= p_month THEN api_keys.month_spend ELSE 0 END,
               spend_month = GREATEST(api_keys.spend_month, p_month)
         WHERE api_keys.id = p_key
        RETURNING * INTO k;
      END IF;
      INSERT INTO holds (org_id, key_id, tool, request_id, amount, created_at, lease_until)
      VALUES (p_org, p_key, p_tool, p_request, p_amount, p_now, p_lease)
      RETURNING id INTO h;
      RETURN QUERY SELECT h, NULL::text, o.balance, o.held, o.month_spend, o.spend_cap,
        k.month_spend, k.held, k.spend_limit;
    END $$`)
