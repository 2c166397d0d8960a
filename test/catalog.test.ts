/**
 * `GET /v1/tools` and prices: every tool with its schemas, price, connection and beta flags, and whether
 * this gateway can run it; an operator's price file replaces the catalog's prices (and a bad one stops it).
 */
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Exit, Layer, Option, Schema } from "effect"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { encodesAsIs } from "../src/domain/schema-helpers.js"
import { catalog, toolNames } from "../src/domain/tools.js"
import { defaults, LedgerConfig } from "../src/config.js"
import { PricingLive } from "../src/services/Pricing.js"
import { expectOk } from "./support/assert.js"
import { books, callTool, gatewayLayer, givenOrg, request, TestUpstreams } from "./support/gateway.js"

const Listing = Schema.Struct({
  data: Schema.Array(Schema.Struct({
    name: Schema.String,
    summary: Schema.String,
    description: Schema.String,
    account: Schema.Boolean,
    beta: Schema.Boolean,
    configured: Schema.Boolean,
    price: Schema.Unknown,
    input_schema: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
    output_schema: Schema.Record({ key: Schema.String, value: Schema.Unknown })
  }))
})

const list = Effect.map(request("/v1/tools", { method: "GET" }), (r) => {
  expect(r.status).toBe(200)
  return Schema.decodeUnknownSync(Listing)(r.body).data
})

layer(gatewayLayer(), { excludeTestServices: true })("GET /v1/tools", (it) => {
  it.effect("lists every tool of the contract, each working here once configured", () =>
    Effect.gen(function* () {
      const tools = yield* list
      expect(tools.map((t) => t.name).sort()).toEqual([...toolNames].sort())
      for (const t of tools) {
        expect(t.configured, t.name).toBe(true)
        expect(t.input_schema["type"], t.name).toBe("object")
        // model APIs refuse a tool's input schema with one of these at its top (the OpenAPI document has the exact schema)
        for (const combinator of ["allOf", "anyOf", "oneOf"]) expect(Object.keys(t.input_schema), t.name).not.toContain(combinator)
        expect(t.output_schema["type"], t.name).toBe("object")
        // a model choosing a tool from the catalog reads what it does, not only its one-line summary
        expect(t.description.length, t.name).toBeGreaterThan(t.summary.length)
      }
      const read = tools.find((t) => t.name === "read")
      expect(read).toMatchObject({ account: false, beta: false, price: { unit: "chars", credits: 1, per: 20000, min: 1 } })
      expect(read?.input_schema).toMatchObject({ required: ["url"], properties: { max_chars: expect.objectContaining({ type: "integer" }) } })
      expect(tools.find((t) => t.name === "kappa_ingest_events")).toMatchObject({ account: true, beta: true, price: { unit: "call", credits: 1 } })
      // extra properties: allowed where the contract says so, refused elsewhere
      expect(tools.find((t) => t.name === "alpha_search")?.input_schema["additionalProperties"]).not.toBe(false)
      expect(tools.find((t) => t.name === "beta_read")?.input_schema["additionalProperties"]).toBe(false)
    }))
})

layer(
  gatewayLayer({
    // no operator keys anywhere: the public defaults
    providers: { endpoints: defaults.providers.endpoints, searchProviders: ["alpha"] }
  }),
  { excludeTestServices: true }
)("an unconfigured gateway", (it) => {
  it.effect("says which tools it cannot run", () =>
    Effect.gen(function* () {
      const tools = yield* list
      const configured = Object.fromEntries(tools.map((t) => [t.name, t.configured]))
      expect(configured).toMatchObject({
        alpha_search: false,
        search: false,
        beta_read: false,
        gamma_scrape: false,
        xi_movie: false,
        read: true,
        weather: true,
        nu_account: true
      })
    }))
})

const pricesFile = (contents: unknown) =>
  Effect.gen(function* () {
    const u = yield* TestUpstreams
    const file = Path.join(u.dataDir, `prices-${Math.random().toString(36).slice(2)}.json`)
    yield* Effect.promise(() => Fs.writeFile(file, typeof contents === "string" ? contents : JSON.stringify(contents)))
    return file
  })

