/**
 * Every package the lockfile installs — development dependencies included — runs on the oldest Node.js the
 * project claims: the minimum of `engines.node` in package.json, which the README states in its quick start.
 * A dependency that needs a newer Node (npm only warns: EBADENGINE) fails here.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Semver from "semver"

const readJson = (path: string): unknown => JSON.parse(Fs.readFileSync(path, "utf8"))

const enginesOf = (entry: unknown): string | undefined => {
  if (typeof entry !== "object" || entry === null || !("engines" in entry)) return undefined
  const engines = entry.engines
  if (typeof engines !== "object" || engines === null || !("node" in engines)) return undefined
  return typeof engines.node === "string" ? engines.node : undefined
}

describe("the Node.js version the project states", () => {
  const claimed = enginesOf(readJson("package.json"))
  const oldest = claimed === undefined ? null : Semver.minVersion(claimed)

  it("is package.json's engines.node, and the README states it", () => {
    expect(oldest).not.toBeNull()
    const readme = Fs.readFileSync("README.md", "utf8")
    expect(readme).toContain(`Node.js ${oldest?.major}.${oldest?.minor} or later`)
  })

  it("runs every package the lockfile installs", () => {
    const lock = readJson("package-lock.json")
    const packages = typeof lock === "object" && lock !== null && "packages" in lock ? lock.packages : {}
    expect(oldest).not.toBeNull()
    const refused: Array<string> = []
    let checked = 0
    for (const [path, entry] of Object.entries(packages ?? {})) {
      const range = enginesOf(entry)
      if (path === "" || range === undefined || oldest === null) continue
      checked++
      if (!Semver.satisfies(oldest, range)) refused.push(`${path} needs node ${range}`)
    }
    // the lockfile was read: many packages state the Node versions they run on
    expect(checked).toBeGreaterThan(50)
    expect(refused, `packages that do not run on Node.js ${oldest?.version}`).toEqual([])
  })
})
