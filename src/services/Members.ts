/**
 * Dashboard users belong to orgs: a user (the ID token's `sub`) is a member of one org. The operator adds
 * members with the CLI; with `AUTO_CREATE_ORGS`, a user who signs in without one gets a personal org.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { InvalidRequest, NotAMember, NotFound } from "../domain/errors.js"
import { OrgId } from "../domain/ids.js"
import { IdentityConfig } from "../config.js"
import { Orgs } from "./Orgs.js"
import { nowMillis, toDate } from "./time.js"

export interface Member {
  readonly uid: string
  readonly orgId: OrgId
  readonly createdAt: Date
}

/** A member as added: the org the user was moved out of, if any. */
export interface AddedMember extends Member {
  readonly movedFrom: OrgId | undefined
}

export class Members extends Context.Tag("Members")<Members, {
  /**
   * Add a user to an org (again: nothing changes). A user belongs to one org: one who is a member of another is
   * refused (`InvalidRequest`, naming it) unless `move` is set, and is then moved — out of the other org.
   */
  readonly add: (orgId: OrgId, uid: string, options?: { readonly move?: boolean }) => Effect.Effect<AddedMember, NotFound | InvalidRequest>
  /** Take a user out of an org: their next dashboard request is refused (`not_a_member`). */
  readonly remove: (orgId: OrgId, uid: string) => Effect.Effect<void, NotFound>
  readonly list: (orgId: OrgId) => Effect.Effect<ReadonlyArray<Member>>
  /** The org of a signed-in user. */
  readonly orgOf: (uid: string) => Effect.Effect<OrgId, NotAMember>
}>() {}

const MemberRow = Schema.Struct({ uid: Schema.String, org_id: OrgId, created_at: Schema.DateFromSelf })

const toMember = (row: typeof MemberRow.Type): Member => ({ uid: row.uid, orgId: row.org_id, createdAt: row.created_at })

const NewMember = Schema.Struct({ uid: Schema.String, orgId: Schema.String, now: Schema.DateFromSelf })
const MembershipRow = Schema.Struct({ org_id: OrgId })

export const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const identity = yield* IdentityConfig
  const orgs = yield* Orgs

  const upsertMember = SqlSchema.findOne({
    Request: NewMember,
    Result: MemberRow,
    execute: (m) => sql`
      INSERT INTO members (uid, org_id, created_at)
      SELECT ${m.uid}, id, ${m.now} FROM orgs WHERE id = ${m.orgId}
      ON CONFLICT (uid) DO UPDATE SET org_id = EXCLUDED.org_id,
        created_at = CASE WHEN members.org_id = EXCLUDED.org_id THEN members.created_at ELSE EXCLUDED.created_at END
      RETURNING uid, org_id, created_at`
  })
  // a new member only: a user who is a member already (of this org, or of another since the check) is left as is
  const insertMember = SqlSchema.findOne({
    Request: NewMember,
    Result: MemberRow,
    execute: (m) => sql`
      INSERT INTO members (uid, org_id, created_at)
      SELECT ${m.uid}, id, ${m.now} FROM orgs WHERE id = ${m.orgId}
      ON CONFLICT (uid) DO NOTHING
      RETURNING uid, org_id, created_at`
  })
  const findMember = SqlSchema.findOne({
    Request: Schema.String,
    Result: MemberRow,
    execute: (uid) => sql`SELECT uid, org_id, created_at FROM members WHERE uid = ${uid}`
  })
  const findMembers = SqlSchema.findAll({
    Request: Schema.String,
    Result: MemberRow,
    execute: (orgId) => sql`SELECT uid, org_id, created_at FROM members WHERE org_id = ${orgId} ORDER BY created_at, uid`
  })
  const findMembershipLocked = SqlSchema.findOne({
    Request: Schema.String,
    Result: MembershipRow,
    execute: (uid) => sql`SELECT org_id FROM members WHERE uid = ${uid} FOR UPDATE`
  })
  const findMembership = SqlSchema.findOne({
    Request: Schema.String,
    Result: MembershipRow,
    execute: (uid) => sql`SELECT org_id FROM members WHERE uid = ${uid}`
  })

  const memberElsewhere = (uid: string, orgId: OrgId, other: OrgId) =>
    new InvalidRequest({
      message: `${uid} is a member of ${other}: a user belongs to one org. Add --move to move them to ${orgId} ` +
        `(they lose access to ${other}).`
    })

  // In one transaction, the user's row locked: the org read is the org moved out of. Without `move`, a user
  // added by another transaction at the same moment (no row to lock yet) is not overwritten: the insert leaves
  // their row, which is read back.
  const add = (orgId: OrgId, uid: string, options: { readonly move?: boolean } = {}) =>
    sql.withTransaction(Effect.gen(function* () {
      const now = yield* nowMillis
      const before = yield* findMembershipLocked(uid)
      const other = Option.filter(Option.map(before, (m) => m.org_id), (org) => org !== orgId)
      const move = options.move === true
      if (Option.isSome(other) && !move) return yield* memberElsewhere(uid, orgId, other.value)
      const row = yield* (move ? upsertMember : insertMember)({ uid, orgId, now: toDate(now) })
      if (Option.isSome(row)) return { ...toMember(row.value), movedFrom: Option.getOrUndefined(other) }
      const existing = yield* findMember(uid)
      if (Option.isSome(existing) && existing.value.org_id === orgId) return { ...toMember(existing.value), movedFrom: undefined }
      if (Option.isSome(existing) && !move) return yield* memberElsewhere(uid, orgId, existing.value.org_id)
      return yield* new NotFound({ message: `no org with id ${orgId}` })
    })).pipe(Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die }))

  const remove = (orgId: OrgId, uid: string) =>
    Effect.gen(function* () {
      const removed = yield* sql<{ readonly uid: string }>`
        DELETE FROM members WHERE org_id = ${orgId} AND uid = ${uid} RETURNING uid`
      if (removed.length === 0) return yield* new NotFound({ message: `${uid} is not a member of ${orgId}` })
    }).pipe(Effect.catchTags({ SqlError: Effect.die }))

  const list = (orgId: OrgId) =>
    findMembers(orgId).pipe(
      Effect.map((rows) => rows.map(toMember)),
      Effect.orDie
    )

  const orgOf = (uid: string): Effect.Effect<OrgId, NotAMember> =>
    Effect.gen(function* () {
      const member = yield* findMembership(uid)
      if (Option.isSome(member)) return member.value.org_id
      if (!identity.autoCreateOrgs) {
        return yield* new NotAMember({
          message: "This account is not a member of any org. Ask the operator to add it (tool-gateway members add)."
        })
      }
      // SIGNUP_CREDITS was checked at start-up
      const org = yield* Effect.orDie(orgs.create({ name: `personal:${uid}`, credits: identity.signupCredits }))
      const now = yield* nowMillis
      // Two first sign-ins at once: the first membership wins; the other org stays empty and unused.
      yield* sql`INSERT INTO members (uid, org_id, created_at) VALUES (${uid}, ${org.id}, ${toDate(now)})
                 ON CONFLICT (uid) DO NOTHING`
      const settled = yield* findMembership(uid)
      return Option.match(settled, { onNone: () => org.id, onSome: (m) => m.org_id })
    }).pipe(Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die }))

  return Members.of({ add, remove, list, orgOf })
})

export const MembersLive = Layer.effect(Members, make)
