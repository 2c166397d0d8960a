/**
 * The one place where failures become responses. An API-wide middleware wraps the whole router, so it sees
 * the gateway's typed errors, the framework's own failures (decode errors, unreadable bodies, unknown
 * routes, wrong methods) and defects, and answers each with the envelope, its status and its headers.
 * It also stamps every response with `X-Request-Id`.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApiError from "@effect/platform/HttpApiError"
import type * as HttpApp from "@effect/platform/HttpApp"
import * as HttpServerError from "@effect/platform/HttpServerError"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberRef from "effect/FiberRef"
import * as HashMap from "effect/HashMap"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import {
  envelope,
  envelopeOf,
  type GatewayError,
  InternalError,
  InvalidRequest,
  isGatewayError,
  MalformedJson,
  MethodNotAllowed,
  NotFound,
  PayloadTooLarge,
  rateLimitHeaders,
  responseHeaders
} from "../domain/errors.js"
import { clip, describeIssue, meaningfulIssues } from "../domain/parse.js"
import { withoutApiKeys } from "../domain/ids.js"
import { ServerConfig } from "../config.js"
import { KeyStore } from "../services/KeyStore.js"
import type { RateLimitState } from "../services/RateLimit.js"
import { base62 } from "../services/random.js"
import { preciseMillis } from "../services/time.js"
import { type CallFacts, CurrentCallFacts, newCallFacts, recordStatus } from "../services/Telemetry.js"
import { Api } from "./Api.js"
import { routeTable } from "./routes.js"

/** Per-request facts that end up in response headers and in the request log line. */
export interface RequestState {
  readonly requestId: string
  rateLimit: RateLimitState | undefined
  /** The envelope's code when the answer is an error. */
  code: string | undefined
  /** The route matched takes secrets in its payload: its errors never repeat a value sent. */
  secretPayload: boolean
}

/** The request in progress, per fiber (set by the envelope middleware for each request). */
export const CurrentRequest = FiberRef.unsafeMake<RequestState | undefined>(undefined)

/** The current request's state (outside a request: a fresh one, whose writes go nowhere); read in one step. */
export const currentRequest: Effect.Effect<RequestState> = Effect.withFiberRuntime((fiber) =>
  Effect.succeed(fiber.getFiberRef(CurrentRequest) ?? { requestId: newRequestId(), rateLimit: undefined, code: undefined, secretPayload: false }))

export const newRequestId = () => `req_${base62(20)}`

/**
 * The path a request asked for, without its query: the request target as sent, or of an absolute-form target
 * (`GET http://host/v1/weather HTTP/1.1`, which the server routes by its path) its path only — what is logged and
 * matched is the path served, not a host the client named.
 */
export const pathOf = (url: string): string => {
  const path = url.split("?")[0] ?? "/"
  if (path.startsWith("/")) return path
  // as the router reads one: `http://` or `https://`, as written (find-my-way's own pattern)
  const match = /^https?:\/\/[^/]*(\/.*)?$/.exec(path)
  return match === null ? path : match[1] ?? "/"
}

/**
 * A streamed answer's body that closes the request's connection if it fails: once the headers are out a failure can
 * only cut the answer off, and the client then sees an incomplete download, never a shorter one that looks whole.
 */
export const cutOffOnFailure = <A, E, R>(request: HttpServerRequest.HttpServerRequest, body: Stream.Stream<A, E, R>) => {
  const socket = NodeHttpServerRequest.toIncomingMessage(request).socket
  return Stream.tapErrorCause(body, () => Effect.sync(() => socket.destroy()))
}

/** The longest path an error message quotes. */
const MAX_QUOTED_PATH = 200

/** A path as a message or a log line quotes it: an API key in it shortened first, then cut to its longest. */
const quotedPath = (path: string): string => clip(withoutApiKeys(path), MAX_QUOTED_PATH)

/** No route answers this method and path. */
export const noRoute = (method: string, path: string): NotFound =>
  new NotFound({ message: `No route ${clip(method, 20)} ${quotedPath(path)}.` })

/** A method the path's routes do not answer, and the ones they do (`Allow`). */
export const methodNotAllowed = (method: string, path: string, allowed: ReadonlyArray<string>) =>
  new MethodNotAllowed({
    message: `${clip(method, 20)} is not allowed on ${quotedPath(path)}; use ${allowed.join(", ")}.`,
    allow: allowed.join(", ")
  })

