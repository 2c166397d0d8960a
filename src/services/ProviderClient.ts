/**
 * Every upstream HTTP call goes through here: keep-alive pooled connections (undici), a deadline, a cap
 * on the answer's size, retries with jittered backoff for safe reads only, and one mapping of upstream
 * failures onto the gateway's provider errors. Caller-supplied URLs go through a second client whose
 * connections pass the SSRF guard and whose redirects are followed one hop at a time, each hop checked.
 */
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Agent } from "@effect/platform-node/Undici"
import { Context, Duration, Effect, Layer, Schedule, Stream } from "effect"
import {
  type ProviderError,
  ProviderRateLimited,
  ProviderRejected,
  ProviderCredentialRejected,
  ProviderResponseTooLarge,
  ProviderTimeout,
  ProviderUnavailable,
  UrlNotAllowed
} from "../domain/errors.js"
import { GatewayConfig } from "./GatewayConfig.js"
import { guardedLookup, makePolicy, refusedUrl } from "./Ssrf.js"

export type HttpMethod = "GET" | "POST" | "PUT" | "PATCH" | "DELETE"

export interface UpstreamRequest {
  /** Neutral provider name, used in messages. */
  readonly provider: string
  readonly method: HttpMethod
  readonly url: string
  readonly headers?: Readonly<Record<string, string>>
  /** Sent as JSON. */
  readonly json?: unknown
  /** Safe to send again after a network error or a 5xx (reads); writes are sent once. */
  readonly idempotent: boolean
  /** The URL came from a caller: SSRF guard, redirects followed hop by hop. */
  readonly guarded?: boolean
  /** Overrides the configured deadline, in milliseconds. */
  readonly timeoutMs?: number
  /** Overrides the configured cap on the answer's size (files kept as artifacts have their own). */
  readonly maxBytes?: number
}

export interface UpstreamResponse {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  /** The final URL (after redirects, for guarded requests). */
  readonly url: string
  readonly body: Uint8Array
}

export class ProviderClient extends Context.Tag("ProviderClient")<ProviderClient, {
  /** The upstream answer when it is a 2xx; every other outcome is a provider error. */
  readonly request: (request: UpstreamRequest) => Effect.Effect<UpstreamResponse, ProviderError>
  /** As `request`, then the body parsed as JSON (invalid JSON is `provider_unavailable`). */
  readonly json: (request: UpstreamRequest) => Effect.Effect<unknown, ProviderError>
}>() {}

const MAX_REDIRECTS = 5
const decoder = new TextDecoder()

export const bodyText = (response: UpstreamResponse): string => decoder.decode(response.body)

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
        (typeof error === "string" ? error : undefined) ?? o["reason"] ?? o["errorMessage"] ?? o["detail"] ??
        o["error_description"] ?? text
    }
  } catch {
    // not JSON: the text itself
  }
  const s = typeof message === "string" ? message : JSON.stringify(message)
  return s.length > 300 ? `${s.slice(0, 300)}…` : s
}

const retryAfterSeconds = (headers: Readonly<Record<string, string>>): number | undefined => {
  const value = headers["retry-after"]
  if (value === undefined) return undefined
  const seconds = Number(value)
  return Number.isFinite(seconds) && seconds >= 0 ? Math.ceil(seconds) : undefined
}

const causeChain = (cause: unknown): ReadonlyArray<unknown> => {
  const out: Array<unknown> = []
  let current: unknown = cause
  for (let i = 0; i < 6 && typeof current === "object" && current !== null; i++) {
    out.push(current)
    current = "cause" in current ? current.cause : undefined
  }
  return out
}

const ssrfReason = (cause: unknown): string | undefined => {
  for (const c of causeChain(cause)) {
    if (c instanceof Error && "code" in c && c.code === "ESSRF") return c.message
  }
  return undefined
}

