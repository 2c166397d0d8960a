/**
 * Every upstream HTTP call goes through here: keep-alive pooled connections (Node's own `http` and `https`
 * agents), a deadline, a cap on the answer's size, retries with jittered backoff for safe reads only, and one
 * mapping of upstream failures onto the gateway's provider errors. Caller-supplied URLs go through a second
 * pair of agents whose connections pass the SSRF guard and whose redirects are followed one hop at a time, each
 * hop checked.
 *
 * The transport is `node:http`'s client, wrapped in `Effect.async` (interruption destroys the request).
 * It sits on every billed call; it costs a fifth of the CPU of `@effect/platform`'s `HttpClient`, and it keeps
 * undici (a second HTTP client, 2 MB of live heap and about 25 MB of RSS under load, loaded at start for every
 * process) out of the gateway (docs/performance.md, fifteenth round).
 */
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import * as Scheduler from "effect/Scheduler"
import * as Http from "node:http"
import * as Https from "node:https"
import { TextDecoder } from "node:util"
import * as Net from "node:net"
import {
  type ProviderError,
  ProviderRateLimited,
  ProviderRejected,
  ProviderCredentialRejected,
  ProviderResponseTooLarge,
  ProviderTimeout,
  ProviderUnavailable,
  UrlNotAllowed,
  WriteOutcomeUnknown
} from "../domain/errors.js"
import { ProvidersConfig } from "../config.js"
import { causeChain } from "../domain/causes.js"
import type { OrgId } from "../domain/ids.js"
import { guardedLookup, HostUnresolved, hostOf, makePolicy, refusedUrl } from "./Ssrf.js"
import { nowMillis } from "./time.js"
import { traced } from "./tracing.js"
import { charsetOf, isJsonMediaType } from "../domain/contentType.js"
import { isArray, parseUpstreamJson } from "../domain/json.js"

export type HttpMethod = "GET" | "POST" | "PUT" | "PATCH" | "DELETE"

export interface UpstreamRequest {
  /** Neutral provider name, used in messages. */
  readonly provider: string
  readonly method: HttpMethod
  readonly url: string
  readonly headers?: Readonly<Record<string, string>>
  /** Sent as JSON. */
  readonly json?: unknown
  /**
   * Safe to send again after a network error or a 5xx (reads). A write (false) is sent once, and a failure
   * after it may have reached the provider — a timeout, a connection broken after sending, a 5xx, an answer
   * too large to read — is `write_outcome_unknown`, never a retryable error.
   */
  readonly idempotent: boolean
  /**
   * The URL came from a caller (a page, a connection's base URL): the SSRF guard on every hop, and redirects
   * followed one hop at a time as the Fetch standard does — 301/302 turn a POST into a GET, 303 anything but
   * GET and HEAD; a redirect to another origin carries no body and none of the request's own headers.
   */
  readonly guarded?: boolean
  /**
   * The request carries an account's credentials (a connection's token, an app password): a redirect to
   * another origin is not followed at all, and the answer says where it pointed.
   */
  readonly credentialed?: boolean
  /**
   * The base URL the request's credentials are for (a connection's): a redirect that leaves its origin or its path
   * (`staysUnder`) is not followed, and the answer says where it pointed.
   */
  readonly scope?: string
  /**
   * The URL is the caller's (its own, or its connection's base URL), not one a provider handed back: a host name the
   * guard cannot resolve is then the caller's to fix when it does not exist (`url_not_allowed`), and is not handed
   * to another provider when its lookup failed for now (`unresolvedFailure`). Only with `guarded`.
   */
  readonly callerUrl?: boolean
  /**
   * Secrets the request carries outside its headers (a password in its JSON body). With every header value and
   * every credential-like query parameter, they are taken out of an error answer's body before anything reads it:
   * a provider that echoes the key it was sent does not put it in a message the caller sees.
   */
  readonly secrets?: ReadonlyArray<string>
  /** Overrides the configured deadline, in milliseconds. */
  readonly timeoutMs?: number
  /** Overrides the configured cap on the answer's size (files kept as artifacts have their own). */
  readonly maxBytes?: number
  /**
   * The provider's own reading of a non-2xx answer, where it differs from HTTP's (Monkeytype's 470–479,
   * GitHub's rate limit as a 403, a Graph token error as a 400); undefined leaves it to the general rules.
   */
  readonly classify?: (response: UpstreamResponse, now: number) => ProviderError | undefined
  /**
   * A non-2xx answer the provider means as an answer, not a refusal (Jina Search's 422 "No search results"): it
   * is returned as it came, for the provider module to read; undefined: every non-2xx is a refusal.
   */
  readonly isAnswer?: (response: UpstreamResponse) => boolean
}

export interface UpstreamResponse {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  /** The final URL (after redirects, for guarded requests). */
  readonly url: string
  readonly body: Uint8Array
}

/**
 * The latest moment (a Clock reading, in milliseconds) by which the whole provider phase of a call must
 * end, fallbacks and retries included; set by the pipeline. Each request ends at the earlier of this and
 * its own deadline.
 */
export interface Deadline {
  readonly at: number
  /** Why this deadline exists, for the timeout message. */
  readonly describe: string
  /**
   * Until when the call's hold and Idempotency-Key claim are known to be held (Leases.heldUntil): a request is not
   * sent once that has passed, since another process may have taken the call for dead (voided its hold, told a
   * retry to use a new key). None outside a tool call.
   */
  readonly heldUntil?: () => number
  /**
   * The call has an `Idempotency-Key` (set with its `ProviderIdempotencyKey`, from the same key): a retry with it is
   * answered a write's uncertain outcome, not sent again.
   */
  readonly keyed?: boolean
}

