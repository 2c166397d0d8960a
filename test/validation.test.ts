/**
 * Input validation of every tool, as the contract's tables say: required fields, field types, integer
 * ranges, minimum lengths, and extra properties only where allowed. Bad input is a 400 envelope that names
 * the field and costs nothing; valid input gets past validation.
 */
import { describe, expect, layer } from "@effect/vitest"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Effect, Schema } from "effect"
import { isToolName, type ToolName, toolNames } from "../src/domain/tools.js"
import { withBody } from "../src/http/security.js"
import { Connections } from "../src/services/Connections.js"
import { errorOf, expectEnvelope } from "./support/assert.js"
import { books, callTool, gatewayLayer, givenOrg, request, requestChunked, TestUpstreams } from "./support/gateway.js"
import { EPSILON_TOKEN } from "./upstreams/accounts.js"
import { PAGES_HOST } from "./upstreams/pages.js"

interface Case {
  /** A minimal valid input. */
  readonly valid: Readonly<Record<string, unknown>>
  readonly required: ReadonlyArray<string>
  /** A wrong-typed value for each field. */
  readonly wrongTypes: Readonly<Record<string, unknown>>
  readonly extra: "refused" | "allowed"
  /** Field values at and beyond its limits. */
  readonly bounds?: ReadonlyArray<{ readonly field: string; readonly ok: ReadonlyArray<unknown>; readonly bad: ReadonlyArray<unknown> }>
  /** Other valid inputs. */
  readonly alsoValid?: ReadonlyArray<Readonly<Record<string, unknown>>>
}

