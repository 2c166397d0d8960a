/**
 * Org administration: create an org, read it (balance, held, available, month spend, spend cap), add
 * credits, set or remove its monthly spend cap. Calls' holds are the Ledger's; this service only changes
 * what an operator or a dashboard member changes. Every balance change is appended to the journal whose
 * sum is the balance.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as SqlSchema from "@effect/sql/SqlSchema"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { creditsMessage, isCredits, MAX_CREDITS } from "../domain/credits.js"
import { InvalidRequest, NotFound } from "../domain/errors.js"
import { OrgId } from "../domain/ids.js"
import { randomId } from "./random.js"
import { monthOf, nowMillis, toDate } from "./time.js"
import { traced } from "./tracing.js"

export interface Org {
  readonly id: OrgId
  readonly name: string
  readonly balance: number
  readonly held: number
  readonly available: number
  /** Charged in the current UTC month. */
  readonly monthSpend: number
  readonly spendCap: number | null
  readonly createdAt: Date
}

export interface NewOrg {
  readonly name: string
  readonly credits?: number
  readonly spendCap?: number | null
}

export class Orgs extends Context.Tag("Orgs")<Orgs, {
  /** Amounts are whole numbers of credits up to `MAX_CREDITS`; anything else is `invalid_request`. */
  readonly create: (input: NewOrg) => Effect.Effect<Org, InvalidRequest>
  readonly get: (id: OrgId) => Effect.Effect<Org, NotFound>
  /** Every org, oldest first. */
  readonly list: Effect.Effect<ReadonlyArray<Org>>
  /** How many orgs there are (the first start's check): a database that does not answer is the caller's to say. */
  readonly count: Effect.Effect<number, SqlError>
  /** Add credits; a grant that would take the balance past `MAX_CREDITS` is refused. */
  readonly grant: (id: OrgId, amount: number, note?: string) => Effect.Effect<Org, NotFound | InvalidRequest>
  readonly setSpendCap: (id: OrgId, cap: number | null) => Effect.Effect<Org, NotFound | InvalidRequest>
}>() {}

/** `invalid_request` unless `value` is a whole number of credits from `min` to `MAX_CREDITS`. */
export const checkCredits = (name: string, value: number, min = 0): Effect.Effect<void, InvalidRequest> =>
  isCredits(value, min) ? Effect.void : Effect.fail(new InvalidRequest({ message: creditsMessage(name, value, min) }))

const OrgRow = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  balance: Schema.Number,
  held: Schema.Number,
  spend_month: Schema.Number,
  month_spend: Schema.Number,
  spend_cap: Schema.NullOr(Schema.Number),
  created_at: Schema.DateFromSelf
})

const Count = Schema.Struct({ n: Schema.Number })
const Balance = Schema.Struct({ balance: Schema.Number })
const Id = Schema.Struct({ id: Schema.String })
const Grant = Schema.Struct({ id: Schema.String, amount: Schema.Number })