export const make = Effect.gen(function* () {
  const config = yield* GatewayConfig
  const trusted = yield* HttpClient.HttpClient
  const policy = makePolicy(config.ssrfAllow)
  const guardedAgent = yield* Effect.acquireRelease(
    Effect.sync(() => new Agent({ connect: { lookup: guardedLookup(policy) }, keepAliveTimeout: 4_000 })),
    (agent) => Effect.promise(() => agent.close())
  )
  const guarded = NodeHttpClient.makeUndici(guardedAgent)

  const readBody = (provider: string, response: HttpClientResponse.HttpClientResponse, max: number) => {
    const tooLarge = () =>
      new ProviderResponseTooLarge({ message: `The ${provider} answer is larger than the ${max}-byte limit.` })
    const declared = Number(response.headers["content-length"] ?? "NaN")
    if (Number.isFinite(declared) && declared > max) return Effect.fail(tooLarge())
    return response.stream.pipe(
      Stream.mapError((cause) =>
        new ProviderUnavailable({ message: `The connection to ${provider} failed while reading its answer: ${cause.message}` })
      ),
      Stream.runFoldEffect({ chunks: new Array<Uint8Array>(), size: 0 }, (acc, chunk) => {
        if (acc.size + chunk.length > max) return Effect.fail(tooLarge())
        acc.chunks.push(chunk)
        return Effect.succeed({ chunks: acc.chunks, size: acc.size + chunk.length })
      }),
      Effect.map(({ chunks, size }) => {
        const body = new Uint8Array(size)
        let offset = 0
        for (const chunk of chunks) {
          body.set(chunk, offset)
          offset += chunk.length
        }
        return body
      })
    )
  }

  const once = (request: UpstreamRequest, url: string) =>
    Effect.gen(function* () {
      let req = HttpClientRequest.make(request.method)(url).pipe(
        HttpClientRequest.setHeaders({ accept: "application/json", "user-agent": "tool-gateway/1", ...request.headers })
      )
      if (request.json !== undefined) req = yield* HttpClientRequest.bodyJson(req, request.json).pipe(Effect.orDie)
      const client = request.guarded === true ? guarded : trusted
      const response = yield* client.execute(req).pipe(
        Effect.catchAll((error): Effect.Effect<never, UrlNotAllowed | ProviderUnavailable> => {
          const reason = ssrfReason(error.cause)
          return reason !== undefined
            ? Effect.fail(new UrlNotAllowed({ message: `The URL is not allowed: ${reason}.` }))
            : Effect.fail(
              new ProviderUnavailable({ message: `Could not reach ${request.provider}: ${connectionMessage(error.cause)}` })
            )
        })
      )
      const body = yield* readBody(request.provider, response, request.maxBytes ?? config.providerMaxResponseBytes)
      return { status: response.status, headers: response.headers, url, body }
    }).pipe(Effect.scoped)

  const classify = (request: UpstreamRequest, response: UpstreamResponse): Effect.Effect<UpstreamResponse, ProviderError> => {
    const status = response.status
    if (status >= 200 && status < 300) return Effect.succeed(response)
    const name = request.provider
    if (status === 429) {
      const retryAfter = retryAfterSeconds(response.headers)
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
    return Effect.fail(new ProviderUnavailable({ message: `${name} failed (HTTP ${status}).` }))
  }

  // Guarded requests follow redirects themselves so that every hop passes the guard.
  const send = (request: UpstreamRequest): Effect.Effect<UpstreamResponse, ProviderError> =>
    Effect.gen(function* () {
      let url = request.url
      for (let hop = 0; ; hop++) {
        if (request.guarded === true) {
          const parsed = URL.canParse(url) ? new URL(url) : undefined
          const reason = parsed === undefined ? "it is not a valid URL" : refusedUrl(policy, parsed)
          if (reason !== undefined) return yield* new UrlNotAllowed({ message: `The URL is not allowed: ${reason}.` })
        }
        const response = yield* once(request, url)
        const location = response.headers["location"]
        const isRedirect = [301, 302, 303, 307, 308].includes(response.status) && location !== undefined
        if (request.guarded !== true || !isRedirect) return yield* classify(request, response)
        if (hop >= MAX_REDIRECTS) {
          return yield* new ProviderRejected({ message: `Too many redirects (more than ${MAX_REDIRECTS}).` })
        }
        url = new URL(location, url).toString()
      }
    })

  const retrySchedule = Schedule.exponential(Duration.millis(100)).pipe(
    Schedule.jittered,
    Schedule.intersect(Schedule.recurs(2))
  )

  const request = (request: UpstreamRequest): Effect.Effect<UpstreamResponse, ProviderError> => {
    const timeoutMs = request.timeoutMs ?? config.providerTimeoutMs
    const attempt = request.idempotent
      ? Effect.retry(send(request), {
        schedule: retrySchedule,
        while: (e) => e._tag === "ProviderUnavailable"
      })
      : send(request)
    return attempt.pipe(
      Effect.timeoutFail({
        duration: Duration.millis(timeoutMs),
        onTimeout: () =>
          new ProviderTimeout({ message: `${request.provider} did not answer within ${timeoutMs} ms.` })
      }),
      Effect.withSpan("ProviderClient.request", { attributes: { provider: request.provider, method: request.method } })
    )
  }

  const json = (req: UpstreamRequest) =>
    Effect.flatMap(request(req), (response) =>
      Effect.try({
        try: (): unknown => JSON.parse(bodyText(response)),
        catch: () => new ProviderUnavailable({ message: `${req.provider} answered with invalid JSON.` })
      }))

  return ProviderClient.of({ request, json })
})

const connectionMessage = (cause: unknown): string => {
  for (const c of causeChain(cause)) {
    if (c instanceof Error && "code" in c && typeof c.code === "string") return `${c.code}`
  }
  return "connection failed"
}

export const ProviderClientLive = Layer.scoped(ProviderClient, make).pipe(Layer.provide(NodeHttpClient.layerUndici))
