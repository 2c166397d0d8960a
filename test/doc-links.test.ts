/**
 * The documentation holds together: every relative link of the README, CONTRIBUTING.md and docs/ leads to a
 * file that exists and, with an anchor, to a heading of it; and docs/configuration.md documents exactly the
 * variables the configuration reads (each name recorded by a config provider as `ConfigFromEnv` asks for it);
 * docs/operations.md's `/readyz` example names as many migrations as this build applies.
 */
import { describe, expect, it } from "@effect/vitest"
import { ConfigError, ConfigProvider, ConfigProviderPathPatch, Effect, HashSet } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { ConfigFromEnv, IdentityConfig, LedgerConfig, logging, ProvidersConfig, ServerConfig } from "../src/config.js"
import { migrationCount } from "../src/db/migrations/index.js"

const documents = ["README.md", "CONTRIBUTING.md", ...Fs.readdirSync("docs").filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`)]

/** The text outside fenced code blocks. */
const prose = (markdown: string) => markdown.replace(/^```[\s\S]*?^```/gm, "")

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens; repeats get -1, -2, … */
const anchorsOf = (markdown: string): ReadonlySet<string> => {
  const seen = new Map<string, number>()
  const anchors = new Set<string>()
  for (const [, text = ""] of prose(markdown).matchAll(/^#{1,6} +(.+?) *#*$/gm)) {
    const base = text.toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, "").replace(/\s/g, "-")
    const count = seen.get(base) ?? 0
    seen.set(base, count + 1)
    anchors.add(count === 0 ? base : `${base}-${count}`)
  }
  return anchors
}

describe("links", () => {
  for (const document of documents) {
    it(`${document}: every relative link and anchor resolves`, () => {
      const text = Fs.readFileSync(document, "utf8")
      const broken: Array<string> = []
      for (const [, target = ""] of prose(text).matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/.test(target)) continue
        const [file = "", anchor] = target.split("#")
        const resolved = file === "" ? document : Path.join(Path.dirname(document), file)
        if (!Fs.existsSync(resolved)) {
          broken.push(`${target}: no file ${resolved}`)
          continue
        }
        if (anchor !== undefined && !anchorsOf(Fs.readFileSync(resolved, "utf8")).has(anchor)) {
          broken.push(`${target}: no heading #${anchor} in ${resolved}`)
        }
      }
      expect(broken).toEqual([])
    })
  }
})

describe("docs/configuration.md", () => {
  it.effect("documents every variable the configuration reads, and no other", () =>
    Effect.gen(function* () {
      const read = new Set<string>()
      // answers nothing, so every variable falls back to its default; records each name asked for
      const recording = ConfigProvider.fromFlat(ConfigProvider.makeFlat({
        load: (path) => {
          read.add(path.join("_"))
          return Effect.fail(ConfigError.MissingData([...path], "unset"))
        },
        enumerateChildren: () => Effect.succeed(HashSet.empty()),
        patch: ConfigProviderPathPatch.empty
      }))
      yield* Effect.all([ServerConfig, LedgerConfig, ProvidersConfig, IdentityConfig]).pipe(
        Effect.provide(ConfigFromEnv),
        Effect.withConfigProvider(recording)
      )
      // the log settings, read by the command itself (src/bin.ts) before anything else
      yield* Effect.withConfigProvider(logging, recording)
      expect(read.size).toBeGreaterThan(40)

      const doc = Fs.readFileSync("docs/configuration.md", "utf8")
      const documented = new Set(
        doc.split("\n")
          .filter((line) => line.startsWith("| `"))
          .flatMap((line) => [...(line.split("|")[1] ?? "").matchAll(/`([A-Z][A-Z0-9_]*)`/g)].map((m) => m[1] ?? ""))
      )
      // NO_COLOR is read by the command itself, as no-color.org says: set and not empty, no colour
      const bin = Fs.readFileSync("src/bin.ts", "utf8")
      const readByBin = [...documented].filter((name) => !read.has(name) && bin.includes(`process.env["${name}"]`))
      expect(readByBin.sort()).toEqual(["NO_COLOR"])
      expect([...read].filter((name) => !documented.has(name)).sort()).toEqual([])
      expect([...documented].filter((name) => !read.has(name) && !readByBin.includes(name)).sort()).toEqual([])
    }))
})

describe("docs/operations.md", () => {
  it("its /readyz example names as many migrations as this build applies", () => {
    const counts = [...Fs.readFileSync("docs/operations.md", "utf8").matchAll(/"migrations":"(\d+) applied"/g)].map((m) => Number(m[1]))
    expect(counts).toEqual([migrationCount])
  })
})
