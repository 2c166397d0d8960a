/**
 * The benchmark's provider: a `node:http` server answering every request with the same iTunes-shaped
 * JSON (what `mobile_app_search` expects), after `--delay <ms>` if given. Prints `{"port":…}` when ready.
 */
import * as Http from "node:http"
import { argValue, ready } from "./proc.js"

const delayMs = Number(argValue("--delay") ?? "0")

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

const server = Http.createServer((req, res) => {
  req.resume()
  req.on("end", () => {
    if (delayMs > 0) setTimeout(() => answer(res), delayMs)
    else answer(res)
  })
})
server.keepAliveTimeout = 60_000
server.listen(0, "127.0.0.1", () => ready(server))