const decodeMessage = (error: HttpApiError.HttpApiDecodeError, secret: boolean): string => {
  const all = meaningfulIssues(error.issues)
  const issues = all.slice(0, 5).map((i) => describeIssue(i, secret))
  const more = all.length > 5 ? ` (and ${all.length - 5} more)` : ""
  return `Invalid request: ${issues.join("; ")}${more}`
}

const causeChainIncludes = (error: unknown, predicate: (e: unknown) => boolean): boolean => {
  let current: unknown = error
  for (let i = 0; i < 6 && current !== undefined && current !== null; i++) {
    if (predicate(current)) return true
    current = typeof current === "object" && "cause" in current ? current.cause : undefined
  }
  return false
}

/** A body the server could not read, as the caller's error: too large, not JSON, or cut off. */
export const unreadableBody = (
  error: HttpServerError.RequestError,
  maxBodyBytes: number
): PayloadTooLarge | MalformedJson | InvalidRequest => {
  if (causeChainIncludes(error.cause, (e) => e instanceof Error && e.message === "maxBytes exceeded")) {
    return new PayloadTooLarge({ message: `The request body is larger than ${maxBodyBytes} bytes.` })
  }
  if (causeChainIncludes(error.cause, (e) => e instanceof SyntaxError)) {
    return new MalformedJson({ message: "The request body is not valid JSON." })
  }
  return new InvalidRequest({ message: "The request body could not be read." })
}

/**
 * A method the path's routes do not take, found only once the credentials were refused: `POST /v1/org` reaches the
 * catch-all of unknown tools (`POST /v1/:tool`), whose API key is checked first. The method is what is wrong
 * whatever the credentials, as for `GET /v1/weather` (which no route matches): a dashboard user's ID token is not
 * told to send an API key.
 */
const wrongMethod = (request: HttpServerRequest.HttpServerRequest): MethodNotAllowed | undefined =>
  wrongMethodFor(request.method, pathOf(request.url))

/** The `405` of a method the routes of a path do not take (with the ones they do), if that is what is wrong. */
export const wrongMethodFor = (method: string, path: string): MethodNotAllowed | undefined => {
  const allowed = routeTable.methodsFor(path)
  return allowed.length > 0 && !takes(allowed, method) ? methodNotAllowed(method, path, allowed) : undefined
}

/** Whether routes of these methods answer `method`: a HEAD is answered by a GET route, as the router does. */
const takes = (allowed: ReadonlyArray<string>, method: string) => allowed.includes(method) || (method === "HEAD" && allowed.includes("GET"))

/** What the framework or a defect means to the caller, as a gateway error. */
const toGatewayError = (
  error: unknown,
  request: HttpServerRequest.HttpServerRequest,
  state: RequestState,
  maxBodyBytes: number
): GatewayError | undefined => {
  if (isGatewayError(error)) {
    return error._tag === "InvalidKey" || error._tag === "InvalidToken" ? (wrongMethod(request) ?? error) : error
  }
  if (error instanceof HttpApiError.HttpApiDecodeError) {
    // a connection's body carries credentials: its errors never repeat what was sent (decided on the route the
    // router matched, however the path was spelled)
    return new InvalidRequest({ message: decodeMessage(error, state.secretPayload) })
  }
  if (error instanceof HttpServerError.RouteNotFound) {
    const path = pathOf(request.url)
    const allowed = routeTable.methodsFor(path)
    // the path's route answers this method, yet the router found none: a parameter of the path does not decode
    // (a percent-escape that is not UTF-8), which the router takes for no route
    if (takes(allowed, request.method)) {
      return new InvalidRequest({
        message: `The path ${quotedPath(path)} does not decode: a percent-escape in it is not UTF-8.`
      })
    }
    return wrongMethodFor(request.method, path) ?? noRoute(request.method, path)
  }
  if (error instanceof HttpServerError.RequestError) return unreadableBody(error, maxBodyBytes)
  return undefined
}

/** An error's answer: its envelope, its status and its headers, all from the one table. */
const respond = (error: GatewayError): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.unsafeJson(envelope(error), { status: envelopeOf[error._tag].status, headers: responseHeaders(error) })

