/**
 * The edges of a request that the schemas and the server answer before any service: values PostgreSQL cannot
 * store, paths spelled as the router reads them, long paths, the body's charset and bytes, headers that never
 * end, oversized values in a message, and what a refused key's answer carries.
 */
import { expect, layer } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { Effect, Redacted } from "effect"
import * as Net from "node:net"
import { KeyStore } from "../src/services/KeyStore.js"
import { forecastBody } from "../src/testing/openMeteo.js"
import { expectEnvelope } from "./support/assert.js"
import { collectGarbage } from "./support/gc.js"
import { baseUrl, capturedLogs, dashboard, devToken, gatewayLayer, givenMember, givenOrg, request, requestChunked, TestUpstreams } from "./support/gateway.js"

const invalidRequest = { status: 400, type: "validation", code: "invalid_request", retryable: false, billable: false } as const
const invalidKey = { status: 401, type: "auth", code: "invalid_key", retryable: false, billable: false } as const
const unknownTool = { status: 404, type: "not_found", code: "unknown_tool", retryable: false, billable: false } as const
const notFound = { status: 404, type: "not_found", code: "not_found", retryable: false, billable: false } as const
const unsupported = { status: 415, type: "validation", code: "unsupported_media_type", retryable: false, billable: false } as const
const malformed = { status: 400, type: "validation", code: "malformed_json", retryable: false, billable: false } as const
const invalidToken = { status: 401, type: "auth", code: "invalid_token", retryable: false, billable: false } as const

