/**
 * What every provider module shares. A tool's provider is two steps:
 *
 * - `fetch` builds the upstream request from the tool input (method, URL, headers, body, auth) and answers
 *   the upstream's raw answer (`Raw`) — this is what `POST /v1/run` returns;
 * - `normalize` decodes that answer with the upstream's response Schema and maps it to the tool's documented
 *   output. A decode failure is `normalization_failed`, naming the field and pointing at `/v1/run`.
 */
import * as Cause from "effect/Cause"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { InvalidRequest, NormalizationFailed, type ProviderError, ProviderUnavailable, type UrlNotAllowed } from "../domain/errors.js"
import { describeParseError } from "../domain/parse.js"
import { type ArtifactRef, ArtifactSink } from "../services/Artifacts.js"
import type { Credentials } from "../domain/connections.js"
import { catalog, type ToolInput, type ToolName, type ToolOutput } from "../domain/tools.js"
import type { ProvidersConfig } from "../config.js"
import type { DeltaSessions } from "../services/DeltaSessions.js"
import type { HtmlConverter } from "../services/HtmlConverter.js"
import { bodyText, type CallOrg, ProviderClient, staysUnder, type UpstreamRequest, type UpstreamResponse } from "../services/ProviderClient.js"
import { MAX_UPSTREAM_JSON_DEPTH, parseUpstreamJson } from "../domain/json.js"

/** What a provider call can end in, besides its output. */
export type ProviderCallError = ProviderError | NormalizationFailed | InvalidRequest

export { describeParseError } from "../domain/parse.js"

/** What a provider call runs with: the providers' services, and the call's own (where its files go). */
export type ProviderServices = ProviderClient | ProvidersConfig | ArtifactSink | HtmlConverter | DeltaSessions | CallOrg

export type ProviderEffect<A> = Effect.Effect<A, ProviderCallError, ProviderServices>

/**
 * A provider phase that failed, and the provider it is put down to: the one whose failure decided it (of a tool
 * over several, the last one tried), as `Answered.provider` names the one that answered; undefined when none was
 * tried (none is configured, or the caller's URL was refused first). Named as the error it carries (its tag, its
 * message), so that the span it fails reads as that error.
 */
export class ProviderFailure extends Data.Error<{ readonly provider: string | undefined; readonly error: ProviderCallError }> {
  constructor(args: { readonly provider: string | undefined; readonly error: ProviderCallError }) {
    super(args)
    this.name = args.error._tag
    this.message = args.error.message
  }
}

/**
 * `effect`'s failure put down to `provider` (a defect or an interruption stays as it is). Nothing is evaluated on
 * success but the frame pushed: a call that succeeds pays one step.
 */