export class CallDeadline extends Context.Reference<CallDeadline>()("CallDeadline", {
  defaultValue: (): Deadline => ({ at: Number.POSITIVE_INFINITY, describe: "" })
}) {}

/**
 * The idempotency key a provider that documents one receives with a write (Resend's `Idempotency-Key`, say),
 * derived from the org and the caller's `Idempotency-Key`: a retry that does reach the provider twice is
 * still carried out once. None when the caller sent no key.
 */
export class ProviderIdempotencyKey extends Context.Reference<ProviderIdempotencyKey>()("ProviderIdempotencyKey", {
  defaultValue: (): string | undefined => undefined
}) {}

/** The org a provider call runs for (delta keeps its sessions per org). */
export class CallOrg extends Context.Tag("CallOrg")<CallOrg, OrgId>() {}

/** The `Idempotency-Key` header for a provider that takes one, when the call has a key. */
export const idempotencyHeader = Effect.map(
  ProviderIdempotencyKey,
  (key): Readonly<Record<string, string>> => (key === undefined ? {} : { "idempotency-key": key })
)

export class ProviderClient extends Context.Tag("ProviderClient")<ProviderClient, {
  /** The upstream answer when it is a 2xx; every other outcome is a provider error. */
  readonly request: (request: UpstreamRequest) => Effect.Effect<UpstreamResponse, ProviderError>
  /**
   * `read`, the reading of an answer of `bytes` bytes (its decoding and parsing, say). An answer of
   * `LARGE_ANSWER_BYTES` or more waits its turn: such answers are read one at a time in a process, each after the
   * event loop has had a turn — twenty of 5 MB that arrive together would otherwise be read back to back, keeping
   * every other request waiting for seconds (an account tool's upstream is the org's choice).
   */
  readonly digest: <A, E, R>(bytes: number, read: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /**
   * The SSRF guard's word on a caller's URL that another service fetches (a reader: Jina, Firecrawl, which may be
   * the operator's own, inside its network): refused as the guard refuses what the gateway fetches itself — by its
   * text, and by where its host name resolves now (a name that does not resolve is refused too, one that cannot be
   * resolved for now is `provider_unavailable`, retryable). The reader's own fetch is out of the gateway's sight
   * (its redirects, a page that answers it otherwise): a self-hosted reader needs egress rules of its own.
   */
  readonly vouch: (url: string) => Effect.Effect<void, UrlNotAllowed | ProviderUnavailable>
}>() {}

/** From this size on, an answer is read in its turn (`ProviderClient.digest`): parsing 1 MiB of JSON takes ~10 ms. */
export const LARGE_ANSWER_BYTES = 1024 * 1024

/**
 * Gives the event loop a turn: the fiber goes on from a timer, after the I/O that is waiting (a plain yield goes on
 * from a microtask, before any of it).
 */
const yieldToEventLoop = Effect.withScheduler(Effect.yieldNow(), Scheduler.timer(0))

const MAX_REDIRECTS = 5
const REDIRECTS: ReadonlySet<number> = new Set([301, 302, 303, 307, 308])

const isSuccess = (response: UpstreamResponse) => response.status >= 200 && response.status < 300

/** One request of a redirect chain. */
interface Hop {
  readonly url: string
  readonly method: HttpMethod
  readonly headers: Readonly<Record<string, string>>
  readonly json: unknown
}

/** Headers that say nothing about who is asking: the only ones that follow a redirect to another origin. */
const CROSS_ORIGIN_SAFE: ReadonlySet<string> = new Set(["accept", "accept-language", "user-agent"])

/**
 * The request a redirect leads to, as the Fetch standard's HTTP-redirect fetch makes it: a 303 turns any
 * method but GET and HEAD into a GET, a 301 or 302 turns a POST into a GET, and a GET carries no body; a
 * request to another origin keeps no header of its own but the harmless ones (and so no credential).
 */
const redirected = (hop: Hop, status: number, url: URL, crossOrigin: boolean): Hop => {
  const toGet = (status === 303 && hop.method !== "GET") || ((status === 301 || status === 302) && hop.method === "POST")
  const method = toGet ? "GET" : hop.method
  const headers = Object.fromEntries(
    Object.entries(hop.headers).filter(([name]) => !crossOrigin || CROSS_ORIGIN_SAFE.has(name.toLowerCase()))
  )
  return { url: url.toString(), method, headers, json: toGet || crossOrigin ? undefined : hop.json }
}

// `%2F` and `%5C`, which a server may decode before routing: `..%2F` then climbs like `../`
const ENCODED_SLASH = /%2f|%5c/gi

/**
 * Whether the URL `url` is on the origin of `base` (a base URL) and at or under its path. `.` and `..` segments,
 * spelled or percent-encoded, are resolved before the check, and so they are once more with `%2F` and `%5C` read as
 * slashes in both; a URL sent keeps them encoded (`group%2Fproject` is one segment to most APIs).
 */
export const staysUnder = (url: string, base: string): boolean => {
  const under = (u: string, b: string) => {
    if (!URL.canParse(u) || !URL.canParse(b)) return false
    const target = new URL(u)
    const root = new URL(b)
    const scope = root.pathname.replace(/\/+$/, "")
    return target.origin === root.origin && (target.pathname === scope || target.pathname.startsWith(`${scope}/`))
  }
  return under(url, base) && under(url.replace(ENCODED_SLASH, "/"), base.replace(ENCODED_SLASH, "/"))
}

/** A URL for a message: its origin and path, without its query (which may carry a token). */
const shown = (url: URL) => {
  const text = `${url.origin}${url.pathname}`
  return text.length > 200 ? `${text.slice(0, 200)}…` : text
}
// setTimeout's limit; a deadline further away than this (none set) is as good as none.
const MAX_TIMER_MS = 2 ** 31 - 1
const decoder = new TextDecoder()
// one decoder a charset label seen: the labels are trimmed and lower case (charsetOf) and only those the WHATWG
// Encoding standard knows are kept, a bounded set
const decoders = new Map<string, TextDecoder>([["utf-8", decoder], ["utf8", decoder]])

const decoderFor = (charset: string | undefined): TextDecoder => {
  if (charset === undefined) return decoder
  const known = decoders.get(charset)
  if (known !== undefined) return known
  try {
    const made = new TextDecoder(charset)
    decoders.set(charset, made)
    return made
  } catch {
    // a label the Encoding standard does not know: read the bytes as UTF-8
    return decoder
  }
}

/**
 * Bytes as text in the charset their `Content-Type` names (UTF-8 when it names none, or one unknown). JSON is
 * UTF-8 whatever it names: RFC 8259 defines no charset for it ("adding one really has no effect on compliant
 * recipients"), and an API that says `charset=ISO-8859-1` of JSON is more often wrong about the label than the bytes.
 */
export const decodeText = (body: Uint8Array, contentType: string | undefined): string => {
  // most answers name no charset, or UTF-8: their media type is not even read
  const charset = contentType === undefined ? undefined : charsetOf(contentType)
  const named = charset === undefined || charset === "utf-8" || contentType === undefined || isJsonMediaType(contentType) ? undefined : charset
  return decoderFor(named).decode(body)
}

/** An upstream answer's body as text, in the charset its `Content-Type` names. */
export const bodyText = (response: UpstreamResponse): string => decodeText(response.body, response.headers["content-type"])

// Shorter values (a format name, a count) are not secrets, and replacing them would garble an honest message.
const MIN_SECRET_LENGTH = 8
const SECRET_PARAMETER = /key|token|secret|password|auth|sig/i
/**
 * A header value of more words than this is a secret whole, not word by word: `Bearer <token>` or a Digest
 * header's few parameters are words worth looking for alone; a value of thousands of words (a connection's
 * header may hold one) would make the search below cost thousands of passes over the answer.
 */
const MAX_SECRET_WORDS = 8
/** The longest secrets looked for in an answer: a bound on the passes over it, whatever the request carried. */
const MAX_SECRETS = 64
/**
 * How much of an error answer a refusal reads: its message (quoted at most 300 characters, from its first 4 KiB)
 * and a provider's reading of its code are near its start, and the search for secrets in it costs a pass per
 * secret.
 */
export const MAX_ERROR_ANSWER_BYTES = 64 * 1024
const encoder = new TextEncoder()

/**
 * The secrets a request sent: each header's value (and each word of it: `Bearer <token>`), the values of its
 * credential-like query parameters, and what the provider names in `secrets`; each also as a URL would carry it
 * (percent-encoded, in either case) and as JSON with escaped slashes would, where those differ.
 */
const sentSecrets = (request: UpstreamRequest, hop: Hop): ReadonlyArray<string> => {
  const own = new Set<string>(request.secrets ?? [])
  for (const value of Object.values(hop.headers)) for (const secret of headerSecrets(value)) own.add(secret)
  const queried = new Set<string>()
  if (URL.canParse(hop.url)) {
    for (const [name, value] of new URL(hop.url).searchParams) if (SECRET_PARAMETER.test(name)) queried.add(value)
  }
  // the request's own secrets first: a caller names query parameters (epsilon's, zeta's `params`), and theirs take
  // only the places left, so that many long ones cannot push a connection's token out of the search
  const first = spelled(own)
  return queried.size === 0 ? first : longestFirst([...first, ...spelled(queried)].slice(0, MAX_SECRETS))
}

/** A header's value as secrets: the whole value, and each word of it when it has a few (`Bearer <token>`). */
export const headerSecrets = (value: string): ReadonlyArray<string> => {
  const words = value.split(/[\s,]+/)
  return words.length <= MAX_SECRET_WORDS ? [value, ...words] : [value]
}

/**
 * Each secret, and each as a URL would carry it (percent-encoded as `encodeURIComponent` does, as RFC 3986 does with
 * `!'()*` encoded too, and as a form does, a space a `+`; in either case) and as JSON with escaped slashes would;
 * the longest first.
 */
const spelled = (secrets: Iterable<string>): ReadonlyArray<string> => {
  const found = new Set(secrets)
  for (const secret of [...found]) {
    const encoded = encodeURIComponent(secret)
    const strict = encoded.replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)
    const form = new URLSearchParams([["", secret]]).toString().slice(1)
    for (const spelling of [encoded, strict, form]) {
      found.add(spelling)
      found.add(spelling.replace(/%[0-9A-F]{2}/g, (hex) => hex.toLowerCase()))
    }
    // as JSON writes it, slashes escaped (PHP's json_encode): looked for in the text too, for an answer too long to
    // parse whole (its first 64 KiB) or not quite JSON
    found.add(JSON.stringify(secret).slice(1, -1).replaceAll("/", "\\/"))
  }
  return longestFirst([...found].filter((s) => s.length >= MIN_SECRET_LENGTH)).slice(0, MAX_SECRETS)
}

