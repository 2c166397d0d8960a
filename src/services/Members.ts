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

  // a new member; a user who is a member already (of any org) is left as is
  const insertMember = SqlSchema.findOne({
    Request: NewMember,
    Result: MemberRow,
    execute: (m) => sql`
      INSERT INTO members (uid, org_id, created_at) VALUES (${m.uid}, ${m.orgId}, ${m.now})
      ON CONFLICT (uid) DO NOTHING
      RETURNING uid, org_id, created_at`
  })
  const findMemberLocked = SqlSchema.findOne({
    Request: Schema.String,
    Result: MemberRow,
    execute: (uid) => sql`SELECT uid, org_id, created_at FROM members WHERE uid = ${uid} FOR UPDATE`
  })
  const moveMember = SqlSchema.single({
    Request: NewMember,
    Result: MemberRow,
    execute: (m) => sql`
      UPDATE members SET org_id = ${m.orgId}, created_at = ${m.now} WHERE uid = ${m.uid}
      RETURNING uid, org_id, created_at`
  })
  const findMembers = SqlSchema.findAll({
    Request: Schema.String,
    Result: MemberRow,
    execute: (orgId) => sql`SELECT uid, org_id, created_at FROM members WHERE org_id = ${orgId} ORDER BY created_at, uid`
  })
  const findMembership = SqlSchema.findOne({
    Request: Schema.String,
    Result: MembershipRow,
    execute: (uid) => sql`SELECT org_id FROM members WHERE uid = ${uid}`
  })

  // The org first (a mistyped one is not found, whoever the user is). A new member is inserted; the insert waits
  // for another transaction inserting the same user, and then leaves their row, read next, committed, and locked:
  // the org read there is the one a move takes the user out of.
  const add = (orgId: OrgId, uid: string, options: { readonly move?: boolean } = {}): Effect.Effect<AddedMember, NotFound | InvalidRequest> =>
    sql.withTransaction(Effect.gen(function* () {
      yield* orgs.get(orgId)
      const member = { uid, orgId, now: toDate(yield* nowMillis) }
      const inserted = yield* insertMember(member)
      if (Option.isSome(inserted)) return { ...toMember(inserted.value), movedFrom: undefined }
      const existing = yield* findMemberLocked(uid)
      // taken out since the insert: add them again
      if (Option.isNone(existing)) return yield* add(orgId, uid, options)
      const other = existing.value.org_id
      if (other === orgId) return { ...toMember(existing.value), movedFrom: undefined }
      if (options.move !== true) {
        return yield* new InvalidRequest({
          message: `${uid} is a member of ${other}: a user belongs to one org. Add --move to move them to ${orgId} ` +
            `(they lose access to ${other}).`
        })
      }
      return { ...toMember(yield* moveMember(member)), movedFrom: other }
    })).pipe(Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die, NoSuchElementException: Effect.die }))

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
