/**
 * The admin CLI (`tool-gateway …`). Every command works against `DATABASE_URL`, or against the embedded
 * database in `GATEWAY_DATA_DIR` (joining the running server's, or starting it for the command).
 * `--json` prints machine-readable output.
 */
import * as Command from "@effect/cli/Command"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Options from "@effect/cli/Options"
import * as ValidationError from "@effect/cli/ValidationError"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Os from "node:os"
import { migrate } from "../db/migrations/index.js"
import { ConnectionLive, ReadableDatabaseLive } from "../db/Database.js"
import { parseCredits } from "../domain/credits.js"
import { KeyName, MAX_RATE, Uid } from "../domain/dashboard.js"
import { envelope, type GatewayError, InvalidRequest, isGatewayError } from "../domain/errors.js"
import { KeyId, OrgId } from "../domain/ids.js"
import { catalog, isToolName, toolNames } from "../domain/tools.js"
import { Betas, BetasLive } from "../services/Betas.js"
import { Connections, ConnectionsLive } from "../services/Connections.js"
import { DeltaSessionsLive } from "../services/DeltaSessions.js"
import { EncryptionLive } from "../services/Encryption.js"
import { type KeyInfo, KeyStore, KeyStoreLive } from "../services/KeyStore.js"
import { type Org, Orgs, OrgsLive } from "../services/Orgs.js"
import { devKey, isLoopback, mintDevToken } from "../services/Identity.js"
import { Members, MembersLive } from "../services/Members.js"
import { nowMillis, toDate } from "../services/time.js"
import { keyView, orgView } from "../views.js"
import { ConfigFromEnv, IdentityConfig, ServerConfig } from "../config.js"

const json = Options.boolean("json").pipe(Options.withDescription("Print JSON"))
const orgOption = Options.text("org").pipe(Options.withDescription("Org id (org_…)"))

/**
 * The services for one admin command, over the configured or embedded database: one that takes no writes (a standby)
 * serves the reading commands, and a writing one fails with the database's one line.
 */
const AdminLive = MembersLive.pipe(
  Layer.provideMerge(Layer.mergeAll(OrgsLive, KeyStoreLive, BetasLive)),
  Layer.provideMerge(ReadableDatabaseLive),
  Layer.provideMerge(ConfigFromEnv)
)

const orgJson = (org: Org, betas: ReadonlyArray<string>) => ({ ...orgView(org, betas), created_at: org.createdAt.toISOString() })
const keyJson = (key: KeyInfo) => ({ ...keyView(key), org_id: key.orgId })

/** A key's state at `now` (a Clock reading): revoked, expired, or active. */
const keyState = (k: KeyInfo, now: number) =>
  k.revokedAt !== null
    ? `revoked ${k.revokedAt.toISOString()}`
    : k.expiresAt !== null && k.expiresAt.getTime() <= now
    ? `expired ${k.expiresAt.toISOString()}`
    : "active"

const keyText = (k: KeyInfo, now: number) =>
  [
    `${k.id}  ${k.prefix}…  ${k.name}  ${keyState(k, now)}`,
    `  expires      ${k.expiresAt?.toISOString() ?? "never"}`,
    `  last used    ${k.lastUsedAt?.toISOString() ?? "never"}`,
    `  spend limit  ${k.spendLimit === null ? "none" : `${k.spendLimit} a month`} (spent ${k.monthSpend} this month)`,
    `  tools        ${k.allowedTools === null ? "all" : k.allowedTools.join(", ")}`,
    `  rate         ${k.rateLimit === null ? "the gateway's" : `${k.rateLimit.perSecond}/s, burst ${k.rateLimit.burst}`}`
  ].join("\n")

const orgText = (org: Org) =>
  [
    `${org.name} (${org.id})`,
    `  balance      ${org.balance}`,
    `  held         ${org.held}`,
    `  available    ${org.available}`,
    `  month spend  ${org.monthSpend}`,
    `  spend cap    ${org.spendCap ?? "none"}`
  ].join("\n")

