/**
 * A month's spend never moves back: a process whose clock is behind across a UTC month's turn carries the older
 * month, and its reservations and settlements count in the newer month the row already has, so calls alternating
 * between two such processes still meet the spend cap and a key's monthly limit (TestClock plays both clocks).
 */
import { expect, layer } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { KeySpendLimitExceeded, SpendCapExceeded } from "../src/domain/errors.js"
import type { KeyId, OrgId } from "../src/domain/ids.js"
import { KeyStore } from "../src/services/KeyStore.js"
import { Ledger } from "../src/services/Ledger.js"
import { Orgs } from "../src/services/Orgs.js"
import { givenOrg, servicesLayer } from "./support/gateway.js"

// the same instant as two processes read it, one clock 20 s behind the other, across the turn of February
const AHEAD = Date.parse("2026-02-01T00:00:10Z")
const BEHIND = Date.parse("2026-01-31T23:59:50Z")

layer(servicesLayer())("a month's spend under clocks on both sides of a month's turn", (it) => {
  const hold = (who: { readonly orgId: OrgId; readonly keyId: KeyId }, amount: number) =>
    Effect.flatMap(Ledger, (ledger) =>
      ledger.reserve({ ...who, tool: "weather", requestId: `req_${Math.random()}`, amount, leaseMs: 60_000 }))

  it.effect("a reservation and a settlement carrying the older month count in the newer one: the org's cap binds", () =>
    Effect.gen(function* () {
      const ledger = yield* Ledger
      const orgs = yield* Orgs
      yield* TestClock.setTime(AHEAD)
      const org = yield* givenOrg({ credits: 100, cap: 10 })
      yield* ledger.settle(yield* hold(org, 6), 6)
      const pending = yield* hold(org, 4)
      // the process behind settles the hold the process ahead made
      yield* TestClock.setTime(BEHIND)
      yield* ledger.settle(pending, 4)
      // February has its 10 credits: neither clock gets another one
      expect(yield* Effect.flip(hold(org, 1))).toBeInstanceOf(SpendCapExceeded)
      yield* TestClock.setTime(AHEAD)
      expect(yield* Effect.flip(hold(org, 1))).toBeInstanceOf(SpendCapExceeded)
      expect(yield* orgs.get(org.orgId)).toMatchObject({ balance: 90, held: 0, monthSpend: 10 })
      // and March starts from nothing
      yield* TestClock.setTime(Date.parse("2026-03-01T00:00:01Z"))
      yield* ledger.settle(yield* hold(org, 10), 10)
      expect(yield* orgs.get(org.orgId)).toMatchObject({ balance: 80, monthSpend: 10 })
    }))

  it.effect("a process behind shows the org's and the key's month spend the cap counts, not 0", () =>
    Effect.gen(function* () {
      const ledger = yield* Ledger
      const orgs = yield* Orgs
      const keys = yield* KeyStore
      yield* TestClock.setTime(AHEAD)
      const org = yield* givenOrg({ credits: 100, cap: 10 })
      yield* ledger.settle(yield* hold(org, 10), 10)
      yield* TestClock.setTime(BEHIND)
      // the ledger, on this clock, counts February's 10: the cap refuses, saying so
      const refused = yield* Effect.flip(hold(org, 1))
      expect(refused).toBeInstanceOf(SpendCapExceeded)
      expect(refused.message).toContain("10")
      // and what the same process shows agrees with it
      expect((yield* orgs.get(org.orgId)).monthSpend).toBe(10)
      expect((yield* keys.list(org.orgId)).find((k) => k.id === org.keyId)?.monthSpend).toBe(10)
    }))

  it.effect("calls alternating between the two clocks never pass the cap", () =>
    Effect.gen(function* () {
      const ledger = yield* Ledger
      const orgs = yield* Orgs
      yield* TestClock.setTime(AHEAD)
      const org = yield* givenOrg({ credits: 100, cap: 5 })
      let charged = 0
      for (let i = 0; i < 12; i++) {
        yield* TestClock.setTime(i % 2 === 0 ? AHEAD : BEHIND)
        const held = yield* Effect.either(hold(org, 1))
        if (held._tag === "Right") {
          yield* ledger.settle(held.right, 1)
          charged += 1
        } else {
          expect(held.left).toBeInstanceOf(SpendCapExceeded)
        }
      }
      expect(charged).toBe(5)
      yield* TestClock.setTime(AHEAD)
      expect(yield* orgs.get(org.orgId)).toMatchObject({ balance: 95, monthSpend: 5 })
    }))

  it.effect("a key's monthly limit binds the same way", () =>
    Effect.gen(function* () {
      const ledger = yield* Ledger
      const keys = yield* KeyStore
      yield* TestClock.setTime(AHEAD)
      const { orgId } = yield* givenOrg({ credits: 100 })
      const limited = yield* Effect.orDie(keys.create(orgId, { name: "limited", spendLimit: 3 }))
      const who = { orgId, keyId: limited.id }
      yield* ledger.settle(yield* hold(who, 2), 2)
      yield* TestClock.setTime(BEHIND)
      yield* ledger.settle(yield* hold(who, 1), 1)
      expect(yield* Effect.flip(hold(who, 1))).toBeInstanceOf(KeySpendLimitExceeded)
      yield* TestClock.setTime(AHEAD)
      expect(yield* Effect.flip(hold(who, 1))).toBeInstanceOf(KeySpendLimitExceeded)
    }))
})
