/**
 * The served OpenAPI document (`GET /openapi.json`) works with the tools people point at it: Redocly's linter
 * (its recommended rules) finds nothing to report, and the types openapi-typescript makes from it compile
 * and type a tool call and the usage list. It carries nothing of the schema library's own (generated titles
 * and descriptions, `group.endpoint` ids), integer query parameters are integers, every operation has a
 * summary and every tag a description, each tool operation states this gateway's price, and the headers it
 * declares on each response are the ones the gateway sends.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Ajv2020 } from "ajv/dist/2020.js"
import { Effect, Layer, Option, Redacted, Schema } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Url from "node:url"
import openapiTS, { astToString } from "openapi-typescript"
import { inputExamples } from "../src/domain/examples.js"
import { describePrice } from "../src/domain/pricing.js"
import { catalog, toolNames } from "../src/domain/tools.js"
import { KeyStore } from "../src/services/KeyStore.js"
import { errorOf } from "./support/assert.js"
import { callTool, dashboard, gatewayLayer, givenMember, givenOrg, type HttpResult, request, TestUpstreams } from "./support/gateway.js"
import { registerSecret } from "./support/secrets.js"

const Json = Schema.Record({ key: Schema.String, value: Schema.Unknown })
const obj = (u: unknown): Record<string, unknown> => Schema.decodeUnknownSync(Json)(u)
const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

const servedDocument = Effect.map(request("/openapi.json", { method: "GET" }), (result) => {
  expect(result.status).toBe(200)
  return obj(result.body)
})

/** Each operation of the document, with its path and method. */
const operationsOf = (spec: Record<string, unknown>) =>
  Object.entries(obj(spec["paths"])).flatMap(([path, item]) =>
    Object.entries(obj(item)).map(([method, operation]) => ({ path, method, operation: obj(operation) })))

/** Every `key: value` of the document outside examples (data, not schema), with where it is. */
const keywords = (u: unknown, at = "#"): Array<{ readonly at: string; readonly key: string; readonly value: unknown }> => {
  if (Array.isArray(u)) return u.flatMap((v, i) => keywords(v, `${at}/${i}`))
  if (!isRecord(u)) return []
  return Object.entries(u).flatMap(([key, value]) =>
    key === "example" || key === "examples" ? [] : [{ at, key, value }, ...keywords(value, `${at}/${key}`)])
}

const scratch = Effect.acquireRelease(
  Effect.promise(() => Fs.mkdtemp(Path.join(Os.tmpdir(), "tool-gateway-openapi-"))),
  (dir) => Effect.promise(() => Fs.rm(dir, { recursive: true, force: true }))
)

const run = (command: string, args: ReadonlyArray<string>, cwd: string) =>
  Effect.async<{ readonly code: number; readonly stdout: string; readonly stderr: string }>((resume) => {
    ChildProcess.execFile(command, args, {
      cwd,
      timeout: 50_000,
      maxBuffer: 64 * 1024 * 1024,
      // offline: no telemetry, no update check
      env: { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true", DO_NOT_TRACK: "1" }
    }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === "number" ? error.code : -1
      resume(Effect.succeed({ code, stdout, stderr }))
    })
  })

const redocly = Path.resolve("node_modules/@redocly/cli/bin/cli.js")
const tsc = Path.resolve("node_modules/typescript/bin/tsc")

const LintReport = Schema.Struct({
  totals: Schema.Struct({ errors: Schema.Number, warnings: Schema.Number }),
  problems: Schema.Array(Schema.Struct({ ruleId: Schema.String, severity: Schema.String, message: Schema.String }))
})

/** `redocly lint --extends=recommended` on a document: its problems, as one line each. */
const lint = (dir: string, name: string, spec: unknown) =>
  Effect.gen(function* () {
    yield* Effect.promise(() => Fs.writeFile(Path.join(dir, name), JSON.stringify(spec)))
    const result = yield* run(process.execPath, [redocly, "lint", "--extends=recommended", "--format=json", name], dir)
    const report = Schema.decodeUnknownSync(Schema.parseJson(LintReport))(result.stdout.slice(result.stdout.indexOf("{")))
    return { code: result.code, report, problems: report.problems.map((p) => `${p.severity} ${p.ruleId}: ${p.message}`) }
  })

