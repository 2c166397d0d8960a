/**
 * The HTTP server: the API with its handlers and middlewares on Node's http server.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpIncomingMessage from "@effect/platform/HttpIncomingMessage"
import * as HttpServer from "@effect/platform/HttpServer"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as FiberRef from "effect/FiberRef"
import * as Option from "effect/Option"
import * as Http from "node:http"
import type * as Net from "node:net"
import { envelope, envelopeOf, HeadersTooLarge, InvalidRequest, RequestTimeout, responseHeaders } from "../domain/errors.js"
import { ServerConfig } from "../config.js"
import { Api } from "./Api.js"
import { atSocket, EnvelopeMiddlewareLive, newRequestId } from "./envelope.js"
import { HandlersLive } from "./handlers.js"
import { ServeNarrowed } from "./narrowContext.js"
import { ArtifactsLive } from "./artifacts.js"
import { CatalogLive } from "./catalog.js"
import { DashboardHandlersLive } from "./dashboard.js"
import { OperationsLive } from "./operations.js"
import { McpLive } from "./mcp.js"
import { DocsLive } from "./openapiRoute.js"
import { ApiKeyAuthLive, IdTokenAuthLive, JsonBodyLive } from "./security.js"
import { CorsLive, DashboardSiteLive } from "./web.js"


/** The API, built: handlers, middlewares, error envelopes. Needs the gateway services. */
export const ApiLive = HttpApiBuilder.api(Api).pipe(
  Layer.provide(Layer.mergeAll(HandlersLive, DashboardHandlersLive, CatalogLive, ArtifactsLive)),
  Layer.provide(Layer.mergeAll(ApiKeyAuthLive, IdTokenAuthLive, JsonBodyLive)),
  Layer.provide(EnvelopeMiddlewareLive)
)

/**
 * A request whose body the gateway stopped reading (it exceeded the size limit) is abandoned without
 * destroying its socket, so that the `413 payload_too_large` answer can still be written; that answer
 * carries `Connection: close`, which ends the connection (and the rest of the body) once it is sent.
 */
class GatewayIncomingMessage extends Http.IncomingMessage {
  /**
   * The answer of a request that sent `Expect: 100-continue`, until its body is first read: `100 Continue` is sent
   * then, so only once the gateway reads the body — after the key and the checks before it. A request refused
   * before (a `401`) is answered without it, and Node closes the connection after that answer, the body unsent.
   */
  continueWith: Http.ServerResponse | undefined

  override _read(size: number): void {
    const response = this.continueWith
    if (response !== undefined) {
      this.continueWith = undefined
      if (!response.headersSent) response.writeContinue()
    }
    super._read(size)
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    if (error === null && !this.complete && this.socket !== null && !this.socket.destroyed) {
      callback(null)
      return
    }
    super._destroy(error, callback)
  }
}

/**
 * A server that, once told to close, closes each keep-alive connection as soon as its answer is out: Node's
 * `close` ends the connections idle at that moment and then waits for the others, which a client keeps open
 * after their answers until the keep-alive timeout. Shutdown waits for the calls in flight, not for that.
 */
class GatewayServer extends Http.Server {
  override close(callback?: (error?: Error) => void): this {
    const sweep = setInterval(() => this.closeIdleConnections(), 50)
    this.once("close", () => clearInterval(sweep))
    return super.close(callback)
  }
}

/** A W3C `traceparent` of version 00 (lowercase hex), whose trace and parent ids are not all zeros (invalid, §3.2.2.3). */
const TRACEPARENT = /^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/
/** Zipkin's B3 headers, which the platform would also read: their ids are taken as sent, hex or not, 64-bit or not. */
const B3_HEADERS = ["b3", "x-b3-traceid", "x-b3-spanid", "x-b3-sampled", "x-b3-parentspanid", "x-b3-flags"] as const

/**
 * The trace context a request may continue: a valid W3C `traceparent`, and nothing else. An id the exporter cannot
 * write (a B3 id of any text, an all-zero trace id) made every span of its batch refused by a collector, and the
 * exporter then pause for a minute — any client, a key or not, could keep the gateway's traces from being kept.
 */
export const keepValidTraceContext = (headers: Http.IncomingHttpHeaders): void => {
  const parent = headers.traceparent
  if (parent !== undefined && (typeof parent !== "string" || !TRACEPARENT.test(parent))) Reflect.deleteProperty(headers, "traceparent")
  for (const name of B3_HEADERS) if (headers[name] !== undefined) Reflect.deleteProperty(headers, name)
}

/**
 * Node's http server with timeouts that keep slow or idle clients from holding sockets forever: headers
 * within `headersTimeoutMs`, the whole request within `requestTimeoutMs` (Node answers 408 and closes),
 * idle keep-alive connections closed after `keepAliveTimeoutMs`. The timeouts are checked every second
 * (at most), not Node's default 30 s.
 */
