/**
 * The provider deadline fires whatever the garbage collector does. It used to be
 * `AbortSignal.any([signal, AbortSignal.timeout(ms)])`, whose timeout source Node holds weakly: a
 * collection could take it, and a call to an upstream that stalled after its headers then never ended.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Child from "node:child_process"
import * as Path from "node:path"

describe("the provider deadline", () => {
  it.live("ends calls to a stalled upstream on time while garbage collections run", () =>
    Effect.gen(function* () {
      const run = yield* Effect.async<{ readonly code: number | null; readonly out: string }>((resume) => {
        Child.execFile("node", ["--expose-gc", Path.resolve("test/support/deadline-under-gc.mjs")], { timeout: 20_000 }, (error, stdout, stderr) =>
          resume(Effect.succeed({ code: error === null ? 0 : typeof error.code === "number" ? error.code : 1, out: stdout + stderr })))
      })
      expect(run.code, run.out).toBe(0)
      const result: unknown = JSON.parse(run.out.trim().split("\n").pop() ?? "{}")
      expect(result).toMatchObject({ outcomes: Array.from({ length: 10 }, () => "ProviderTimeout") })
      expect(result).toHaveProperty("ms", expect.any(Number))
      if (typeof result === "object" && result !== null && "ms" in result) expect(Number(result.ms)).toBeLessThan(5_000)
    }), 30_000)
})
