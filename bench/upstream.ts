/**
 * The benchmark's provider: a `node:http` server answering every request with the same iTunes-shaped
 * JSON (what `mobile_app_search` expects), after `--delay <ms>` if given. Prints `{"port":…}` when ready.
 *
 * `--faults`: a faulty provider for the soak. Request by request, in a fixed cycle: 1 in 20 is a 503,
 * 1 in 25 invalid JSON, 1 in 30 hangs for 3 s (past the gateway's deadline), 1 in 40 resets the
 * connection, 1 in 50 sends headers and then nothing for 3 s; the others answer after 0–20 ms.
 */
import * as Http from "node:http"
import { argValue, ready } from "./proc.js"

const delayMs = Number(argValue("--delay") ?? "0")
const faulty = process.argv.includes("--faults")
let served = 0

const result = (n: number) => ({
  trackId: 1000 + n,
  trackName: `Benchmark App ${n}`,
  artistName: "Bench Labs",
  bundleId: `com.example.bench${n}`,
  trackViewUrl: `https://apps.example.com/app/${1000 + n}`,
  artworkUrl512: `https://img.example.com/${n}/512.png`,
  price: 0,
  currency: "USD",
  averageUserRating: 4.5,
  userRatingCount: 1234 + n,
  genres: ["Productivity", "Utilities"],
  version: "1.2.3",
  releaseDate: "2024-01-01T00:00:00Z",
  description: "A fixed answer for load tests. ".repeat(4)
})

const body = Buffer.from(JSON.stringify({ resultCount: 3, results: [result(1), result(2), result(3)] }))
const headers = { "content-type": "application/json", "content-length": String(body.length) }

const answer = (res: Http.ServerResponse) => {
  res.writeHead(200, headers)
  res.end(body)
}

const fault = (req: Http.IncomingMessage, res: Http.ServerResponse): boolean => {
  const n = ++served
  if (n % 20 === 0) {
    res.writeHead(503, { "content-type": "application/json" }).end(`{"error":"unavailable"}`)
  } else if (n % 25 === 0) {
    res.writeHead(200, { "content-type": "application/json" }).end(`{"resultCount": 3, "results": [`)
  } else if (n % 30 === 0) {
    setTimeout(() => answer(res), 3_000)
  } else if (n % 40 === 0) {
    req.socket.destroy()
  } else if (n % 50 === 0) {
    res.writeHead(200, { "content-type": "application/json" })
    res.flushHeaders()
    setTimeout(() => res.end(body), 3_000)
  } else {
    setTimeout(() => answer(res), n % 21)
  }
  return true
}

const server = Http.createServer((req, res) => {
  req.resume()
  req.on("end", () => {
    if (faulty) fault(req, res)
    else if (delayMs > 0) setTimeout(() => answer(res), delayMs)
    else answer(res)
  })
})
server.keepAliveTimeout = 60_000
server.listen(0, "127.0.0.1", () => ready(server))