const print = (asJson: boolean, value: unknown, text: string) => Console.log(asJson ? JSON.stringify(value, null, 2) : text)

/** Rows as columns, each as wide as its widest cell (numbers aligned right). */
const table = (rows: ReadonlyArray<ReadonlyArray<string>>) => {
  const widths = (rows[0] ?? []).map((_, i) => Math.max(...rows.map((row) => (row[i] ?? "").length)))
  return rows.map((row) =>
    row.map((cell, i) => (/^\d+$/.test(cell) ? cell.padStart(widths[i] ?? 0) : cell.padEnd(widths[i] ?? 0))).join("  ").trimEnd()
  ).join("\n")
}

/**
 * Run an admin action; a gateway error (an unknown org, say) is printed — as the error envelope on stdout
 * with `--json`, as a line on stderr without — and exits with status 1. Any other failure (a service the action
 * builds that cannot start on its configuration, as `connections reseal`'s encryption keys) goes on to the
 * command's start-up handling: one line, the envelope with `--json`, status 2.
 */
const admin = <A, E, R>(asJson: boolean, effect: Effect.Effect<A, E, R>) =>
  effect.pipe(
    Effect.catchIf((error: E): error is E & GatewayError => isGatewayError(error), (error) =>
      Effect.zipRight(
        asJson ? Console.log(JSON.stringify(envelope(error), null, 2)) : Console.error(`error: ${error.message}`),
        Effect.sync(() => {
          process.exitCode = 1
        })
      )),
    Effect.provide(AdminLive)
  )

/** The org must exist (a mistyped id is an error, not an empty list). */
const existingOrg = (org: string) => Effect.flatMap(Orgs, (orgs) => orgs.get(OrgId.make(org)))

// More server processes than twice the cores only add database connections and memory (a hundred of them took
// every connection the database allows)
const MAX_WORKERS = 2 * Os.availableParallelism()
const workers = Options.integer("workers").pipe(
  Options.filterMap(
    (n) => (n >= 1 && n <= MAX_WORKERS ? Option.some(n) : Option.none()),
    `--workers takes 1 to ${MAX_WORKERS} (twice this machine's ${MAX_WORKERS / 2} cores)`
  ),
  Options.withDefault(1),
  Options.withDescription("Server processes sharing the port and the database (one per core is a good start)")
)

const serve = Command.make("serve", {
  workers,
  // read where the logger is chosen (src/bin.ts): the same as LOG_FORMAT=json
  json: Options.boolean("json").pipe(Options.withDescription("Log lines as JSON (as LOG_FORMAT=json)"))
}, ({ workers }) =>
  // Loaded on demand: the admin commands do not need the HTTP server and the providers.
  Effect.flatMap(Effect.promise(() => import("./serve.js")), (m) => m.serve(workers))
).pipe(Command.withDescription("Run the gateway (HOST, PORT; DATABASE_URL or the embedded database)"))

// over a connection not yet migrated (AdminLive's is, and would leave nothing to report); a migration that fails is
// the start-up's one line, status 2
const migrateCommand = Command.make("migrate", { json }, ({ json }) =>
  Effect.gen(function* () {
    const applied = yield* migrate
    const named = applied.map(([id, name]) => `${String(id).padStart(4, "0")}_${name}`)
    yield* print(json, { applied: applied.map(([id, name]) => ({ id, name })) }, applied.length === 0
      ? "The schema is up to date."
      : `Applied ${named.join(", ")}.`)
  }).pipe(Effect.provide(ConnectionLive.pipe(Layer.provide(ConfigFromEnv))))).pipe(Command.withDescription("Apply pending migrations (the server also does this at start-up)"))

/** An amount of credits: digits only, from `min` to 2^53 − 1, or a clear message naming the option. */
const credits = (name: string, min = 0) =>
  Options.text(name).pipe(
    Options.mapEffect((text) =>
      Either.match(parseCredits(text, `--${name}`, min), {
        onLeft: (message) => Effect.fail(ValidationError.invalidValue(HelpDoc.p(message))),
        onRight: Effect.succeed
      })
    )
  )