export const makeNodeServer = (timeouts: {
  readonly headersTimeoutMs: number
  readonly requestTimeoutMs: number
  readonly keepAliveTimeoutMs: number
  /** Whether requests are traced: if not, no request's trace context is read, nor checked. */
  readonly traced: boolean
}) => {
  const server = new GatewayServer({
    IncomingMessage: GatewayIncomingMessage,
    connectionsCheckingInterval: Math.min(1_000, timeouts.headersTimeoutMs)
  })
  // before the platform's own listener reads the request; with tracing off, not on any request's path
  if (timeouts.traced) {
    server.prependListener("request", (request: Http.IncomingMessage) => keepValidTraceContext(request.headers))
  }
  server.headersTimeout = timeouts.headersTimeoutMs
  server.requestTimeout = Math.max(timeouts.requestTimeoutMs, timeouts.headersTimeoutMs)
  server.keepAliveTimeout = timeouts.keepAliveTimeoutMs
  // A connection that never sends a byte is closed after the headers timeout, without an answer (there is no
  // request to answer): this timer is due before Node's check can find it expired (that check needs more than the
  // timeout to have passed, and runs later), so it comes first. One that began a request is Node's: its headers
  // timeout answers it 408 with the envelope. Not the socket's own timeout: Node's server destroys a socket whose
  // timeout fires, before any 408 is written.
  server.on("connection", (socket: Net.Socket) => {
    const silent = setTimeout(() => {
      if (socket.bytesRead === 0) socket.destroy()
    }, timeouts.headersTimeoutMs)
    silent.unref()
    socket.once("close", () => clearTimeout(silent))
  })
  const inTurn = serveInTurn(server)
  server.on("clientError", (error: Error & { readonly code?: string }, socket: Net.Socket) => answerClientError(error, socket, inTurn))
  // Node would answer 100 Continue before the app sees the request (an unauthenticated client invited to send its
  // body); handled here, the request goes to the app as any other, and 100 waits for the body's first read.
  server.on("checkContinue", (request, response) => {
    if (request instanceof GatewayIncomingMessage) request.continueWith = response
    else response.writeContinue()
    server.emit("request", request, response)
  })
  return server
}

type Handler = (request: Http.IncomingMessage, response: Http.ServerResponse) => void

/** A connection's requests waiting for the answer in progress there, and what is written once it is (a refusal). */
interface Turns {
  readonly waiting: Array<readonly [Http.IncomingMessage, Http.ServerResponse]>
  after: (() => void) | undefined
}

/** What `serveInTurn` tells the server's refusals: whether to answer after the answer in progress. */
interface InTurn {
  /**
   * When requests wait on `socket` behind the answer in progress, `answer` is written once that answer is (a
   * refusal of a waiting request — its body timed out while it waited — must not come before the answer to the
   * request before it), and the waiting requests are dropped: true. Else false (nothing waits there).
   */
  readonly afterCurrent: (socket: Net.Socket, answer: () => void) => boolean
}

/**
 * The app's handler (the platform's) sees a connection's requests one at a time: a request pipelined behind another
 * (sent before that one's answer) waits until that answer is written, and is never run if the connection closes
 * or is ending first. Node parses a whole read at once — 1,800 small pipelined requests from 64 KB — and answers them
 * in order; run at once, each held a fiber and its answer, and those queued behind an answer the client never read
 * were never let go (Node drops them without an event once the connection closes): a client with no key could hold
 * gigabytes. The server also listens before the handler is installed (the platform's layers build in that order): a
 * request in between — an early health check — waits, and is handed to the handler once it is there.
 */
const serveInTurn = (server: Http.Server): InTurn => {
  let handler: Handler | undefined
  const early: Array<readonly [Http.IncomingMessage, Http.ServerResponse]> = []
  /** Present while an answer is in progress on the connection. */
  const turns = new WeakMap<Net.Socket, Turns>()

  const run = (socket: Net.Socket, request: Http.IncomingMessage, response: Http.ServerResponse, app: Handler) => {
    const turn = turns.get(socket) ?? { waiting: [], after: undefined }
    turns.set(socket, turn)
    response.once("finish", () => {
      const next = turn.waiting.shift()
      // a connection closed, or ending (an answer with Connection: close), leaves the requests behind it unrun; its
      // entry goes with it (a WeakMap's)
      if (turn.after !== undefined || next === undefined || socket.destroyed || socket.writableEnded) {
        turns.delete(socket)
        turn.after?.()
      } else {
        run(socket, next[0], next[1], app)
      }
    })
    app(request, response)
  }
  const admit: Handler = (request, response) => {
    if (handler === undefined) {
      early.push([request, response])
      return
    }
    const socket = request.socket
    const turn = turns.get(socket)
    if (turn === undefined) run(socket, request, response, handler)
    else if (turn.after === undefined) turn.waiting.push([request, response])
  }
  const isHandler = (listener: unknown): listener is Handler => typeof listener === "function" && listener !== admit
  server.on("newListener", (event: string | symbol, listener: unknown) => {
    if (event !== "request" || !isHandler(listener)) return
    // the platform's, added once this event returns: taken off the server, and handed each request in its turn
    process.nextTick(() => {
      server.off("request", listener)
      handler = listener
      for (const [request, response] of early.splice(0)) admit(request, response)
    })
  })
  server.on("request", admit)
  return {
    afterCurrent: (socket, answer) => {
      const turn = turns.get(socket)
      if (turn === undefined || turn.waiting.length === 0) return false
      turn.waiting.length = 0
      turn.after = answer
      return true
    }
  }
}

