/**
 * Hostile input, drawn at random: bodies from every tool's own Schema (`Arbitrary`), arbitrary JSON and
 * arbitrary bytes, thousands of requests across every tool endpoint — never a 5xx, every failure a valid
 * envelope. Plus what a fuzzer does not find: a body over the limit refused without being read, invalid
 * UTF-8, slow clients (headers, body) cut off, and many idle connections that do not stop the server.
 */
import { expect, layer } from "@effect/vitest"
import { Arbitrary, Effect, FastCheck as fc, Schema } from "effect"
import * as Net from "node:net"
import { envelopeOf } from "../src/domain/errors.js"
import { catalog, toolNames } from "../src/domain/tools.js"
import { baseUrl, givenOrg, request } from "./support/gateway.js"
import { gatewayLayer } from "./support/gateway.js"

const codes = new Set(Object.values(envelopeOf).map((e) => e.code))

const Envelope = Schema.Struct({
  error: Schema.Struct({
    type: Schema.String,
    code: Schema.String,
    message: Schema.String.pipe(Schema.minLength(1)),
    retryable: Schema.Boolean,
    billable: Schema.Boolean
  })
})

interface Seen {
  requests: number
  byStatus: Record<string, number>
}

/** One request: below 500, and an envelope with a known code whenever it is not a 200. */
const check = (seen: Seen, tool: string, body: string | Uint8Array, key: string, contentType = "application/json") =>
  Effect.gen(function* () {
    const base = yield* baseUrl
    const result = yield* Effect.promise(async () => {
      const response = await fetch(`${base}/v1/${tool}`, {
        method: "POST",
        headers: { "content-type": contentType, "x-api-key": key },
        body
      })
      return { status: response.status, text: await response.text(), id: response.headers.get("x-request-id") }
    })
    seen.requests++
    seen.byStatus[result.status] = (seen.byStatus[result.status] ?? 0) + 1
    const shown = typeof body === "string" ? body.slice(0, 200) : `${body.length} bytes`
    expect(result.status, `${tool} ${shown} → ${result.text}`).toBeLessThan(500)
    expect(result.id).toMatch(/^req_/)
    if (result.status !== 200) {
      const parsed = Schema.decodeUnknownEither(Schema.parseJson(Envelope))(result.text)
      expect(parsed._tag, `${tool} ${shown} → ${result.text}`).toBe("Right")
      if (parsed._tag === "Right") expect(codes.has(parsed.right.error.code), parsed.right.error.code).toBe(true)
    }
  })

const samples = <A>(arbitrary: fc.Arbitrary<A>, n: number, seed: number) => fc.sample(arbitrary, { numRuns: n, seed })

/**
 * Bodies drawn from a tool's input Schema, encoded as the wire has them. A schema that admits only the
 * empty object (a record of `never`) has no arbitrary: its one valid body is `{}`.
 */
const drawn = (schema: Schema.Schema.AnyNoContext, n: number, seed: number): ReadonlyArray<string> => {
  try {
    return samples(Arbitrary.make(schema), n, seed).map((value: unknown) => JSON.stringify(Schema.encodeUnknownSync(schema)(value)))
  } catch {
    return ["{}"]
  }
}