/** The longest first, so that a whole header value is replaced before a word of it (no part of it left readable). */
const longestFirst = (secrets: ReadonlyArray<string>): ReadonlyArray<string> => [...new Set(secrets)].sort((a, b) => b.length - a.length)

/**
 * A 2xx answer's body (its text, or the JSON read from it) with none of `secrets` in it, in any of the spellings an
 * error answer is searched for: an API that echoes the request (its headers, say) gives the connection's token back.
 */
export const withoutSecrets = (body: unknown, secrets: ReadonlyArray<string>): unknown => {
  const spellings = spelled(secrets)
  return spellings.length === 0 ? body : redactedJson(body, spellings)?.value ?? body
}

/** `text` with every secret replaced by `[redacted]`. */
const redactedText = (text: string, secrets: ReadonlyArray<string>): string =>
  secrets.reduce((t, secret) => (t.includes(secret) ? t.split(secret).join("[redacted]") : t), text)

/**
 * Parsed JSON with every secret in its strings (and names) replaced: a secret JSON wrote with escapes (`\/`, as
 * PHP's `json_encode` writes every slash, or `\uXXXX`) is only seen once parsed. `undefined` when nothing changed.
 */
const redactedJson = (value: unknown, secrets: ReadonlyArray<string>): { readonly value: unknown } | undefined => {
  if (typeof value === "string") {
    const redacted = redactedText(value, secrets)
    return redacted === value ? undefined : { value: redacted }
  }
  if (typeof value !== "object" || value === null) return undefined
  if (isArray(value)) {
    const items: ReadonlyArray<unknown> = value
    let changed = false
    const out = items.map((item) => {
      const r = redactedJson(item, secrets)
      if (r === undefined) return item
      changed = true
      return r.value
    })
    return changed ? { value: out } : undefined
  }
  let changed = false
  const out: Array<readonly [string, unknown]> = []
  for (const [name, item] of Object.entries(value)) {
    const shownName = redactedText(name, secrets)
    const r = redactedJson(item, secrets)
    if (shownName !== name || r !== undefined) changed = true
    out.push([shownName, r === undefined ? item : r.value])
  }
  // fromEntries defines each name as the object's own: a `__proto__` member too (an assignment would drop it)
  return changed ? { value: Object.fromEntries(out) } : undefined
}

