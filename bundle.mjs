/**
 * Bundles the gateway's command (dist/bin.js, compiled by tsc) into dist/bundle/: the code it loads at start in
 * a few files, comments and unused exports left out. A process holds every module's source text for as long as it
 * runs, and the framework's modules are mostly documentation comments: bundled, the gateway starts with about
 * two fifths less live heap, and V8 sizes the heap under load from what is live (docs/performance.md, eleventh
 * round). What is loaded at first use (the MCP server, the /docs page, OpenTelemetry) stays in chunks of its own.
 * `npm start`, the `tool-gateway` command and the tests run this bundle; dist/ as tsc writes it is the library
 * (`import … from "tool-gateway"`). Run by `npm run build`.
 */
import * as esbuild from "esbuild"
import * as Fs from "node:fs/promises"
import { builtinModules } from "node:module"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

const here = Path.dirname(fileURLToPath(import.meta.url))
const out = Path.join(here, "dist", "bundle")

/**
 * `@effect/platform-node`'s HTTP server module imports its HTTP client module for one export, `layerTest` (a
 * server with a client for tests), which the gateway does not use and the bundle leaves out. The import itself
 * stays, and with it undici (the client's transport, 112 modules): in the chunk the server loads at start,
 * evaluated there, about 2 MB of live heap for nothing (the provider client is Node's own `http`). Resolved here
 * to a module that has only what `layerTest` names; the client module itself is bundled as it is for whoever
 * imports it (the OTLP exporter, loaded when configured). test/lazy.test.ts checks that a gateway serving tool
 * calls has not loaded undici.
 */
const serverWithoutTestClient = {
  name: "server-without-test-client",
  setup(build) {
    build.onResolve({ filter: /^\.\.\/NodeHttpClient\.js$/ }, (args) =>
      args.importer.endsWith(Path.join("@effect", "platform-node", "dist", "esm", "internal", "httpServer.js"))
        ? { path: "NodeHttpClient (layerTest only)", namespace: "server-test-client" }
        : undefined)
    build.onLoad({ filter: /.*/, namespace: "server-test-client" }, () => ({
      contents: "const absent = () => { throw new Error(\"NodeHttpServer.layerTest is not in the bundle\") }\n" +
        "export const layerWithoutAgent = undefined\nexport const makeAgentLayer = absent\n",
      loader: "js"
    }))
  }
}

await Fs.rm(out, { recursive: true, force: true })
const built = await esbuild.build({
  absWorkingDir: here,
  entryPoints: { bin: Path.join(here, "dist", "bin.js") },
  bundle: true,
  format: "esm",
  platform: "node",
  target: "node20",
  // what is imported with import() is a chunk of its own, loaded when first used; the chunks sit beside bin.js,
  // at the depth of dist/<dir>/<module>.js, so paths the code finds from import.meta.url (the dashboard's
  // files, the page converter's worker) resolve as they do from tsc's output
  splitting: true,
  chunkNames: "[name]-[hash]",
  outdir: out,
  // comments and whitespace go (names stay); a source map beside each file leads back to src/ for
  // `node --enable-source-maps`, which reads it only when asked
  legalComments: "none",
  minifyWhitespace: true,
  sourcemap: "linked",
  sourcesContent: false,
  // one byte per character in memory: a single non-ASCII character would make V8 hold a whole file in two
  charset: "ascii",
  // left in node_modules, imported from there (each is one of the package's dependencies; test/package.test.ts
  // checks that the bundle imports nothing else but Node's own modules)
  external: [
    // finds its thread's entry beside its own module
    "piscina",
    // reads its own package.json beside its module (the version it reports to Redis)
    "ioredis",
    // OpenTelemetry: the API is one registry per process; the Prometheus exporter is CommonJS imported with
    // import(), and a bundled chunk would give it no named exports; the SDK they share stays one copy
    "@opentelemetry/api",
    "@opentelemetry/exporter-prometheus",
    "@opentelemetry/resources",
    "@opentelemetry/sdk-metrics",
    // the database client: `npm run bench -- --timeline` times each statement at its Query (bench/timeline.ts),
    // which must be the one the gateway runs
    "pg"
  ],
  // CommonJS modules in the bundle require Node's built-in modules
  banner: { js: "import { createRequire as __bundleRequire } from \"node:module\"; const require = __bundleRequire(import.meta.url);" },
  plugins: [serverWithoutTestClient],
  metafile: true,
  logLevel: "warning"
})
await Fs.chmod(Path.join(out, "bin.js"), 0o755)
// which modules each file holds (paths relative to the project's root): what a loaded chunk stands for
const contents = Object.fromEntries(
  Object.entries(built.metafile.outputs)
    .filter(([file]) => file.endsWith(".js"))
    .map(([file, output]) => [Path.basename(file), Object.keys(output.inputs).sort()])
)
await Fs.writeFile(Path.join(out, "modules.json"), JSON.stringify(contents, null, 1) + "\n")
// what the bundle imports from node_modules at run time (Node's own modules left out)
const imported = new Set(
  Object.values(built.metafile.outputs).flatMap((output) =>
    output.imports.filter((i) => i.external && !i.path.startsWith("node:") && !builtinModules.includes(i.path)).map((i) => i.path)
  )
)
await Fs.writeFile(Path.join(out, "externals.json"), JSON.stringify([...imported].sort(), null, 1) + "\n")
