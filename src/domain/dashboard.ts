/**
 * Request and response shapes of the dashboard API (signed in with an ID token): connections, keys, the
 * org's balance and spend cap, beta tools, and the usage log.
 */
import { ParseResult, Schema } from "effect"
import { AccountProviderSchema } from "./connections.js"
import { Credits } from "./credits.js"
import { NonEmpty, opt, strict } from "./schema-helpers.js"
import { tools } from "./tools.js"

const Timestamp = Schema.String.annotations({ description: "ISO 8601, UTC" })
/** The most requests per second (and burst) a key's own rate limit may name. */
export const MAX_RATE = 100_000

const PerSecond = Schema.Int.pipe(Schema.between(1, MAX_RATE, { message: () => `must be an integer from 1 to ${MAX_RATE}` }))

export const KeyRateLimitView = Schema.Struct({
  per_second: PerSecond,
  burst: PerSecond
}).annotations({ identifier: "KeyRateLimit", description: "Requests per second (sustained) and the burst allowed at once" })
const toolNameList = Object.keys(tools)
const betaToolNameList: ReadonlyArray<string> = Object.values(tools).filter((t) => t.beta).map((t) => t.name)

/** The value a refinement refused, quoted and cut short, for a message. */
const refused = (issue: ParseResult.ParseIssue): string => JSON.stringify(issue.actual)?.slice(0, 100) ?? "the value"

export const ToolNameSchema = Schema.String.pipe(
  Schema.filter((s) => toolNameList.includes(s), { message: (issue) => `${refused(issue)} is not a tool` })
).annotations({ identifier: "ToolName" })

export const BetaToolSchema = Schema.String.pipe(
  Schema.filter((s) => betaToolNameList.includes(s), {
    message: (issue) => `${refused(issue)} is not a beta tool (beta tools: ${betaToolNameList.join(", ")})`
  })
).annotations({ identifier: "BetaTool" })

// -- connections ---------------------------------------------------------------------------------------

export const CreateConnection = strict({
  provider: AccountProviderSchema,
  credentials: Schema.Record({ key: Schema.String, value: Schema.Unknown }).annotations({
    description: "What the provider needs; see the README's connection table"
  }),
  label: opt(NonEmpty.pipe(Schema.maxLength(100)))
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
  identifier: "ConnectionList"
})

// -- keys ------------------------------------------------------------------------------------------------

export const CreateKey = strict({
  name: NonEmpty.pipe(Schema.maxLength(100)),
  monthly_spend_limit: opt(Schema.NullOr(Credits)),
  allowed_tools: opt(Schema.NullOr(Schema.Array(ToolNameSchema).pipe(Schema.minItems(1)))),
  rate_limit: opt(Schema.NullOr(KeyRateLimitView))
}, "CreateKey", "A new API key, optionally with a monthly spend limit, a tool allow-list and its own rate limit")

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
  rate_limit: Schema.NullOr(KeyRateLimitView).annotations({ description: "The key's own rate limit; null: the gateway's default" })
}).annotations({ identifier: "Key" })

export const CreatedKeyView = Schema.Struct({
  ...KeyView.fields,
  key: Schema.String.annotations({ description: "The full key, shown only in this answer" })
}).annotations({ identifier: "CreatedKey" })

export const KeyList = Schema.Struct({ data: Schema.Array(KeyView) }).annotations({ identifier: "KeyList" })

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
}).annotations({ identifier: "Org" })

export const SetSpendCap = strict({
  spend_cap: Schema.NullOr(Credits).annotations({ description: "Monthly cap in credits; null removes it" })
}, "SetSpendCap", "The org's monthly spend cap")

export const SetBeta = strict({ enabled: Schema.Boolean }, "SetBeta", "Turn a beta tool on or off for the org")

// -- usage -----------------------------------------------------------------------------------------------

export const UsageQuery = Schema.Struct({
  limit: opt(Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, 200, { message: () => "must be from 1 to 200" }))),
  cursor: opt(Schema.String.pipe(Schema.pattern(/^\d{1,18}$/, { message: () => "must be a next_cursor from a previous page" }))),
  key_id: opt(Schema.String),
  tool: opt(Schema.String)
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
}).annotations({ identifier: "UsagePage" })