/** The envelope response for any cause; unexpected ones are logged with the request id and answered 500. */
export const renderCause = (
  cause: Cause.Cause<unknown>,
  request: HttpServerRequest.HttpServerRequest,
  state: RequestState,
  maxBodyBytes: number
): Effect.Effect<HttpServerResponse.HttpServerResponse> => {
  const failure = Option.getOrUndefined(Cause.failureOption(cause))
  const defect = Option.getOrUndefined(Cause.dieOption(cause))
  const known = toGatewayError(failure ?? defect, request, state, maxBodyBytes)
  if (known !== undefined) {
    state.code = envelopeOf[known._tag].code
    return Effect.succeed(respond(known))
  }
  state.code = envelopeOf.InternalError.code
  if (Cause.isInterruptedOnly(cause)) {
    return Effect.succeed(respond(new InternalError({ message: "The request was interrupted." })))
  }
  return Effect.logError("unexpected failure", cause).pipe(
    // the path, as the request's line has it: never its query (a key sent there by mistake), nor a key in the path
    Effect.annotateLogs({ request_id: state.requestId, method: request.method, url: quotedPath(pathOf(request.url)) }),
    Effect.as(respond(
      new InternalError({
        message: `An internal error occurred; it has been logged. Retry, or quote request id ${state.requestId}.`
      })
    ))
  )
}

const round = (ms: number) => Math.round(ms * 1000) / 1000

/** Requests that probes, scrapers and browsers repeat all day: logged at DEBUG when they are answered. */
const ROUTINE_PATHS: ReadonlySet<string> = new Set(["/healthz", "/readyz", "/metrics", "/favicon.ico"])

/** The HTTP status each envelope code stands for (an MCP tool error is answered 200, with its code). */
const statusOfCode: ReadonlyMap<string, number> = new Map(Object.values(envelopeOf).map((spec) => [spec.code, spec.status]))

/**
 * One structured line per request: what was called, by which org and key, how it ended, what it cost and
 * how long it took. Never a header, a body or a credential. Errors of the server are logged at ERROR,
 * refusals (4xx) at WARNING — by the code, for an answer that carries an error in a 200 (an MCP tool
 * error) — routine requests answered (health, readiness, metrics, the favicon) at DEBUG, the rest at INFO.
 */
const logRequest = (
  request: HttpServerRequest.HttpServerRequest,
  response: HttpServerResponse.HttpServerResponse,
  state: RequestState,
  facts: CallFacts,
  latencyMs: number,
  clientClosed: boolean
) => {
  const status = response.status < 400 && state.code !== undefined ? statusOfCode.get(state.code) ?? response.status : response.status
  const routine = ROUTINE_PATHS.has(pathOf(request.url))
  const level = status >= 500 ? LogLevel.Error : status >= 400 ? LogLevel.Warning : routine ? LogLevel.Debug : LogLevel.Info
  // below the minimum level (LOG_LEVEL=warn, say), the line's fields are not even built
  return Effect.withFiberRuntime((fiber) =>
    LogLevel.lessThan(level, fiber.getFiberRef(FiberRef.currentMinimumLogLevel))
      ? Effect.void
      : requestLine(request, response, state, facts, latencyMs, level, clientClosed))
}

const requestLine = (
  request: HttpServerRequest.HttpServerRequest,
  response: HttpServerResponse.HttpServerResponse,
  state: RequestState,
  facts: CallFacts,
  latencyMs: number,
  level: LogLevel.LogLevel,
  clientClosed: boolean
) => {
  const status = response.status
  const path = pathOf(request.url)
  const fields = {
    request_id: state.requestId,
    method: request.method,
    path: quotedPath(path),
    status,
    code: state.code ?? (response.headers["idempotent-replayed"] === "true" ? "replayed" : "ok"),
    org_id: facts.orgId ?? null,
    key_id: facts.keyId ?? null,
    tool: facts.tool ?? null,
    credits: facts.credits,
    provider: facts.provider ?? null,
    latency_ms: round(latencyMs),
    provider_latency_ms: facts.providerMs === undefined ? null : round(facts.providerMs),
    // the client was gone before the answer was written
    client_closed: clientClosed
  }
  // Set on the request's fiber, not scoped with `Effect.annotateLogs`: the line is the request's last log and the
  // fiber is the request's own (see the middleware); a scope would copy the fiber's refs twice more and run an
  // uninterruptible acquire/release around the one line.
  return Effect.zipRight(
    FiberRef.update(FiberRef.currentLogAnnotations, (annotations) =>
      // the thirteen fields in one mutable pass, not a new map for each
      HashMap.mutate(annotations, (all) => {
        for (const [key, value] of Object.entries(fields)) HashMap.set(all, key, value)
      })),
    Effect.logWithLevel(level, "request")
  )
}

