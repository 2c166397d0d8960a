/**
 * How orgs, keys and connections are shown outside the process: the dashboard API's JSON and the CLI's
 * `--json` output use the same snake_case shapes.
 */
import type { Connection } from "./services/Connections.js"
import type { KeyInfo } from "./services/KeyStore.js"
import type { Org } from "./services/Orgs.js"

const iso = (d: Date) => d.toISOString()

export const orgView = (org: Org, betas: ReadonlyArray<string>) => ({
  id: org.id,
  name: org.name,
  balance: org.balance,
  held: org.held,
  available: org.available,
  month_spend: org.monthSpend,
  spend_cap: org.spendCap,
  betas
})

export const keyView = (k: KeyInfo) => ({
  id: k.id,
  name: k.name,
  prefix: k.prefix,
  created_at: iso(k.createdAt),
  revoked_at: k.revokedAt === null ? null : iso(k.revokedAt),
  last_used_at: k.lastUsedAt === null ? null : iso(k.lastUsedAt),
  monthly_spend_limit: k.spendLimit,
  allowed_tools: k.allowedTools,
  month_spend: k.monthSpend,
  rate_limit: k.rateLimit === null ? null : { per_second: k.rateLimit.perSecond, burst: k.rateLimit.burst },
  expires_at: k.expiresAt === null ? null : iso(k.expiresAt)
})

export const connectionView = (c: Connection) => ({
  id: c.id,
  provider: c.provider,
  label: c.label,
  status: c.status,
  created_at: iso(c.createdAt),
  updated_at: iso(c.updatedAt)
})
