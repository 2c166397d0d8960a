/**
 * Credits under concurrency and over time: a balance that covers 50 calls pays for exactly 50, a spend cap
 * is never exceeded, month roll-over resets it (TestClock), holds resolve exactly once, and holds whose
 * request died are voided by the sweeper.
 */
import { describe, expect, layer } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { Deferred, Effect, Exit, Fiber, Layer, Metric, Redacted, TestClock } from "effect"
import { InsufficientCredits, KeySpendLimitExceeded, SpendCapExceeded } from "../src/domain/errors.js"
import type { KeyId, OrgId } from "../src/domain/ids.js"
import { defaults, LedgerConfig } from "../src/config.js"
import { Idempotency } from "../src/services/Idempotency.js"
import { KeyStore } from "../src/services/KeyStore.js"
import { Ledger } from "../src/services/Ledger.js"
import { monthOf } from "../src/services/time.js"
import { Orgs } from "../src/services/Orgs.js"
import { SweeperLive } from "../src/services/Sweeper.js"
import { ledgerBatchSize } from "../src/services/Telemetry.js"
import { errorOf, expectEnvelope } from "./support/assert.js"
import { books, callTool, gatewayLayer, givenOrg, servicesLayer } from "./support/gateway.js"

// 100 calls at once on a machine that also runs other test files: a provider deadline that load cannot reach
layer(gatewayLayer({ providers: { timeoutMs: 10_000 } }), { excludeTestServices: true })("over HTTP, concurrently", (it) => {
  it.effect("200 concurrent calls on a balance that covers 50: exactly 50 succeed", () =>
    Effect.gen(function* () {
      const { key, orgId } = yield* givenOrg({ credits: 50 })
      const results = yield* Effect.forEach(
        Array.from({ length: 200 }, (_, i) => i),
        () => callTool("weather", { q: "Berlin" }, { key }),
        { concurrency: 200 }
      )
      const ok = results.filter((r) => r.status === 200)
      const refused = results.filter((r) => r.status !== 200)
      expect(ok).toHaveLength(50)
      expect(refused).toHaveLength(150)
      for (const r of refused) {
        expectEnvelope(r, { status: 402, type: "insufficient_credits", code: "insufficient_credits", retryable: false, billable: false })
      }
      for (const r of ok) expect(r.headers.get("x-credits-charged")).toBe("1")
      const b = yield* books(orgId)
      expect(b).toMatchObject({ balance: 0, held: 0, pendingHolds: 0, journalSum: 0, monthSpend: 50 })
      expect(b.holdsByStatus).toEqual({ settled: 50 })
    }))

  it.effect("a spend cap holds under concurrency", () =>
    Effect.gen(function* () {
      const { key, orgId } = yield* givenOrg({ credits: 1000, cap: 30 })
      const results = yield* Effect.forEach(
        Array.from({ length: 100 }, (_, i) => i),
        () => callTool("weather", { q: "Berlin" }, { key }),
        { concurrency: 100 }
      )
      expect(results.filter((r) => r.status === 200).length, results.filter((r) => r.status !== 429).map((r) => r.text).join("\n"))
        .toBe(30)
      for (const r of results.filter((r) => r.status !== 200)) {
        expectEnvelope(r, { status: 429, type: "rate_limited", code: "spend_cap_exceeded", retryable: false, billable: false, message: "would be exceeded" })
      }
      expect(yield* books(orgId)).toMatchObject({ balance: 970, held: 0, monthSpend: 30, journalSum: 970 })
    }))

  // spend_cap_exceeded and key_spend_limit_exceeded carry Retry-After: the next month. A call that reserves more
  // than the whole cap or limit fits in no month: its message says so, and what helps.
  it.effect("a call that reserves more than the whole cap or key limit: 429 whose message says it fits in no month", () =>
    Effect.gen(function* () {
      const capped = yield* givenOrg({ credits: 100, cap: 5 })
      const over = yield* callTool("read", { url: "https://example.com", max_chars: 500000 }, { key: capped.key })
      expectEnvelope(over, { status: 429, type: "rate_limited", code: "spend_cap_exceeded", retryable: false, billable: false, message: "more than the org's monthly spend cap of 5 in all" })

      // a cap of 0 lets no call that costs credits through: it says so, not "ask for less"
      const frozen = yield* givenOrg({ credits: 100, cap: 0 })
      const none = yield* callTool("weather", { q: "Berlin" }, { key: frozen.key })
      expectEnvelope(none, { status: 429, type: "rate_limited", code: "spend_cap_exceeded", retryable: false, billable: false, message: "The org's monthly spend cap is 0 credits" })
      expect(errorOf(none)?.message).not.toContain("ask for less")
      const keys = yield* KeyStore
      const limited = yield* Effect.orDie(keys.create(capped.orgId, { name: "limited", spendLimit: 3 }))
      const overKey = yield* callTool("read", { url: "https://example.com", max_chars: 100000 }, { key: Redacted.value(limited.key) })
      expectEnvelope(overKey, { status: 429, type: "rate_limited", code: "key_spend_limit_exceeded", retryable: false, billable: false, message: "more than this key's monthly spend limit of 3 in all" })
      expect(yield* books(capped.orgId)).toMatchObject({ balance: 100, held: 0 })
    }))

  it.effect("the reservation covers the most the input can cost", () =>
    Effect.gen(function* () {
      // read reserves by max_chars: 500000 characters at 1 credit per 20000 is 25 credits
      const { key, orgId } = yield* givenOrg({ credits: 10 })
      const result = yield* callTool("read", { url: "https://example.com", max_chars: 500000 }, { key })
      expectEnvelope(result, { status: 402, type: "insufficient_credits", code: "insufficient_credits", retryable: false, billable: false, message: "reserves up to 25 credits" })
      expect(yield* books(orgId)).toMatchObject({ balance: 10, held: 0 })
    }))
})

