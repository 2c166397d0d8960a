/**
 * Dashboard users belong to orgs: a user (the ID token's `sub`) is a member of one org. The operator adds
 * members with the CLI; with `AUTO_CREATE_ORGS`, a user who signs in without one gets a personal org.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { NotAMember, NotFound } from "../domain/errors.js"
import { OrgId } from "../domain/ids.js"
import { IdentityConfig } from "../config.js"
import { Ledger } from "./Ledger.js"
import { nowMillis, toDate } from "./time.js"

export interface Member {
  readonly uid: string
  readonly orgId: OrgId
  readonly createdAt: Date
}

export class Members extends Context.Tag("Members")<Members, {
  /** Add (or move) a user to an org. */
  readonly add: (orgId: OrgId, uid: string) => Effect.Effect<Member, NotFound>
  readonly list: (orgId: OrgId) => Effect.Effect<ReadonlyArray<Member>>
  /** The org of a signed-in user. */
  readonly orgOf: (uid: string) => Effect.Effect<OrgId, NotAMember>
}>() {}

interface MemberRow {
  readonly uid: string
  readonly org_id: string
  readonly created_at: Date
}

const toMember = (row: MemberRow): Member => ({ uid: row.uid, orgId: OrgId.make(row.org_id), createdAt: row.created_at })

export const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const identity = yield* IdentityConfig
  const ledger = yield* Ledger

  const add = (orgId: OrgId, uid: string) =>
    Effect.gen(function* () {
      const now = yield* nowMillis
      const rows = yield* sql<MemberRow>`
        INSERT INTO members (uid, org_id, created_at)
        SELECT ${uid}, id, ${toDate(now)} FROM orgs WHERE id = ${orgId}
        ON CONFLICT (uid) DO UPDATE SET org_id = EXCLUDED.org_id
        RETURNING uid, org_id, created_at`
      const row = rows[0]
      if (row === undefined) return yield* new NotFound({ message: `no org with id ${orgId}` })
      return toMember(row)
    }).pipe(Effect.catchTag("SqlError", Effect.die))

  const list = (orgId: OrgId) =>
    sql<MemberRow>`SELECT uid, org_id, created_at FROM members WHERE org_id = ${orgId} ORDER BY created_at, uid`.pipe(
      Effect.map((rows) => rows.map(toMember)),
      Effect.orDie
    )

  const orgOf = (uid: string): Effect.Effect<OrgId, NotAMember> =>
    Effect.gen(function* () {
      const rows = yield* sql<{ readonly org_id: string }>`SELECT org_id FROM members WHERE uid = ${uid}`
      const row = rows[0]
      if (row !== undefined) return OrgId.make(row.org_id)
      if (!identity.autoCreateOrgs) {
        return yield* new NotAMember({
          message: "This account is not a member of any org. Ask the operator to add it (tool-gateway members add)."
        })
      }
      // SIGNUP_CREDITS was checked at start-up
      const org = yield* Effect.orDie(ledger.createOrg({ name: `personal:${uid}`, credits: identity.signupCredits }))
      const now = yield* nowMillis
      // Two first sign-ins at once: the first membership wins; the other org stays empty and unused.
      yield* sql`INSERT INTO members (uid, org_id, created_at) VALUES (${uid}, ${org.id}, ${toDate(now)})
                 ON CONFLICT (uid) DO NOTHING`
      const settled = yield* sql<{ readonly org_id: string }>`SELECT org_id FROM members WHERE uid = ${uid}`
      return OrgId.make(settled[0]?.org_id ?? org.id)
    }).pipe(Effect.catchTag("SqlError", Effect.die))

  return Members.of({ add, list, orgOf })
})

export const MembersLive = Layer.effect(Members, make)