/**
 * An error answer as a refusal reads it: its first `MAX_ERROR_ANSWER_BYTES`, as UTF-8 text in which no secret the
 * request sent appears — looked for as written, in the text as its `Content-Type`'s charset reads it (a UTF-16
 * body's NULs between letters taken out), and inside its JSON strings, whatever escapes wrote them. A body that
 * changed is UTF-8 from then on, and its `Content-Type` says so.
 */
export const redactedAnswer = (response: UpstreamResponse, secrets: ReadonlyArray<string>): UpstreamResponse => {
  const cut = response.body.length > MAX_ERROR_ANSWER_BYTES ? { ...response, body: response.body.subarray(0, MAX_ERROR_ANSWER_BYTES) } : response
  if (secrets.length === 0) return cut
  const read = bodyText(cut)
  const text = read.includes("\u0000") ? read.replaceAll("\u0000", "") : read
  let redacted = redactedText(text, secrets)
  const trimmed = redacted.trimStart()
  if (trimmed.startsWith("{") || trimmed.startsWith("[") || trimmed.startsWith("\"")) {
    try {
      const parsed = parseUpstreamJson(redacted)
      const walked = parsed === undefined ? undefined : redactedJson(parsed.value, secrets)
      if (walked !== undefined) redacted = JSON.stringify(walked.value)
    } catch {
      // not JSON: redacted as text
    }
  }
  if (redacted === text) return cut
  const type = cut.headers["content-type"]
  const headers = type === undefined ? cut.headers : { ...cut.headers, "content-type": `${type.split(";")[0] ?? type}; charset=utf-8` }
  return { ...cut, headers, body: encoder.encode(redacted) }
}

/** The most useful sentence of an upstream error body, for `provider_rejected` messages. */
export const upstreamMessage = (body: Uint8Array): string => {
  const text = decoder.decode(body.subarray(0, 4096)).trim()
  let message: unknown = text
  try {
    const json: unknown = JSON.parse(text)
    if (typeof json === "object" && json !== null) {
      const o: Record<string, unknown> = { ...json }
      const error = o["error"]
      const nested = typeof error === "object" && error !== null ? { ...error } : undefined
      message = (nested !== undefined && "message" in nested ? nested.message : undefined) ?? o["message"] ??
        o["status_message"] ?? o["detail"] ?? o["error_description"] ?? (typeof error === "string" ? error : undefined) ??
        o["reason"] ?? o["errorMessage"] ?? text
    }
  } catch {
    // not JSON: the text itself
  }
  const s = typeof message === "string" ? message : JSON.stringify(message)
  return s.length > 300 ? `${s.slice(0, 300)}…` : s
}

/** `Retry-After` in seconds, from its delay form or its HTTP-date form (read against `now`, a Clock reading). */
export const retryAfterSeconds = (headers: Readonly<Record<string, string>>, now: number): number | undefined => {
  const value = headers["retry-after"]?.trim()
  if (value === undefined || value === "") return undefined
  const seconds = Number(value)
  if (Number.isFinite(seconds)) return seconds >= 0 ? retryAfterBounds(seconds) : undefined
  const at = Date.parse(value)
  return Number.isFinite(at) ? retryAfterBounds((at - now) / 1000) : undefined
}