/** The headers a client reads, as the gateway sends them (lower case). */
const TRACKED = ["x-request-id", "x-credits-charged", "idempotent-replayed", "ratelimit", "ratelimit-policy", "retry-after"]

/** The headers the document declares on one response, by lower-case name, with whether each is required. */
const declaredHeaders = (spec: Record<string, unknown>, path: string, method: string, status: number) => {
  const response = obj(obj(obj(obj(obj(spec["paths"])[path])[method])["responses"])[String(status)])
  const components = obj(obj(spec["components"])["headers"])
  const declared = new Map<string, boolean>()
  for (const [name, value] of Object.entries(obj(response["headers"]))) {
    const ref = obj(value)["$ref"]
    const resolved = typeof ref === "string" ? obj(components[ref.replace("#/components/headers/", "")]) : obj(value)
    declared.set(name.toLowerCase(), resolved["required"] === true)
  }
  return declared
}

/**
 * The served document's verdict on a request body of `POST path`: its request schema, with the document's own
 * components, checked by a JSON Schema 2020-12 validator (OpenAPI 3.1's dialect). `true`: the document accepts it.
 */
const documentAccepts = (spec: Record<string, unknown>) => {
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateSchema: false })
  ajv.addSchema(spec, "openapi.json")
  return (path: string, body: unknown): boolean => {
    const pointer = `/paths/${path.replaceAll("/", "~1")}/post/requestBody/content/application~1json/schema`
    return ajv.validate({ $ref: `openapi.json#${pointer}` }, body)
  }
}

/** Request bodies the gateway refuses (400 invalid_request), and ones it takes past validation, by path. */
const verdicts: ReadonlyArray<{ readonly path: string; readonly body: unknown; readonly valid: boolean }> = [
  { path: "/v1/weather", body: {}, valid: false },
  { path: "/v1/weather", body: { lat: 10 }, valid: false },
  { path: "/v1/weather", body: { lon: 10 }, valid: false },
  { path: "/v1/weather", body: { lat: 52.5, lon: 13.4 }, valid: true },
  { path: "/v1/weather", body: { q: "Berlin" }, valid: true },
  { path: "/v1/read", body: { url: "ftp://x" }, valid: false },
  { path: "/v1/read", body: { url: "mailto:a@example.com" }, valid: false },
  { path: "/v1/read", body: { url: "not a url" }, valid: false },
  { path: "/v1/run", body: { tool: "nope", input: {} }, valid: false },
  { path: "/v1/run", body: { tool: "weather", input: { q: "Berlin" } }, valid: true },
  { path: "/v1/gamma_search", body: { query: "x", limit: 0 }, valid: false },
  { path: "/v1/gamma_search", body: { query: "x", limit: 101 }, valid: false },
  { path: "/v1/kappa_ingest_events", body: { events: [{}] }, valid: false },
  { path: "/v1/kappa_ingest_events", body: { events: [{ name: "e" }] }, valid: false },
  { path: "/v1/kappa_ingest_events", body: { events: [{ customer_id: "c-1" }] }, valid: false },
  { path: "/v1/kappa_ingest_events", body: { events: [{ name: "e", customer_id: "c-1" }] }, valid: true },
  { path: "/v1/kappa_ingest_events", body: { events: [{ name: "e", external_customer_id: "u-1", metadata: { n: 1 } }] }, valid: true },
  { path: "/v1/lambda_batch_emails", body: {}, valid: false },
  { path: "/v1/lambda_batch_emails", body: { emails: [] }, valid: false },
  { path: "/v1/lambda_batch_emails", body: { emails: "x" }, valid: false },
  { path: "/v1/lambda_batch_emails", body: { emails: [{ from: "a@example.com", to: "b@example.com" }] }, valid: false },
  {
    path: "/v1/lambda_batch_emails",
    body: { emails: Array.from({ length: 101 }, () => ({ from: "a@example.com", to: "b@example.com", subject: "s" })) },
    valid: false
  },
  { path: "/v1/lambda_batch_emails", body: { emails: [{ from: "a@example.com", to: ["b@example.com"], subject: "s", text: "t" }] }, valid: true },
  { path: "/v1/lambda_batch_emails", body: { from: "a@example.com", to: "b@example.com", subject: "s", html: "<p>t</p>" }, valid: true },
  { path: "/v1/lambda_update_broadcast", body: { id: "b-1" }, valid: false },
  { path: "/v1/lambda_update_broadcast", body: { id: "b-1", subject: "s" }, valid: true },
  { path: "/v1/nu_account", body: { a: 1 }, valid: false },
  // an id that is a segment of the provider's path is never . or .. (nor has such a part between slashes)
  { path: "/v1/iota_delete_service", body: { service_id: ".." }, valid: false },
  { path: "/v1/iota_delete_service", body: { service_id: "srv-1" }, valid: true },
  { path: "/v1/kappa_delete_benefit", body: { benefit_id: "." }, valid: false },
  { path: "/v1/theta_ratings", body: { type: "x/../.." }, valid: false },
  { path: "/v1/theta_ratings", body: { type: "movies" }, valid: true },
  { path: "/v1/lambda_update_broadcast", body: { id: "..\\x", subject: "s" }, valid: false },
  { path: "/v1/mu_database", body: { database_id: "a..b" }, valid: true },
  { path: "/v1/mu_database", body: { database_id: "a/.." }, valid: false },
  { path: "/v1/zeta_request", body: { path: "me", version: ".." }, valid: false },
  { path: "/v1/zeta_request", body: { path: "me", version: "v26.0" }, valid: true },
  { path: "/v1/zeta_request", body: { path: "me?fields=id" }, valid: false }
]

