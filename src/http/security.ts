/**
 * The tool routes' middlewares: the API key (with the rate limit), then the body checks that must run
 * before the payload is decoded.
 */
import type { RequestError } from "@effect/platform/HttpServerError"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import { InvalidRequest, InvalidToken, MalformedJson, PayloadTooLarge, UnsupportedMediaType } from "../domain/errors.js"
import { looksLikeApiKey } from "../domain/ids.js"
import { Identity } from "../services/Identity.js"
import { Members } from "../services/Members.js"
import { Authentication } from "../services/Authentication.js"
import { ServerConfig } from "../config.js"
import { ApiKeyAuth, IdTokenAuth, JsonBody } from "./Api.js"
import { currentRequest, unreadableBody } from "./envelope.js"
import { routeTable } from "./routes.js"
import { charsetOf, mediaTypeOf } from "../domain/contentType.js"
import { jsonProblem, type JsonProblem } from "../domain/json.js"

export const ApiKeyAuthLive = Layer.effect(
  ApiKeyAuth,
  Effect.gen(function* () {
    const authentication = yield* Authentication
    return ApiKeyAuth.of({
      apiKey: (key) =>
        Effect.gen(function* () {
          const request = yield* HttpServerRequest.HttpServerRequest
          // Tool calls (the POST routes) may take the key from this process's cache: the reservation, or
          // the envelope middleware for an error answer, confirms it in the database. Reads never do.
          const authenticated = yield* authentication.authenticate(Redacted.value(key), request.headers["authorization"], {
            cached: request.method === "POST"
          })
          const state = yield* currentRequest
          state.rateLimit = authenticated.rateLimit
          return authenticated.caller
        })
    })
  })
)

export const IdTokenAuthLive = Layer.effect(
  IdTokenAuth,
  Effect.gen(function* () {
    const identity = yield* Identity
    const members = yield* Members
    const refuseKey = new InvalidToken({
      message: "These routes take a signed-in user's ID token (Authorization: Bearer <ID token>), never an API key."
    })
    return IdTokenAuth.of({
      idToken: (token) =>
        Effect.gen(function* () {
          const request = yield* HttpServerRequest.HttpServerRequest
          const value = Redacted.value(token)
          if (request.headers["x-api-key"] !== undefined || looksLikeApiKey(value)) return yield* refuseKey
          const principal = yield* identity.verify(value)
          const orgId = yield* members.orgOf(principal.uid)
          return { uid: principal.uid, orgId }
        })
    })
  })
)

/** Deeper JSON than this is refused: no tool input needs it, and it would cost stack further on. */
export const MAX_JSON_DEPTH = 64

/** What a request body that parses as JSON may still not hold (src/domain/json.ts). */
export const bodyProblems: Record<JsonProblem, string> = {
  too_deep: `The request body nests deeper than ${MAX_JSON_DEPTH} levels.`,
  infinite_number: "The request body has a number too large to be read (such as 1e400): it would be passed on as null.",
  proto_key: "The request body has a key named __proto__, which the gateway does not pass on: rename it."
}

/** What a request body's `Content-Type` must say: JSON, as `application/json` (not `…+json`). */
const isJsonRequestType = (contentType: string) => mediaTypeOf(contentType) === "application/json"

/** JSON is UTF-8 (RFC 8259): the labels of UTF-8 a client may send (the Encoding standard's). */
const UTF8_LABELS: ReadonlySet<string> = new Set(["utf-8", "utf8", "unicode-1-1-utf-8"])

export const isJsonObject = (u: unknown): u is Readonly<Record<string, unknown>> =>
  typeof u === "object" && u !== null && !Array.isArray(u)

/** A request body as UTF-8 text, a byte order mark kept; bytes that are not UTF-8 throw (they are not JSON). */
const utf8Decoder = () => new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })
const utf8 = utf8Decoder()