/** The longest wait passed on from an upstream: a day (a larger one is a provider's mistake, not a plan). */
export const MAX_RETRY_AFTER_SECONDS = 86_400

/**
 * An upstream's wait as the gateway's `Retry-After`: whole seconds from 1 (0, or a date already past, still
 * means "not at once": the header the gateway answers is at least 1) to a day.
 */
const retryAfterBounds = (seconds: number): number => Math.min(MAX_RETRY_AFTER_SECONDS, Math.max(1, Math.ceil(seconds)))

/**
 * A rate limit's reset header as the wait from `now`, within the same bounds as `Retry-After`: UTC epoch seconds
 * (GitHub's and express-rate-limit's legacy `X-RateLimit-Reset`, Monkeytype's; Bluesky's and Render's
 * `RateLimit-Reset`) or seconds from now (the IETF draft's `RateLimit-Reset`) — a value from 10^9 on (2001) is
 * read as a time, a smaller one as a delay.
 */
export const resetSeconds = (value: string | undefined, now: number): number | undefined => {
  const reset = Number(value?.trim() || "NaN")
  if (!Number.isFinite(reset) || reset < 0) return undefined
  return retryAfterBounds(reset >= 1e9 ? reset - now / 1000 : reset)
}

/** `X-RateLimit-Reset` as seconds from `now` (see `resetSeconds`). */
export const rateLimitResetSeconds = (headers: Readonly<Record<string, string>>, now: number): number | undefined =>
  resetSeconds(headers["x-ratelimit-reset"], now)

/** How long an upstream's 429 says to wait: `Retry-After`, else its rate limit's reset (`RateLimit-Reset`, `X-RateLimit-Reset`). */
export const upstreamWait = (headers: Readonly<Record<string, string>>, now: number): number | undefined =>
  retryAfterSeconds(headers, now) ?? resetSeconds(headers["ratelimit-reset"], now) ?? rateLimitResetSeconds(headers, now)

const ssrfReason = (cause: unknown): string | undefined => {
  for (const c of causeChain(cause)) {
    if (c instanceof Error && "code" in c && c.code === "ESSRF") return c.message
  }
  return undefined
}

/** The guard's lookup of the URL's host name that failed, if that is what the exchange failed with. */
const unresolvedHost = (cause: unknown): HostUnresolved | undefined => {
  for (const c of causeChain(cause)) {
    if (c instanceof HostUnresolved) return c
  }
  return undefined
}

/**
 * A caller's URL (`callerUrl`, or a hop of its redirects) whose host name the guard could not resolve. A name that does not
 * exist is the caller's to fix (`url_not_allowed`); a lookup that failed for now is `provider_unavailable`,
 * retryable. Neither moves a curated tool on to its next provider, which may resolve the name where this gateway
 * cannot check it (an operator's self-hosted reader, inside their network).
 */
const unresolvedFailure = (unresolved: HostUnresolved): UrlNotAllowed | ProviderUnavailable =>
  unresolved.dnsCode === "ENOTFOUND"
    ? new UrlNotAllowed({
      message: `The URL is not allowed: ${unresolved.host} does not resolve (ENOTFOUND), so it is not fetched, here or by another provider.`
    })
    : new ProviderUnavailable({
      message: `${unresolved.host} could not be resolved for now (${unresolved.dnsCode}); retry later.`,
      hostUnresolved: true
    })

/**
 * What an exchange failed with before its connection was made, its TLS handshake included (refused, unresolvable,
 * unreachable, a certificate refused, a handshake cut off, no connection within the connect timeout or the
 * deadline): Node writes nothing of a request before then, so such a request never left. Anything else may have
 * reached the provider.
 */
const unsent = new WeakSet<object>()

const neverSent = (error: unknown): boolean => typeof error === "object" && error !== null && unsent.has(error)

/** A write that may have been carried out: what happened, and what the caller should do. */
const writeOutcomeUnknown = (request: UpstreamRequest, what: string, keyed: boolean) =>
  new WriteOutcomeUnknown({
    message: `${what}, after the request was sent: the write may have been carried out by ${request.provider}. ` +
      (keyed
        ? "Check there before sending it again (the same Idempotency-Key replays this answer instead of sending it)."
        : "Check there before sending it again: sent without an Idempotency-Key, a retry sends the write again (with " +
          "one, a retry with the same key is answered this instead).")
  })

/**
 * A request not sent because its call's leases may have run out (the process, or its database, stalled longer
 * than `HOLD_LEASE_MS`): a fault of the gateway's, answered `500 internal_error` (retryable, nothing charged) and
 * logged at ERROR. Nothing reached the provider, so a write's Idempotency-Key is freed, unless a retry has
 * meanwhile been told to use a new one (the key then stays `idempotency_replay_unavailable`).
 */
export class LeaseLost extends Error {
  constructor(provider: string) {
    super(
      `The request to ${provider} was not sent: its call was held up past its lease (HOLD_LEASE_MS), so another ` +
        "process may have taken it for dead, voided its hold and answered a retry of it."
    )
    this.name = "LeaseLost"
  }
}

/** A provider request's deadline: its own instant and reason, and the rest of its call's. */
const within = (call: Deadline, at: number, describe: string): Deadline => ({ ...call, at, describe })

/** The answer passed the size cap (the request is destroyed). */
class TooLarge extends Error {}