describe("PRICES_FILE", () => {
  layer(
    Layer.unwrapEffect(Effect.gen(function* () {
      const file = yield* Effect.promise(async () => {
        const dir = await Fs.mkdtemp(Path.join((await import("node:os")).tmpdir(), "tool-gateway-prices-"))
        const path = Path.join(dir, "prices.json")
        await Fs.writeFile(path, JSON.stringify({
          weather: { unit: "call", credits: 3 },
          search: { unit: "results", credits: 2, per: 5, min: 2 },
          // the most a price per result may be: 2^53 − 1 credits for the most results any tool's input may ask for
          alpha_search: { unit: "results", credits: 2000, per: 1, min: 1 }
        }))
        return path
      })
      return gatewayLayer({ ledger: { pricesFile: Option.some(file) } })
    })),
    { excludeTestServices: true }
  )("an operator's prices", (it) => {
    it.effect("replace the catalog's: reserved, charged and listed", () =>
      Effect.gen(function* () {
        const { key, orgId } = yield* givenOrg({ credits: 10 })
        expectOk(yield* callTool("weather", { q: "Berlin" }, { key }), 3)
        expect(yield* books(orgId)).toMatchObject({ balance: 7 })
        const tools = yield* list
        expect(tools.find((t) => t.name === "weather")?.price).toEqual({ unit: "call", credits: 3 })
        expect(tools.find((t) => t.name === "search")?.price).toEqual({ unit: "results", credits: 2, per: 5, min: 2 })
      }))

    it.effect("no input asks for more results than the start-up check of a price assumed: past it, the caller's 400, never a 500", () =>
      Effect.gen(function* () {
        const { key } = yield* givenOrg({ credits: 10 })
        // numResults was any whole number: 2^53 − 1 results at 2,000 credits each was a reservation PostgreSQL's
        // bigint refused (a 500)
        const asked = yield* callTool("alpha_search", { query: "x", numResults: 9007199254740991 }, { key })
        expect(asked.status, asked.text).toBe(400)
        expect(asked.text).toContain("numResults")
        // the most it takes reserves what a balance can be asked for: refused for the credits it lacks
        const most = yield* callTool("alpha_search", { query: "x", numResults: 1000 }, { key })
        expect(most.status, most.text).toBe(402)
      }))

    it.effect("a malformed or unknown entry stops the gateway from starting", () =>
      Effect.gen(function* () {
        const config = yield* LedgerConfig
        for (const [contents, message] of [
          [{ nope: { unit: "call", credits: 1 } }, "nope is not a tool"],
          [{ weather: { unit: "call", credits: -1 } }, "weather"],
          [{ search: { unit: "chars", credits: 1, per: 1000, min: 1 } }, "search cannot be priced per chars"],
          [{ weather: { unit: "results", credits: 1, per: 10, min: 1 } }, "weather cannot be priced per results"],
          ["{not json", "PRICES_FILE"],
          // a reservation past 2^53 − 1 was a 500 (and failed the other calls of its batch)
          [{ read: { unit: "chars", credits: 9007199254740991, per: 1, min: 1 } }, "read would reserve up to"],
          [{ weather: { unit: "call", credits: 9007199254740992 } }, "weather"]
        ] as const) {
          const file = yield* pricesFile(contents)
          const exit = yield* Effect.exit(
            Layer.build(PricingLive.pipe(Layer.provide(Layer.succeed(LedgerConfig, { ...config, pricesFile: Option.some(file) })))).pipe(
              Effect.scoped
            )
          )
          expect(Exit.isFailure(exit)).toBe(true)
          expect(String(exit)).toContain(message)
        }
      }))
  })
})

describe("encodesAsIs", () => {
  it("holds for the output schemas without a transformation or a refinement, whose answers are written as built", () => {
    expect(toolNames.filter((tool) => encodesAsIs(catalog[tool].output)).sort()).toEqual([
      "alpha_search", "beta_search", "delta_like", "delta_post", "eta_personal_bests", "gamma_search",
      "iota_delete_service", "kappa_delete_benefit", "lambda_batch_emails", "lambda_update_broadcast",
      "mobile_app_search", "mu_database", "nu_account", "search", "xi_movie", "zeta_request"
    ])
    // an integer the gateway computes (a rounded weather code) is still checked
    expect(encodesAsIs(catalog.weather.output)).toBe(false)
  })

  it("does not hold where encoding could change, drop or check a value of the schema's type", () => {
    class Point extends Schema.Class<Point>("Point")({ x: Schema.Number }) {}
    interface Tree {
      readonly label: string
      readonly children: ReadonlyArray<Tree>
    }
    const Tree: Schema.Schema<Tree> = Schema.Struct({
      label: Schema.String,
      children: Schema.Array(Schema.suspend(() => Tree))
    })
    expect(encodesAsIs(Schema.Struct({ a: Schema.String, b: Schema.NullOr(Schema.Number), c: Schema.Literal("x") }))).toBe(true)
    expect(encodesAsIs(Tree)).toBe(true)
    expect(encodesAsIs(Schema.Struct({ n: Schema.NullOr(Schema.Int) }))).toBe(false)
    expect(encodesAsIs(Schema.Struct({ at: Schema.Date }))).toBe(false)
    expect(encodesAsIs(Schema.Struct({ n: Schema.optionalWith(Schema.Number, { default: () => 0 }) }))).toBe(false)
    expect(encodesAsIs(Schema.Struct({ n: Schema.propertySignature(Schema.Number).pipe(Schema.fromKey("N")) }))).toBe(false)
    expect(encodesAsIs(Schema.Array(Point))).toBe(false)
    expect(encodesAsIs(Schema.Union(Schema.String, Schema.NumberFromString))).toBe(false)
    expect(encodesAsIs(Schema.Tuple(Schema.String, Schema.DateFromSelf))).toBe(false)
    // a record's key pattern, parse options of a part's own, two objects in a union
    expect(encodesAsIs(Schema.Record({ key: Schema.String, value: Schema.Number }))).toBe(true)
    expect(encodesAsIs(Schema.Record({ key: Schema.String.pipe(Schema.minLength(2)), value: Schema.Number }))).toBe(false)
    expect(encodesAsIs(Schema.Record({ key: Schema.TemplateLiteral("x-", Schema.String), value: Schema.Number }))).toBe(false)
    expect(encodesAsIs(Schema.Struct({ a: Schema.String }).annotations({ parseOptions: { onExcessProperty: "error" } }))).toBe(false)
    expect(encodesAsIs(Schema.Union(Schema.Struct({ a: Schema.String }), Schema.Struct({ b: Schema.String })))).toBe(false)
    expect(encodesAsIs(Schema.NullOr(Schema.Struct({ a: Schema.String })))).toBe(true)
    // a recursive schema whose thunk makes a new schema each time: not followed for ever
    const fresh = (): Schema.Schema<Tree> => Schema.Struct({ label: Schema.String, children: Schema.Array(Schema.suspend(fresh)) })
    expect(encodesAsIs(fresh())).toBe(false)
  })
})
