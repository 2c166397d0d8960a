/**
 * Request and response shapes of the dashboard API (signed in with an ID token): connections, keys, the
 * org's balance and spend cap, beta tools, and the usage log.
 */
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { accountProviders, AccountProviderSchema } from "./connections.js"
import { Credits } from "./credits.js"
import { NonEmptyText, opt, refusedAs, refusedAsOneOf, strict, Text } from "./schema-helpers.js"
import { ToolNameSchema, tools } from "./tools.js"

export { ToolNameSchema }

const Timestamp = Schema.String.annotations({ description: "ISO 8601, UTC" })

const INSTANT = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2}))?$/

/** 0001-01-01T00:00:00Z: the first instant the API takes (PostgreSQL's timestamps have no year 0). */
export const FIRST_INSTANT_MS = -62_135_596_800_000

/**
 * Whether a text's calendar date and time of day exist: JavaScript's parser rolls 2026-02-30 over to March 2nd and
 * 24:00 to the next day. Years from 1 (PostgreSQL's timestamps have no year 0).
 */
const isRealInstant = (s: string): boolean => {
  const [year = 0, month = 0, day = 0] = s.slice(0, 10).split("-").map(Number)
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0)
  const days = month === 2 ? (leap ? 29 : 28) : [4, 6, 9, 11].includes(month) ? 30 : 31
  const [hours = 0, minutes = 0, seconds = 0] = s.length > 10 ? s.slice(11, 19).split(":").map((part) => Number.parseInt(part, 10)) : []
  return year >= 1 && month >= 1 && month <= 12 && day >= 1 && day <= days && hours <= 23 && minutes <= 59 && seconds <= 59
}

/** An instant given by a caller: an ISO 8601 date (its 00:00 UTC) or a date and time with its offset. */
export const Instant = Schema.String.pipe(
  // from the year 1 as an instant too (0001-01-01T00:00+01:00 is in the year 0)
  Schema.filter((s) => INSTANT.test(s) && isRealInstant(s) && instantMillis(s) >= FIRST_INSTANT_MS, {
    message: () => "must be an ISO 8601 date or time that exists (years from 0001), e.g. 2030-01-31 or 2030-01-31T12:00:00Z",
    // published, so that the JSON Schema keeps the check and the description (a filter without one has neither)
    jsonSchema: { pattern: INSTANT.source }
  })
).annotations({ identifier: "Instant", description: "ISO 8601: a date (00:00 UTC) or a date and time with Z or an offset" })

/**
 * Unicode's bidirectional controls (marks, embeddings, overrides, isolates): in a name the dashboard shows, they
 * reorder the text around them ("invoice‮fdp.exe" shown as "invoiceexe.pdf").
 */