/** A whole number from 1 to `max` (a rate, a lifetime), or a clear message naming the option. */
const positive = (name: string, max: number) =>
  Options.text(name).pipe(
    Options.mapEffect((text) => {
      const n = /^\d{1,20}$/.test(text.trim()) ? Number(text.trim()) : Number.NaN
      return Number.isSafeInteger(n) && n >= 1 && n <= max
        ? Effect.succeed(n)
        : Effect.fail(ValidationError.invalidValue(HelpDoc.p(`--${name} must be a whole number from 1 to ${max} (got ${text.slice(0, 40)})`)))
    })
  )

/** The value refused, for a message: quoted when short, its length when long. */
const shownValue = (text: string) => (text.length > 40 ? `${text.length} characters` : JSON.stringify(text))

/** Text the API's `schema` takes (the same check as over HTTP), or a clear message naming the option. */
const checkedText = <A>(name: string, schema: Schema.Schema<A, string>, expected: string) =>
  Options.text(name).pipe(
    Options.mapEffect((text) =>
      Either.match(Schema.decodeEither(schema)(text), {
        onLeft: () => Effect.fail(ValidationError.invalidValue(HelpDoc.p(`--${name} must be ${expected} (got ${shownValue(text)})`))),
        onRight: Effect.succeed
      })
    )
  )

/** An org's or a key's name: what the API takes for a key's. */
const nameOption = checkedText("name", KeyName, "1 to 100 characters, not blank")
/** A dashboard user (an ID token's sub): what the API's dev token request takes. */
const uidOption = checkedText("uid", Uid, "1 to 128 characters, not blank")

const orgCreate = Command.make("create", {
  name: nameOption.pipe(Options.withDescription("Org name")),
  credits: credits("credits").pipe(Options.withDefault(0)),
  spendCap: credits("spend-cap").pipe(Options.optional),
  json
}, ({ credits, json, name, spendCap }) =>
  admin(json, Effect.gen(function* () {
    const orgs = yield* Orgs
    const org = yield* orgs.create({ name, credits, spendCap: Option.getOrNull(spendCap) })
    yield* print(json, orgJson(org, yield* Effect.flatMap(Betas, (b) => b.list(org.id))), `Created org\n${orgText(org)}`)
  }))).pipe(Command.withDescription("Create an org"))

const orgShow = Command.make("show", { org: orgOption, json }, ({ json, org }) =>
  admin(json, Effect.gen(function* () {
    const orgs = yield* Orgs
    const betas = yield* Betas
    const found = yield* orgs.get(OrgId.make(org))
    const enabled = yield* betas.list(found.id)
    yield* print(
      json,
      orgJson(found, enabled),
      `${orgText(found)}\n  betas        ${enabled.length > 0 ? enabled.join(", ") : "none"}`
    )
  }))).pipe(Command.withDescription("Show an org's balance, holds, month spend and cap"))

const orgList = Command.make("list", { json }, ({ json }) =>
  admin(json, Effect.gen(function* () {
    const orgs = yield* Orgs
    const list = yield* orgs.list
    const rows = [
      ["ID", "NAME", "BALANCE", "MONTH SPEND", "SPEND CAP"],
      ...list.map((o) => [o.id, o.name, String(o.balance), String(o.monthSpend), o.spendCap === null ? "none" : String(o.spendCap)])
    ]
    yield* print(
      json,
      list.map((o) => ({
        id: o.id,
        name: o.name,
        balance: o.balance,
        held: o.held,
        available: o.available,
        month_spend: o.monthSpend,
        spend_cap: o.spendCap,
        created_at: o.createdAt.toISOString()
      })),
      list.length > 0 ? table(rows) : "No orgs."
    )
  }))).pipe(Command.withDescription("List every org: id, name, balance, month spend, spend cap"))

