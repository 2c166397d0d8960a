/**
 * The package as its users get it. `npm pack` of the built dist/ (`npm run build` first; `npm test` does it),
 * installed with npm into a scratch project, which brings the peer dependencies at the versions the README
 * states. There, the library's examples — the README's "Library use", docs/library.md's, and an example that
 * imports `tool-gateway`, `tool-gateway/client` and `tool-gateway/testing` — are type-checked against the
 * installed types (the scratch project's node_modules, this repository's tsc), and the example runs: over a
 * fresh database of the test server it creates an org and a key and calls `weather` against the fake
 * Open-Meteo of `tool-gateway/testing`, in process and over HTTP with the typed client.
 *
 * The scratch project checks the package's declarations as a consumer's would (`skipLibCheck: false`, no DOM
 * library) and emits its own (`declaration: true`): a layer it exports must be nameable through the package's
 * exports and its peers, never through a path inside the package (TS2742).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import * as Child from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import Pg from "pg"
import { freshDatabaseUrl } from "./support/database.js"

const ROOT = process.cwd()
const TSC = Path.join(ROOT, "node_modules/typescript/bin/tsc")

const Versions = Schema.Record({ key: Schema.String, value: Schema.String })
const Target = Schema.Struct({ types: Schema.String, default: Schema.String })
const PackageJson = Schema.Struct({
  name: Schema.String,
  version: Schema.String,
  dependencies: Versions,
  peerDependencies: Versions,
  exports: Schema.Record({ key: Schema.String, value: Target })
})
const manifest = Schema.decodeUnknownSync(PackageJson)(JSON.parse(Fs.readFileSync("package.json", "utf8")))
/** The specifiers a consumer imports: `tool-gateway`, `tool-gateway/client`, … */
const entryPoints = new Set(Object.keys(manifest.exports).map((path) => path === "." ? manifest.name : `${manifest.name}/${path.slice(2)}`))
const isPeer = (specifier: string) => Object.keys(manifest.peerDependencies).some((name) => specifier === name || specifier.startsWith(`${name}/`))
const NODE_MODULES = `${Path.sep}node_modules${Path.sep}`

/** The package a file in node_modules belongs to, and that package's directory. */
const installedPackageOf = (file: string) => {
  const at = file.lastIndexOf(NODE_MODULES)
  if (at < 0) return undefined
  const [scope = "", name = ""] = file.slice(at + NODE_MODULES.length).split(Path.sep)
  const full = scope.startsWith("@") ? `${scope}/${name}` : scope
  return { name: full, dir: file.slice(0, at + NODE_MODULES.length) + full }
}
const Packed = Schema.Array(Schema.Struct({ filename: Schema.String, files: Schema.Array(Schema.Struct({ path: Schema.String })) }))
const Installed = Schema.Struct({ version: Schema.String })
const ExportNames = Schema.Record({ key: Schema.String, value: Schema.Array(Schema.String) })
const Result = Schema.Struct({
  orgId: Schema.String,
  celsius: Schema.Number,
  location: Schema.String,
  outage: Schema.String,
  overHttp: Schema.String,
  charged: Schema.Number,
  brokeInProcess: Schema.Boolean,
  brokeOverHttp: Schema.Boolean,
  forecastHits: Schema.Number,
  balance: Schema.Number
})

const isEffectPackage = (name: string) => name === "effect" || name.startsWith("@effect/")

/** `~x.y.z`: the same x.y, patch z or later. */
const satisfiesTilde = (version: string, range: string) => {
  const r = /^~(\d+)\.(\d+)\.(\d+)$/.exec(range)
  const v = /^(\d+)\.(\d+)\.(\d+)$/.exec(version)
  return r !== null && v !== null && r[1] === v[1] && r[2] === v[2] && Number(v[3]) >= Number(r[3])
}

/** The README's table of peer dependencies: name → range. */
const readmePeers = (): Record<string, string> => {
  const readme = Fs.readFileSync("README.md", "utf8")
  const table = readme.slice(readme.indexOf("| Peer dependency | Version |"))
  const rows = table.slice(0, table.search(/\n\s*\n/)).split("\n").slice(2)
  return Object.fromEntries(rows.map((row) => {
    const [, name = "", range = ""] = /^\| `([^`]+)` \| `([^`]+)` \|$/.exec(row.trim()) ?? []
    return [name, range]
  }))
}

