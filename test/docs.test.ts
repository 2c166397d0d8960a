/**
 * docs/tools.md stays true: every tool has a section, and each example request and answer is valid for the
 * tool's input and output schemas.
 */
import { describe, expect, it } from "@effect/vitest"
import { Either, Schema } from "effect"
import * as Fs from "node:fs"
import { outputExamples } from "../src/domain/examples.js"
import { catalog, type ToolName, toolNames } from "../src/domain/tools.js"

const inputOk = <T extends ToolName>(tool: T, value: unknown) => Schema.decodeUnknownEither(catalog[tool].input)(value)
const outputOk = <T extends ToolName>(tool: T, value: unknown) =>
  Schema.decodeUnknownEither(catalog[tool].output, { onExcessProperty: "error" })(value)

const doc = Fs.readFileSync("docs/tools.md", "utf8")
const sections = new Map(
  doc.split(/^## /m).slice(1).map((section) => {
    const name = section.match(/^`([a-z_]+)`/)?.[1] ?? ""
    const blocks = [...section.matchAll(/```json\n([\s\S]*?)```/g)].map((m) => JSON.parse(m[1] ?? "null"))
    return [name, blocks] as const
  })
)

describe("docs/tools.md", () => {
  it("has a section for every tool", () => {
    expect([...sections.keys()].sort()).toEqual([...toolNames].sort())
  })

  for (const tool of toolNames) {
    it(`${tool}: the example request and answer fit the schemas`, () => {
      const [request, answer] = sections.get(tool) ?? []
      const input = inputOk(tool, request)
      expect(Either.isRight(input), String(Either.isLeft(input) ? input.left : "")).toBe(true)
      const output = outputOk(tool, answer)
      expect(Either.isRight(output), String(Either.isLeft(output) ? output.left : "")).toBe(true)
      // the API reference shows the same answer
      expect(answer).toEqual(outputExamples[tool])
    })
  }
})