const BIDI_CONTROLS = /[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/

/** A name or label a person reads in the dashboard: 1 to 100 characters, no NUL, no bidirectional controls. */
export const DisplayName = NonEmptyText.pipe(
  Schema.maxLength(100),
  Schema.filter((s) => !BIDI_CONTROLS.test(s), {
    message: () => "must not contain bidirectional control characters (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F, U+061C)"
  })
)

/** The epoch milliseconds of an `Instant`. */
export const instantMillis = (s: string): number => {
  const millis = Date.parse(s.length === 10 ? `${s}T00:00:00Z` : s)
  // JavaScript drops digits past the millisecond: a later part of that millisecond is rounded up, so that a record
  // (whole milliseconds) before `from`, or at or after `to`, or a call at or after an expiry, stays on its side
  const fraction = /\.\d{3}(\d+)/.exec(s)?.[1]
  return fraction !== undefined && /[1-9]/.test(fraction) ? millis + 1 : millis
}
/** The most requests per second (and burst) a key's own rate limit may name. */
export const MAX_RATE = 100_000

const PerSecond = Schema.Int.pipe(Schema.between(1, MAX_RATE, { message: () => `must be an integer from 1 to ${MAX_RATE}` }))

export const KeyRateLimitView = Schema.Struct({
  per_second: PerSecond,
  burst: PerSecond
}).annotations({
  identifier: "KeyRateLimit",
  description: "Requests per second (sustained) and the burst allowed at once",
  ...refusedAs(`an object {per_second, burst}, each an integer from 1 to ${MAX_RATE}`)
})
const betaToolNameList: ReadonlyArray<string> = Object.values(tools).filter((t) => t.beta).map((t) => t.name)

/** The value a refinement refused, quoted and cut short, for a message. */
const refused = (issue: ParseResult.ParseIssue): string => JSON.stringify(issue.actual)?.slice(0, 100) ?? "the value"


export const BetaToolSchema = Schema.String.pipe(
  Schema.filter((s) => betaToolNameList.includes(s), {
    message: (issue) => `${refused(issue)} is not a beta tool (beta tools: ${betaToolNameList.join(", ")})`,
    jsonSchema: { enum: betaToolNameList }
  })
).annotations({ identifier: "BetaTool", description: "A beta tool's name" })

// -- connections ---------------------------------------------------------------------------------------

export const CreateConnection = strict({
  provider: AccountProviderSchema.annotations(refusedAsOneOf(accountProviders)),
  credentials: Schema.Record({ key: Schema.String, value: Schema.Unknown }).annotations({
    description: "What the provider needs; see the connection table in docs/dashboard-and-connections.md",
    ...refusedAs("an object of the provider's credential fields (the connection table in docs/dashboard-and-connections.md)")
  }),
  label: opt(DisplayName)
}, "CreateConnection", "Connect (or reconnect) the org's account at a provider")

export const ConnectionView = Schema.Struct({
  id: Schema.String,
  provider: Schema.String,
  label: Schema.NullOr(Schema.String),
  status: Schema.Literal("active", "rejected"),
  created_at: Timestamp,
  updated_at: Timestamp
}).annotations({ identifier: "Connection", description: "A connection; its credentials are never returned" })

export const ConnectionList = Schema.Struct({ data: Schema.Array(ConnectionView) }).annotations({
  identifier: "ConnectionList",
  description: "The org's connections"
})

// -- keys ------------------------------------------------------------------------------------------------

/** A key's name (and, in the CLI, an org's): 1 to 100 characters, not blank. */
export const KeyName = DisplayName

/** A key's allow-list: tool names, at least one (null, where it is taken, is every tool). */
const AllowedTools = Schema.Array(ToolNameSchema).annotations(refusedAs("a list of tool names, or null")).pipe(
  Schema.minItems(1, { message: () => "must name at least one tool (null: every tool)" })
)

export const CreateKey = strict({
  name: KeyName,
  monthly_spend_limit: opt(Schema.NullOr(Credits)),
  allowed_tools: opt(Schema.NullOr(AllowedTools)),
  rate_limit: opt(Schema.NullOr(KeyRateLimitView)),
  expires_at: opt(Schema.NullOr(Instant).annotations({ description: "From then on the key is refused (invalid_key); null or absent: never" }))
}, "CreateKey", "A new API key, optionally with a monthly spend limit, a tool allow-list, its own rate limit and an expiry")

export const UpdateKey = strict({
  name: opt(KeyName),
  monthly_spend_limit: opt(Schema.NullOr(Credits).annotations({ description: "Credits per UTC month; null removes the limit" })),
  allowed_tools: opt(Schema.NullOr(AllowedTools).annotations({
    description: "The only tools the key may call; null: every tool"
  })),
  rate_limit: opt(Schema.NullOr(KeyRateLimitView).annotations({ description: "null: the gateway's default" })),
  expires_at: opt(Schema.NullOr(Instant).annotations({ description: "null: never expires" }))
}, "UpdateKey", "Change a key: only the fields sent change (at least one)")

export const KeyView = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  prefix: Schema.String,
  created_at: Timestamp,
  revoked_at: Schema.NullOr(Timestamp),
  last_used_at: Schema.NullOr(Timestamp),
  monthly_spend_limit: Schema.NullOr(Schema.Int),
  allowed_tools: Schema.NullOr(Schema.Array(Schema.String)),
  month_spend: Schema.Int,
  rate_limit: Schema.NullOr(KeyRateLimitView).annotations({ description: "The key's own rate limit; null: the gateway's default" }),
  expires_at: Schema.NullOr(Timestamp).annotations({ description: "When the key stops working; null: never" })
}).annotations({ identifier: "Key", description: "An API key (never the key itself: its prefix)" })

export const CreatedKeyView = Schema.Struct({
  ...KeyView.fields,
  key: Schema.String.annotations({ description: "The full key, shown only in this answer" })
}).annotations({ identifier: "CreatedKey", description: "The new key, with the full key this once" })

export const KeyList = Schema.Struct({ data: Schema.Array(KeyView) }).annotations({
  identifier: "KeyList",
  description: "The org's keys, revoked ones included"
})

// -- the org ---------------------------------------------------------------------------------------------

export const OrgView = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  balance: Schema.Int,
  held: Schema.Int.annotations({ description: "Reserved by calls in flight" }),
  available: Schema.Int,
  month_spend: Schema.Int.annotations({ description: "Charged in the current UTC month" }),
  spend_cap: Schema.NullOr(Schema.Int),
  betas: Schema.Array(Schema.String)
}).annotations({ identifier: "Org", description: "The org: its credits (balance, held, available), month spend, spend cap and betas" })

export const SetSpendCap = strict({
  spend_cap: Schema.NullOr(Credits).annotations({ description: "Monthly cap in credits; null removes it" })
}, "SetSpendCap", "The org's monthly spend cap")