layer(gatewayLayer(), { excludeTestServices: true })("the served OpenAPI document", (it) => {
  it.effect("accepts exactly the request bodies the gateway takes past validation", () =>
    Effect.gen(function* () {
      const accepts = documentAccepts(yield* servedDocument)
      const { key } = yield* givenOrg({ credits: 1000 })
      for (const { path, body, valid } of verdicts) {
        const label = `${path} ${JSON.stringify(body).slice(0, 80)}`
        expect.soft(accepts(path, body), `the document on ${label}`).toBe(valid)
        const answer = errorOf(yield* callTool(path.slice("/v1/".length), body, { key }))
        if (valid) expect.soft(answer?.code, `the gateway on ${label}`).not.toBe("invalid_request")
        else expect.soft(answer?.code, `the gateway on ${label}`).toBe("invalid_request")
      }
      // and every tool's example input is one the document accepts
      for (const tool of toolNames) expect(accepts(`/v1/${tool}`, inputExamples[tool]), tool).toBe(true)
    }))

  it.effect("has no schema-library internals, plain operation ids, integer query parameters, summaries, tag descriptions and a server", () =>
    Effect.gen(function* () {
      const spec = yield* servedDocument
      const text = JSON.stringify(spec)
      // Effect's generated titles and descriptions, and its Int schema, are gone
      for (const internal of ["between(", "greaterThanOrEqualTo(", "maxLength(", "minItems(", "\"title\":\"int\"", "\"title\":\"unknown\"", "an integer", "a string to be decoded into", "#/components/schemas/Int\""]) {
        expect(text).not.toContain(internal)
      }
      const generatedTitles = keywords(spec).filter((k) => k.key === "title" && typeof k.value === "string" && /^[a-z]\w*(\(.*\))?$/.test(k.value))
      expect(generatedTitles).toEqual([])
      const generatedDescriptions = keywords(spec).filter((k) => k.key === "description" && typeof k.value === "string" && /^an? [a-z]/.test(k.value))
      expect(generatedDescriptions).toEqual([])
      // what the project wrote stays, with its keywords
      const schemas = obj(obj(spec["components"])["schemas"])
      const lat = obj(obj(obj(schemas["WeatherInput"])["properties"])["lat"])
      expect(lat).toEqual({ type: "number", description: "Latitude, -90 to 90 (give lat and lon instead of q)", minimum: -90, maximum: 90 })
      const maxResults = obj(obj(obj(schemas["SearchInput"])["properties"])["max_results"])
      expect(maxResults).toMatchObject({ type: "integer", minimum: 1, maximum: 100 })
      expect(String(maxResults["description"])).toContain("Results to return")

      const operations = operationsOf(spec)
      expect(operations.length).toBeGreaterThan(toolNames.length)
      const ids = operations.map(({ operation }) => String(operation["operationId"]))
      for (const id of ids) expect(id).toMatch(/^[a-z][A-Za-z0-9]*$/)
      expect(new Set(ids).size).toBe(ids.length)
      expect(obj(obj(obj(spec["paths"])["/v1/weather"])["post"])["operationId"]).toBe("toolsWeather")
      for (const { method, operation, path } of operations) {
        expect(operation["summary"], `${method} ${path}`).toEqual(expect.stringMatching(/\S/))
      }
      const tags = Schema.decodeUnknownSync(Schema.Array(Schema.Struct({ name: Schema.String, description: Schema.String })))(spec["tags"])
      expect(new Set(operations.flatMap(({ operation }) => Schema.decodeUnknownSync(Schema.Array(Schema.String))(operation["tags"]))))
        .toEqual(new Set(tags.map((t) => t.name)))
      expect(spec["servers"]).toEqual([{ url: "/", description: "This gateway" }])

      // integer query parameters are integers (a cursor is opaque text: up to 18 digits)
      const usage = obj(obj(obj(spec["paths"])["/v1/usage"])["get"])
      const parameters = Schema.decodeUnknownSync(Schema.Array(Json))(usage["parameters"])
      const parameter = (name: string) => obj(parameters.find((p) => p["name"] === name))
      expect(parameter("limit")).toMatchObject({ in: "query", schema: { type: "integer", minimum: 1, maximum: 200 } })
      expect(parameter("cursor")).toMatchObject({ in: "query", schema: { type: "string", pattern: "^\\d{1,16}$" } })
      // the page is JSON; the export is CSV
      expect(Object.keys(obj(obj(obj(usage["responses"])["200"])["content"]))).toEqual(["application/json", "text/csv"])

      // every tool operation says what it costs
      for (const tool of toolNames) {
        const description = String(obj(obj(obj(spec["paths"])[`/v1/${tool}`])["post"])["description"])
        expect(description, tool).toContain(`Price: ${describePrice(catalog[tool].price)}.`)
        expect(description, tool).toContain(catalog[tool].description)
      }
      expect(String(obj(obj(obj(spec["paths"])["/v1/run"])["post"])["description"])).toContain("Price: the price of the tool named in `tool`")
    }))

  it.effect("declares the headers the gateway sends with each answer", () =>
    Effect.gen(function* () {
      const spec = yield* servedDocument
      const u = yield* TestUpstreams
      u.resetAll()
      const answers: Array<{ readonly path: string; readonly method: string; readonly result: HttpResult }> = []
      const post = (tool: string, result: HttpResult) => answers.push({ path: `/v1/${tool}`, method: "post", result })

      const { key } = yield* givenOrg({ credits: 1 })
      post("weather", yield* callTool("weather", { q: "Berlin" }, { key, idempotencyKey: "headers-1" }))
      post("weather", yield* callTool("weather", { q: "Berlin" }, { key, idempotencyKey: "headers-1" }))
      post("weather", yield* callTool("weather", { q: "Paris" }, { key }))
      // a billable failure, and its replay
      const second = yield* givenOrg({ credits: 10 })
      u.itunes.fault({ wrongShape: true, times: 1 })
      post("mobile_app_search", yield* callTool("mobile_app_search", { query: "shape" }, { key: second.key, idempotencyKey: "headers-2" }))
      post("mobile_app_search", yield* callTool("mobile_app_search", { query: "shape" }, { key: second.key, idempotencyKey: "headers-2" }))
      // a key with its own rate limit: the headers of where it stands, then a 429
      const limited = yield* Effect.orDie(Effect.flatMap(KeyStore, (keys) =>
        keys.create(second.orgId, { name: "limited", rateLimit: { perSecond: 1, burst: 1 } })))
      registerSecret(Redacted.value(limited.key))
      post("weather", yield* callTool("weather", { q: "Berlin" }, { key: Redacted.value(limited.key) }))
      post("weather", yield* callTool("weather", { q: "Berlin" }, { key: Redacted.value(limited.key) }))
      // the dashboard and the public catalog
      const member = yield* givenMember()
      answers.push({ path: "/v1/usage", method: "get", result: yield* dashboard("GET", "/v1/usage?limit=5", member.token) })
      answers.push({ path: "/v1/tools", method: "get", result: yield* request("/v1/tools", { method: "GET" }) })

      expect(answers.map((a) => a.result.status)).toEqual([200, 200, 402, 502, 502, 200, 429, 200, 200])
      const seen = new Set<string>()
      for (const { method, path, result } of answers) {
        const declared = declaredHeaders(spec, path, method, result.status)
        const where = `${method} ${path} ${result.status}`
        for (const name of TRACKED) {
          if (result.headers.get(name) === null) continue
          seen.add(name)
          expect(declared.has(name), `${where} sends ${name}: declared`).toBe(true)
        }
        for (const [name, required] of declared) {
          if (required) expect(result.headers.get(name), `${where} declares ${name} required: sent`).not.toBeNull()
        }
      }
      // each header was met at least once, so each was checked
      expect([...seen].sort()).toEqual([...TRACKED].sort())
      // a CSV export cut at its limit says where the rest starts (sent in test/dashboard-api.test.ts): optional
      expect(declaredHeaders(spec, "/v1/usage", "get", 200).get("x-next-cursor")).toBe(false)
    }))

  it.effect("Redocly's linter (recommended rules) reports nothing, and would report a missing summary", () =>
    Effect.gen(function* () {
      const spec = yield* servedDocument
      const dir = yield* scratch
      const served = yield* lint(dir, "openapi.json", spec)
      expect(served.problems).toEqual([])
      expect(served.report.totals).toEqual({ errors: 0, warnings: 0 })
      expect(served.code).toBe(0)
      // the linter does look: without a summary, the same document fails
      const paths = obj(spec["paths"])
      const weather = obj(paths["/v1/weather"])
      const { summary: _, ...withoutSummary } = obj(weather["post"])
      const broken = yield* lint(dir, "broken.json", { ...spec, paths: { ...paths, "/v1/weather": { ...weather, post: withoutSummary } } })
      expect(broken.problems).toContain("error operation-summary: Operation object should contain `summary` field.")
      expect(broken.code).not.toBe(0)
    }).pipe(Effect.scoped), 60_000)

  it.effect("openapi-typescript's types of it compile, and type a tool call and the usage list", () =>
    Effect.gen(function* () {
      const spec = yield* servedDocument
      const dir = yield* scratch
      const file = Path.join(dir, "openapi.json")
      yield* Effect.promise(() => Fs.writeFile(file, JSON.stringify(spec)))
      const ast = yield* Effect.promise(() => openapiTS(Url.pathToFileURL(file)))
      yield* Effect.promise(() => Fs.writeFile(Path.join(dir, "api.d.ts"), astToString(ast)))
      yield* Effect.promise(() => Fs.writeFile(Path.join(dir, "example.ts"), EXAMPLE))
      yield* Effect.promise(() => Fs.writeFile(Path.join(dir, "tsconfig.json"), JSON.stringify({
        compilerOptions: {
          strict: true,
          exactOptionalPropertyTypes: true,
          noUncheckedIndexedAccess: true,
          target: "es2022",
          module: "nodenext",
          moduleResolution: "nodenext",
          types: [],
          noEmit: true
        },
        files: ["api.d.ts", "example.ts"]
      })))
      const compiled = yield* run(process.execPath, [tsc, "-p", "."], dir)
      expect(compiled.stdout + compiled.stderr).toBe("")
      expect(compiled.code).toBe(0)
    }).pipe(Effect.scoped), 60_000)
})