layer(gatewayLayer({ server: { headersTimeoutMs: 500, requestTimeoutMs: 1_000, keepAliveTimeoutMs: 1_000 } }), {
  excludeTestServices: true
})("request edges", (it) => {
  it.effect("a U+0000 bound for a text column is the caller's invalid_request, never a database error", () =>
    Effect.gen(function* () {
      const { key, token } = yield* givenMember()
      const apiKey = { "x-api-key": key }
      expectEnvelope(yield* request("/v1/artifacts/%00", { method: "GET", headers: apiKey }), invalidRequest)
      expectEnvelope(yield* request("/v1/artifacts/art_%00x", { method: "GET", headers: apiKey }), invalidRequest)
      for (const query of ["tool=%00", "key_id=%00", "format=csv&tool=%00", "key_id=a%00b"]) {
        expectEnvelope(yield* dashboard("GET", `/v1/usage?${query}`, token), { ...invalidRequest, message: "U+0000" })
      }
      expectEnvelope(yield* dashboard("DELETE", "/v1/keys/%00", token), invalidRequest)
      expectEnvelope(yield* dashboard("PATCH", "/v1/keys/%00", token, { name: "b" }), invalidRequest)
      expectEnvelope(yield* dashboard("POST", "/v1/keys", token, { name: "a\u0000b" }), { ...invalidRequest, message: "name" })
      expectEnvelope(yield* dashboard("PATCH", "/v1/keys/key_x", token, { name: "a\u0000b" }), { ...invalidRequest, message: "name" })
      expectEnvelope(
        yield* dashboard("POST", "/v1/connections", token, { provider: "epsilon", credentials: {}, label: "a\u0000b" }),
        { ...invalidRequest, message: "label" }
      )
      expectEnvelope(yield* request("/dev/token", {
        body: JSON.stringify({ uid: "a\u0000b" }),
        headers: { "content-type": "application/json" }
      }), { ...invalidRequest, message: "uid" })
      // a signed token whose user id PostgreSQL cannot store is not a valid token here
      expectEnvelope(yield* dashboard("GET", "/v1/org", yield* devToken("user\u0000x")), { ...invalidToken, message: "sub" })
      // and the ordinary requests still work
      expect((yield* dashboard("GET", "/v1/usage?tool=search", token)).status).toBe(200)
      expect((yield* dashboard("POST", "/v1/keys", token, { name: "fine" })).status).toBe(201)
    }))

  it.effect("a percent-escape in a path parameter that is not UTF-8 is the caller's invalid_request, not a 405 naming the method it used", () =>
    Effect.gen(function* () {
      const { key, token } = yield* givenMember()
      // the router took the undecodable parameter for no route: "GET is not allowed on /v1/artifacts/abc%FF; use GET."
      const message = "does not decode: a percent-escape in it is not UTF-8"
      expectEnvelope(yield* request("/v1/artifacts/abc%FF", { method: "GET", headers: { "x-api-key": key } }), { ...invalidRequest, message })
      expectEnvelope(yield* dashboard("PATCH", "/v1/keys/%FF", token, { name: "b" }), { ...invalidRequest, message })
      expectEnvelope(yield* dashboard("DELETE", "/v1/keys/%E0%A4", token), { ...invalidRequest, message })
      // a method the route does not answer is still 405
      expectEnvelope(yield* request("/v1/artifacts/abc%FF", { method: "PUT", headers: { "x-api-key": key } }), {
        status: 405, type: "not_found", code: "method_not_allowed", retryable: false, billable: false
      })
    }))

  it.effect("an API key pasted where a key's id goes is not written whole to the request's log line, nor to its answer", () =>
    Effect.gen(function* () {
      const { key, token } = yield* givenMember()
      const mark = capturedLogs.length
      // a user who pastes the key itself to revoke it: the key is not an id (404), and the line said the path as sent
      const answer = yield* dashboard("DELETE", `/v1/keys/${key}`, token)
      expectEnvelope(answer, notFound)
      // nor sent back whole: the answer names it as the dashboard shows a key
      expect(answer.text).toContain(`${key.slice(0, 7)}…`)
      expect(answer.text).not.toContain(key)
      const lines = capturedLogs.slice(mark)
      expect(lines.some((line) => line.includes(`"path":"/v1/keys/${key.slice(0, 7)}…"`))).toBe(true)
      expect(lines.filter((line) => line.includes(key))).toEqual([])
    }))

  it.effect("an absolute-form request target is logged and matched by its path, not by the host it names", () =>
    Effect.gen(function* () {
      const base = new URL(yield* baseUrl)
      const mark = capturedLogs.length
      // raw: a client (a proxy) that sends the whole URL as the request target, which HTTP/1.1 servers accept
      const statusOf = (target: string) =>
        Effect.promise(() =>
          new Promise<string>((resolve, reject) => {
            const socket = Net.connect(Number(base.port), base.hostname)
            let answer = ""
            socket.on("data", (chunk) => (answer += chunk.toString("latin1")))
            socket.on("end", () => resolve(answer.split("\r\n")[0] ?? ""))
            socket.on("error", reject)
            socket.write(`GET ${target} HTTP/1.1\r\nHost: ${base.host}\r\nConnection: close\r\n\r\n`)
          }))
      expect(yield* statusOf("http://admin.internal.example/v1/tools")).toBe("HTTP/1.1 200 OK")
      expect(yield* statusOf("http://admin.internal.example/metrics")).toBe("HTTP/1.1 200 OK")
      const paths = capturedLogs.slice(mark).flatMap((line) => [...line.matchAll(/"path":"([^"]*)"/g)].map((m) => m[1]))
      // it was logged as "http://admin.internal.example/v1/tools"
      expect(paths).toContain("/v1/tools")
      expect(paths.filter((p) => p?.includes("admin.internal"))).toEqual([])
      // a scheme the router does not read is no route (it was told its percent-escapes do not decode)
      expect(yield* statusOf("HTTP://admin.internal.example/v1/tools")).toBe("HTTP/1.1 404 Not Found")
    }))

  it.effect("a connection's credentials are never repeated in an error, however the path is spelled", () =>
    Effect.gen(function* () {
      const { token } = yield* givenMember()
      for (const path of ["/v1/connections", "/v1/Connections", "/v1/CONNECTIONS", "//v1/connections", "/v1//connections/"]) {
        const answer = yield* dashboard("POST", path, token, { provider: "epsilon", credentials: "SECRET-VALUE" })
        expectEnvelope(answer, { ...invalidRequest, message: "credentials" })
        expect(answer.text, path).not.toContain("SECRET-VALUE")
      }
      // other routes still say what was wrong with the value
      const named = yield* dashboard("POST", "/v1/KEYS", token, { name: 12345 })
      expectEnvelope(named, { ...invalidRequest, message: "12345" })
    }))

  it.effect("a long path parameter still reaches its route, and a message quotes a path only in part", () =>
    Effect.gen(function* () {
      const { key } = yield* givenOrg({ credits: 0 })
      const long = "t".repeat(101)
      const json = { "content-type": "application/json" }
      // an unknown tool never hides a bad key, however long its name
      expectEnvelope(yield* request(`/v1/${long}`, { body: "{}", headers: { ...json, "x-api-key": "tg_nope" } }), invalidKey)
      expectEnvelope(yield* request(`/v1/${long}`, { body: "{}", headers: { ...json, "x-api-key": key } }), unknownTool)
      expectEnvelope(yield* request(`/v1/artifacts/art_${"a".repeat(200)}`, { method: "GET", headers: { "x-api-key": key } }), notFound)
      // a 12 KB path: found where it leads, and no answer quotes it whole
      const huge = "p".repeat(12 * 1024)
      for (const answer of [
        yield* request(`/v1/${huge}`, { body: "{}", headers: { ...json, "x-api-key": key } }),
        yield* request(`/v1/artifacts/${huge}`, { method: "GET", headers: { "x-api-key": key } }),
        yield* request(`/v1/nothing/${huge}`, { method: "GET" }),
        yield* request(`/v1/artifacts/${huge}`, { method: "DELETE", headers: { "x-api-key": key } })
      ]) {
        expect(answer.status).toBeGreaterThanOrEqual(400)
        expect(answer.status).toBeLessThan(500)
        expect(answer.text.length).toBeLessThan(1_000)
      }
      expectEnvelope(yield* request(`/v1/nothing/${huge}`, { method: "GET" }), { ...notFound, message: "…" })
    }))

  it.effect("a body is JSON in UTF-8: another charset is 415, bytes that are not UTF-8 are malformed_json", () =>
    Effect.gen(function* () {
      const { key } = yield* givenOrg()
      const body = JSON.stringify({ q: "Berlin" })
      const as = (contentType: string) => request("/v1/weather", { body, headers: { "x-api-key": key, "content-type": contentType } })
      for (const charset of ["iso-8859-1", "utf-16", "\"utf-16le\"", "us-ascii"]) {
        expectEnvelope(yield* as(`application/json; charset=${charset}`), { ...unsupported, message: "UTF-8" })
      }
      for (const charset of ["utf-8", "UTF-8", "\"utf-8\"", "utf8"]) {
        expect((yield* as(`application/json;charset=${charset}`)).status, charset).toBe(200)
      }
      const headers = { "content-type": "application/json", "x-api-key": key }
      // "\xff" and a lone continuation byte: not UTF-8, whether read as bytes (small, with a length), streamed
      // (chunked, or large), or cut inside a character at the end
      const bad = (inside: ReadonlyArray<number>, pad = 0) =>
        new Uint8Array([...new TextEncoder().encode(`{"q":"${" ".repeat(pad)}`), ...inside, 0x22, 0x7d])
      for (const bytes of [bad([0xff]), bad([0x80]), bad([0xc3, 0x28]), bad([0xff], 100_000)]) {
        expectEnvelope(yield* requestChunked("/v1/weather", [bytes], { ...headers, "content-length": String(bytes.length) }), malformed)
        expectEnvelope(yield* requestChunked("/v1/weather", [bytes.subarray(0, 4), bytes.subarray(4)], headers), malformed)
      }
      const cut = new TextEncoder().encode(`{"q":"Berlin"}`.padEnd(70_000, " "))
      expectEnvelope(
        yield* requestChunked("/v1/weather", [cut, new Uint8Array([0xe2, 0x9c])], headers),
        malformed
      )
      // a character split between two chunks is still one character
      const split = new TextEncoder().encode(JSON.stringify({ q: "Zürich" }))
      const u = split.indexOf(0xc3)
      expectEnvelope(
        yield* requestChunked("/v1/weather", [split.subarray(0, u + 1), split.subarray(u + 1)], headers, 30),
        { ...invalidRequest, message: "Zürich" }
      )
    }))

  it.effect("headers that never end are answered 408 request_timeout; a connection that sends nothing is closed", () =>
    Effect.gen(function* () {
      const port = Number(new URL(yield* baseUrl).port)
      const hangAround = (first: string) =>
        Effect.async<{ readonly closedAfterMs: number; readonly text: string }>((resume) => {
          const started = Date.now()
          let text = ""
          const socket = Net.connect(port, "127.0.0.1", () => {
            if (first !== "") socket.write(first)
          })
          socket.on("data", (d: Buffer) => (text += d.toString()))
          socket.on("close", () => resume(Effect.succeed({ closedAfterMs: Date.now() - started, text })))
          socket.on("error", () => undefined)
        }).pipe(Effect.timeout("8 seconds"))
      const [partial, silent] = yield* Effect.all(
        [hangAround("POST /v1/weather HTTP/1.1\r\nHost: x\r\n"), hangAround("")],
        { concurrency: 2 }
      )
      expect(partial.text).toMatch(/^HTTP\/1\.1 408/)
      expect(partial.text).toMatch(/x-request-id: req_/)
      expect(partial.text).toMatch(/connection: close/i)
      expect(JSON.parse(partial.text.slice(partial.text.indexOf("\r\n\r\n") + 4))).toEqual({
        error: { type: "timeout", code: "request_timeout", message: expect.any(String), retryable: true, billable: false }
      })
      expect(partial.closedAfterMs).toBeLessThan(4_000)
      expect(silent.text).toBe("")
      expect(silent.closedAfterMs).toBeLessThan(4_000)
    }), 30_000)

  it.effect("pipelined requests are answered in order, one at a time; those behind an answer the client never reads are let go when it hangs up", () =>
    Effect.gen(function* () {
      const port = Number(new URL(yield* baseUrl).port)
      // a client that pipelines, and reads: every answer, in order
      const answers = yield* Effect.async<string>((resume) => {
        let text = ""
        const socket = Net.connect(port, "127.0.0.1", () => {
          socket.write("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/nothing HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        })
        socket.on("data", (d: Buffer) => (text += d.toString()))
        socket.on("close", () => resume(Effect.succeed(text)))
        socket.on("error", () => undefined)
      }).pipe(Effect.timeout("8 seconds"))
      expect([...answers.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => m[1])).toEqual(["200", "404", "200"])

      // five clients without a key pipeline 2,000 catalog requests each (about 42 KB an answer), read nothing, and
      // hang up: the answers behind the first unread one held their fibers and bodies for good (about 80 MB a client)
      const flood = Effect.async<void>((resume) => {
        const socket = Net.connect(port, "127.0.0.1", () => {
          socket.pause()
          socket.write("GET /v1/tools HTTP/1.1\r\nHost: x\r\n\r\n".repeat(2_000))
          setTimeout(() => {
            socket.destroy()
            resume(Effect.void)
          }, 1_000)
        })
        socket.on("error", () => undefined)
      })
      collectGarbage()
      const before = process.memoryUsage()
      yield* Effect.all(Array.from({ length: 5 }, () => flood), { concurrency: 5 })
      yield* Effect.sleep("500 millis")
      collectGarbage()
      const after = process.memoryUsage()
      const held = after.heapUsed + after.external - before.heapUsed - before.external
      expect(held, `${Math.round(held / 2 ** 20)} MB held`).toBeLessThan(40 * 2 ** 20)
      expect((yield* request("/healthz", { method: "GET" })).status).toBe(200)
    }), 30_000)

  it.effect("a pipelined request whose body times out while it waits is refused after the answer before it, never in its place", () =>
    Effect.gen(function* () {
      const port = Number(new URL(yield* baseUrl).port)
      const { key } = yield* givenOrg({ credits: 10 })
      const u = yield* TestUpstreams
      // the first call takes long (its provider), past this server's 1 s request timeout; the second, pipelined behind
      // it with a 200 KB body nobody reads while it waits, times out meanwhile
      u.openMeteo.fault({ delayMs: 2_000, times: 1 })
      const first = JSON.stringify({ lat: 52.52, lon: 13.41 })
      const text = yield* Effect.async<string>((resume) => {
        let text = ""
        const socket = Net.connect(port, "127.0.0.1", () => {
          socket.write(`POST /v1/weather HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-API-Key: ${key}\r\nContent-Length: ${first.length}\r\n\r\n${first}`)
          socket.write(`POST /v1/weather HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-API-Key: ${key}\r\nContent-Length: 200000\r\n\r\n${" ".repeat(200_000)}`)
        })
        socket.on("data", (d: Buffer) => (text += d.toString()))
        socket.on("close", () => resume(Effect.succeed(text)))
        socket.on("error", () => undefined)
      }).pipe(Effect.timeout("10 seconds"))
      u.openMeteo.fault()
      const answers = [...text.matchAll(/HTTP\/1\.1 (\d{3}) [^\r]*\r\n(?:[^\r]+\r\n)*?x-request-id: (req_\w+)/gi)].map((m) => [m[1], m[2]])
      // the first answered as its call ended (its provider's deadline here is shorter than 2 s: 504), then the 408
      expect(answers.map(([status]) => status)).toEqual([expect.not.stringMatching(/^408$/), "408"])
      // each under its own request id
      expect(answers[0]?.[1]).not.toBe(answers[1]?.[1])
    }), 30_000)

  it.effect("Expect: 100-continue is answered 100 only once the key is valid: without one, 401 at once and the body is never asked for", () =>
    Effect.gen(function* () {
      const port = Number(new URL(yield* baseUrl).port)
      const { key } = yield* givenOrg({ credits: 10 })
      // a client as RFC 9110 §10.1.1 has it: headers, then the body only after 100 Continue
      const expecting = (path: string, headers: Record<string, string>, body: string) =>
        Effect.async<{ readonly first: string; readonly text: string }>((resume) => {
          let text = ""
          let sent = false
          const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join("")
          const socket = Net.connect(port, "127.0.0.1", () => {
            socket.write(
              `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
                `Expect: 100-continue\r\nConnection: close\r\n${lines}\r\n`
            )
          })
          socket.on("data", (d: Buffer) => {
            text += d.toString()
            if (!sent && text.startsWith("HTTP/1.1 100 Continue\r\n\r\n")) {
              sent = true
              socket.write(body)
            }
          })
          socket.on("close", () => resume(Effect.succeed({ first: text.slice(0, text.indexOf("\r\n")), text })))
          socket.on("error", () => undefined)
        }).pipe(Effect.timeout("8 seconds"))
      const body = JSON.stringify({ q: "Berlin" })
      for (const headers of [{}, { "x-api-key": "tg_000000000000000000000000000000ff" }]) {
        for (const path of ["/v1/weather", "/mcp"]) {
          const refused = yield* expecting(path, headers, body)
          expect(refused.first, `${path} ${JSON.stringify(headers)}`).toBe("HTTP/1.1 401 Unauthorized")
          expect(refused.text).not.toContain("100 Continue")
          expect(JSON.parse(refused.text.slice(refused.text.indexOf("\r\n\r\n") + 4))).toMatchObject({ error: { code: "invalid_key" } })
        }
      }
      const accepted = yield* expecting("/v1/weather", { "x-api-key": key }, body)
      expect(accepted.first).toBe("HTTP/1.1 100 Continue")
      expect(accepted.text.slice(accepted.text.indexOf("\r\n\r\n") + 4)).toMatch(/^HTTP\/1\.1 200 OK\r\n/)
    }), 30_000)

  it.effect("a validation message quotes a bad value only in part", () =>
    Effect.gen(function* () {
      const { key } = yield* givenOrg()
      const headers = { "content-type": "application/json", "x-api-key": key }
      const huge = Array.from({ length: 300_000 }, () => 1)
      const answers = [
        yield* request("/v1/weather", { body: JSON.stringify({ q: "x", lat: huge }), headers }),
        yield* request("/v1/weather", { body: JSON.stringify({ q: "x".repeat(200_000), lat: "y".repeat(200_000) }), headers }),
        yield* request("/v1/weather", { body: JSON.stringify({ q: "x", ["k".repeat(100_000)]: 1 }), headers })
      ]
      for (const answer of answers) {
        expectEnvelope(answer, { ...invalidRequest, message: "…" })
        expect(answer.text.length).toBeLessThan(2_000)
      }
      for (const answer of answers.slice(0, 2)) expectEnvelope(answer, { ...invalidRequest, message: "lat" })
      // through /v1/run (the input decoded by the tool's schema in the pipeline, not by the route's), the same
      const run = yield* request("/v1/run", { body: JSON.stringify({ tool: "weather", input: { q: "x", lat: "y".repeat(60_000) } }), headers })
      expectEnvelope(run, { ...invalidRequest, message: "input.lat: Expected number, actual \"yyy" })
      expect(run.text.length).toBeLessThan(2_000)
    }))

  it.effect("a provider's answer that cannot be read is quoted only in part in normalization_failed", () =>
    Effect.gen(function* () {
      const { key } = yield* givenOrg()
      const u = yield* TestUpstreams
      // Open-Meteo's forecast with 60,000 characters where the temperature's number goes
      const forecast = forecastBody(52.52, 13.41)
      u.openMeteo.fault({ text: JSON.stringify({ ...forecast, current: { ...forecast.current, temperature_2m: "9".repeat(60_000) } }), times: 1 })
      const answer = yield* request("/v1/weather", { body: JSON.stringify({ lat: 52.52, lon: 13.41 }), headers: { "content-type": "application/json", "x-api-key": key } })
      u.openMeteo.fault()
      expectEnvelope(answer, { status: 502, type: "normalization", code: "normalization_failed", retryable: false, billable: true, message: "current.temperature_2m: Expected number, actual \"999" })
      expectEnvelope(answer, { status: 502, type: "normalization", code: "normalization_failed", retryable: false, billable: true, message: "…" })
      expect(answer.text.length).toBeLessThan(2_000)
    }))

  it.effect("a key revoked elsewhere while cached here is refused without its rate limit", () =>
    Effect.gen(function* () {
      const { orgId } = yield* givenOrg()
      const created = yield* Effect.orDie(Effect.flatMap(KeyStore, (keys) =>
        keys.create(orgId, { name: "limited", rateLimit: { perSecond: 50, burst: 50 } })))
      const key = Redacted.value(created.key)
      const headers = { "content-type": "application/json", "x-api-key": key }
      // a refusal to the key as it is: with its rate limit (and the key now in this process's cache)
      const before = yield* request("/v1/weather", { body: "{}", headers })
      expectEnvelope(before, invalidRequest)
      expect(before.headers.get("ratelimit-policy")).toBe(`"key";q=50;w=1`)
      // another process revokes it: this one still has it cached
      const sql = yield* SqlClient.SqlClient
      yield* Effect.orDie(sql`UPDATE api_keys SET revoked_at = now() WHERE id = ${created.id}`)
      const after = yield* request("/v1/weather", { body: "{}", headers })
      expectEnvelope(after, invalidKey)
      expect(after.headers.get("ratelimit-policy")).toBeNull()
      expect(after.headers.get("ratelimit")).toBeNull()
    }))
})
