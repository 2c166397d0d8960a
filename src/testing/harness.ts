/**
 * A fake upstream: a real HTTP server on 127.0.0.1:0 that records every request and answers through a
 * protocol handler, unless a fault is switched on (delay, status, 429, malformed JSON, wrong shape,
 * connection reset, oversized body, hang after headers). The gateway's own tests use it for every
 * provider; `tool-gateway/testing` exports it for tests of programs that use the gateway.
 */
import * as Effect from "effect/Effect"
import * as Http from "node:http"
import type * as Net from "node:net"

export interface RecordedRequest {
  readonly method: string
  /** The path, percent-decoded (`%2F` is a slash here). */
  readonly path: string
  /** The path as it was sent, percent-encoding and all. */
  readonly rawPath: string
  readonly query: URLSearchParams
  readonly headers: Http.IncomingHttpHeaders
  readonly body: string
  readonly json: unknown
}

export interface Reply {
  readonly status: number
  readonly body: unknown
  readonly headers?: Readonly<Record<string, string>>
  /** Send `body` as is (a string), not as JSON. */
  readonly raw?: boolean
  /** `body` is bytes, one per character (latin1). */
  readonly binary?: boolean
}

export interface Fault {
  readonly status?: number
  readonly body?: unknown
  readonly headers?: Readonly<Record<string, string>>
  readonly delayMs?: number
  readonly malformed?: boolean
  readonly wrongShape?: boolean
  readonly reset?: boolean
  readonly oversizedBytes?: number
  readonly hangAfterHeaders?: boolean
  /** Answer this text as the body, as it is (JSON no serializer would write, say), with `status` (default 200). */
  readonly text?: string
  /** Apply to this many requests, then answer normally again (default: until cleared). */
  readonly times?: number
  /** Apply only to requests for this path. */
  readonly path?: string
}

export interface Upstream {
  readonly url: string
  readonly requests: Array<RecordedRequest>
  /** Switch a fault on (or off, with no argument). */
  readonly fault: (fault?: Fault) => void
  readonly hits: (path?: string) => number
  /** Connections clients hold open to this upstream now (a client that gives up on a request closes its own). */
  readonly connections: () => number
  readonly reset: () => void
  readonly close: () => Promise<void>
}

export type Handler = (request: RecordedRequest) => Reply

export const json = (status: number, body: unknown, headers?: Readonly<Record<string, string>>): Reply =>
  headers === undefined ? { status, body } : { status, body, headers }

export const startUpstream = (handler: Handler, host = "127.0.0.1"): Promise<Upstream> =>
  new Promise((resolve) => {
    const requests: Array<RecordedRequest> = []
    let current: { fault: Fault; remaining: number } | undefined
    const sockets = new Set<Net.Socket>()

    // headers as large as a connection's may be (Node's own limit, 16 KB, would answer 431 before the handler)
    const server = Http.createServer({ maxHeaderSize: 1024 * 1024 }, (req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (c: Buffer) => chunks.push(c))
      req.on("end", () => {
        const body = Buffer.concat(chunks).toString("utf8")
        let parsed: unknown
        try {
          parsed = body === "" ? undefined : JSON.parse(body)
        } catch {
          parsed = undefined
        }
        const url = new URL(req.url ?? "/", "http://upstream")
        const recorded: RecordedRequest = {
          method: req.method ?? "GET",
          path: decodeURIComponent(url.pathname),
          rawPath: url.pathname,
          query: url.searchParams,
          headers: req.headers,
          body,
          json: parsed
        }
        requests.push(recorded)

        let fault: Fault | undefined
        if (current !== undefined && (current.fault.path === undefined || current.fault.path === recorded.path)) {
          fault = current.fault
          current.remaining -= 1
          if (current.remaining <= 0) current = undefined
        }
        const answer = () => {
          if (fault?.reset === true) {
            req.socket.destroy()
            return
          }
          if (fault?.hangAfterHeaders === true) {
            res.writeHead(200, { "content-type": "application/json" })
            res.flushHeaders()
            return
          }
          if (fault?.oversizedBytes !== undefined) {
            res.writeHead(200, { "content-type": "application/json" })
            const chunk = Buffer.alloc(64 * 1024, "a")
            let sent = 0
            const pump = () => {
              while (sent < (fault?.oversizedBytes ?? 0)) {
                sent += chunk.length
                if (!res.write(chunk)) return res.once("drain", pump)
              }
              res.end()
            }
            pump()
            return
          }
          if (fault?.text !== undefined) {
            res.writeHead(fault.status ?? 200, { "content-type": "application/json", ...fault.headers })
            res.end(fault.text)
            return
          }
          if (fault?.malformed === true) {
            res.writeHead(200, { "content-type": "application/json" })
            res.end("{\"results\": [ this is not json")
            return
          }
          if (fault?.wrongShape === true) {
            res.writeHead(200, { "content-type": "application/json" })
            res.end(JSON.stringify({ unexpected: true, items: "none" }))
            return
          }
          const reply: Reply = fault?.status !== undefined
            ? { status: fault.status, body: fault.body ?? { error: `fault ${fault.status}` }, ...(fault.headers ? { headers: fault.headers } : {}) }
            : handler(recorded)
          const text = reply.raw === true && typeof reply.body === "string" ? reply.body : JSON.stringify(reply.body)
          res.writeHead(reply.status, { "content-type": "application/json", ...reply.headers })
          res.end(reply.binary === true ? Buffer.from(text, "latin1") : text)
        }
        if (fault?.delayMs !== undefined) setTimeout(answer, fault.delayMs)
        else answer()
      })
    })
    server.on("connection", (socket) => {
      sockets.add(socket)
      socket.on("close", () => sockets.delete(socket))
    })
    server.listen(0, host, () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      resolve({
        url: `http://${host}:${port}`,
        requests,
        fault: (fault) => {
          current = fault === undefined ? undefined : { fault, remaining: fault.times ?? Number.POSITIVE_INFINITY }
        },
        hits: (path) => (path === undefined ? requests.length : requests.filter((r) => r.path === path).length),
        connections: () => sockets.size,
        reset: () => {
          requests.length = 0
          current = undefined
        },
        close: () =>
          new Promise<void>((done) => {
            for (const socket of sockets) socket.destroy()
            server.close(() => done())
          })
      })
    })
  })

/** An upstream for the life of the scope. */
export const upstream = (handler: Handler, host?: string) =>
  Effect.acquireRelease(Effect.promise(() => startUpstream(handler, host)), (u) => Effect.promise(() => u.close()))