/** A client's code against the generated types: a tool's request and answer (and headers), the usage list. */
const EXAMPLE = `import type { components, paths } from "./api.js"

type Weather = paths["/v1/weather"]["post"]
type WeatherInput = Weather["requestBody"]["content"]["application/json"]
type WeatherAnswer = Weather["responses"][200]["content"]["application/json"]
type WeatherHeaders = Weather["responses"][200]["headers"]
type Usage = paths["/v1/usage"]["get"]
type UsageQuery = NonNullable<Usage["parameters"]["query"]>
type UsagePage = Usage["responses"][200]["content"]["application/json"]

export const byName: WeatherInput = { q: "Berlin" }
export const byPlace: WeatherInput = { lat: 52.52, lon: 13.41 }
export const summary = (answer: WeatherAnswer, headers: WeatherHeaders): string => {
  const charged: number = headers["X-Credits-Charged"]
  const requestId: string = headers["X-Request-Id"]
  return \`\${answer.location.name}: \${answer.current.temperature_c} °C, \${answer.daily.length} days; \${charged} credits (\${requestId})\`
}
export const query: UsageQuery = { limit: 50, cursor: "120", status: "error" }
// @ts-expect-error limit is an integer, not text
export const textLimit: UsageQuery = { limit: "50" }
export const credits = (page: UsagePage): number => page.data.reduce((sum, record) => sum + record.credits, 0)
export const next = (page: UsagePage): string | null => page.next_cursor
export const refused = (answer: components["schemas"]["InsufficientCreditsError"]): "insufficient_credits" => answer.error.code
`