layer(gatewayLayer({ server: { maxBodyBytes: 64 * 1024, headersTimeoutMs: 500, requestTimeoutMs: 1_000, keepAliveTimeoutMs: 1_000 } }), {
  excludeTestServices: true
})("hostile input", (it) => {
  it.effect("bodies drawn from every tool's Schema, arbitrary JSON and arbitrary bytes: no 5xx, every failure an envelope", () =>
    Effect.gen(function* () {
      // no credits: a valid body is answered 402 (or credential_required, beta_unavailable) and no provider
      // is called; the point is what the gateway does with the input
      const { key } = yield* givenOrg({ credits: 0 })
      const seen: Seen = { requests: 0, byStatus: {} }
      let seed = 42
      const bodies: Array<{ tool: string; body: string | Uint8Array; contentType?: string }> = []
      for (const tool of toolNames) {
        const valid = drawn(catalog[tool].input, 60, seed++)
        for (const body of valid) bodies.push({ tool, body })
        // the same inputs through POST /v1/run, and a run of a tool that does not exist
        for (const body of valid.slice(0, 10)) bodies.push({ tool: "run", body: `{"tool":${JSON.stringify(tool)},"input":${body}}` })
        bodies.push({ tool: "run", body: `{"tool":"${tool}_nope","input":{}}` })
        for (const value of samples(fc.jsonValue({ maxDepth: 4 }), 30, seed++)) bodies.push({ tool, body: JSON.stringify(value) })
        for (const value of samples(fc.uint8Array({ maxLength: 300 }), 10, seed++)) bodies.push({ tool, body: value })
        for (const value of samples(fc.string({ maxLength: 200 }), 5, seed++)) bodies.push({ tool, body: value, contentType: "text/plain" })
      }
      yield* Effect.forEach(bodies, (b) => check(seen, b.tool, b.body, key, b.contentType), { concurrency: 8, discard: true })
      expect(seen.requests).toBeGreaterThanOrEqual(2_000)
      console.log(`hostile input: ${seen.requests} requests over ${toolNames.length} tools, by status ${JSON.stringify(seen.byStatus)}`)
      // the Schema-drawn bodies are valid: they get past validation (402 and the like), not 400
      expect(seen.byStatus["402"] ?? 0).toBeGreaterThan(toolNames.length * 5)
    }), 180_000)

  it.effect("invalid UTF-8 and deep nesting are malformed or invalid input, never a crash", () =>
    Effect.gen(function* () {
      const { key } = yield* givenOrg({ credits: 0 })
      const seen: Seen = { requests: 0, byStatus: {} }
      yield* check(seen, "weather", new Uint8Array([0x7b, 0x22, 0x71, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0xc3, 0x28, 0x22, 0x7d]), key)
      yield* check(seen, "weather", "[".repeat(100_000), key)
      yield* check(seen, "weather", `${"{\"a\":".repeat(5_000)}1${"}".repeat(5_000)}`, key)
      yield* check(seen, "weather", "\u0000\u0000", key)
      expect(Object.keys(seen.byStatus).every((s) => s.startsWith("4"))).toBe(true)
    }))

  it.effect("a body over the limit is refused with 413 before the client has sent it", () =>
    Effect.gen(function* () {
      const { key } = yield* givenOrg()
      const port = Number(new URL(yield* baseUrl).port)
      // announce 50 MB, send 128 KB, and wait: the answer comes without the rest
      const answer = yield* Effect.async<string>((resume) => {
        const socket = Net.connect(port, "127.0.0.1", () => {
          socket.write(
            `POST /v1/weather HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-API-Key: ${key}\r\n` +
              `Content-Length: ${50 * 1024 * 1024}\r\n\r\n`
          )
          socket.write(Buffer.alloc(128 * 1024, 0x20))
        })
        let text = ""
        socket.on("data", (d: Buffer) => {
          text += d.toString()
          if (text.includes("\r\n\r\n") && text.includes("}}")) {
            socket.destroy()
            resume(Effect.succeed(text))
          }
        })
        socket.on("error", () => resume(Effect.succeed(text)))
      }).pipe(Effect.timeout("5 seconds"))
      expect(answer).toMatch(/^HTTP\/1\.1 413/)
      expect(answer).toContain(`"code":"payload_too_large"`)
    }))

  it.effect("slow clients: headers that never end, a body that never comes — cut off, and the server still answers", () =>
    Effect.gen(function* () {
      const { key } = yield* givenOrg()
      const port = Number(new URL(yield* baseUrl).port)
      const hangAround = (first: string) =>
        Effect.async<{ readonly closedAfterMs: number; readonly text: string }>((resume) => {
          const started = Date.now()
          let text = ""
          const socket = Net.connect(port, "127.0.0.1", () => socket.write(first))
          socket.on("data", (d: Buffer) => (text += d.toString()))
          socket.on("close", () => resume(Effect.succeed({ closedAfterMs: Date.now() - started, text })))
          socket.on("error", () => undefined)
        }).pipe(Effect.timeout("8 seconds"))
      const [headers, body] = yield* Effect.all(
        [
          hangAround("POST /v1/weather HTTP/1.1\r\nHost: x\r\nX-API-Key: "),
          hangAround(
            `POST /v1/weather HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-API-Key: ${key}\r\nContent-Length: 100\r\n\r\n{"q":`
          )
        ],
        { concurrency: 2 }
      )
      expect(headers.closedAfterMs).toBeLessThan(4_000)
      expect(body.closedAfterMs).toBeLessThan(4_000)
      // the body that never came: Node's request timeout, answered with the envelope
      expect(body.text).toMatch(/^HTTP\/1\.1 408/)
      expect(body.text).toContain(`"code":"request_timeout"`)
      expect(body.text).toMatch(/x-request-id: req_/)
      expect((yield* request("/healthz", { method: "GET" })).status).toBe(200)
    }), 30_000)

  it.effect("many idle connections do not stop the server, and are closed after the timeouts", () =>
    Effect.gen(function* () {
      const port = Number(new URL(yield* baseUrl).port)
      const sockets = yield* Effect.forEach(
        Array.from({ length: 300 }),
        () =>
          Effect.async<Net.Socket>((resume) => {
            const socket = Net.connect(port, "127.0.0.1", () => resume(Effect.succeed(socket)))
            socket.on("error", () => undefined)
          }),
        { concurrency: 50 }
      )
      const { key } = yield* givenOrg()
      const started = Date.now()
      const during = yield* request("/v1/weather", { body: JSON.stringify({ q: "Berlin" }), headers: { "content-type": "application/json", "x-api-key": key } })
      expect(during.status).toBe(200)
      expect(Date.now() - started).toBeLessThan(2_000)
      yield* Effect.sleep("3 seconds")
      const open = sockets.filter((s) => !s.destroyed && s.readyState === "open").length
      for (const s of sockets) s.destroy()
      expect(open).toBe(0)
    }), 30_000)

  it.effect("what Node refuses before the app — unparseable HTTP, oversized headers — is the envelope with a request id", () =>
    Effect.gen(function* () {
      const port = Number(new URL(yield* baseUrl).port)
      const exchange = (raw: string) =>
        Effect.async<string>((resume) => {
          let text = ""
          const socket = Net.connect(port, "127.0.0.1", () => socket.write(raw))
          socket.on("data", (d: Buffer) => (text += d.toString()))
          socket.on("close", () => resume(Effect.succeed(text)))
          socket.on("error", () => undefined)
        }).pipe(Effect.timeout("5 seconds"))
      const garbage = yield* exchange("HELLO THERE\r\n\r\n")
      expect(garbage).toMatch(/^HTTP\/1\.1 400/)
      const badLength = yield* exchange("POST /v1/weather HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n")
      expect(badLength).toMatch(/^HTTP\/1\.1 400/)
      const huge = yield* exchange(`GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`)
      expect(huge).toMatch(/^HTTP\/1\.1 431/)
      for (const answer of [garbage, badLength, huge]) {
        expect(answer).toMatch(/x-request-id: req_\w+/)
        const body = JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4))
        expect(body).toEqual({
          error: { type: "validation", code: "invalid_request", message: expect.any(String), retryable: false, billable: false }
        })
      }
    }))
})