export const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient

  const findOrg = SqlSchema.findOne({
    Request: Schema.String,
    Result: OrgRow,
    execute: (id) => sql`SELECT * FROM orgs WHERE id = ${id}`
  })
  const findAll = SqlSchema.findAll({
    Request: Schema.Void,
    Result: OrgRow,
    execute: () => sql`SELECT * FROM orgs ORDER BY created_at, id`
  })
  const countRows = SqlSchema.single({
    Request: Schema.Void,
    Result: Count,
    execute: () => sql`SELECT count(*)::int AS n FROM orgs`
  })
  const addBalance = SqlSchema.findOne({
    Request: Grant,
    Result: Balance,
    execute: (g) =>
      sql`UPDATE orgs SET balance = balance + ${g.amount} WHERE id = ${g.id} AND balance <= ${MAX_CREDITS - g.amount}
          RETURNING balance`
  })
  const updateCap = SqlSchema.findOne({
    Request: Schema.Struct({ id: Schema.String, cap: Schema.NullOr(Schema.Number) }),
    Result: Id,
    execute: ({ cap, id }) => sql`UPDATE orgs SET spend_cap = ${cap} WHERE id = ${id} RETURNING id`
  })

  const fromRow = (org: typeof OrgRow.Type, now: number): Org => ({
    id: OrgId.make(org.id),
    name: org.name,
    balance: org.balance,
    held: org.held,
    available: org.balance - org.held,
    // a row already in a later month (another process's clock ahead) is the month the ledger counts in
    monthSpend: org.spend_month >= monthOf(now) ? org.month_spend : 0,
    spendCap: org.spend_cap,
    createdAt: org.created_at
  })

  const read = (id: OrgId) =>
    Effect.gen(function* () {
      const now = yield* nowMillis
      const row = yield* findOrg(id)
      if (Option.isNone(row)) return yield* new NotFound({ message: `no org with id ${id}` })
      return fromRow(row.value, now)
    })

  const list = Effect.gen(function* () {
    const now = yield* nowMillis
    const rows = yield* findAll(undefined)
    return rows.map((row) => fromRow(row, now))
  }).pipe(Effect.orDie, traced("Orgs.list"))

  const get = (id: OrgId) => read(id).pipe(Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die }))

  const create = (input: NewOrg) =>
    Effect.gen(function* () {
      if (input.name.trim() === "") return yield* new InvalidRequest({ message: "An org's name must not be empty." })
      yield* checkCredits("credits", input.credits ?? 0)
      if (input.spendCap !== undefined && input.spendCap !== null) yield* checkCredits("spend cap", input.spendCap)
      const now = yield* nowMillis
      const id = OrgId.make(yield* randomId("org"))
      const credits = input.credits ?? 0
      yield* sql.withTransaction(Effect.gen(function* () {
        yield* sql`
          INSERT INTO orgs (id, name, balance, held, spend_month, month_spend, spend_cap, created_at)
          VALUES (${id}, ${input.name}, ${credits}, 0, ${monthOf(now)}, 0, ${input.spendCap ?? null}, ${toDate(now)})`
        if (credits > 0) {
          yield* sql`
            INSERT INTO journal (org_id, kind, amount, note, created_at)
            VALUES (${id}, 'grant', ${credits}, 'initial credits', ${toDate(now)})`
        }
      }))
      return yield* read(id)
    }).pipe(Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die, NotFound: Effect.die }), traced("Orgs.create"))

  const count = countRows(undefined).pipe(
    Effect.map((row) => row.n),
    Effect.catchTags({ ParseError: Effect.die, NoSuchElementException: Effect.die })
  )

  const grant = (id: OrgId, amount: number, note?: string) =>
    Effect.gen(function* () {
      yield* checkCredits("amount", amount, 1)
      const now = yield* nowMillis
      const updated = yield* sql.withTransaction(Effect.gen(function* () {
        const row = yield* addBalance({ id, amount })
        if (Option.isNone(row)) return false
        yield* sql`
          INSERT INTO journal (org_id, kind, amount, note, created_at)
          VALUES (${id}, 'grant', ${amount}, ${note ?? null}, ${toDate(now)})`
        return true
      }))
      if (!updated) {
        const org = yield* read(id)
        return yield* new InvalidRequest({
          message: `Granting ${amount} credits would take the balance of ${org.id} (${org.balance}) past ${MAX_CREDITS}, ` +
            "the largest amount of credits the gateway counts."
        })
      }
      return yield* read(id)
    }).pipe(Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die }), traced("Orgs.grant"))

  const setSpendCap = (id: OrgId, cap: number | null) =>
    Effect.gen(function* () {
      if (cap !== null) yield* checkCredits("spend cap", cap)
      const row = yield* updateCap({ id, cap })
      if (Option.isNone(row)) return yield* new NotFound({ message: `no org with id ${id}` })
      return yield* read(id)
    }).pipe(Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die }), traced("Orgs.setSpendCap"))

  return Orgs.of({ create, get, list, count, grant, setSpendCap })
})

export const OrgsLive = Layer.effect(Orgs, make)