describe("with an operator's prices and PUBLIC_URL", () => {
  layer(
    Layer.unwrapEffect(Effect.gen(function* () {
      const file = yield* Effect.promise(async () => {
        const dir = await Fs.mkdtemp(Path.join(Os.tmpdir(), "tool-gateway-prices-"))
        const path = Path.join(dir, "prices.json")
        await Fs.writeFile(path, JSON.stringify({ weather: { unit: "call", credits: 3 }, search: { unit: "results", credits: 2, per: 5, min: 2 } }))
        return path
      })
      return gatewayLayer({ ledger: { pricesFile: Option.some(file) }, server: { publicUrl: Option.some("https://tools.example.org/gateway") } })
    })),
    { excludeTestServices: true }
  )("the served document", (it) => {
    it.effect("states this gateway's prices and names its public URL as the server", () =>
      Effect.gen(function* () {
        const spec = yield* servedDocument
        const description = (tool: string) => String(obj(obj(obj(spec["paths"])[`/v1/${tool}`])["post"])["description"])
        expect(description("weather")).toContain("Price: 3 credits per call.")
        expect(description("search")).toContain("Price: 2 credits per 5 results (at least 2).")
        expect(description("read")).toContain(`Price: ${describePrice(catalog.read.price)}.`)
        expect(spec["servers"]).toEqual([{ url: "https://tools.example.org/gateway", description: "This gateway" }])
      }))

    it.effect("GET /docs shows the same document: this gateway's prices and server", () =>
      Effect.gen(function* () {
        const spec = yield* servedDocument
        const page = yield* request("/docs", { method: "GET" })
        expect(page.status).toBe(200)
        // never framed by another site, never sniffed
        expect(page.headers.get("content-security-policy")).toContain("frame-ancestors 'none'")
        expect(page.headers.get("x-content-type-options")).toBe("nosniff")
        expect(page.headers.get("referrer-policy")).toBe("no-referrer")
        // the page carries its document as JSON in a script element (HttpApiScalar's page)
        const embedded = /<script id="api-reference" type="application\/json">([\s\S]*?)<\/script>/.exec(page.text)?.[1]
        expect(embedded).toBeDefined()
        const shown = obj(JSON.parse(embedded ?? "null"))
        expect(String(obj(obj(obj(shown["paths"])["/v1/weather"])["post"])["description"])).toContain("Price: 3 credits per call.")
        expect(shown["servers"]).toEqual([{ url: "https://tools.example.org/gateway", description: "This gateway" }])
        expect(shown).toEqual(spec)
      }))
  })
})
