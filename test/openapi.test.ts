/**
 * The API describes itself: `GET /openapi.json` is a valid OpenAPI 3.1 document with every path of the
 * contract, the envelope as every 4xx's schema, both security schemes and examples; `GET /docs` renders the
 * reference in headless Chromium with every other host blocked; the typed client decodes envelopes back into
 * the error classes.
 */
import { expect, layer } from "@effect/vitest"
import { Validator } from "@seriousme/openapi-schema-validator"
import { Effect, Schema } from "effect"
import * as Fs from "node:fs"
import { chromium } from "playwright-core"
import { InsufficientCredits, ToolGatewayClient } from "tool-gateway/client"
import { toolNames } from "../src/domain/tools.js"
import { baseUrl, gatewayLayer, givenOrg, request } from "./support/gateway.js"

const Json = Schema.Record({ key: Schema.String, value: Schema.Unknown })
const obj = (u: unknown): Record<string, unknown> => Schema.decodeUnknownSync(Json)(u)

const specPaths = [
  ...toolNames.map((t) => `/v1/${t}`),
  "/v1/run",
  "/v1/connections"
]

const CHROMIUM = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find((p) => Fs.existsSync(p))

layer(gatewayLayer(), { excludeTestServices: true })("self-description", (it) => {
  it.effect("GET /openapi.json is a valid OpenAPI 3.1 document of the whole API", () =>
    Effect.gen(function* () {
      const result = yield* request("/openapi.json", { method: "GET" })
      expect(result.status).toBe(200)
      const spec = obj(result.body)
      expect(spec["openapi"]).toBe("3.1.0")
      const validation = yield* Effect.promise(() => new Validator().validate(spec))
      expect(validation.errors ?? []).toEqual([])
      expect(validation.valid).toBe(true)

      const paths = obj(spec["paths"])
      for (const path of specPaths) expect(Object.keys(paths), path).toContain(path)
      const components = obj(obj(spec["components"])["securitySchemes"])
      expect(components).toMatchObject({
        apiKey: { type: "apiKey", in: "header", name: "X-API-Key" },
        idToken: { type: "http", scheme: "bearer" }
      })
      const text = JSON.stringify(spec)
      expect(text).not.toContain("HttpApiDecodeError")

      // every 4xx of every operation is the envelope, with an example
      const schemas = obj(obj(spec["components"])["schemas"])
      for (const [path, item] of Object.entries(paths)) {
        for (const [method, operation] of Object.entries(obj(item))) {
          for (const [status, response] of Object.entries(obj(obj(operation)["responses"]))) {
            if (!status.startsWith("4")) continue
            const json = obj(obj(obj(response)["content"])["application/json"])
            const schema = obj(json["schema"])
            const refs = (Array.isArray(schema["anyOf"]) ? schema["anyOf"] : [schema]).map((r) => String(obj(r)["$ref"]))
            for (const ref of refs) {
              const name = ref.replace("#/components/schemas/", "")
              expect(ref, `${method} ${path} ${status}`).toMatch(/^#\/components\/schemas\/\w+Error$/)
              const envelope = obj(schemas[name])
              expect(obj(obj(envelope["properties"])["error"])["properties"], name).toBeDefined()
            }
            expect(obj(json["example"])["error"], `${method} ${path} ${status}`).toBeDefined()
          }
        }
      }
      // tool operations: input and output schemas, an example body, the API key
      const weather = obj(obj(paths["/v1/weather"])["post"])
      expect(weather["security"]).toEqual([{ apiKey: [] }])
      expect(obj(obj(obj(weather["requestBody"])["content"])["application/json"])["example"]).toEqual({ q: "Berlin" })
      expect(JSON.stringify(obj(weather["responses"])["200"])).toContain("WeatherOutput")
      expect(obj(obj(paths["/v1/connections"])["post"])["security"]).toEqual([{ idToken: [] }])
    }))

  it.effect("GET /docs renders offline in headless Chromium and shows the tools", () =>
    Effect.gen(function* () {
      if (CHROMIUM === undefined) {
        console.log("skipped: no Chromium at /usr/bin/chromium (install Debian's chromium; .ci/run does)")
        return
      }
      const base = yield* baseUrl
      const page = yield* Effect.acquireRelease(
        Effect.promise(() =>
          chromium.launch({
            executablePath: CHROMIUM,
            args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"]
          })
        ),
        (browser) => Effect.promise(() => browser.close())
      ).pipe(Effect.flatMap((browser) => Effect.promise(() => browser.newPage())))
      const blocked: Array<string> = []
      yield* Effect.promise(() =>
        page.route("**/*", (route) => {
          const url = route.request().url()
          if (url.startsWith(base) || url.startsWith("data:") || url.startsWith("blob:")) return route.continue()
          blocked.push(url)
          return route.abort()
        })
      )
      const response = yield* Effect.promise(() => page.goto(`${base}/docs`, { waitUntil: "load" }))
      expect(response?.status()).toBe(200)
      // (in the page: strings, as this project type-checks without the DOM)
      yield* Effect.promise(() =>
        page.waitForFunction(
          "document.body.innerText.includes('mobile_app_search') && document.body.innerText.includes('Tool Gateway')",
          undefined,
          { timeout: 30_000 }
        )
      )
      const text = String(yield* Effect.promise(() => page.evaluate("document.body.innerText")))
      for (const tool of ["search", "read", "weather", "mobile_app_search"]) expect(text).toContain(tool)
      expect(yield* Effect.promise(() => page.title())).toBe("Tool Gateway")
      // nothing it needed came from elsewhere: what was blocked was optional (fonts, telemetry)
      expect(blocked.filter((u) => u.endsWith(".js"))).toEqual([])
    }).pipe(Effect.scoped), 60_000)

  it.effect("the typed client (tool-gateway/client) calls tools and decodes a 402 into InsufficientCredits", () =>
    Effect.gen(function* () {
      const { key } = yield* givenOrg({ credits: 1 })
      const layer = ToolGatewayClient.layer({ baseUrl: yield* baseUrl, apiKey: key })
      const result = yield* Effect.gen(function* () {
        const client = yield* ToolGatewayClient
        const weather = yield* client.tools.weather({ payload: { q: "Berlin" }, headers: {} })
        const error = yield* Effect.flip(client.tools.weather({ payload: { q: "Paris" }, headers: {} }))
        const tools = yield* client.catalog.list()
        return { weather, error, tools }
      }).pipe(Effect.provide(layer))
      expect(result.weather.location.name).toBe("Berlin")
      expect(result.error).toBeInstanceOf(InsufficientCredits)
      expect(result.tools.data.map((t) => t.name)).toContain("weather")
    }))
})