/** The exchange's deadline passed (the request is destroyed). */
class DeadlinePassed extends Error {}

/** No connection was made within `CONNECT_TIMEOUT_MS` (its code is what the error message shows). */
class ConnectTimeout extends Error {
  readonly code = "ECONNECT_TIMEOUT"
}

/** How long a new connection (its TLS handshake included) may take before the provider counts as unreachable. */
const CONNECT_TIMEOUT_MS = 10_000

const flatHeaders = (headers: Http.IncomingHttpHeaders): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined) out[name] = Array.isArray(value) ? value.join(", ") : value
  }
  return out
}

/** Keep-alive connections, pooled per origin, for `http:` and for `https:` URLs. */
interface Agents {
  readonly http: Http.Agent
  readonly https: Https.Agent
}

export const make = Effect.gen(function* () {
  const config = yield* ProvidersConfig
  const policy = makePolicy(config.ssrfAllow)
  // An idle connection is closed after 4 s, before the 5 s after which Node's servers (and many others) close
  // theirs, so that a request is rarely sent on a connection its server is closing; one whose server announces a
  // shorter time (`Keep-Alive: timeout=N`) is closed a second before that.
  const agents = (options: Http.AgentOptions) =>
    Effect.acquireRelease(
      Effect.sync((): Agents => ({
        http: new Http.Agent({ keepAlive: true, timeout: 4_000, ...options }),
        https: new Https.Agent({ keepAlive: true, timeout: 4_000, ...options })
      })),
      (a) => Effect.sync(() => {
        a.http.destroy()
        a.https.destroy()
      })
    )
  const trusted = yield* agents({ maxSockets: 256 })
  const guarded = yield* agents({ lookup: guardedLookup(policy) })

  /**
   * One HTTP exchange, ended at `deadline` by a timer that destroys the request (cheaper than racing a timer
   * fiber, and it runs in the caller's fiber: the pipeline's uninterruptible region does not stop it).
   */
  const once = (request: UpstreamRequest, hop: Hop, deadline: Deadline) =>
    Effect.flatMap(nowMillis, (now) => {
      const remaining = deadline.at - now
      if (remaining <= 0) return Effect.fail(new ProviderTimeout({ message: deadline.describe }))
      if (deadline.heldUntil !== undefined && now >= deadline.heldUntil()) return Effect.die(new LeaseLost(request.provider))
      return exchange(request, hop, deadline, remaining)
    })

  const exchange = (request: UpstreamRequest, hop: Hop, deadline: Deadline, remainingMs: number) => {
    const max = request.maxBytes ?? config.maxResponseBytes
    const url = hop.url
    const body = hop.json === undefined ? undefined : JSON.stringify(hop.json)
    // Content-Length set here: Node sets it from `end(body)` only for the methods it would otherwise send chunked
    // (POST, PUT, PATCH); a DELETE's body would go out with neither, and the server read it as the next request.
    // Set after the request's own headers, so that none of them (a connection's token header) can reframe the body.
    const headers: Record<string, string | number> = {
      accept: "application/json",
      "user-agent": "tool-gateway/1",
      ...hop.headers,
      ...(body !== undefined ? { "content-type": "application/json", "content-length": Buffer.byteLength(body) } : {})
    }
    /** What a failed exchange means for the caller: whether anything may have reached the provider decides it. */
    const keyed = deadline.keyed === true
    const failure = (error: unknown): ProviderError => {
      const reason = ssrfReason(error)
      if (reason !== undefined) return new UrlNotAllowed({ message: `The URL is not allowed: ${reason}.` })
      const unresolved = request.callerUrl === true ? unresolvedHost(error) : undefined
      if (unresolved !== undefined) return unresolvedFailure(unresolved)
      const write = !request.idempotent && !neverSent(error)
      if (error instanceof DeadlinePassed) {
        return write ? writeOutcomeUnknown(request, deadline.describe.replace(/\.$/, ""), keyed) : new ProviderTimeout({ message: deadline.describe })
      }
      if (error instanceof TooLarge) {
        return write
          ? writeOutcomeUnknown(request, `${request.provider} answered with more than ${max} bytes`, keyed)
          : new ProviderResponseTooLarge({ message: `The answer of ${request.provider} is larger than the ${max}-byte limit.` })
      }
      return write
        ? writeOutcomeUnknown(request, `The connection to ${request.provider} broke (${connectionMessage(error)})`, keyed)
        : new ProviderUnavailable({ message: `Could not reach ${request.provider}: ${connectionMessage(error)}` })
    }
    // `Effect.async` with a canceler, not `Effect.tryPromise`: no promise, no `AbortController` and no listener
    // on its signal for each exchange (the exchange is on every billed call)
    return Effect.async<UpstreamResponse, ProviderError>((resume) => {
      const pool = request.guarded === true ? guarded : trusted
      let secure = false
      let connected = false
      let finished = false
      let connectTimer: ReturnType<typeof setTimeout> | undefined
      const end = () => {
        finished = true
        clearTimeout(deadlineTimer)
        clearTimeout(connectTimer)
      }
      const fail = (error: unknown) => {
        if (finished) return
        end()
        if (!connected && typeof error === "object" && error !== null) unsent.add(error)
        // classified in the caller's fiber, as `tryPromise`'s `catch` was, not in the socket's callback
        resume(Effect.failSync(() => failure(error)))
      }
      // the connection closed before the exchange ended: every exchange ends with its `close` events, so the Error
      // (which captures a stack) is made only when the exchange is still open
      const closedEarly = (message: string) => () => {
        if (!finished) fail(new Error(message))
      }
      let req: Http.ClientRequest | undefined
      // The gateway ends the exchange (the deadline, the size cap, the caller gone): the call fails with why,
      // first; whatever error the destroyed request then reports comes after it and is ignored.
      const stop = (why: Error) => {
        fail(why)
        req?.destroy()
      }
      // The deadline is a timer of our own that ends the exchange (headers and body alike). Not
      // `AbortSignal.timeout(ms)`: Node holds such a signal weakly, and a collected one never fires — a call
      // to an upstream that stalls would then hang for good.
      const deadlineTimer = setTimeout(
        () => stop(new DeadlinePassed(deadline.describe)),
        Math.min(remainingMs, MAX_TIMER_MS)
      )
      try {
        const parsed = new URL(url)
        secure = parsed.protocol === "https:"
        req = (secure ? Https : Http).request({
          agent: secure ? pool.https : pool.http,
          protocol: parsed.protocol,
          hostname: parsed.hostname.startsWith("[") ? parsed.hostname.slice(1, -1) : parsed.hostname,
          port: parsed.port === "" ? undefined : Number(parsed.port),
          path: parsed.pathname + parsed.search,
          method: hop.method,
          headers
        })
      } catch (error) {
        // refused before anything was sent (a URL that is not one, a header value Node will not write)
        return fail(error)
      }
      req.once("socket", (socket: Net.Socket) => {
        if (!socket.connecting) {
          connected = true
          return
        }
        connectTimer = setTimeout(
          () => stop(new ConnectTimeout(`no connection within ${CONNECT_TIMEOUT_MS} ms`)),
          CONNECT_TIMEOUT_MS
        )
        socket.once(secure ? "secureConnect" : "connect", () => {
          connected = true
          clearTimeout(connectTimer)
        })
      })
      req.once("response", (res: Http.IncomingMessage) => {
        const declared = Number(res.headers["content-length"] ?? "NaN")
        if (Number.isFinite(declared) && declared > max) return stop(new TooLarge())
        const chunks: Array<Buffer> = []
        let size = 0
        res.on("data", (chunk: Buffer) => {
          size += chunk.length
          if (size > max) return stop(new TooLarge())
          chunks.push(chunk)
        })
        res.once("end", () => {
          if (finished) return
          end()
          const bytes = chunks.length === 1 && chunks[0] !== undefined ? chunks[0] : Buffer.concat(chunks, size)
          resume(Effect.succeed({ status: res.statusCode ?? 0, headers: flatHeaders(res.headers), url, body: bytes }))
        })
        res.on("error", fail)
        res.once("close", closedEarly("the connection closed before the answer ended"))
      })
      req.on("error", fail)
      req.once("close", closedEarly("the connection closed before an answer"))
      try {
        req.end(body)
      } catch (error) {
        // thrown while sending: part of the request may have left, so it is not one that never did
        connected = true
        fail(error)
        req.destroy()
      }
      // the caller gone (interrupted) while the exchange is open: the request is destroyed
      return Effect.sync(() => {
        if (!finished) stop(new Error("interrupted"))
      })
    })
  }

  /** What an answer other than a 2xx means: the provider's own reading of it first, then its HTTP status. */
  const refusal = (request: UpstreamRequest, hop: Hop, answer: UpstreamResponse, now: number, keyed: boolean): Effect.Effect<never, ProviderError> => {
    const response = redactedAnswer(answer, sentSecrets(request, hop))
    const status = response.status
    const own = request.classify?.(response, now)
    if (own !== undefined) return Effect.fail(own)
    const name = request.provider
    if (status === 429) {
      const retryAfter = upstreamWait(response.headers, now)
      return Effect.fail(
        new ProviderRateLimited({
          message: `${name} is rate limiting the gateway (HTTP 429). Retry later.`,
          ...(retryAfter !== undefined ? { retryAfter } : {})
        })
      )
    }
    if (status === 401 || status === 403) {
      return Effect.fail(
        new ProviderCredentialRejected({
          message: `${name} rejected the credential (HTTP ${status}): ${upstreamMessage(response.body)}. ` +
            "Check the provider key, or reconnect the account."
        })
      )
    }
    if (status >= 400 && status < 500) {
      return Effect.fail(
        new ProviderRejected({
          message: `${name} rejected the request (HTTP ${status}): ${upstreamMessage(response.body)}`,
          upstreamStatus: status
        })
      )
    }
    if (status >= 300 && status < 400) {
      return Effect.fail(
        new ProviderRejected({ message: `${name} answered with a redirect (HTTP ${status}).`, upstreamStatus: status })
      )
    }
    return Effect.fail(
      request.idempotent
        ? new ProviderUnavailable({ message: `${name} failed (HTTP ${status}).` })
        : writeOutcomeUnknown(request, `${name} failed (HTTP ${status})`, keyed)
    )
  }

  // Guarded requests follow redirects themselves so that every hop passes the guard and nothing the request
  // carries reaches another origin.
  const send = (request: UpstreamRequest, deadline: Deadline): Effect.Effect<UpstreamResponse, ProviderError> =>
    Effect.gen(function* () {
      let hop: Hop = { url: request.url, method: request.method, headers: request.headers ?? {}, json: request.json }
      for (let hops = 0; ; hops++) {
        if (request.guarded === true) {
          const parsed = URL.canParse(hop.url) ? new URL(hop.url) : undefined
          const reason = parsed === undefined ? "it is not a valid URL" : refusedUrl(policy, parsed)
          if (reason !== undefined) return yield* new UrlNotAllowed({ message: `The URL is not allowed: ${reason}.` })
        }
        const response = yield* once(request, hop, deadline)
        const location = response.headers["location"]
        const isRedirect = REDIRECTS.has(response.status) && location !== undefined && URL.canParse(location, hop.url)
        if (request.guarded !== true || !isRedirect) {
          // a 2xx, nearly every answer, needs nothing more (nor the clock, which only a refusal's Retry-After reads)
          return isSuccess(response) || request.isAnswer?.(response) === true
            ? response
            : yield* refusal(request, hop, response, yield* nowMillis, deadline.keyed === true)
        }
        if (hops >= MAX_REDIRECTS) {
          return yield* new ProviderRejected({ message: `Too many redirects (more than ${MAX_REDIRECTS}).` })
        }
        const next = new URL(location, hop.url)
        const crossOrigin = next.origin !== new URL(hop.url).origin
        if (crossOrigin && request.credentialed === true) {
          return yield* new ProviderRejected({
            message: `${request.provider} redirected the request to ${redactedText(shown(next), sentSecrets(request, hop))} (HTTP ${response.status}). It was not ` +
              "followed: a connection's credentials never go to another host. Use that address in the connection if it is the right one.",
            upstreamStatus: response.status
          })
        }
        if (request.scope !== undefined && !staysUnder(next.toString(), request.scope)) {
          return yield* new ProviderRejected({
            message: `${request.provider} redirected the request to ${redactedText(shown(next), sentSecrets(request, hop))} (HTTP ${response.status}). It was not ` +
              "followed: a connection's credentials stay under its base URL's path.",
            upstreamStatus: response.status
          })
        }
        hop = redirected(hop, response.status, next, crossOrigin)
      }
    })

  /** A safe request that found its provider unavailable is tried twice more, about 100 and 200 ms later. */
  const retrySchedule = Schedule.exponential(Duration.millis(100)).pipe(
    Schedule.jittered,
    Schedule.intersect(Schedule.recurs(2))
  )
  const unavailable = (e: ProviderError) => e._tag === "ProviderUnavailable"
  /**
   * The retries, set up only once the first attempt failed: `Effect.retry` builds its schedule's driver and
   * provides the iteration's metadata (a copy of the fiber's context) even for an attempt that succeeds, as
   * nearly every attempt does. The first failure is replayed to the schedule, so the delays are its own.
   */
  const retried = (attempt: Effect.Effect<UpstreamResponse, ProviderError>) =>
    Effect.catchIf(attempt, unavailable, (first) => {
      let replayed = false
      const again = Effect.suspend(() => {
        if (replayed) return attempt
        replayed = true
        return Effect.fail(first)
      })
      return Effect.retry(again, { schedule: retrySchedule, while: unavailable })
    })

  const request = (request: UpstreamRequest): Effect.Effect<UpstreamResponse, ProviderError> =>
    Effect.gen(function* () {
      const timeoutMs = request.timeoutMs ?? config.timeoutMs
      const now = yield* nowMillis
      const call = yield* CallDeadline
      const own = now + timeoutMs
      const deadline: Deadline = own <= call.at
        ? within(call, own, `${request.provider} did not answer within ${timeoutMs} ms.`)
        : within(call, call.at, `${request.provider} did not answer before the call's deadline. ${call.describe}`)
      const attempt = send(request, deadline)
      return yield* request.idempotent ? retried(attempt) : attempt
    }).pipe(
      traced("ProviderClient.request", { attributes: { provider: request.provider, method: request.method } })
    )

  const turn = yield* Effect.makeSemaphore(1)
  const digest = <A, E, R>(bytes: number, read: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    bytes < LARGE_ANSWER_BYTES ? read : turn.withPermits(1)(Effect.zipRight(yieldToEventLoop, read))

  const vouch = (url: string): Effect.Effect<void, UrlNotAllowed | ProviderUnavailable> => {
    const parsed = URL.canParse(url) ? new URL(url) : undefined
    const reason = parsed === undefined ? "it is not a valid URL" : refusedUrl(policy, parsed)
    if (reason !== undefined) return Effect.fail(new UrlNotAllowed({ message: `The URL is not allowed: ${reason}.` }))
    const host = parsed === undefined ? "" : hostOf(parsed)
    if (Net.isIP(host) !== 0 || policy.allowHosts.has(host)) return Effect.void
    return Effect.async<void, UrlNotAllowed | ProviderUnavailable>((resume) => {
      guardedLookup(policy)(host, { all: true }, (error) => {
        if (error === null) return resume(Effect.void)
        resume(Effect.fail(
          error instanceof HostUnresolved ? unresolvedFailure(error) : new UrlNotAllowed({ message: `The URL is not allowed: ${error.message}.` })
        ))
      })
    }).pipe(
      // a lookup that failed for now is tried twice more, as a fetch's own is
      Effect.retry({ times: 2, while: (error) => error._tag === "ProviderUnavailable" })
    )
  }

  return ProviderClient.of({ request, digest, vouch })
})

const connectionMessage = (cause: unknown): string => {
  for (const c of causeChain(cause)) {
    if (c instanceof Error && "code" in c && typeof c.code === "string") return `${c.code}`
  }
  return "connection failed"
}

export const ProviderClientLive = Layer.scoped(ProviderClient, make)