const notUtf8 = () => new MalformedJson({ message: "The request body is not valid JSON: its bytes are not UTF-8." })

/**
 * Bytes as text with a fatal decoder (`stream`: more bytes follow, a character split between chunks waits for
 * them; no bytes: what is left of a character the body ended in the middle of), in the decode itself: no second pass.
 */
const decodeUtf8 = (
  decoder: { readonly decode: (bytes?: ArrayBuffer | Uint8Array, options?: { readonly stream?: boolean }) => string },
  bytes?: ArrayBuffer | Uint8Array,
  options?: { readonly stream?: boolean }
): Effect.Effect<string, MalformedJson> => {
  try {
    return Effect.succeed(decoder.decode(bytes, options))
  } catch {
    return Effect.fail(notUtf8())
  }
}

/**
 * A larger or chunked body as text, each chunk decoded as it arrives (a character split between two chunks
 * included), with the body size limit: the platform's `text` would replace bytes that are not UTF-8 instead.
 */
const readLargeText = (
  request: HttpServerRequest.HttpServerRequest,
  maxBodyBytes: number
): Effect.Effect<string, PayloadTooLarge | MalformedJson | InvalidRequest> =>
  Effect.suspend(() => {
    const decoder = utf8Decoder()
    let bytes = 0
    return request.stream.pipe(
      Stream.mapError((error) => unreadableBody(error, maxBodyBytes)),
      Stream.runFoldEffect("", (text, chunk: Uint8Array): Effect.Effect<string, PayloadTooLarge | MalformedJson> => {
        bytes += chunk.length
        if (bytes > maxBodyBytes) {
          return Effect.fail(new PayloadTooLarge({ message: `The request body is larger than ${maxBodyBytes} bytes.` }))
        }
        return Effect.map(decodeUtf8(decoder, chunk, { stream: true }), (more) => text + more)
      }),
      Effect.flatMap((text) => Effect.map(decodeUtf8(decoder), (rest) => text + rest))
    )
  })

/**
 * Bodies declared this small (nearly every tool call's) are read as bytes: the platform's `arrayBuffer` joins a
 * body's chunks by copying what it has so far for each one, nothing for a body of one or a few chunks, but
 * quadratic in their number (a 1 MiB body in 16 KiB chunks: 6 ms); a larger or chunked body is read as `text`.
 */
const SMALL_BODY_BYTES = 64 * 1024

/**
 * The checks every JSON request body passes before anything decodes it: media type, declared and actual
 * size, valid JSON, an object (not an array or a scalar), and a sane depth. Answers the text and the parsed object.
 *
 * A small body is read as bytes (`arrayBuffer`), with the body size limit in force, not as `text`: the platform's
 * `text` is `Effect.cached`, made at its first access with `Effect.runSync` (a fiber, a `Deferred`, a `Ref`), its
 * first read diffing the fiber's refs around the read and every read patching them back: about 20 µs of a request.
 * `withBody` hands the payload decoder what was read here.
 */
export const readJsonBody = (
  request: HttpServerRequest.HttpServerRequest,
  maxBodyBytes: number
) =>
  Effect.gen(function* () {
    const text = yield* readJsonText(request, maxBodyBytes)
    if (text.trim() === "") return yield* emptyBody()
    const parsed = yield* Effect.try({
      try: (): unknown => JSON.parse(text),
      catch: notJson
    })
    if (!isJsonObject(parsed)) return yield* new InvalidRequest({ message: "The request body must be a JSON object." })
    const problem = jsonProblem(parsed, MAX_JSON_DEPTH)
    if (problem !== undefined) return yield* new InvalidRequest({ message: bodyProblems[problem] })
    return { text, parsed }
  })

export const emptyBody = () => new InvalidRequest({ message: "The request body is empty: send a JSON object, e.g. {}." })
export const notJson = () => new MalformedJson({ message: "The request body is not valid JSON." })

