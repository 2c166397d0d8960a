/**
 * The floor: the least a Node process can do in the gateway's place. It checks a constant API key
 * header, forwards the call to the upstream over a keep-alive agent, and returns the upstream's body.
 * `--upstream <port>`. Prints `{"port":…}` when ready.
 */
import * as Http from "node:http"
import { argValue, ready } from "./proc.js"

const upstreamPort = Number(argValue("--upstream"))
const KEY = "bench-key"
const agent = new Http.Agent({ keepAlive: true, maxSockets: 256 })

const server = Http.createServer((req, res) => {
  if (req.headers["x-api-key"] !== KEY) {
    req.resume()
    res.writeHead(401, { "content-type": "application/json" })
    res.end('{"error":{"code":"invalid_key"}}')
    return
  }
  const chunks: Array<Buffer> = []
  req.on("data", (chunk: Buffer) => chunks.push(chunk))
  req.on("end", () => {
    const input: unknown = JSON.parse(Buffer.concat(chunks).toString("utf8"))
    const term = typeof input === "object" && input !== null && "query" in input ? String(input.query) : ""
    const upstream = Http.request(
      { host: "127.0.0.1", port: upstreamPort, path: `/search?term=${encodeURIComponent(term)}`, agent },
      (up) => {
        const parts: Array<Buffer> = []
        up.on("data", (chunk: Buffer) => parts.push(chunk))
        up.on("end", () => {
          const body = Buffer.concat(parts)
          res.writeHead(up.statusCode ?? 502, { "content-type": "application/json", "content-length": body.length })
          res.end(body)
        })
      }
    )
    upstream.on("error", () => {
      res.writeHead(502)
      res.end()
    })
    upstream.end()
  })
})
server.keepAliveTimeout = 60_000
server.listen(0, "127.0.0.1", () => ready(server))