const creditsGrant = Command.make("grant", {
  org: orgOption,
  amount: credits("amount", 1),
  json
}, ({ amount, json, org }) =>
  admin(json, Effect.gen(function* () {
    const orgs = yield* Orgs
    const updated = yield* orgs.grant(OrgId.make(org), amount, "granted by the operator")
    yield* print(json, orgJson(updated, yield* Effect.flatMap(Betas, (b) => b.list(updated.id))), `Granted ${amount} credits\n${orgText(updated)}`)
  }))).pipe(Command.withDescription("Add credits to an org"))

const capSet = Command.make("set", {
  org: orgOption,
  amount: Options.text("amount").pipe(
    Options.withDescription("Monthly cap in credits, or none"),
    Options.mapEffect((text) =>
      text.trim() === "none"
        ? Effect.succeed(null)
        : Either.match(parseCredits(text, "--amount (or none)"), {
          onLeft: (message) => Effect.fail(ValidationError.invalidValue(HelpDoc.p(message))),
          onRight: Effect.succeed
        })
    )
  ),
  json
}, ({ amount, json, org }) =>
  admin(json, Effect.gen(function* () {
    const orgs = yield* Orgs
    const updated = yield* orgs.setSpendCap(OrgId.make(org), amount)
    yield* print(json, orgJson(updated, yield* Effect.flatMap(Betas, (b) => b.list(updated.id))), `Spend cap set\n${orgText(updated)}`)
  }))).pipe(Command.withDescription("Set or remove an org's monthly spend cap"))

const keysCreate = Command.make("create", {
  org: orgOption,
  name: nameOption.pipe(Options.withDescription("Key name"), Options.withDefault("default")),
  spendLimit: credits("spend-limit").pipe(Options.withDescription("Monthly spend limit of the key"), Options.optional),
  tools: Options.text("tools").pipe(
    Options.withDescription("Comma-separated tools the key may call (default: all)"),
    Options.mapEffect((s) => {
      const names = s.split(",").map((x) => x.trim()).filter((x) => x.length > 0)
      const unknown = names.filter((name) => !isToolName(name))
      if (names.length > 0 && unknown.length === 0) return Effect.succeed<ReadonlyArray<string>>(names)
      const what = names.length === 0
        ? "--tools must be a comma-separated list of tool names"
        : `--tools: no tool named ${unknown.map((name) => `"${name.slice(0, 60)}"`).join(", ")}`
      return Effect.fail(ValidationError.invalidValue(HelpDoc.p(`${what} (the tools: ${toolNames.join(", ")})`)))
    }),
    Options.optional
  ),
  rate: Options.all({
    rateLimit: positive("rate-limit", MAX_RATE).pipe(
      Options.withDescription("The key's own sustained requests per second (default: the gateway's)"),
      Options.optional
    ),
    burst: positive("burst", MAX_RATE).pipe(Options.withDescription("The key's burst (default: its --rate-limit)"), Options.optional)
  }).pipe(
    // a burst alone would be dropped: the key would have the gateway's rate, not the burst asked for
    Options.mapEffect(({ burst, rateLimit }) =>
      Option.isSome(burst) && Option.isNone(rateLimit)
        ? Effect.fail(ValidationError.invalidValue(HelpDoc.p("--burst needs --rate-limit (the key's own rate; its burst defaults to it)")))
        : Effect.succeed({ burst, rateLimit })
    )
  ),
  json
}, ({ json, name, org, rate: { burst, rateLimit }, spendLimit, tools }) =>
  admin(json, Effect.gen(function* () {
    const keys = yield* KeyStore
    const created = yield* keys.create(OrgId.make(org), {
      name,
      spendLimit: Option.getOrNull(spendLimit),
      allowedTools: Option.getOrNull(tools),
      rateLimit: Option.match(rateLimit, {
        onNone: () => null,
        onSome: (perSecond) => ({ perSecond, burst: Option.getOrElse(burst, () => perSecond) })
      })
    })
    const full = Redacted.value(created.key)
    yield* print(
      json,
      { ...keyJson(created), key: full },
      `Created key ${created.id} (${created.name}) for ${created.orgId}. It is shown only this once:\n\n  ${full}\n`
    )
  }))).pipe(Command.withDescription("Create an API key; the full key is printed once"))