/** The ```ts blocks of a markdown text. */
const tsBlocks = (markdown: string) => [...markdown.matchAll(/^```ts\n([\s\S]*?)^```/gm)].map((m) => m[1] ?? "")

const Tsconfig = Schema.Struct({ compilerOptions: Schema.Record({ key: Schema.String, value: Schema.Unknown }) })

/** The tsconfig.json that docs/library.md's "TypeScript settings" shows a consumer. */
const documentedTsconfig = () => {
  const doc = Fs.readFileSync("docs/library.md", "utf8")
  const section = doc.slice(doc.indexOf("## TypeScript settings"))
  const block = /^```json\n([\s\S]*?)^```/m.exec(section.slice(0, section.indexOf("\n## ")))?.[1]
  if (block === undefined) return expect.fail("docs/library.md shows no tsconfig.json under \"TypeScript settings\"")
  return Schema.decodeUnknownSync(Tsconfig)(JSON.parse(block))
}

interface Run {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

const run = (command: string, args: ReadonlyArray<string>, options: { readonly cwd: string; readonly env?: Record<string, string>; readonly timeoutMs: number }) =>
  Effect.async<Run>((resume) => {
    Child.execFile(
      command,
      [...args],
      { cwd: options.cwd, env: { ...process.env, ...options.env }, timeout: options.timeoutMs, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === "number" ? error.code : 1
        resume(Effect.succeed({ code, stdout, stderr }))
      }
    )
  })

const succeeded = (what: string, result: Run) => {
  if (result.code !== 0) expect.fail(`${what} failed (${result.code}):\n${result.stdout}\n${result.stderr}`)
  return result.stdout
}

const scratchDir = Effect.acquireRelease(
  Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "tool-gateway-package-"))),
  (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
)

/** What a user's program does with the three entry points; run with DATABASE_URL set. */
const EXAMPLE = `
import { Config, Effect, Layer } from "effect"
import { Gateway, InsufficientCredits, KeyStore, Orgs } from "tool-gateway"
import { callMeta, InsufficientCredits as ClientInsufficientCredits, ToolGatewayClient } from "tool-gateway/client"
import { FakeUpstreams, testServerLayer, testServerUrl } from "tool-gateway/testing"

export const TestGateway = Layer.unwrapEffect(Effect.map(Config.redacted("DATABASE_URL"), (databaseUrl) => testServerLayer({ databaseUrl })))

const program = Effect.gen(function* () {
  const orgs = yield* Orgs
  const keys = yield* KeyStore
  const gateway = yield* Gateway
  const fakes = yield* FakeUpstreams
  const org = yield* orgs.create({ name: "packaged", credits: 2 })
  const created = yield* keys.create(org.id, { name: "packaged" })

  const weather = yield* gateway.call("weather", { q: "Berlin" }, { apiKey: created.key })
  const celsius: number | null = weather.current.temperature_c
  // @ts-expect-error the output is typed (this line compiles only if the types were lost)
  const lost: string = weather.current.temperature_c

  // a provider outage: a typed failure, not charged
  fakes.openMeteo.fault({ status: 500 })
  const outage = yield* Effect.flip(gateway.call("weather", { q: "Berlin" }, { apiKey: created.key }))
  fakes.resetAll()

  const client = ToolGatewayClient.layer({ baseUrl: yield* testServerUrl, apiKey: created.key })
  const [overHttp, response] = yield* Effect.flatMap(ToolGatewayClient, (c) =>
    c.tools.weather({ payload: { q: "Paris" }, withResponse: true })).pipe(Effect.provide(client))
  const meta = yield* callMeta(response)

  // the credits are spent: one error class, whichever entry point it is imported from
  const brokeInProcess = yield* Effect.flip(gateway.call("weather", { q: "Berlin" }, { apiKey: created.key }))
  const brokeOverHttp = yield* Effect.flip(Effect.flatMap(ToolGatewayClient, (c) => c.tools.weather({ payload: { q: "Paris" } })).pipe(Effect.provide(client)))
  const after = yield* orgs.get(org.id)
  console.log("RESULT " + JSON.stringify({
    orgId: org.id,
    celsius,
    location: weather.location.name,
    outage: outage._tag,
    overHttp: overHttp.location.name,
    charged: meta.creditsCharged,
    brokeInProcess: brokeInProcess instanceof ClientInsufficientCredits,
    brokeOverHttp: brokeOverHttp instanceof InsufficientCredits,
    forecastHits: fakes.openMeteo.hits("/v1/forecast"),
    balance: after.balance
  }))
})

program.pipe(Effect.provide(TestGateway), Effect.runPromise).catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
`

