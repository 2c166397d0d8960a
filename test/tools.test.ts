/**
 * The four curated tools against their real protocols (fake upstreams), with their documented outputs,
 * prices and provider fallback.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { ReadOutput, WeatherOutput } from "../src/domain/schemas.js"
import { NO_DATA } from "../src/testing/openMeteo.js"
import { expectEnvelope, expectOk, expectOwnEncoding } from "./support/assert.js"
import { books, callTool, gatewayLayer, givenOrg, TestUpstreams } from "./support/gateway.js"
import { ARTICLE, FRAGMENTS } from "./upstreams/pages.js"

layer(gatewayLayer(), { excludeTestServices: true })("curated tools", (it) => {
  describe("weather", () => {
    it.effect("geocodes q and answers current weather and seven days", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const { key, orgId } = yield* givenOrg({ credits: 10 })
        const result = yield* callTool("weather", { q: "Berlin" }, { key })
        expectOk(result, 1)
        expect(result.body).toMatchObject({
          provider: "open-meteo",
          location: { name: "Berlin", country: "Germany", latitude: 52.52437, longitude: 13.41053 },
          current: { temperature_c: 4.2, weather_code: 3, description: "Overcast", relative_humidity_pct: 81 },
          daily: expect.arrayContaining([expect.objectContaining({ date: "2026-11-23", description: "Slight rain" })])
        })
        expect(Schema.decodeUnknownSync(WeatherOutput)(result.body).daily).toHaveLength(7)
        // the request the gateway sent upstream
        const geo = u.openMeteo.requests.find((r) => r.path === "/v1/search")
        expect(geo?.query.get("name")).toBe("Berlin")
        const forecast = u.openMeteo.requests.find((r) => r.path === "/v1/forecast")
        expect(forecast?.query.get("latitude")).toBe("52.52437")
        expect(forecast?.query.get("current")).toContain("temperature_2m")
        const b = yield* books(orgId)
        expect(b).toMatchObject({ balance: 9, held: 0, journalSum: 9, pendingHolds: 0 })
      }))

    it.effect("takes coordinates without geocoding", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const { key } = yield* givenOrg()
        const result = yield* callTool("weather", { lat: 48.85, lon: 2.35 }, { key })
        expectOk(result, 1)
        expect(u.openMeteo.hits("/v1/search")).toBe(0)
        expect(result.body).toMatchObject({ location: { latitude: 48.85, longitude: 2.35, name: null } })
      }))

    it.effect("a place Open-Meteo has no current data for answers null for them, not normalization_failed", () =>
      Effect.gen(function* () {
        const { key, orgId } = yield* givenOrg({ credits: 10 })
        const result = yield* callTool("weather", { lat: NO_DATA.latitude, lon: NO_DATA.longitude }, { key })
        expectOk(result, 1)
        expect(result.body).toMatchObject({
          current: {
            time: "2026-11-22T10:00",
            temperature_c: null,
            apparent_temperature_c: null,
            relative_humidity_pct: null,
            precipitation_mm: null,
            wind_speed_kmh: null,
            wind_direction_deg: null,
            weather_code: null,
            description: "Unknown"
          },
          daily: expect.arrayContaining([expect.objectContaining({ date: "2026-11-22", weather_code: 3 })])
        })
        expectOwnEncoding("weather", result)
        expect(yield* books(orgId)).toMatchObject({ balance: 9, held: 0, pendingHolds: 0 })
      }))

    it.effect("an unknown place is invalid_request, not charged", () =>
      Effect.gen(function* () {
        const { key, orgId } = yield* givenOrg({ credits: 5 })
        const result = yield* callTool("weather", { q: "Nowhereville" }, { key })
        expectEnvelope(result, { status: 400, type: "validation", code: "invalid_request", retryable: false, billable: false, message: "Nowhereville" })
        expect(yield* books(orgId)).toMatchObject({ balance: 5, held: 0, pendingHolds: 0 })
      }))
  })

  describe("mobile_app_search", () => {
    it.effect("searches software in the store country with the limit", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const { key } = yield* givenOrg()
        const result = yield* callTool("mobile_app_search", { query: "notes", country: "DE", limit: 2 }, { key })
        expectOk(result, 1)
        const sent = u.itunes.requests[0]
        expect(sent?.query.get("term")).toBe("notes")
        expect(sent?.query.get("country")).toBe("de")
        expect(sent?.query.get("limit")).toBe("2")
        expect(sent?.query.get("entity")).toBe("software")
        expect(result.body).toEqual({
          provider: "itunes",
          query: "notes",
          country: "de",
          results: [
            expect.objectContaining({ id: 1000, name: "notes App 0", developer: "Example Developer", price: 0, genres: ["Productivity", "Utilities"], icon_url: "https://is1-ssl.mzstatic.com/image/512.png" }),
            expect.objectContaining({ id: 1001, price: 2.99, currency: "USD", rating: 4.5, rating_count: 1234 })
          ]
        })
      }))
  })

  describe("read", () => {
    it.effect("extracts the main content of an HTML page as markdown", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        const { key } = yield* givenOrg()
        const result = yield* callTool("read", { url: `${u.pages.url}/article` }, { key })
        expectOk(result)
        const body = Schema.decodeUnknownSync(ReadOutput)(result.body)
        expect(body.provider).toBe("builtin")
        expect(body.title).toBe("The Gateway Article")
        expect(body.content).toContain("# How gateways meter tools")
        expect(body.content).toContain("reserves credits **before** it calls a provider")
        expect(body.content).toMatch(/^-\s+Reserve$/m)
        expect(body.content).not.toContain("tracking")
        expect(body.chars).toBe(body.content.length)
        expect(body.truncated).toBe(false)
        expect(ARTICLE.length).toBeGreaterThan(body.chars)
      }))

    it.effect("cuts content at max_chars and charges by characters delivered", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        const { key, orgId } = yield* givenOrg({ credits: 100 })
        const result = yield* callTool("read", { url: `${u.pages.url}/article`, max_chars: 500 }, { key })
        expectOk(result, 1)
        const body = Schema.decodeUnknownSync(ReadOutput)(result.body)
        expect(body.chars).toBe(500)
        expect(body.content.length).toBe(500)
        expect(body.truncated).toBe(true)
        expect(yield* books(orgId)).toMatchObject({ balance: 99, held: 0 })
      }))

    it.effect("follows redirects, returns plain text and JSON pages as they are", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        const { key } = yield* givenOrg()
        const redirected = yield* callTool("read", { url: `${u.pages.url}/redirect?to=/plain` }, { key })
        expectOk(redirected)
        expect(redirected.body).toMatchObject({ url: `${u.pages.url}/plain`, content: "Just some plain text.", title: null })
        const data = yield* callTool("read", { url: `${u.pages.url}/data.json` }, { key })
        expect(data.body).toMatchObject({ content: "```json\n{\"hello\":\"world\"}\n```" })
      }))

    describe("HTML that is not a whole document is read as the body of one, and charged as any page", () => {
      const cases: ReadonlyArray<readonly [name: string, content: string, title: string | null]> = [
        ["text", "hello world", null],
        ["doctype-text", "hi", null],
        ["paragraph", "hi there", null],
        // Readability writes an h1 as an h2, on any page (its title is shown apart)
        ["heading", "## Title\n\nSome text", null],
        ["minimal", "A page with no html, head or body tag.", "Minimal"],
        // nothing to read is an empty answer, not a failed conversion: the page was fetched, at the least price
        ["empty", "", null],
        ["comment", "", null]
      ]
      for (const [name, content, title] of cases) {
        it.effect(`${name}: ${JSON.stringify(FRAGMENTS[name])} reads as ${JSON.stringify(content)}`, () =>
          Effect.gen(function* () {
            const u = yield* TestUpstreams
            const { key, orgId } = yield* givenOrg({ credits: 10 })
            const result = yield* callTool("read", { url: `${u.pages.url}/fragment/${name}` }, { key })
            expectOk(result, 1)
            expect(result.body).toEqual({
              provider: "builtin",
              url: `${u.pages.url}/fragment/${name}`,
              title,
              content,
              chars: content.length,
              truncated: false,
              artifact: null
            })
            expect(yield* books(orgId)).toMatchObject({ balance: 9, held: 0, pendingHolds: 0 })
          }))
      }
    })

    it.effect("a page the server does not have is provider_rejected with its status", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        const { key, orgId } = yield* givenOrg({ credits: 20 })
        const result = yield* callTool("read", { url: `${u.pages.url}/missing` }, { key })
        expectEnvelope(result, { status: 502, type: "provider", code: "provider_rejected", retryable: false, billable: false, message: "HTTP 404" })
        expect(yield* books(orgId)).toMatchObject({ balance: 20, held: 0, pendingHolds: 0 })
      }))

    it.effect("a binary file is kept as an artifact, not turned into text", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        const { key } = yield* givenOrg()
        const result = yield* callTool("read", { url: `${u.pages.url}/file.bin` }, { key })
        expectOk(result)
        expect(result.body).toMatchObject({ content: "", artifact: { content_type: "application/octet-stream", bytes: 8 } })
      }))
  })

  describe("search", () => {
    it.effect("the first configured provider answers (alpha speaks Exa)", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const { key, orgId } = yield* givenOrg({ credits: 10 })
        const result = yield* callTool("search", { query: "effect ts", max_results: 3 }, { key })
        expectOk(result, 1)
        expect(result.body).toEqual({
          provider: "alpha",
          query: "effect ts",
          results: [0, 1, 2].map((i) => ({
            title: `Exa result ${i} for effect ts`,
            url: `https://example.com/exa/${i}`,
            snippet: `Text of result ${i}.`,
            published_at: `2026-01-0${i + 1}T00:00:00.000Z`
          }))
        })
        const sent = u.exa.requests[0]
        expect(sent?.method).toBe("POST")
        expect(sent?.path).toBe("/search")
        expect(sent?.json).toMatchObject({ query: "effect ts", numResults: 3 })
        expect(u.jina.hits()).toBe(0)
        expect(yield* books(orgId)).toMatchObject({ balance: 9, held: 0 })
      }))

    it.effect("falls back to the next provider on a retryable failure and charges once", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        u.exa.fault({ status: 503 })
        const { key, orgId } = yield* givenOrg({ credits: 10 })
        const result = yield* callTool("search", { query: "fallback" }, { key })
        expectOk(result, 1)
        expect(result.body).toMatchObject({ provider: "beta", results: expect.arrayContaining([expect.objectContaining({ url: "https://example.com/jina/0", snippet: "Description 0", published_at: expect.stringMatching(/^2026-01-0[12]T\d\d:\d\d:\d\d\.\d{3}Z$/) })]) })
        expect(u.exa.hits()).toBeGreaterThanOrEqual(1)
        expect(u.jina.requests[0]?.json).toMatchObject({ q: "fallback" })
        expect(yield* books(orgId)).toMatchObject({ balance: 9, held: 0, pendingHolds: 0 })
        u.resetAll()
      }))

    it.effect("all providers down: the last error, nothing charged", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        u.exa.fault({ status: 503 })
        u.jina.fault({ status: 502 })
        u.firecrawl.fault({ status: 429, headers: { "retry-after": "7" } })
        const { key, orgId } = yield* givenOrg({ credits: 10 })
        const result = yield* callTool("search", { query: "down" }, { key })
        expectEnvelope(result, { status: 502, type: "provider", code: "provider_rate_limited", retryable: true, billable: false })
        expect(result.headers.get("retry-after")).toBe("7")
        expect(u.firecrawl.hits("/v2/search")).toBeGreaterThanOrEqual(1)
        expect(yield* books(orgId)).toMatchObject({ balance: 10, held: 0, pendingHolds: 0 })
        u.resetAll()
      }))

    it.effect("a non-retryable failure does not fall back", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        u.exa.fault({ status: 400, body: { error: "query too long" } })
        const { key } = yield* givenOrg({ credits: 10 })
        const result = yield* callTool("search", { query: "bad" }, { key })
        expectEnvelope(result, { status: 502, type: "provider", code: "provider_rejected", retryable: false, billable: false, message: "query too long" })
        expect(u.jina.hits()).toBe(0)
        u.resetAll()
      }))
  })
})