const keysList = Command.make("list", { org: orgOption, json }, ({ json, org }) =>
  admin(json, Effect.gen(function* () {
    yield* existingOrg(org)
    const keys = yield* KeyStore
    const list = yield* keys.list(OrgId.make(org))
    const now = yield* nowMillis
    yield* print(json, list.map(keyJson), list.length > 0 ? list.map((k) => keyText(k, now)).join("\n") : "No keys.")
  }))).pipe(Command.withDescription("List an org's keys (never the keys themselves)"))

const keysRevoke = Command.make("revoke", { keyId: Options.text("key-id"), json }, ({ json, keyId }) =>
  admin(json, Effect.gen(function* () {
    const keys = yield* KeyStore
    const revoked = yield* keys.revoke(KeyId.make(keyId))
    yield* print(json, keyJson(revoked), `Revoked ${revoked.id}; it is refused from now on.`)
  }))).pipe(Command.withDescription("Revoke a key, effective at once"))

const betaToolNames = toolNames.filter((name) => catalog[name].beta)
const toolOption = Options.choice("tool", betaToolNames).pipe(Options.withDescription(`A beta tool: ${betaToolNames.join(", ")}`))

const betaCommand = (action: "enable" | "disable") =>
  Command.make(action, { org: orgOption, tool: toolOption, json }, ({ json, org, tool }) =>
    admin(json, Effect.gen(function* () {
      const betas = yield* Betas
      if (!isToolName(tool)) return
      if (action === "enable") yield* betas.enable(OrgId.make(org), tool)
      else yield* betas.disable(OrgId.make(org), tool)
      const enabled = yield* betas.list(OrgId.make(org))
      yield* print(json, { org_id: org, betas: enabled }, `Beta tools enabled for ${org}: ${enabled.join(", ") || "none"}`)
    }))).pipe(Command.withDescription(`${action === "enable" ? "Enable" : "Disable"} a beta tool for an org`))

/** A member's org and user id (the ID token's sub). */
const memberOptions = {
  org: orgOption,
  uid: uidOption.pipe(Options.withDescription("The user id (the ID token's sub)")),
  json
}

const membersAdd = Command.make("add", {
  ...memberOptions,
  move: Options.boolean("move").pipe(
    Options.withDescription("Move a user who is a member of another org (they lose access to it); without it, that is refused")
  )
}, ({ json, move, org, uid }) =>
  admin(json, Effect.gen(function* () {
    const members = yield* Members
    const member = yield* members.add(OrgId.make(org), uid, { move })
    yield* print(
      json,
      {
        uid: member.uid,
        org_id: member.orgId,
        created_at: member.createdAt.toISOString(),
        ...(member.movedFrom === undefined ? {} : { moved_from: member.movedFrom })
      },
      `${member.uid} is a member of ${member.orgId}${member.movedFrom === undefined ? "" : ` (moved from ${member.movedFrom})`}.`
    )
  }))).pipe(Command.withDescription("Make a dashboard user (the ID token's sub) a member of an org (a user belongs to one org)"))

const membersRemove = Command.make("remove", memberOptions, ({ json, org, uid }) =>
  admin(json, Effect.gen(function* () {
    const members = yield* Members
    yield* members.remove(OrgId.make(org), uid)
    yield* print(json, { uid, org_id: org, removed: true }, `${uid} is no longer a member of ${org}.`)
  }))).pipe(Command.withDescription("Take a dashboard user out of an org (their next dashboard request is refused)"))

const membersList = Command.make("list", { org: orgOption, json }, ({ json, org }) =>
  admin(json, Effect.gen(function* () {
    yield* existingOrg(org)
    const members = yield* Members
    const list = yield* members.list(OrgId.make(org))
    yield* print(
      json,
      list.map((m) => ({ uid: m.uid, org_id: m.orgId, created_at: m.createdAt.toISOString() })),
      list.length > 0 ? list.map((m) => m.uid).join("\n") : "No members."
    )
  }))).pipe(Command.withDescription("List an org's dashboard users"))