export const EnvelopeMiddlewareLive = HttpApiBuilder.middleware(
  Api,
  Effect.gen(function* () {
    const config = yield* ServerConfig
    const keys = yield* KeyStore
    /** An error answer to a caller whose cached key nothing confirmed yet: a revoked key gets `invalid_key`. */
    const confirmKey = (response: HttpServerResponse.HttpServerResponse, state: RequestState, facts: CallFacts) => {
      const caller = facts.unconfirmed
      // A refusal (4xx) is confirmed; a server error says nothing about the key, and is answered as it is.
      if (caller === undefined || response.status < 400 || response.status >= 500 || state.code === "invalid_key") {
        return Effect.succeed(response)
      }
      return keys.confirm(caller).pipe(
        Effect.as(response),
        Effect.catchAllDefect(() => Effect.succeed(response)),
        Effect.catchTag("InvalidKey", (error) =>
          Effect.sync(() => {
            state.code = envelopeOf.InvalidKey.code
            return respond(error)
          }))
      )
    }
    return (app: HttpApp.Default) =>
      // Uninterruptible around the app: a client that hangs up interrupts the app, not the log line and the
      // metrics of what its request did.
      Effect.uninterruptibleMask((restore) =>
        Effect.gen(function* () {
          const request = yield* HttpServerRequest.HttpServerRequest
          const started = yield* preciseMillis
          const state: RequestState = { requestId: newRequestId(), rateLimit: undefined, code: undefined, secretPayload: false }
          const facts = newCallFacts()
          // Set, not scoped with `Effect.locally`: this fiber is the request's own (the server forks one per
          // request) and ends with it, so nothing reads them after; a scope would copy the fiber's refs twice
          // more and run an uninterruptible acquire/release around the app for each of the two.
          yield* FiberRef.set(CurrentRequest, state)
          yield* FiberRef.set(CurrentCallFacts, facts)
          // the answer the server may write at the socket meanwhile (a request timeout) carries this request's id
          const at = socketOf(request)
          if (at !== undefined) at.requestId = state.requestId
          const exit = yield* Effect.exit(restore(app))
          if (at !== undefined) at.requestId = undefined
          if (Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause)) {
            // Nobody reads this answer: the client left, or the server answered at the socket (a request
            // timeout). The log line says how the request ended — a call that ran to its end, as what it was.
            const ended = endedAtSocket(request) ??
              (facts.status !== undefined ? { status: facts.status, code: facts.code ?? "ok" } : CLIENT_CLOSED)
            state.code = ended.code
            const response = HttpServerResponse.empty({ status: ended.status })
            yield* recordStatus(ended.status)
            yield* logRequest(request, response, state, facts, (yield* preciseMillis) - started, true)
            return response
          }
          const response = yield* (Exit.isSuccess(exit)
            ? Effect.succeed(exit.value)
            : renderCause(exit.cause, request, state, config.maxBodyBytes)).pipe(
              Effect.flatMap((response) => confirmKey(response, state, facts))
            )
          yield* recordStatus(response.status)
          yield* logRequest(request, response, state, facts, (yield* preciseMillis) - started, false)
          const withId = HttpServerResponse.setHeader(response, "x-request-id", state.requestId)
          // a refused caller (401) learns nothing of a key's rate limit
          return state.rateLimit === undefined || response.status === 401
            ? withId
            : HttpServerResponse.setHeaders(withId, rateLimitHeaders(state.rateLimit))
        })
      )
  })
)

/** What the log says of a request whose client left before anything was answered (nginx's 499). */
const CLIENT_CLOSED = { status: 499, code: "client_closed_request" } as const

/**
 * What a socket's requests and the server's own answers at the socket (a request timeout, headers too large) tell
 * each other: the id of the request in progress, which that answer carries, and the answer, which the request's
 * log line says rather than an interruption. One record a connection, made by its first request.
 */
export interface AtSocket {
  requestId: string | undefined
  answered: { readonly status: number; readonly code: string } | undefined
}

const atSockets = new WeakMap<object, AtSocket>()

/** The record of `socket` (made if it has none). */
export const atSocket = (socket: object): AtSocket => {
  const known = atSockets.get(socket)
  if (known !== undefined) return known
  const made: AtSocket = { requestId: undefined, answered: undefined }
  atSockets.set(socket, made)
  return made
}

const socketOf = (request: HttpServerRequest.HttpServerRequest) => {
  const socket = NodeHttpServerRequest.toIncomingMessage(request).socket
  return socket === null ? undefined : atSocket(socket)
}

const endedAtSocket = (request: HttpServerRequest.HttpServerRequest) => socketOf(request)?.answered