describe("the package's peer dependencies", () => {
  it("effect and every @effect/* package the code imports are peers, at the ranges the README states, never bundled", () => {
    const imported = new Set<string>()
    for (const file of Fs.readdirSync("src", { recursive: true, encoding: "utf8" })) {
      if (!file.endsWith(".ts")) continue
      for (const [, name = ""] of Fs.readFileSync(Path.join("src", file), "utf8").matchAll(/from "((?:@effect\/[^/"]+)|effect)[/"]/g)) imported.add(name)
    }
    expect(imported.has("effect")).toBe(true)
    for (const name of imported) expect(manifest.peerDependencies, name).toHaveProperty([name])
    expect(Object.keys(manifest.peerDependencies).filter((name) => !isEffectPackage(name))).toEqual([])
    expect(Object.keys(manifest.dependencies).filter(isEffectPackage)).toEqual([])
    expect(readmePeers()).toEqual(manifest.peerDependencies)
    // the stated ranges are those this repository is built and tested with
    for (const [name, range] of Object.entries(manifest.peerDependencies)) {
      const installed = Schema.decodeUnknownSync(Installed)(JSON.parse(Fs.readFileSync(Path.join("node_modules", name, "package.json"), "utf8")))
      expect(satisfiesTilde(installed.version, range), `${name}@${installed.version} within ${range}`).toBe(true)
    }
  })
})

describe("the command's bundle", () => {
  it("imports at run time nothing but Node's modules and the package's own dependencies", () => {
    // dist/bundle/externals.json: what bundle.mjs left to node_modules, as esbuild recorded it
    const externals: ReadonlyArray<string> = JSON.parse(Fs.readFileSync("dist/bundle/externals.json", "utf8"))
    expect(externals).toContain("pg")
    // ws requires its optional native add-ons inside a try, and works without them
    const optional = new Set(["bufferutil", "utf-8-validate"])
    const packageOf = (specifier: string) => specifier.split("/").slice(0, specifier.startsWith("@") ? 2 : 1).join("/")
    for (const specifier of externals.filter((s) => !optional.has(s))) {
      expect(manifest.dependencies, specifier).toHaveProperty([packageOf(specifier)])
    }
  })
})