export const failedAt = <A, E extends ProviderCallError, R>(
  provider: string | undefined,
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, ProviderFailure, R> =>
  Effect.catchAllCause(effect, (cause) => Effect.failCause(Cause.map(cause, (error) => new ProviderFailure({ provider, error }))))

/** An upstream's answer, before normalization. */
export interface Raw {
  readonly provider: string
  readonly status: number
  /** Parsed JSON; text for an answer that is not JSON (a page); null for an empty answer. */
  readonly body: unknown
  /** The final URL (after redirects). */
  readonly url: string
  readonly contentType: string
  /** The answer's size in bytes as it came: a large one is encoded in its turn too (`ProviderClient.digest`). */
  readonly bytes?: number
  /** The upstream's response headers (lower-case names), for what an API says there (pagination, say). */
  readonly headers?: Readonly<Record<string, string>>
  /** Files the call kept (a screenshot, say), by the name the normalization looks them up with. */
  readonly artifacts?: Readonly<Record<string, ArtifactRef>>
}

/** A tool's answer together with the provider that produced it. */
export interface Answered<A> {
  readonly provider: string
  readonly output: A
  /** What the answer delivered in the tool's price units, when the provider phase counted it (a raw call). */
  readonly units?: number
  /** The size of the upstream answer it came from (`Raw.bytes`). */
  readonly bytes?: number
}

/** A normalization may convert a page (off the event loop, with the call's deadline): nothing else. */
export type Normalize<I, O> = (input: I, raw: Raw) => Effect.Effect<O, NormalizationFailed | InvalidRequest, HtmlConverter>

/** A tool on one provider: the raw call, and the mapping of its answer to the tool's output. */
export interface ProviderTool<I, C, O> {
  /**
   * What can be refused from the input alone, before any credit is reserved (a URL the SSRF guard refuses
   * on its face, a path that leaves the connection's host). No I/O: what needs DNS is checked on connect.
   */
  readonly check?: (input: I, credentials: C, config: typeof ProvidersConfig.Service) => Effect.Effect<void, UrlNotAllowed | InvalidRequest>
  readonly fetch: (input: I, credentials: C) => ProviderEffect<Raw>
  readonly normalize: Normalize<I, O>
  /** Whether this gateway can run it (the operator's key is configured); undefined: always. */
  readonly configured?: (config: typeof ProvidersConfig.Service) => boolean
}

/**
 * Decode an upstream answer; a mismatch is a normalization failure (the provider was called and answered).
 * `step` names an answer the call needs before its main request (delta's session): `POST /v1/run` would stop at
 * the same step, so the message does not send the caller there. Nor does a write's: the provider accepted it, and
 * `POST /v1/run` would send it again.
 */
export const decodeUpstream = <A, I>(provider: string, schema: Schema.Schema<A, I>, tool: ToolName, step?: string) => {
  const decode = Schema.decodeUnknown(schema, { errors: "all" })
  const write = catalog[tool].effect === "write"
  return (body: unknown): Effect.Effect<A, NormalizationFailed> =>
    decode(body).pipe(
      Effect.mapError((error) =>
        new NormalizationFailed({
          message: step !== undefined
            ? `The ${provider} ${step} answer, which ${tool} needs before its call, could not be read ` +
              `(${describeParseError(error)}); ${tool}'s own request was not sent, and the call is billed for the ${step} the provider answered.`
            : write
            ? `${provider} accepted the write but its answer could not be mapped to the ${tool} output ` +
              `(${describeParseError(error)}): it has probably been done; check before sending it again ` +
              "(POST /v1/run would send it again)."
            : `The ${provider} answer could not be mapped to the ${tool} output (${describeParseError(error)}). ` +
              `POST /v1/run with {"tool":"${tool}","input":...} returns the provider's raw answer.`
        })
      )
    )
}

export const invalid = (message: string) => new InvalidRequest({ message })

/**
 * A reader found nothing to read at the caller's URL (Jina Reader's "No content available"): the caller's
 * `invalid_request` (400, not billed) on the tool that asked that reader alone, and for curated `read` a page-level
 * failure on which it moves on to its next provider, as it does for a page that refused the built-in fetch.
 */
export class PageWithoutContent extends InvalidRequest {}

const contentTypeOf = (response: UpstreamResponse) => response.headers["content-type"] ?? ""

const rawOf = (provider: string, response: UpstreamResponse, body: unknown): Raw => ({
  provider,
  status: response.status,
  body,
  url: response.url,
  contentType: contentTypeOf(response),
  bytes: response.body.length,
  headers: response.headers
})

/**
 * One upstream call whose answer is JSON (an empty answer is null). Invalid JSON from a read is
 * `provider_unavailable` (retryable, not billed). From a write it is `normalization_failed`: the upstream
 * said 2xx, so it may well have acted, and a retry could post or send twice. JSON nested deeper than
 * `MAX_UPSTREAM_JSON_DEPTH` counts as invalid: nothing after could read it without overflowing its stack.
 */
export const requestJson = (request: UpstreamRequest): ProviderEffect<Raw> =>
  Effect.flatMap(ProviderClient, (client) =>
    Effect.flatMap(client.request(request), (response) => client.digest(response.body.length, Effect.suspend(() => {
      const text = bodyText(response)
      if (text.trim() === "") return Effect.succeed(rawOf(request.provider, response, null))
      const invalid = (what: string): ProviderUnavailable | NormalizationFailed =>
        request.idempotent
          ? new ProviderUnavailable({ message: `${request.provider} answered with ${what}.` })
          : new NormalizationFailed({
            message: `${request.provider} accepted the write (HTTP ${response.status}) but answered with ${what}: ` +
              "it has probably been done; check before sending it again."
          })
      return Effect.flatMap(
        Effect.try({ try: () => parseUpstreamJson(text), catch: () => invalid("invalid JSON") }),
        (parsed) =>
          parsed === undefined
            ? Effect.fail(invalid(`JSON nested deeper than ${MAX_UPSTREAM_JSON_DEPTH} levels`))
            : Effect.succeed(rawOf(request.provider, response, parsed.value))
      )
    }))))

/** One upstream call whose answer is kept as text (web pages), or JSON when it says so. */
export const requestText = (request: UpstreamRequest): ProviderEffect<Raw> =>
  Effect.flatMap(ProviderClient, (client) =>
    Effect.flatMap(client.request(request), (response) => client.digest(response.body.length, Effect.sync(() => {
      const text = bodyText(response)
      const type = contentTypeOf(response).toLowerCase()
      if (type.includes("json")) {
        try {
          // JSON nested too deep to read further is kept as its text
          const parsed = parseUpstreamJson(text)
          return rawOf(request.provider, response, parsed === undefined ? text : parsed.value)
        } catch {
          return rawOf(request.provider, response, text)
        }
      }
      return rawOf(request.provider, response, text)
    }))))

export const JsonObject = Schema.Record({ key: Schema.String, value: Schema.Unknown })

/** Upstream fields that may be absent or null. */
export const NullableString = Schema.optional(Schema.NullOr(Schema.String))
export const NullableNumber = Schema.optional(Schema.NullOr(Schema.Number))

/**
 * A path segment taken from the caller's input, whose schema refuses `.` and `..` (`PathSegment`): the URL parser
 * would resolve those as steps of the path, which `encodeURIComponent` leaves as they are.
 */
export const enc = encodeURIComponent

/**
 * The URL `base` (an operator's or a connection's base URL, without a trailing slash) and a caller's `path` make,
 * if it stays on the base's origin and under its path (`staysUnder`); undefined if it leaves them or makes no URL.
 */
export const urlUnder = (base: string, path: string): URL | undefined =>
  staysUnder(`${base}${path}`, base) ? new URL(`${base}${path}`) : undefined

/** An account tool: its input, the credentials of the org's connection to provider `P`, its output. */
export type AccountTool<T extends ToolName, P extends keyof Credentials> = ProviderTool<ToolInput<T>, Credentials[P], ToolOutput<T>>

/**
 * A `data:` URL's bytes and media type, read as the WHATWG URL standard's data: URL processor reads them (Fetch
 * §4.4.1, https://fetch.spec.whatwg.org/#data-urls): everything before the first comma is the media type, with
 * `;base64` at its end (any case, spaces around) saying the rest is base64; the rest is percent-decoded, a `%` not
 * followed by two hex digits kept as it is (never an error: the provider's answer is taken as the standard reads it).
 * The media type is the one `Artifacts.store` keeps (a malformed one, `application/octet-stream`).
 */
export const parseDataUrl = (given: string): { readonly contentType: string; readonly data: Uint8Array } | undefined => {
  // the URL parser's own steps: C0 controls and spaces around it dropped, the fragment not part of the data
  let start = 0
  let end = given.length
  while (start < end && given.charCodeAt(start) <= 0x20) start++
  while (end > start && given.charCodeAt(end - 1) <= 0x20) end--
  const url = given.slice(start, end).split("#")[0] ?? ""
  if (!/^data:/i.test(url)) return undefined
  const comma = url.indexOf(",")
  if (comma < 0) return undefined
  const meta = url.slice(5, comma)
  const base64 = /;[ \t]*base64[ \t]*$/i.exec(meta)
  const named = (base64 === null ? meta : meta.slice(0, base64.index)).trim()
  // no type, or parameters alone: text/plain, as the standard reads it
  const contentType = named === "" ? "text/plain;charset=US-ASCII" : named.startsWith(";") ? `text/plain${named}` : named
  const bytes = percentDecode(url.slice(comma + 1))
  const data = base64 === null ? bytes : Buffer.from(Buffer.from(bytes).toString("latin1").replace(/[\t\n\f\r ]/g, ""), "base64")
  return { contentType, data }
}

/** The URL standard's percent-decode (https://url.spec.whatwg.org/#percent-decode): the UTF-8 bytes of `text`, each `%XX` one byte. */
const percentDecode = (text: string): Uint8Array => {
  const bytes = Buffer.from(text, "utf8")
  if (!bytes.includes(0x25)) return bytes
  const out = Buffer.alloc(bytes.length)
  let n = 0
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i] ?? 0
    const hex = byte === 0x25 ? bytes.toString("latin1", i + 1, i + 3) : ""
    if (/^[0-9a-fA-F]{2}$/.test(hex)) {
      out[n++] = Number.parseInt(hex, 16)
      i += 2
    } else out[n++] = byte
  }
  return out.subarray(0, n)
}

/**
 * Keep a file a provider pointed to — a `data:` URL, or an http(s) URL fetched through the SSRF guard —
 * as an artifact of the current call's org.
 */
export const keepFile = (provider: string, url: string): ProviderEffect<ArtifactRef> =>
  Effect.gen(function* () {
    const sink = yield* ArtifactSink
    const inline = parseDataUrl(url)
    if (inline !== undefined) return yield* sink.store(inline.contentType, inline.data)
    const client = yield* ProviderClient
    const response = yield* client.request({
      provider,
      method: "GET",
      url,
      headers: { accept: "*/*" },
      idempotent: true,
      guarded: true,
      maxBytes: sink.maxBytes
    })
    return yield* sink.store(response.headers["content-type"] ?? "", response.body)
  })