const cases = (pagesUrl: string): Record<ToolName, Case> => ({
  search: {
    valid: { query: "effect" },
    required: ["query"],
    wrongTypes: { query: 1, max_results: "5" },
    extra: "refused",
    bounds: [{ field: "max_results", ok: [1, 100], bad: [0, 101, 2.5, -1] }]
  },
  read: {
    valid: { url: `${pagesUrl}/plain` },
    required: ["url"],
    wrongTypes: { url: 5, max_chars: "600" },
    extra: "refused",
    bounds: [{ field: "max_chars", ok: [500, 500000], bad: [499, 500001, 600.5, 0] }]
  },
  weather: {
    valid: { q: "Berlin" },
    required: [],
    wrongTypes: { q: 1, lat: "52", lon: true },
    extra: "refused",
    bounds: [
      { field: "lat", ok: [-90, 90], bad: [-90.5, 91] },
      { field: "lon", ok: [-180, 180], bad: [-181, 180.1] }
    ],
    alsoValid: [{ lat: 52.5, lon: 13.4 }, { q: "Paris", lat: 48.8, lon: 2.3 }]
  },
  mobile_app_search: {
    valid: { query: "notes" },
    required: ["query"],
    wrongTypes: { query: [], country: 5, limit: "3" },
    extra: "refused",
    bounds: [{ field: "limit", ok: [1, 50], bad: [0, 51, 1.5] }]
  },
  alpha_search: {
    valid: { query: "x" },
    required: ["query"],
    wrongTypes: { query: 1, numResults: "3", type: 5 },
    extra: "allowed"
  },
  beta_read: {
    valid: { url: "https://example.com" },
    required: ["url"],
    wrongTypes: { url: 1, format: 2 },
    extra: "refused",
    // sent as a header: what a header cannot carry is the caller's 400, not a retryable provider_unavailable
    bounds: [{ field: "format", ok: ["markdown", "html", "text"], bad: ["a\r\nX-Injected: 1", "日本", "a\u0000b", "", "x".repeat(33)] }]
  },
  beta_search: {
    valid: { q: "x" },
    required: ["q"],
    wrongTypes: {
      q: 1,
      page: "1",
      num: "1",
      gl: 1,
      hl: 1,
      location: 1,
      site: 1,
      type: 1,
      filetype: 1,
      intitle: 1,
      loc: 1,
      ext: 1,
      nfpr: "yes"
    },
    extra: "allowed",
    alsoValid: [{ q: "x", site: "example.com" }, { q: "x", site: ["a.com", "b.com"], nfpr: true, page: 2 }],
    // the provider refuses a num outside 0–20
    bounds: [{ field: "num", ok: [0, 20], bad: [21, -1, 2.5] }, { field: "page", ok: [1, 2], bad: [0, -1, 1.5] }]
  },
  gamma_scrape: {
    valid: { url: "https://example.com" },
    required: ["url"],
    wrongTypes: { url: 1, formats: "markdown", onlyMainContent: "yes" },
    extra: "allowed"
  },
  gamma_search: {
    valid: { query: "x" },
    required: ["query"],
    wrongTypes: { query: 1, limit: "2" },
    extra: "allowed",
    // Firecrawl's search takes a limit of 1 to 100 (its API reference)
    bounds: [{ field: "limit", ok: [1, 100], bad: [0, 101, 2.5] }]
  },
  xi_movie: { valid: { id: 550 }, required: ["id"], wrongTypes: { id: "550", append_to_response: 1 }, extra: "refused" },
  delta_post: {
    valid: { text: "hello" },
    required: ["text"],
    wrongTypes: { text: 1, langs: "en", facets: [1], embed: "x", created_at: 1, record: [] },
    extra: "refused",
    // Bluesky's limits, refused before the PDS is asked (it answered a 502 provider_rejected): 300 graphemes (an emoji
    // with its modifiers is one), and atproto's datetime (RFC 3339 with seconds and a time zone)
    bounds: [
      { field: "text", ok: ["x".repeat(300), "👍🏽".repeat(300)], bad: ["x".repeat(301), "👍🏽".repeat(301), "x".repeat(500_000)] },
      {
        field: "created_at",
        ok: ["2026-11-29T12:00:00Z", "2026-11-29T12:00:00.123+01:00"],
        bad: [
          "not a date", "2026-11-29", "2026-11-29T12:00:00", "2026-11-29 12:00:00Z", "2026-13-45T99:00:00Z",
          // what atproto's own check refuses besides (packages/syntax/src/datetime.ts)
          "2026-01-01T00:00:00-00:00", "0001-01-01T00:00:00Z", `2026-01-01T00:00:00.${"1".repeat(21)}Z`
        ]
      }
    ]
  },
  delta_like: { valid: { uri: "at://x", cid: "bafy" }, required: ["uri", "cid"], wrongTypes: { uri: 1, cid: 1 }, extra: "refused" },
  epsilon_request: {
    valid: { path: "/items" },
    required: ["path"],
    wrongTypes: { path: 1, method: "FETCH", query: [], body: "x" },
    extra: "refused",
    // an allowed method in any case (sent upper-case); no other method, in any case
    bounds: [{ field: "method", ok: ["GET", "get", "Post", "dElEtE"], bad: ["TRACE", "trace", "OPTIONS", "get ", "", "poſt", "ＧＥＴ"] }]
  },
  zeta_request: {
    valid: { path: "me" },
    required: ["path"],
    wrongTypes: { path: 1, params: [], version: 1 },
    extra: "refused",
    bounds: [
      // a version is one (as ZETA_API_VERSION is); query parameters go in params, not in the path
      { field: "version", ok: ["v26.0", "v1.0"], bad: ["..", "26.0", "v26", "v26.0/..", "latest", ""] },
      { field: "path", ok: ["me", "me/accounts", "a.b"], bad: ["me?fields=id", "me#x", " "] }
    ]
  },
  eta_personal_bests: {
    valid: { mode: "time" },
    required: ["mode"],
    wrongTypes: { mode: 1, mode2: 1 },
    extra: "refused",
    // Monkeytype's modes (it answered any other with a 422, said as a 502)
    bounds: [{ field: "mode", ok: ["time", "words", "quote", "zen", "custom"], bad: ["bogus", "Time", ""] }]
  },
  // a caller's id or type that is a segment of the provider's path never names another path
  theta_ratings: {
    valid: {},
    required: [],
    wrongTypes: { type: 1, page: "1", limit: "1" },
    extra: "refused",
    bounds: [{ field: "type", ok: ["movies", "episodes"], bad: [".", "..", "x/../..", "..\\x", ""] }]
  },
  iota_delete_service: {
    valid: { service_id: "srv-1" },
    required: ["service_id"],
    wrongTypes: { service_id: 1 },
    extra: "refused",
    bounds: [{ field: "service_id", ok: ["srv-1", "srv...1", ".srv", "..."], bad: [".", "..", "x/../..", "..\\x", ""] }]
  },
  kappa_delete_benefit: {
    valid: { benefit_id: "b-1" },
    required: ["benefit_id"],
    wrongTypes: { benefit_id: 1 },
    extra: "refused",
    bounds: [{ field: "benefit_id", ok: ["b-1", "b..1"], bad: [".", "..", "x/../..", "..\\x", ""] }]
  },
  kappa_ingest_events: {
    valid: { events: [{ name: "signup", customer_id: "c-1" }] },
    required: ["events"],
    wrongTypes: { events: "signup" },
    extra: "refused",
    // each event as Polar takes it: a name, and whose event it is
    bounds: [{
      field: "events",
      ok: [[{ name: "a", customer_id: "c-1" }, { name: "b", external_customer_id: "u-1", metadata: { n: 1 } }]],
      bad: [[], [1], ["x"], [{}], [{ name: "e" }], [{ customer_id: "c-1" }], [{ name: "", customer_id: "c-1" }]]
    }]
  },
  lambda_update_broadcast: {
    valid: { id: "b-1", subject: "March news" },
    required: ["id"],
    wrongTypes: { id: 1, name: 1, segment_id: 1, from: 1, subject: 1, reply_to: "a@example.com", preview_text: 1, html: 1, text: 1, topic_id: 1 },
    extra: "refused",
    alsoValid: [{ id: "b-1", reply_to: [] }, { id: "b-1", topic_id: null }],
    bounds: [{ field: "id", ok: ["b-1", "b.1"], bad: [".", "..", "x/../..", "..\\x", ""] }]
  },
  lambda_batch_emails: {
    valid: { emails: [{ from: "a@example.com", to: "b@example.com", subject: "Hi" }] },
    required: [],
    wrongTypes: {},
    extra: "allowed",
    // one email, not in an array
    alsoValid: [{ from: "a@example.com", to: ["b@example.com"], subject: "Hi", text: "hello" }],
    // Resend's batch: 1 to 100 emails, each with from, to and subject
    bounds: [{
      field: "emails",
      ok: [Array.from({ length: 100 }, () => ({ from: "a@example.com", to: "b@example.com", subject: "Hi" }))],
      bad: [[], "x", [1], [{ from: "a@example.com", to: "b@example.com" }], Array.from({ length: 101 }, () => ({ from: "a@example.com", to: "b@example.com", subject: "Hi" }))]
    }]
  },
  mu_database: {
    valid: { database_id: "d-1" },
    required: ["database_id"],
    wrongTypes: { database_id: 1 },
    extra: "refused",
    bounds: [{ field: "database_id", ok: ["d-1", "d9824bdc-..."], bad: [".", "..", "x/../..", "..\\x", ""] }]
  },
  nu_account: { valid: {}, required: [], wrongTypes: {}, extra: "refused" }
})