/**
 * What Node refuses before a request reaches the app — a request line or header it cannot parse, headers
 * over its size limit, a request not received within the timeouts — is answered with the envelope too, from
 * the one table, with a request id, instead of Node's bare status line. The connection is then closed.
 */
export const clientErrorOf = (code: string | undefined): RequestTimeout | HeadersTooLarge | InvalidRequest => {
  switch (code) {
    case "HPE_HEADER_OVERFLOW":
      return new HeadersTooLarge({ message: "The request's headers are larger than this server accepts (16 KB)." })
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return new RequestTimeout({ message: "The request was not received in time; send it again, faster." })
    default:
      return new InvalidRequest({ message: "The request is not valid HTTP/1.1." })
  }
}

const answerClientError = (error: Error & { readonly code?: string }, socket: Net.Socket, inTurn: InTurn) => {
  // a connection the client reset, or one whose answer already began, can only be closed. One the client ended in
  // the middle of its body (`HPE_INVALID_EOF_STATE`) is answered: a client that only half-closed reads the 400, and
  // the request's log line says `client_closed` either way
  const answering: unknown = Reflect.get(socket, "_httpMessage")
  const started = typeof answering === "object" && answering !== null && Reflect.get(answering, "headersSent") === true
  if (error.code === "ECONNRESET" || !socket.writable || started) {
    socket.destroy()
    return
  }
  const refusal = clientErrorOf(error.code)
  // a request waiting behind the answer in progress (its body, unread while it waits, timed out): refused after that
  // answer, under an id of its own — the request in progress is answered and logged as it is
  if (inTurn.afterCurrent(socket, () => refuse(socket, refusal, newRequestId()))) return
  const { code, status } = envelopeOf[refusal._tag]
  // the request in progress on this socket (if any) is logged with this answer
  const at = atSocket(socket)
  at.answered = { status, code }
  // the id the request's log line has, if a request was in progress; else a new one (nothing else is logged)
  refuse(socket, refusal, at.requestId ?? newRequestId())
}

/** Write `refusal` as the connection's last answer, and end it; one its client does not end too is closed 1 s later. */
const refuse = (socket: Net.Socket, refusal: RequestTimeout | HeadersTooLarge | InvalidRequest, requestId: string) => {
  if (!socket.writable) {
    socket.destroy()
    return
  }
  const { status } = envelopeOf[refusal._tag]
  const json = JSON.stringify(envelope(refusal))
  const headers = { ...responseHeaders(refusal), connection: "close" }
  socket.end(
    `HTTP/1.1 ${status} ${Http.STATUS_CODES[status] ?? ""}\r\n` +
      `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(json)}\r\n` +
      `x-request-id: ${requestId}\r\n` +
      Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join("") +
      `\r\n${json}`
  )
  // a client that sends on (a body nobody reads) never sees the end: its FIN waits behind its own unread bytes
  setTimeout(() => socket.destroy(), 1_000).unref()
}

/** Serve the API on `HOST:PORT` (port 0 picks a free one; `HttpServer.HttpServer` tells which). */
/**
 * The body size limit of every request (`MAX_BODY_BYTES`): in the context the server's handler runs in, so each
 * request inherits it instead of having it provided (a copy of the request's whole context) one by one.
 */
const MaxBodySizeLive = Layer.effect(
  HttpIncomingMessage.MaxBodySize,
  Effect.map(ServerConfig, (config) => Option.some(FileSystem.Size(config.maxBodyBytes)))
)

export const HttpServerLive = ServeNarrowed.pipe(
  Layer.provide(MaxBodySizeLive),
  Layer.provide(DocsLive),
  Layer.provide(Layer.mergeAll(DashboardSiteLive, CorsLive)),
  Layer.provide(McpLive),
  Layer.provide(OperationsLive),
  Layer.provide(ApiLive),
  HttpServer.withLogAddress,
  Layer.provideMerge(
    Layer.unwrapEffect(
      // traced as the layers the server is built on say (the configured exporter's, or an in-process caller's own)
      Effect.map(
        Effect.zip(ServerConfig, FiberRef.get(FiberRef.currentTracerEnabled)),
        ([config, traced]) => NodeHttpServer.layer(() => makeNodeServer({ ...config, traced }), { port: config.port, host: config.host })
      )
    )
  )
)
