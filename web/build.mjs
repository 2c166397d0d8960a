/**
 * Builds the dashboard (web/) into dist/dashboard/: the app's script and stylesheet, the chunks the script
 * imports when it needs them (Firebase's SDK, only on a gateway that signs in with Firebase), all named by
 * their content hash, and the page that loads them. Everything it needs is bundled: the page loads no code
 * from another host. Run by `npm run build` (and so by `npm ci`, through `prepare`).
 */
import * as esbuild from "esbuild"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

const here = Path.dirname(fileURLToPath(import.meta.url))
const out = Path.resolve(here, "../dist/dashboard")

await Fs.rm(out, { recursive: true, force: true })
const entry = Path.join(here, "src/main.tsx")
const result = await esbuild.build({
  entryPoints: { app: entry },
  bundle: true,
  format: "esm",
  // what the app imports with import() (Firebase's SDK) is a chunk of its own, fetched only when used
  splitting: true,
  chunkNames: "[name]-[hash]",
  platform: "browser",
  target: ["es2022"],
  minify: true,
  sourcemap: false,
  jsx: "automatic",
  jsxImportSource: "preact",
  tsconfig: Path.join(here, "tsconfig.json"),
  outdir: Path.join(out, "assets"),
  entryNames: "[name]-[hash]",
  assetNames: "[name]-[hash]",
  metafile: true,
  legalComments: "linked",
  logLevel: "warning"
})
const named = (file) => Path.relative(out, Path.resolve(file)).split(Path.sep).join("/")
// the page loads the entry's script and its stylesheet; the chunks are imported by the script itself
const [file, main] = Object.entries(result.metafile.outputs)
  .find(([, output]) => output.entryPoint !== undefined && Path.resolve(output.entryPoint) === entry) ?? []
const script = file === undefined ? undefined : named(file)
const style = main?.cssBundle === undefined ? undefined : named(main.cssBundle)
if (script === undefined || style === undefined) {
  throw new Error(`the dashboard build made no script or stylesheet: ${Object.keys(result.metafile.outputs).join(", ")}`)
}
const page = (await Fs.readFile(Path.join(here, "index.html"), "utf8"))
  .replace("%SCRIPT%", `/dashboard/${script}`)
  .replace("%STYLE%", `/dashboard/${style}`)
await Fs.writeFile(Path.join(out, "index.html"), page)
await Fs.copyFile(Path.join(here, "favicon.svg"), Path.join(out, "favicon.svg"))