/**
 * A JSON request body's text, after the checks made before it is parsed: media type and charset, declared and actual
 * size, UTF-8.
 */
export const readJsonText = (
  request: HttpServerRequest.HttpServerRequest,
  maxBodyBytes: number
): Effect.Effect<string, UnsupportedMediaType | PayloadTooLarge | MalformedJson | InvalidRequest> =>
  Effect.gen(function* () {
    const contentType = request.headers["content-type"]
    if (contentType !== undefined && !isJsonRequestType(contentType)) {
      return yield* new UnsupportedMediaType({
        message: `Content-Type must be application/json (got ${contentType.slice(0, 100)}).`
      })
    }
    const charset = contentType === undefined ? undefined : charsetOf(contentType)
    if (charset !== undefined && !UTF8_LABELS.has(charset)) {
      return yield* new UnsupportedMediaType({
        message: `The request body must be UTF-8, as JSON is (got charset=${charset.slice(0, 40)}); send it as UTF-8, or name no charset.`
      })
    }
    const length = request.headers["content-length"]
    const declared = Number(length ?? "0")
    if (Number.isFinite(declared) && declared > maxBodyBytes) {
      return yield* new PayloadTooLarge({ message: `The request body is larger than ${maxBodyBytes} bytes.` })
    }
    const unreadable = (error: RequestError) => unreadableBody(error, maxBodyBytes)
    const text = length !== undefined && declared <= SMALL_BODY_BYTES
      ? yield* decodeUtf8(utf8, yield* Effect.mapError(request.arrayBuffer, unreadable))
      : yield* readLargeText(request, maxBodyBytes)
    return text
  })

const isServerRequest = (u: object): u is HttpServerRequest.HttpServerRequest => HttpServerRequest.TypeId in u

/**
 * The request with its body already read: its `text` and `json` answer what `readJsonBody` read, and everything
 * else is the request's own (it is the prototype). The payload decoder reads `json` from the request it is given.
 *
 * Once a small body is read as bytes, the original request's body stream is spent: its `text`, `json` or
 * `urlParamsBody` (and those of a request `modify` makes from either) would wait for good. Read the body from this
 * one.
 */
export const withBody = (
  request: HttpServerRequest.HttpServerRequest,
  body: { readonly text: string; readonly parsed: unknown }
): HttpServerRequest.HttpServerRequest => {
  const read: Pick<HttpServerRequest.HttpServerRequest, "text" | "json"> = {
    text: Effect.succeed(body.text),
    json: Effect.succeed(body.parsed)
  }
  Object.setPrototypeOf(read, request)
  // always one: the prototype carries the platform's type id (the check gives the object its type)
  return isServerRequest(read) ? read : request
}

export const JsonBodyLive = Layer.effect(
  JsonBody,
  Effect.gen(function* () {
    const config = yield* ServerConfig
    return JsonBody.of(
      Effect.gen(function* () {
        const request = yield* HttpServerRequest.HttpServerRequest
        // Reads (GET, DELETE) have no body to check.
        if (request.method !== "POST" && request.method !== "PUT" && request.method !== "PATCH") return
        // the route the router matched, not the URL as spelled (the router ignores case and repeated slashes)
        const { route } = yield* HttpRouter.RouteContext
        if (routeTable.hasSecretPayload(route.method, route.path)) (yield* currentRequest).secretPayload = true
        const body = yield* readJsonBody(request, config.maxBodyBytes)
        // The handler, next on this fiber, decodes its payload from the request in the fiber's context: it gets the
        // request with its body read. Set in place, not provided (`provides` on the middleware would scope it: an
        // uninterruptible acquire and release around the handler, 24 Effect steps a call); the middleware that
        // provides the caller, around this one, restores the context when the handler is done.
        yield* FiberRef.update(FiberRef.currentContext, Context.add(HttpServerRequest.HttpServerRequest, withBody(request, body)))
      })
    )
  })
)