layer(servicesLayer())("the ledger, in process, on TestClock", (it) => {
  const hold = (who: { readonly orgId: OrgId; readonly keyId: KeyId }, amount: number, leaseMs = 60_000) =>
    Effect.flatMap(Ledger, (ledger) =>
      ledger.reserve({ ...who, tool: "weather", requestId: `req_${Math.random()}`, amount, leaseMs }))

  it.effect("a month roll-over resets the spend cap", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(Date.parse("2026-01-31T23:59:00Z"))
      const ledger = yield* Ledger
      const orgs = yield* Orgs
      const org = yield* givenOrg({ credits: 100, cap: 10 })
      const { orgId } = org
      const h = yield* hold(org, 10)
      yield* ledger.settle(h, 10)
      expect(yield* Effect.flip(hold(org, 1))).toBeInstanceOf(SpendCapExceeded)
      expect((yield* orgs.get(orgId)).monthSpend).toBe(10)
      yield* TestClock.adjust("2 minutes")
      expect((yield* orgs.get(orgId)).monthSpend).toBe(0)
      const next = yield* hold(org, 1)
      yield* ledger.settle(next, 1)
      expect(yield* orgs.get(orgId)).toMatchObject({ balance: 89, monthSpend: 1, held: 0 })
    }))

  it.effect("a month roll-over resets a key's own monthly spend limit too", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(Date.parse("2026-04-30T23:58:00Z"))
      const ledger = yield* Ledger
      const orgs = yield* Orgs
      const keys = yield* KeyStore
      const { orgId } = yield* givenOrg({ credits: 100 })
      const limited = yield* Effect.orDie(keys.create(orgId, { name: "limited", spendLimit: 3 }))
      const who = { orgId, keyId: limited.id }
      yield* ledger.settle(yield* hold(who, 3), 3)
      expect(yield* Effect.flip(hold(who, 1))).toBeInstanceOf(KeySpendLimitExceeded)
      // another key of the org is not limited by it
      const other = yield* Effect.orDie(keys.create(orgId, { name: "other" }))
      yield* ledger.settle(yield* hold({ orgId, keyId: other.id }, 1), 1)
      yield* TestClock.adjust("3 minutes")
      const next = yield* hold(who, 3)
      yield* ledger.settle(next, 3)
      expect(yield* Effect.flip(hold(who, 1))).toBeInstanceOf(KeySpendLimitExceeded)
      expect(yield* orgs.get(orgId)).toMatchObject({ balance: 93, held: 0 })
    }))

  it.effect("pending holds count against the cap and the balance", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(Date.parse("2026-03-10T12:00:00Z"))
      const org = yield* givenOrg({ credits: 10, cap: 8 })
      yield* hold(org, 5)
      expect(yield* Effect.flip(hold(org, 4))).toBeInstanceOf(SpendCapExceeded)
      yield* hold(org, 3)
      const poor = yield* givenOrg({ credits: 4 })
      yield* hold(poor, 3)
      expect(yield* Effect.flip(hold(poor, 2))).toBeInstanceOf(InsufficientCredits)
    }))

  it.effect("at the edges: credits that cover the call exactly are enough, so the cap is what refuses; a call of the whole cap fits next month", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(Date.parse("2026-03-10T12:00:00Z"))
      const ledger = yield* Ledger
      // 10 credits, a cap of 9, 5 spent this month: the 5 credits left cover a call of 5 exactly, the cap's 4 left do
      // not — the cap refuses it (a boundary read the other way said "add credits")
      const org = yield* givenOrg({ credits: 10, cap: 9 })
      yield* ledger.settle(yield* hold(org, 5), 5)
      const refused = yield* Effect.flip(hold(org, 5))
      expect(refused).toBeInstanceOf(SpendCapExceeded)
      // a call of exactly the whole cap fits in a month, the next one: not "fits in no month, raise the cap"
      const capped = yield* givenOrg({ credits: 100, cap: 5 })
      yield* ledger.settle(yield* hold(capped, 1), 1)
      const later = yield* Effect.flip(hold(capped, 5))
      expect(later).toBeInstanceOf(SpendCapExceeded)
      expect(later.message).toContain("would be exceeded")
      expect(later.message).not.toContain("in all")
      // and one of more than the cap fits in none
      expect((yield* Effect.flip(hold(capped, 6))).message).toContain("in all")
    }))

  it.effect("a free call (0 credits) fits under a cap or key limit lowered below the month's spend; a paid one does not", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(Date.parse("2026-03-10T12:00:00Z"))
      const ledger = yield* Ledger
      const org = yield* givenOrg({ credits: 100, cap: 12 })
      yield* ledger.settle(yield* hold(org, 12), 12)
      yield* Effect.orDie((yield* Orgs).setSpendCap(org.orgId, 3))
      yield* ledger.void(yield* hold(org, 0))
      expect(yield* Effect.flip(hold(org, 1))).toBeInstanceOf(SpendCapExceeded)
      const keyed = yield* givenOrg({ credits: 100 })
      yield* ledger.settle(yield* hold(keyed, 2), 2)
      yield* Effect.orDie((yield* KeyStore).update(keyed.keyId, keyed.orgId, { spendLimit: 0 }))
      yield* ledger.void(yield* hold(keyed, 0))
      expect(yield* Effect.flip(hold(keyed, 1))).toBeInstanceOf(KeySpendLimitExceeded)
    }))

  it.effect("a refusal is explained by the row as it was when refused: an org with no cap is never told it hit one", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      // one credit, no cap: a call fits exactly when no other holds it
      const org = yield* givenOrg({ credits: 1 })
      const month = monthOf(Date.now())
      const reserve = sql<{ readonly hold_id: number | null; readonly refusal: string | null }>`
        SELECT hold_id, refusal FROM gateway_reserve_batch(ARRAY[${org.orgId}], ARRAY[${org.keyId}], ARRAY['weather'],
          ARRAY['req_race'], ARRAY[1]::bigint[], ARRAY[now()], ARRAY[${month}]::integer[], ARRAY[now() + interval '1 minute'])`
      const refusals = new Map<string, number>()
      let held = 0
      // each loop reserves the one credit and frees it at once: the others are refused while one holds it, and
      // read the row again after a hold was freed
      const loop = Effect.gen(function* () {
        const until = Date.now() + 2_500
        while (Date.now() < until) {
          const [row] = yield* reserve
          if (row?.hold_id !== null && row?.hold_id !== undefined) {
            held += 1
            yield* sql`SELECT gateway_void(${row.hold_id}, now())`
          } else if (row?.refusal !== null && row?.refusal !== undefined) {
            refusals.set(row.refusal, (refusals.get(row.refusal) ?? 0) + 1)
          }
        }
      })
      yield* Effect.all(Array.from({ length: 6 }, () => loop), { concurrency: "unbounded" }).pipe(Effect.orDie)
      expect(held).toBeGreaterThan(0)
      expect(refusals.get("insufficient_credits") ?? 0).toBeGreaterThan(0)
      expect([...refusals.keys()]).toEqual(["insufficient_credits"])
      expect(yield* books(org.orgId)).toMatchObject({ balance: 1, held: 0, pendingHolds: 0 })
    }), 20_000)

  it.effect("two refusals of one org, each beside an Idempotency-Key claim of it, both answered: no deadlock", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const org = yield* givenOrg({ credits: 1 })
      const month = monthOf(Date.now())
      // as gateway_claim_reserve_batch does: the claim's insert (a key-share lock on the org, by its foreign key),
      // then the reservation, refused (it asks for more than the org has)
      const claimThenReserve = (key: string, inserted: Deferred.Deferred<void>, go: Deferred.Deferred<void>) =>
        sql.withTransaction(Effect.gen(function* () {
          yield* sql`INSERT INTO idempotency (org_id, key, fingerprint, status, request_id, lease_until, expires_at, created_at)
                     VALUES (${org.orgId}, ${key}, 'f', 'running', ${`req_${key}`}, now(), now() + interval '1 day', now())`
          yield* Deferred.succeed(inserted, undefined)
          yield* Deferred.await(go)
          const rows = yield* sql<{ readonly refusal: string | null }>`
            SELECT refusal FROM gateway_reserve_batch(ARRAY[${org.orgId}], ARRAY[${org.keyId}], ARRAY['weather'],
              ARRAY[${`req_${key}`}], ARRAY[10]::bigint[], ARRAY[now()], ARRAY[${month}]::integer[], ARRAY[now() + interval '1 minute'])`
          return rows[0]?.refusal
        }))
      const [inserted1, go1, inserted2, go2] = yield* Effect.all([Deferred.make<void>(), Deferred.make<void>(), Deferred.make<void>(), Deferred.make<void>()])
      const first = yield* Effect.fork(claimThenReserve("k1", inserted1, go1))
      const second = yield* Effect.fork(claimThenReserve("k2", inserted2, go2))
      yield* Deferred.await(inserted1)
      yield* Deferred.await(inserted2)
      yield* Deferred.succeed(go1, undefined)
      // the first refusal, under FOR UPDATE, waited for the second claim's key-share lock; the second then closed the cycle
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 300)))
      yield* Deferred.succeed(go2, undefined)
      const answers = yield* Effect.all([Fiber.join(first), Fiber.join(second)]).pipe(Effect.orDie)
      expect(answers).toEqual(["insufficient_credits", "insufficient_credits"])
    }))

  it.effect("group commit: calls that arrive together share a statement, and each gets its own answer", () =>
    Effect.gen(function* () {
      const ledger = yield* Ledger
      const reserveBatches = Metric.tagged(ledgerBatchSize, "kind", "reserve")
      const resolveBatches = Metric.tagged(ledgerBatchSize, "kind", "resolve")
      const stateOf = Effect.all({ reserve: Metric.value(reserveBatches), resolve: Metric.value(resolveBatches) })
      const before = yield* stateOf
      // one hot org and a few others, 80 calls at once: the hot org covers 30 of its 60
      const hot = yield* givenOrg({ credits: 30 })
      const others = yield* Effect.forEach([1, 2], () => givenOrg({ credits: 10 }))
      const who = [...Array.from({ length: 60 }, () => hot), ...others.flatMap((o) => Array.from({ length: 10 }, () => o))]
      const exits = yield* Effect.forEach(who, (w) => Effect.exit(hold(w, 1)), { concurrency: "unbounded" })
      const held = exits.flatMap((e) => (Exit.isSuccess(e) ? [e.value] : []))
      expect(held.filter((h) => h.orgId === hot.orgId)).toHaveLength(30)
      expect(held).toHaveLength(50)
      // every refusal is the hot org's, for want of credits
      expect(exits.filter(Exit.isFailure)).toHaveLength(30)
      expect(exits.filter((e) => Exit.isFailure(e) && e.cause._tag === "Fail" && e.cause.error instanceof InsufficientCredits)).toHaveLength(30)
      // half settled, half voided, all at once
      const resolved = yield* Effect.forEach(held, (h, i) => (i % 2 === 0 ? ledger.settle(h, 1) : ledger.void(h)), { concurrency: "unbounded" })
      expect(resolved.every((r) => r)).toBe(true)
      expect(yield* books(hot.orgId)).toMatchObject({ balance: 15, held: 0, journalSum: 15 })
      const after = yield* stateOf
      // every call went through a batch (the histogram's sum counts calls, its count statements) ...
      expect(after.reserve.sum - before.reserve.sum).toBe(80)
      expect(after.resolve.sum - before.resolve.sum).toBe(50)
      expect(after.reserve.count - before.reserve.count).toBeGreaterThan(0)
      expect(after.resolve.count - before.resolve.count).toBeGreaterThan(0)
      // ... and there were fewer statements than calls: they were grouped
      expect(after.reserve.count - before.reserve.count).toBeLessThan(80)
      expect(after.resolve.count - before.resolve.count).toBeLessThan(50)
    }))

  it.effect("a settlement keeps the call's answer under its Idempotency-Key in the same statement, with what it posted", () =>
    Effect.gen(function* () {
      const ledger = yield* Ledger
      const idempotency = yield* Idempotency
      const org = yield* givenOrg({ credits: 10 })
      const claimed = (key: string) =>
        idempotency.claim({ orgId: org.orgId, key, fingerprint: "f", requestId: `req_${key}`, leaseMs: 60_000, write: false })
      const completes = Metric.tagged(ledgerBatchSize, "kind", "complete")
      const before = yield* Metric.value(completes)
      // settled: the answer is kept with the 3 credits charged, and nothing else stored it
      expect((yield* claimed("paid"))._tag).toBe("Claimed")
      const paid = yield* hold(org, 5)
      expect(yield* ledger.settle(paid, 3, { orgId: org.orgId, key: "paid", requestId: "req_paid", status: 200, body: "{\"ok\":1}" })).toBe(true)
      expect(yield* claimed("paid")).toEqual({ _tag: "Replay", response: { status: 200, body: "{\"ok\":1}", charged: 3 }, requestId: "req_paid" })
      expect((yield* Metric.value(completes)).count).toBe(before.count)
      // a hold voided meanwhile (a sweeper took the call for dead): kept, as charged 0 — what the call posted
      expect((yield* claimed("swept"))._tag).toBe("Claimed")
      const swept = yield* hold(org, 5)
      yield* ledger.void(swept)
      expect(yield* ledger.settle(swept, 3, { orgId: org.orgId, key: "swept", requestId: "req_swept", status: 200, body: "{\"ok\":2}" })).toBe(false)
      expect(yield* claimed("swept")).toEqual({ _tag: "Replay", response: { status: 200, body: "{\"ok\":2}", charged: 0 }, requestId: "req_swept" })
      // a normalization failure's 502, kept the same way with the minimum it was charged
      expect((yield* claimed("failed"))._tag).toBe("Claimed")
      const failed = yield* hold(org, 5)
      expect(yield* ledger.settle(failed, 1, { orgId: org.orgId, key: "failed", requestId: "req_failed", status: 502, body: "{\"error\":{}}" })).toBe(true)
      expect(yield* claimed("failed")).toEqual({ _tag: "Replay", response: { status: 502, body: "{\"error\":{}}", charged: 1 }, requestId: "req_failed" })
      expect(yield* books(org.orgId)).toMatchObject({ balance: 6, held: 0, journalSum: 6 })
    }))

  it.effect("a batch of resolutions waits for the WAL flush when it settles, unless LEDGER_SYNC=relaxed; voids never wait", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const org = yield* givenOrg({ credits: 10 })
      // the setting the batch leaves for its commit, read in its transaction (which is then rolled back), for a
      // hold alone or beside a void (a batch of one is resolved directly, a larger one in the ledger's lock order)
      const commitSetting = (charge: number | null, relaxed: boolean, alone = true) =>
        Effect.gen(function* () {
          const h = yield* hold(org, 1)
          const holds = alone ? [h.id] : [h.id, (yield* hold(org, 1)).id]
          const charges = alone ? [charge] : [charge, null]
          const rows = yield* sql.withTransaction(Effect.gen(function* () {
            yield* sql`SELECT * FROM gateway_resolve_batch(${holds}::bigint[], ${charges}::bigint[],
                         ${holds.map(() => new Date(0))}::timestamptz[], ${holds.map(() => 0)}::integer[], ${relaxed})`
            const setting = yield* sql<{ readonly s: string }>`SELECT current_setting('synchronous_commit') AS s`
            return yield* Effect.fail({ rollback: setting })
          })).pipe(Effect.catchAll((e) => ("rollback" in e ? Effect.succeed(e.rollback) : Effect.die(e))))
          yield* Effect.forEach(holds, (id) => Effect.flatMap(Ledger, (ledger) => ledger.void({ ...h, id })))
          return rows[0]?.s
        })
      for (const alone of [true, false]) {
        expect(yield* commitSetting(1, false, alone), `alone: ${alone}`).toBe("on")
        expect(yield* commitSetting(1, true, alone), `alone: ${alone}`).toBe("off")
        expect(yield* commitSetting(null, false, alone), `alone: ${alone}`).toBe("off")
      }
    }))

  it.effect("a hold resolved alone and one resolved in a batch answer the same: settled, voided, already resolved, unknown", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const at = new Date("2026-03-04T05:06:07.000Z")
      // one statement; a null charge voids
      const resolve = (holds: ReadonlyArray<number>, charges: ReadonlyArray<number | null>) =>
        sql<{ readonly ord: number; readonly done: boolean }>`SELECT * FROM gateway_resolve_batch(${holds}::bigint[],
          ${charges}::bigint[], ${holds.map(() => at)}::timestamptz[], ${holds.map(() => 202603)}::integer[], false)`
      const unknown = 2 ** 52
      for (const alone of [true, false]) {
        const org = yield* givenOrg({ credits: 10 })
        // alone, the statement resolves its one hold directly; in a batch, the hold is second, after a void
        const answer = (holdId: number, charge: number | null) =>
          Effect.gen(function* () {
            if (alone) return yield* resolve([holdId], [charge])
            const companion = yield* hold(org, 1)
            const rows = yield* resolve([companion.id, holdId], [null, charge])
            expect(rows.find((r) => r.ord === 1)?.done).toBe(true)
            return rows.filter((r) => r.ord === 2).map((r) => ({ ...r, ord: 1 }))
          })
        const settled = yield* hold(org, 3)
        const voided = yield* hold(org, 2)
        const free = yield* hold(org, 1)
        // a charge above the hold is cut to it, one below zero to zero
        expect(yield* answer(settled.id, 99), `alone: ${alone}`).toEqual([{ ord: 1, done: true }])
        expect(yield* answer(voided.id, null), `alone: ${alone}`).toEqual([{ ord: 1, done: true }])
        expect(yield* answer(free.id, -1), `alone: ${alone}`).toEqual([{ ord: 1, done: true }])
        expect(yield* answer(settled.id, 2), `alone: ${alone}`).toEqual([{ ord: 1, done: false }])
        expect(yield* answer(voided.id, 1), `alone: ${alone}`).toEqual([{ ord: 1, done: false }])
        expect(yield* answer(unknown, 1), `alone: ${alone}`).toEqual([{ ord: 1, done: false }])
        expect(yield* answer(unknown, null), `alone: ${alone}`).toEqual([{ ord: 1, done: false }])
        const rows = yield* sql<{ readonly id: number; readonly status: string; readonly charged: number; readonly resolvedAt: Date }>`
          SELECT id, status, charged, resolved_at AS "resolvedAt" FROM holds
           WHERE id IN (${settled.id}, ${voided.id}, ${free.id}) ORDER BY id`
        expect(rows, `alone: ${alone}`).toEqual([
          { id: settled.id, status: "settled", charged: 3, resolvedAt: at },
          { id: voided.id, status: "voided", charged: 0, resolvedAt: at },
          { id: free.id, status: "settled", charged: 0, resolvedAt: at }
        ])
        const b = yield* books(org.orgId)
        expect(b, `alone: ${alone}`).toMatchObject({ balance: 7, held: 0, pendingHolds: 0, journalSum: 7 })
        expect(b.holdsByStatus, `alone: ${alone}`).toEqual(alone ? { settled: 2, voided: 1 } : { settled: 2, voided: 8 })
      }
    }))

  it.effect("each hold resolves exactly once, and a charge never exceeds its hold", () =>
    Effect.gen(function* () {
      const ledger = yield* Ledger
      const org = yield* givenOrg({ credits: 20 })
      const { orgId } = org
      const h = yield* hold(org, 5)
      expect(yield* ledger.settle(h, 99)).toBe(true)
      expect(yield* ledger.settle(h, 5)).toBe(false)
      expect(yield* ledger.void(h)).toBe(false)
      const b = yield* books(orgId)
      expect(b).toMatchObject({ balance: 15, held: 0, journalSum: 15 })
      const v = yield* hold(org, 7)
      expect(yield* ledger.void(v)).toBe(true)
      expect(yield* ledger.settle(v, 7)).toBe(false)
      expect(yield* books(orgId)).toMatchObject({ balance: 15, held: 0, journalSum: 15 })
    }))

  it.effect("the sweeper voids holds whose lease expired, and only those", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(Date.parse("2026-05-01T00:00:00Z"))
      const ledger = yield* Ledger
      const org = yield* givenOrg({ credits: 50 })
      const { orgId } = org
      yield* hold(org, 10, 1_000)
      const live = yield* hold(org, 5, 60_000)
      yield* TestClock.adjust("2 seconds")
      expect(yield* ledger.sweep).toBeGreaterThanOrEqual(1)
      expect(yield* books(orgId)).toMatchObject({ balance: 50, held: 5, pendingHolds: 1 })
      yield* ledger.settle(live, 5)
      expect(yield* books(orgId)).toMatchObject({ balance: 45, held: 0, pendingHolds: 0, journalSum: 45 })
    }))

  it.scoped("the sweeper runs on its own interval, voiding holds whose request died", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(Date.parse("2026-07-01T00:00:00Z"))
      const org = yield* givenOrg({ credits: 9 })
      const { orgId } = org
      yield* hold(org, 4, 500)
      yield* Layer.build(SweeperLive.pipe(Layer.provide(Layer.succeed(LedgerConfig, { ...defaults.ledger, sweepIntervalMs: 1_000 }))))
      expect(yield* books(orgId)).toMatchObject({ held: 4 })
      // Each sweep's queries are real I/O: move the clock a tick at a time and let them land (in real time).
      for (let i = 0; i < 50 && (yield* books(orgId)).held > 0; i++) {
        yield* TestClock.adjust("1 second")
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))
      }
      expect(yield* books(orgId)).toMatchObject({ balance: 9, held: 0, holdsByStatus: { voided: 1 } })
    }))

  it.effect("grants append to the journal; the journal sums to the balance", () =>
    Effect.gen(function* () {
      const ledger = yield* Ledger
      const orgs = yield* Orgs
      const org = yield* givenOrg({ credits: 0 })
      const { orgId } = org
      yield* orgs.grant(orgId, 30, "top-up")
      yield* orgs.grant(orgId, 12)
      const h = yield* hold(org, 2)
      yield* ledger.settle(h, 2)
      expect(yield* books(orgId)).toMatchObject({ balance: 40, journalSum: 40 })
    }))

  it.effect("the journal is append-only", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const { orgId } = yield* givenOrg({ credits: 5 })
      const update = yield* Effect.exit(sql`UPDATE journal SET amount = 1000 WHERE org_id = ${orgId}`)
      const remove = yield* Effect.exit(sql`DELETE FROM journal WHERE org_id = ${orgId}`)
      expect(Exit.isFailure(update)).toBe(true)
      expect(Exit.isFailure(remove)).toBe(true)
      expect(yield* books(orgId)).toMatchObject({ balance: 5, journalSum: 5 })
    }))

  describe("caps", () => {
    it.effect("a cap can be set and removed", () =>
      Effect.gen(function* () {
        const orgs = yield* Orgs
        const org = yield* givenOrg({ credits: 10 })
        const { orgId } = org
        expect((yield* orgs.setSpendCap(orgId, 0)).spendCap).toBe(0)
        expect(yield* Effect.flip(hold(org, 1))).toBeInstanceOf(SpendCapExceeded)
        expect((yield* orgs.setSpendCap(orgId, null)).spendCap).toBeNull()
        yield* hold(org, 1)
      }))
  })
})