export const SetBeta = strict({ enabled: Schema.Boolean }, "SetBeta", "Turn a beta tool on or off for the org")

// -- usage -----------------------------------------------------------------------------------------------

/** The most rows one CSV export holds (narrow the range for more). */
export const USAGE_CSV_MAX = 50_000

export const UsageQuery = Schema.Struct({
  // digits only: `1e2`, `0x10` or ` 1` are numbers to JavaScript, not the integer the document publishes
  limit: opt(Schema.String.pipe(Schema.pattern(/^\d{1,9}$/, { message: () => "must be from 1 to 200" }), Schema.compose(Schema.NumberFromString), Schema.int(), Schema.between(1, 200, {
    message: () => "must be from 1 to 200",
    // the query string carries it as text, but its value is an integer: published as one
    jsonSchema: { type: "integer", minimum: 1, maximum: 200, description: "Records per page, 1 to 200; default 50" }
  }))),
  // opaque, up to 16 digits (a shown usage id, src/services/usageIds.ts): a string, as ids are
  cursor: opt(Schema.String.pipe(Schema.pattern(/^\d{1,16}$/, {
    message: () => "must be a next_cursor from a previous page",
    description: "The next_cursor of the previous page; absent for the first page"
  }))),
  key_id: opt(Text),
  tool: opt(Text),
  status: opt(Schema.Literal("ok", "error").annotations({
    description: "ok: answered 2xx (replays included); error: any error answer",
    ...refusedAsOneOf(["ok", "error"])
  })),
  from: opt(Instant.annotations({ description: "Records at or after this instant" })),
  to: opt(Instant.annotations({ description: "Records before this instant" })),
  format: opt(Schema.Literal("json", "csv").annotations({
    ...refusedAsOneOf(["json", "csv"]),
    description: `csv: every matching record (at most ${USAGE_CSV_MAX} rows, newest first) as text/csv, instead of a page; ` +
      "when more match, the X-Next-Cursor header holds the cursor of the rest"
  }))
})

export const UsageRecordView = Schema.Struct({
  id: Schema.String,
  time: Timestamp,
  key_id: Schema.String,
  tool: Schema.String,
  status: Schema.Int,
  code: Schema.String.annotations({ description: "ok, replayed, or the error code" }),
  credits: Schema.Int,
  latency_ms: Schema.Int,
  provider: Schema.NullOr(Schema.String),
  request_id: Schema.String
}).annotations({ identifier: "UsageRecord" })

export const UsagePageView = Schema.Struct({
  data: Schema.Array(UsageRecordView),
  next_cursor: Schema.NullOr(Schema.String)
}).annotations({ identifier: "UsagePage", description: "A page of usage records, newest first; next_cursor is null on the last page" })

/** The columns of a usage CSV export, in order. */
export const USAGE_CSV_COLUMNS = ["id", "time", "key_id", "tool", "status", "code", "credits", "latency_ms", "provider", "request_id"] as const

export const UsageSummaryQuery = Schema.Struct({
  from: opt(Instant.annotations({ description: "Start, inclusive (default: 30 days before `to`, at 00:00 UTC)" })),
  to: opt(Instant.annotations({ description: "End, exclusive (default: now)" })),
  group_by: opt(Schema.Literal("day", "tool").annotations({
    description: "day (default): every UTC day of the range; tool: most credits first",
    ...refusedAsOneOf(["day", "tool"])
  }))
})

export const UsageGroupView = Schema.Struct({
  key: Schema.String.annotations({ description: "The UTC day (YYYY-MM-DD) or the tool" }),
  calls: Schema.Int,
  errors: Schema.Int.annotations({ description: "Calls answered with an error" }),
  credits: Schema.Int
}).annotations({ identifier: "UsageGroup" })

export const UsageSummaryView = Schema.Struct({
  from: Timestamp,
  to: Timestamp,
  group_by: Schema.Literal("day", "tool"),
  data: Schema.Array(UsageGroupView),
  total: Schema.Struct({ calls: Schema.Int, errors: Schema.Int, credits: Schema.Int })
}).annotations({ identifier: "UsageSummary", description: "Calls, errors and credits per group over the range, and their totals" })

// -- the dev issuer ---------------------------------------------------------------------------------------

/** A dashboard user's id (an ID token's `sub`): 1 to 128 characters, not blank. */
export const Uid = NonEmptyText.pipe(Schema.maxLength(128))

export const DevTokenRequest = strict({
  uid: Uid.annotations({ description: "The user id (the token's sub)" })
}, "DevTokenRequest", "A dev ID token for a user id")

export const DevTokenView = Schema.Struct({
  token: Schema.String,
  expires_at: Timestamp
}).annotations({ identifier: "DevToken" })

/** The longest range a summary covers. */
export const SUMMARY_MAX_DAYS = 366