const connectionsReseal = Command.make("reseal", { json }, ({ json }) =>
  admin(json, Effect.gen(function* () {
    const connections = yield* Connections
    const { resealed, sessionsDeleted, unreadable } = yield* connections.reseal
    yield* print(
      json,
      { resealed, unreadable, sessions_deleted: sessionsDeleted },
      `Sealed ${resealed} connection(s) again with the current key.` +
        (unreadable > 0
          ? ` ${unreadable} cannot be opened: sealed with a key that is not configured (GATEWAY_ENCRYPTION_OLD_KEYS), or altered since (each named in a WARN line).`
          : "") +
        ` Deleted ${sessionsDeleted} delta session(s) sealed with another key (their orgs' next delta call logs in again).`
    )
    // connections no process can read: a script that runs this after a rotation must see it
    if (unreadable > 0) {
      yield* Effect.sync(() => {
        process.exitCode = 1
      })
    }
  }).pipe(Effect.provide(ConnectionsLive.pipe(Layer.provide(DeltaSessionsLive), Layer.provide(EncryptionLive)))))).pipe(
  Command.withDescription(
    "Seal every connection with the current GATEWAY_ENCRYPTION_KEY (after a rotation); delete delta's sessions sealed with another key"
  )
)

const MAX_DEV_TTL_SECONDS = 7 * 24 * 3600

const devToken = Command.make("token", {
  uid: uidOption.pipe(Options.withDescription("The user id (sub)")),
  ttl: positive("ttl", MAX_DEV_TTL_SECONDS).pipe(Options.withDescription("Lifetime in seconds"), Options.withDefault(3600)),
  json
}, ({ json, ttl, uid }) =>
  Effect.gen(function* () {
    const config = yield* ServerConfig
    const identity = yield* IdentityConfig
    const refuse = (message: string) =>
      Effect.zipRight(
        json ? Console.log(JSON.stringify(envelope(new InvalidRequest({ message })), null, 2)) : Console.error(`error: ${message}`),
        Effect.sync(() => {
          process.exitCode = 1
        })
      )
    if (!identity.devIssuer) {
      return yield* refuse("the dev issuer is off; start the gateway and this command with DEV_IDENTITY=true")
    }
    if (!isLoopback(config.host)) return yield* refuse(`DEV_IDENTITY only runs on a loopback HOST (HOST is ${config.host})`)
    const key = yield* devKey(config.dataDir)
    const now = yield* nowMillis
    const token = yield* mintDevToken(key, uid, now, ttl)
    yield* print(json, { token, uid, expires_at: toDate(now + ttl * 1000).toISOString() }, token)
  }).pipe(Effect.provide(ConfigFromEnv))).pipe(
  Command.withDescription("Mint a dashboard ID token for local use (DEV_IDENTITY=true only)")
)

export const command = Command.make("tool-gateway").pipe(
  Command.withSubcommands([
    serve,
    migrateCommand,
    Command.make("org").pipe(Command.withSubcommands([orgCreate, orgShow, orgList])),
    Command.make("credits").pipe(Command.withSubcommands([creditsGrant])),
    Command.make("cap").pipe(Command.withSubcommands([capSet])),
    Command.make("keys").pipe(Command.withSubcommands([keysCreate, keysList, keysRevoke])),
    Command.make("beta").pipe(Command.withSubcommands([betaCommand("enable"), betaCommand("disable")])),
    Command.make("members").pipe(Command.withSubcommands([membersAdd, membersRemove, membersList])),
    Command.make("connections").pipe(Command.withSubcommands([connectionsReseal])),
    Command.make("dev").pipe(Command.withSubcommands([devToken]))
  ])
)

export const cli = Command.run(command, { name: "tool-gateway", version: "0.1.0" })