const invalid = { status: 400, type: "validation", code: "invalid_request", retryable: false, billable: false } as const
const malformed = { status: 400, type: "validation", code: "malformed_json", retryable: false, billable: false } as const

layer(gatewayLayer({ providers: { ssrfAllow: [PAGES_HOST, "127.0.0.1"] } }), { excludeTestServices: true })("validation", (it) => {
  for (const tool of toolNames) {
    describe(tool, () => {
      it.effect("valid input passes validation", () =>
        Effect.gen(function* () {
          const u = yield* TestUpstreams
          const c = cases(u.pages.url)[tool]
          const { key } = yield* givenOrg({ credits: 1000 })
          for (const input of [c.valid, ...(c.alsoValid ?? [])]) {
            const result = yield* callTool(tool, input, { key })
            const code = errorOf(result)?.code
            expect(code, `${tool} ${JSON.stringify(input)}: ${result.text}`).not.toBe("invalid_request")
            expect(result.status).not.toBe(400)
          }
        }))

      it.effect("each required field is required; each field has its type", () =>
        Effect.gen(function* () {
          const u = yield* TestUpstreams
          const c = cases(u.pages.url)[tool]
          const { key, orgId } = yield* givenOrg({ credits: 10 })
          for (const field of c.required) {
            const { [field]: _, ...without } = c.valid
            const result = yield* callTool(tool, without, { key })
            expectEnvelope(result, { ...invalid, message: field })
          }
          for (const [field, value] of Object.entries(c.wrongTypes)) {
            const result = yield* callTool(tool, { ...c.valid, [field]: value }, { key })
            expectEnvelope(result, { ...invalid, message: field })
          }
          // nothing was reserved or charged for any of it
          expect(yield* books(orgId)).toEqual(expect.objectContaining({ balance: 10, held: 0, holdsByStatus: {} }))
        }))

      it.effect(`extra properties are ${cases("")[tool].extra}`, () =>
        Effect.gen(function* () {
          const u = yield* TestUpstreams
          const c = cases(u.pages.url)[tool]
          const { key } = yield* givenOrg({ credits: 100 })
          const result = yield* callTool(tool, { ...c.valid, surprise_field: true }, { key })
          if (c.extra === "refused") expectEnvelope(result, { ...invalid, message: "surprise_field" })
          else expect(errorOf(result)?.code).not.toBe("invalid_request")
        }))

      const bounds = cases("")[tool].bounds
      if (bounds !== undefined) {
        it.effect("limits", () =>
          Effect.gen(function* () {
            const u = yield* TestUpstreams
            const c = cases(u.pages.url)[tool]
            const { key } = yield* givenOrg({ credits: 1000 })
            for (const { bad, field, ok } of c.bounds ?? []) {
              for (const value of ok) {
                const result = yield* callTool(tool, { ...c.valid, [field]: value }, { key })
                expect(result.status, `${field}=${JSON.stringify(value)}: ${result.text}`).not.toBe(400)
              }
              for (const value of bad) {
                const result = yield* callTool(tool, { ...c.valid, [field]: value }, { key })
                expectEnvelope(result, { ...invalid, message: field })
              }
            }
          }))
      }
    })
  }

  describe("the body", () => {
    it.effect("a refusal says what was expected of a field, never the field's description in its place", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        const { key } = yield* givenOrg({ credits: 10_000 })
        const catalog = yield* request("/v1/tools", { method: "GET" })
        const Catalog = Schema.Struct({
          data: Schema.Array(Schema.Struct({
            name: Schema.String,
            input_schema: Schema.Struct({ properties: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Struct({ description: Schema.optional(Schema.String) }) })) })
          }))
        })
        const wrong: ReadonlyArray<unknown> = [1.5, "x", [], {}, true, -1, 0, [1], [{}], { a: 1 }, null]
        const described: Array<string> = []
        for (const tool of Schema.decodeUnknownSync(Catalog)(catalog.body).data) {
          if (!isToolName(tool.name)) continue
          for (const [field, property] of Object.entries(tool.input_schema.properties ?? {})) {
            const description = property.description
            if (description === undefined) continue
            for (const value of wrong) {
              const result = yield* callTool(tool.name, { ...cases(u.pages.url)[tool.name].valid, [field]: value }, { key })
              const message = errorOf(result)?.message ?? ""
              if (result.status === 400 && message.includes(`Expected ${description.slice(0, 24)}`)) described.push(`${tool.name}: ${message}`)
            }
          }
        }
        expect(described).toEqual([])
      }), 60_000)

    it.effect("weather needs q, or lat and lon together", () =>
      Effect.gen(function* () {
        const { key } = yield* givenOrg()
        for (const input of [{}, { lat: 1 }, { lon: 1 }]) {
          expectEnvelope(yield* callTool("weather", input, { key }), { ...invalid, message: "give either q, or both lat and lon" })
        }
      }))

    it.effect("alpha_search refuses stream: true (Exa's event stream) before any credit is held; stream: false passes", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const { key, orgId } = yield* givenOrg({ credits: 10 })
        const streamed = yield* callTool("alpha_search", { query: "x", stream: true }, { key })
        expectEnvelope(streamed, { ...invalid, message: "stream" })
        expect(u.exa.hits()).toBe(0)
        expect(yield* books(orgId)).toEqual(expect.objectContaining({ balance: 10, held: 0, holdsByStatus: {} }))
        const whole = yield* callTool("alpha_search", { query: "x", stream: false }, { key })
        expect(whole.status, whole.text).toBe(200)
        expect(u.exa.requests[0]?.json).toMatchObject({ query: "x", stream: false })
      }))

    it.effect("lambda_batch_emails says what a batch or an email lacks", () =>
      Effect.gen(function* () {
        const { key } = yield* givenOrg()
        const email = { from: "a@example.com", to: "b@example.com", subject: "Hi" }
        const cases: ReadonlyArray<readonly [unknown, string]> = [
          [{ emails: [] }, "emails: must hold 1 to 100 emails (Resend's batch limit)"],
          [{ emails: Array.from({ length: 101 }, () => email) }, "emails: must hold 1 to 100 emails"],
          [{ emails: [email, { from: "a@example.com", to: "b@example.com" }] }, "emails[1].subject: is missing"],
          [{ from: "a@example.com", to: "b@example.com" }, "emails: is missing: give an array of 1 to 100 emails, or one email with from, to and subject"],
          [{ emails: [{ ...email, to: 1 }] }, "emails[0].to: "]
        ]
        for (const [input, message] of cases) {
          expectEnvelope(yield* callTool("lambda_batch_emails", input, { key }), { ...invalid, message })
        }
      }))

    it.effect("malformed JSON, a non-object body, an empty body, deep nesting", () =>
      Effect.gen(function* () {
        const { key } = yield* givenOrg()
        const headers = { "content-type": "application/json", "x-api-key": key }
        const send = (body: string) => request("/v1/lambda_batch_emails", { body, headers })
        expectEnvelope(yield* send("{\"a\":"), malformed)
        expectEnvelope(yield* send("not json at all"), malformed)
        for (const body of ["[]", "[{\"a\":1}]", "\"text\"", "42", "null", "true"]) {
          expectEnvelope(yield* send(body), { ...invalid, message: "must be a JSON object" })
        }
        expectEnvelope(yield* send(""), { ...invalid, message: "empty" })
        const deep = "{\"a\":".repeat(200) + "1" + "}".repeat(200)
        expectEnvelope(yield* send(deep), { ...invalid, message: "nests deeper" })
      }))

    it.effect("a number JSON cannot carry (1e400) and a key named __proto__ are refused, not passed on changed", () =>
      Effect.gen(function* () {
        const { key, orgId } = yield* givenOrg({ credits: 10 })
        const u = yield* TestUpstreams
        yield* Effect.orDie(Effect.flatMap(Connections, (c) => c.connect(orgId, "epsilon", { base_url: u.rest.url, token: EPSILON_TOKEN }, null)))
        u.rest.reset()
        const headers = { "content-type": "application/json", "x-api-key": key }
        const send = (body: string) => request("/v1/epsilon_request", { body, headers })
        // 1e400 reads as Infinity, which would go out as null; __proto__ as the object's prototype, gone from the body
        const refused: ReadonlyArray<readonly [string, string]> = [
          ['{"method":"POST","path":"/items","body":{"n":1e400}}', "number too large"],
          ['{"method":"POST","path":"/items","body":{"n":-1e400}}', "number too large"],
          ['{"method":"POST","path":"/items","body":{"__proto__":{"admin":true},"a":1}}', "__proto__"],
          ['{"method":"POST","path":"/items","body":{"list":[{"__proto__":1}]}}', "__proto__"]
        ]
        for (const [body, message] of refused) expectEnvelope(yield* send(body), { ...invalid, message })
        expect(u.rest.hits()).toBe(0)
        // a large number JSON can carry goes out as it came
        const fine = yield* send('{"method":"POST","path":"/items","body":{"n":1e300,"proto":"__proto__"}}')
        expect(fine.status).toBe(200)
        expect(u.rest.requests.at(-1)?.json).toEqual({ n: 1e300, proto: "__proto__" })
        expect(yield* books(orgId)).toMatchObject({ held: 0 })
      }))

    it.effect("without Content-Type a body is read as JSON; another media type is 415", () =>
      Effect.gen(function* () {
        const { key } = yield* givenOrg()
        const plain = yield* requestChunked("/v1/weather", [JSON.stringify({ q: "Berlin" })], { "x-api-key": key })
        expect(plain.status).toBe(200)
        const withCharset = yield* request("/v1/weather", {
          body: JSON.stringify({ q: "Berlin" }),
          headers: { "x-api-key": key, "content-type": "application/json; charset=utf-8" }
        })
        expect(withCharset.status).toBe(200)
        expectEnvelope(
          yield* request("/v1/weather", { body: "q=Berlin", headers: { "x-api-key": key, "content-type": "text/plain" } }),
          { status: 415, type: "validation", code: "unsupported_media_type", retryable: false, billable: false }
        )
      }))

    it.effect("a place no geocoder knows is quoted in the refusal as any value sent is: its first 300 characters", () =>
      Effect.gen(function* () {
        const { key } = yield* givenOrg()
        const q = "Q".repeat(200_000)
        const result = yield* callTool("weather", { q }, { key })
        expectEnvelope(result, { ...invalid, message: `No place named "${"Q".repeat(300)}…" was found` })
        expect(result.text.length).toBeLessThan(1_000)
      }))

    it.effect("the body's bytes are read whole as UTF-8; a byte order mark before the JSON is not JSON", () =>
      Effect.gen(function* () {
        const { key } = yield* givenOrg()
        const headers = { "content-type": "application/json", "x-api-key": key }
        // "ü" is two bytes, "✓" three: the tool decodes the name as sent (its answer names it: the fake geocoder knows
        // no Zürich), whether the body is small (read as bytes), large (read as text) or sent without a length (chunked)
        const body = JSON.stringify({ q: "Zürich ✓" })
        const asSent = { ...invalid, message: "No place named \"Zürich ✓\" was found" }
        for (const sent of [body, `${body}${" ".repeat(200_000)}`]) {
          expectEnvelope(yield* request("/v1/weather", { body: sent, headers }), asSent)
        }
        expectEnvelope(yield* requestChunked("/v1/weather", [body.slice(0, 5), body.slice(5)], headers), asSent)
        // a small body with its length, in three writes that split "ü" and "✓" between them
        const bytes = new TextEncoder().encode(body)
        const u = bytes.indexOf(0xc3)
        const check = bytes.indexOf(0xe2)
        expectEnvelope(
          yield* requestChunked("/v1/weather", [bytes.subarray(0, u + 1), bytes.subarray(u + 1, check + 2), bytes.subarray(check + 2)], {
            ...headers,
            "content-length": String(bytes.length)
          }, 30),
          asSent
        )
        expectEnvelope(yield* request("/v1/weather", { body: `\uFEFF${JSON.stringify({ q: "Berlin" })}`, headers }), malformed)
      }))

    it.effect("withBody: the request answers the body the checks read (the parsed object itself) and is otherwise the request", () =>
      Effect.gen(function* () {
        const original = HttpServerRequest.fromWeb(
          new Request("http://gateway.test/v1/weather?x=1", { method: "POST", body: "{\"q\":\"Berlin\"}", headers: { "x-api-key": "k" } })
        )
        const parsed = { q: "Berlin" }
        const request = withBody(original, { text: "{\"q\":\"Berlin\"}", parsed })
        expect(yield* request.json).toBe(parsed)
        expect(yield* request.text).toBe("{\"q\":\"Berlin\"}")
        expect(request.method).toBe("POST")
        expect(request.url).toBe(original.url)
        expect(request.headers["x-api-key"]).toBe("k")
      }))

    it.effect("the key is checked before the body", () =>
      Effect.gen(function* () {
        expectEnvelope(
          yield* request("/v1/weather", { body: "{bad", headers: { "content-type": "application/json" } }),
          { status: 401, type: "auth", code: "invalid_key", retryable: false, billable: false }
        )
      }))

    it.effect("unknown tools and wrong methods", () =>
      Effect.gen(function* () {
        const { key } = yield* givenOrg()
        expectEnvelope(yield* callTool("weather2", { q: "x" }, { key }), { status: 404, type: "not_found", code: "unknown_tool", retryable: false, billable: false })
        for (const method of ["GET", "PUT", "DELETE", "PATCH"]) {
          const result = yield* request("/v1/search", { method, headers: { "x-api-key": key } })
          expectEnvelope(result, { status: 405, type: "not_found", code: "method_not_allowed", retryable: false, billable: false })
          expect(result.headers.get("allow")).toBe("POST")
        }
        // a POST to a route of another method is the method's fault, not an unknown tool's — whatever the credentials,
        // as any method a path does not take: a dashboard user's ID token is not told to send an API key
        const credentials = [{ "x-api-key": key }, { "x-api-key": "tg_not_a_key" }, {}, { authorization: "Bearer eyJhbGciOiJSUzI1NiJ9.e30.c2ln" }]
        for (const path of ["/v1/tools", "/v1/org", "/v1/usage", "/v1/usage/summary"]) {
          for (const given of credentials) {
            const result = yield* request(path, { method: "POST", headers: { ...given, "content-type": "application/json" }, body: "{}" })
            expectEnvelope(result, { status: 405, type: "not_found", code: "method_not_allowed", retryable: false, billable: false })
            expect(result.headers.get("allow"), path).toBe("GET")
          }
        }
        // a HEAD is a GET route's to answer: its credentials are checked, as a GET's
        for (const path of ["/v1/org", "/v1/usage", "/v1/connections"]) {
          const head = yield* request(path, { method: "HEAD", headers: { authorization: "Bearer xyz" } })
          expect(head.status, path).toBe(401)
          expect(head.headers.get("allow"), path).toBeNull()
        }
        // a name that is no route at all: the key first, so an unknown tool never hides a bad key
        expectEnvelope(
          yield* request("/v1/weather2", { method: "POST", headers: { "x-api-key": "tg_not_a_key", "content-type": "application/json" }, body: "{}" }),
          { status: 401, type: "auth", code: "invalid_key", retryable: false, billable: false }
        )
      }))
  })
})