describe("the packed package", () => {
  it.scoped("installs with npm, type-checks against its exports, and runs an in-process gateway and its client", () =>
    Effect.gen(function* () {
      expect(Fs.existsSync("dist/testing.js"), "dist/ is not built: run `npm run build` first").toBe(true)
      const dir = yield* scratchDir
      const databaseUrl = yield* freshDatabaseUrl

      // npm pack: the three entry points, their types, and nothing from test/ or src/
      const packed = Schema.decodeUnknownSync(Packed)(JSON.parse(succeeded(
        "npm pack",
        yield* run("npm", ["pack", "--ignore-scripts", "--json", "--pack-destination", dir], { cwd: ROOT, timeoutMs: 60_000 })
      )))
      const files = new Set(packed[0]?.files.map((f) => f.path))
      for (const target of Object.values(manifest.exports)) {
        expect(files, target.types).toContain(target.types.replace(/^\.\//, ""))
        expect(files, target.default).toContain(target.default.replace(/^\.\//, ""))
      }
      expect(Object.keys(manifest.exports).sort()).toEqual([".", "./client", "./testing"])
      expect([...files].filter((f) => f.startsWith("test/") || f.startsWith("src/") || f.endsWith(".tsbuildinfo"))).toEqual([])
      const tarball = Path.join(dir, packed[0]?.filename ?? "missing.tgz")

      // a scratch project installs it as a user would; npm brings the peers
      Fs.writeFileSync(Path.join(dir, "package.json"), JSON.stringify({ name: "scratch", private: true, type: "module" }))
      succeeded("npm install", yield* run("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error", tarball], { cwd: dir, timeoutMs: 150_000 }))
      for (const [name, range] of Object.entries(manifest.peerDependencies)) {
        const installed = Schema.decodeUnknownSync(Installed)(JSON.parse(Fs.readFileSync(Path.join(dir, "node_modules", name, "package.json"), "utf8")))
        expect(satisfiesTilde(installed.version, range), `${name}@${installed.version} within ${range}`).toBe(true)
      }
      // the command as installed: its bundle finds what it imports from node_modules among the package's dependencies
      const migrated = succeeded(
        "tool-gateway migrate",
        yield* run(Path.join(dir, "node_modules", ".bin", "tool-gateway"), ["migrate", "--json"], { cwd: dir, env: { DATABASE_URL: databaseUrl }, timeoutMs: 60_000 })
      )
      expect(JSON.parse(migrated)).toHaveProperty("applied")
      // no missing or invalid peer anywhere, and one copy of each, at the top of node_modules
      const peers = Object.keys(manifest.peerDependencies)
      const copies = succeeded("npm ls", yield* run("npm", ["ls", "--all", "--parseable", ...peers], { cwd: dir, timeoutMs: 60_000 })).split("\n")
      for (const name of peers) {
        expect(copies.filter((line) => line.endsWith(`${Path.sep}node_modules${Path.sep}${name}`)), name).toEqual([Path.join(dir, "node_modules", name)])
      }

      // the examples, type-checked against the installed package with the strictest settings the repository uses
      const src = Path.join(dir, "src")
      Fs.mkdirSync(src)
      Fs.writeFileSync(Path.join(src, "example.ts"), EXAMPLE)
      const readme = Fs.readFileSync("README.md", "utf8")
      const libraryUse = readme.slice(readme.indexOf("## Library use"), readme.indexOf("\n## ", readme.indexOf("## Library use")))
      const documented = [
        ...tsBlocks(libraryUse).map((code, i) => [`readme-library-use-${i + 1}.ts`, code] as const),
        ...tsBlocks(Fs.readFileSync("docs/library.md", "utf8")).map((code, i) => [`docs-library-${i + 1}.ts`, code] as const)
      ]
      expect(documented.length).toBeGreaterThanOrEqual(7)
      // each block is a module of its own: `export {}` keeps one without exports from being a script
      for (const [name, code] of documented) Fs.writeFileSync(Path.join(src, name), `${code}\nexport {}\n`)
      // and every value the three entry points export, re-exported as it is: its type must be nameable too
      const listed = succeeded("listing the exports", yield* run("node", ["--input-type=module", "-e", [
        "const names = {}",
        `for (const entry of ${JSON.stringify([...entryPoints])}) names[entry] = Object.keys(await import(entry))`,
        "console.log(JSON.stringify(names))"
      ].join("\n")], { cwd: dir, timeoutMs: 60_000 }))
      const exported = Object.entries(Schema.decodeUnknownSync(ExportNames)(JSON.parse(listed)))
      expect(exported.find(([entry]) => entry === manifest.name)?.[1]).toEqual(expect.arrayContaining(["GatewayLive", "ServicesLive", "DatabaseLive", "HttpServerLive", "ApiLive"]))
      Fs.writeFileSync(Path.join(src, "reexports.ts"), exported.flatMap(([entry, names], i) => [
        `import * as entry${i} from "${entry}"`,
        ...names.map((name) => `export const entry${i}_${name} = entry${i}.${name}`)
      ]).join("\n") + "\n")
      // docs/library.md's settings, with the strictest checks the repository uses: no skipLibCheck, no DOM
      const documentedOptions = documentedTsconfig().compilerOptions
      expect(documentedOptions).toMatchObject({ lib: ["ES2022"], declaration: true })
      expect(documentedOptions).not.toHaveProperty("skipLibCheck")
      Fs.writeFileSync(Path.join(dir, "tsconfig.json"), JSON.stringify({
        compilerOptions: {
          ...documentedOptions,
          exactOptionalPropertyTypes: true,
          noUncheckedIndexedAccess: true,
          // the package's declarations are checked too, and the consumer's own are emitted
          skipLibCheck: false,
          declaration: true,
          typeRoots: [Path.join(ROOT, "node_modules/@types")],
          rootDir: "src",
          outDir: "build"
        },
        include: ["src"]
      }))
      succeeded("tsc in the scratch project", yield* run("node", [TSC, "-p", "tsconfig.json"], { cwd: dir, timeoutMs: 120_000 }))

      // what the checker loaded: no DOM (linkedom's types, lib.dom), and every peer from its one copy
      const loaded = succeeded("tsc --listFilesOnly", yield* run("node", [TSC, "-p", "tsconfig.json", "--listFilesOnly"], { cwd: dir, timeoutMs: 120_000 }))
        .split("\n").map((line) => line.trim()).filter((line) => line !== "")
      expect(loaded.filter((file) => /[\\/]linkedom[\\/]|[\\/]lib\.dom\./.test(file))).toEqual([])
      const peerDirs = new Map<string, Set<string>>()
      for (const file of loaded) {
        const found = installedPackageOf(file)
        if (found === undefined || !(found.name in manifest.peerDependencies)) continue
        peerDirs.set(found.name, (peerDirs.get(found.name) ?? new Set()).add(found.dir))
      }
      expect(peerDirs.get("effect")?.size).toBe(1)
      for (const [name, dirs] of peerDirs) expect([...dirs], name).toEqual([Path.join(dir, "node_modules", name)])

      // the layers the examples export are named in their declarations through the package and its peers only
      const emitted = Fs.readdirSync(Path.join(dir, "build")).filter((file) => file.endsWith(".d.ts"))
      const specifiers = new Set(emitted.flatMap((file) =>
        [...Fs.readFileSync(Path.join(dir, "build", file), "utf8").matchAll(/(?:import\(|from )"([^"]+)"/g)].map((m) => m[1] ?? "")))
      expect([...specifiers].filter((specifier) => !isPeer(specifier) && !entryPoints.has(specifier) && !specifier.startsWith("node:"))).toEqual([])
      expect(specifiers).toContain("tool-gateway")
      expect(specifiers).toContain("tool-gateway/testing")
      expect(specifiers).toContain("@effect/sql/SqlClient")
      const layerDeclaration = Fs.readFileSync(Path.join(dir, "build", "docs-library-1.d.ts"), "utf8")
      expect(layerDeclaration).toMatch(/export declare const ToolGateway: Layer\.Layer<.*import\("tool-gateway"\)\.Gateway\b/s)

      // the example runs: an in-process gateway over the test server's fresh database
      const ran = yield* run("node", ["build/example.js"], { cwd: dir, env: { DATABASE_URL: databaseUrl }, timeoutMs: 60_000 })
      const line = succeeded("the example", ran).split("\n").find((l) => l.startsWith("RESULT "))
      if (line === undefined) return expect.fail(`the example printed no result:\n${ran.stdout}\n${ran.stderr}`)
      const result = Schema.decodeUnknownSync(Result)(JSON.parse(line.slice("RESULT ".length)))
      expect(result).toEqual({
        orgId: expect.stringMatching(/^org_/),
        celsius: 4.2,
        location: "Berlin",
        outage: "ProviderUnavailable",
        overHttp: "Paris",
        charged: 1,
        brokeInProcess: true,
        brokeOverHttp: true,
        forecastHits: 1,
        balance: 0
      })

      // and what it did is in the database: the org's balance, the journal, one key
      const rows = yield* Effect.promise(async () => {
        const client = new Pg.Client({ connectionString: databaseUrl })
        await client.connect()
        try {
          const org = await client.query("SELECT balance::int8 AS balance FROM orgs WHERE id = $1", [result.orgId])
          const keys = await client.query("SELECT count(*)::int AS n FROM api_keys WHERE org_id = $1", [result.orgId])
          return { org: org.rows, keys: keys.rows }
        } finally {
          await client.end()
        }
      })
      expect(rows).toEqual({ org: [{ balance: "0" }], keys: [{ n: 1 }] })
    }), 240_000)
})
