/**
 * `npm run bench -- --steps`: a probe preloaded into the gateway (`node --import`), for the measurement only.
 *
 * It counts the Effect runtime's steps: each primitive operation a fiber's loop evaluates (a `flatMap`'s
 * continuation, a `sync` thunk, a read of the fiber's state, a generator's resumption, …), by kind and by the code
 * the step runs (the first characters of its function's source, which name the combinator or the gateway's own
 * closure). Each step allocates (the loop's own frame, the continuation, the exit), so fewer steps is less
 * allocated and less CPU, and unlike both a count of steps does not depend on the machine.
 *
 * It wraps the methods of the runtime's fiber class, which is not part of `effect`'s API: it reaches the class by
 * the path of the `effect` in node_modules, so it counts a process that runs that copy of Effect — tsc's output
 * (`--entry dist/bin.js`) and the framework's ceilings — and not the bundle `npm start` runs, which carries its
 * own (the report then says the probe counted nothing).
 *
 * The first `SIGUSR2` starts counting, the next stops it and writes `BENCH_STEPS_OUT`: the steps counted, the
 * responses finished meanwhile, and the counts by kind and by site; and so on, in pairs. Counting costs the process
 * CPU and allocation (a map update per step): the other figures of a run with the probe are not comparable to any
 * other's, nor are `--allocations` figures taken in the same run.
 */
import * as DiagnosticsChannel from "node:diagnostics_channel"
import { writeProbeFile } from "./probeFile.js"

export interface Steps {
  /**
   * Whether the probe counted any step (false: the process runs a copy of Effect of its own, or the probe could not
   * load the runtime's module; false too in the file the first signal writes, when counting starts).
   */
  readonly counted: boolean
  readonly responses: number
  readonly steps: number
  /** Steps by the kind of operation, most first. */
  readonly kinds: ReadonlyArray<readonly [string, number]>
  /** Steps by kind and the start of the source of the function the step runs, most first (the first 60). */
  readonly sites: ReadonlyArray<readonly [string, number]>
}

const out = process.env["BENCH_STEPS_OUT"]

/**
 * The operations whose methods the fiber's loop calls (`this[op._op](op)`): the class's methods named by the runtime's
 * op codes, which alone among its methods start with a capital ("Sync", "OnSuccess", "Iterator", "Right", "Some", …).
 */
const kindsOf = (prototype: object) => Object.getOwnPropertyNames(prototype).filter((name) => /^[A-Z]/.test(name))

/** The function a step of this kind runs, where one names it (the operation's fields as the runtime lays them out). */
const FIELD: Readonly<Record<string, string>> = {
  Sync: "effect_instruction_i0",
  WithRuntime: "effect_instruction_i0",
  OnSuccess: "effect_instruction_i1",
  OnFailure: "effect_instruction_i1",
  OnSuccessAndFailure: "effect_instruction_i2",
  Commit: "commit"
}

/**
 * A step's site: its kind and the start of its function's source, made once per kind and function (a step's
 * function is often a whole generator's body), so that counting a step builds no string.
 */
const siteOf = (sites: WeakMap<object, string>, kind: string, f: unknown): string => {
  if (typeof f !== "function") return kind
  let site = sites.get(f)
  if (site === undefined) {
    site = `${kind} ${Function.prototype.toString.call(f).slice(0, 400).replace(/\s+/g, " ").slice(0, 110)}`
    sites.set(f, site)
  }
  return site
}

const fiberClass = async (): Promise<object | undefined> => {
  try {
    const url = new URL("./internal/fiberRuntime.js", import.meta.resolve("effect"))
    const module: unknown = await import(url.href)
    const cls: unknown = typeof module === "object" && module !== null ? Reflect.get(module, "FiberRuntime") : undefined
    const prototype: unknown = typeof cls === "function" ? Reflect.get(cls, "prototype") : undefined
    return typeof prototype === "object" && prototype !== null ? prototype : undefined
  } catch {
    return undefined
  }
}

if (out !== undefined) {
  const prototype = await fiberClass()
  let counting = false
  let steps = 0
  let responses = 0
  const kinds = new Map<string, number>()
  const sites = new Map<string, number>()
  const bump = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + 1)
  if (prototype !== undefined) {
    for (const kind of kindsOf(prototype)) {
      const original: unknown = Reflect.get(prototype, kind)
      if (typeof original !== "function") continue
      const field = FIELD[kind]
      const known = new WeakMap<object, string>()
      Reflect.set(prototype, kind, function(this: unknown, op: unknown) {
        if (counting) {
          steps++
          bump(kinds, kind)
          bump(sites, field === undefined || typeof op !== "object" || op === null ? kind : siteOf(known, kind, Reflect.get(op, field)))
        }
        return Reflect.apply(original, this, [op])
      })
    }
  }
  DiagnosticsChannel.subscribe("http.server.response.finish", () => {
    responses++
  })
  const sorted = (map: Map<string, number>) => [...map.entries()].sort((a, b) => b[1] - a[1])
  process.on("SIGUSR2", () => {
    if (!counting) {
      counting = true
      steps = 0
      responses = 0
      kinds.clear()
      sites.clear()
      writeProbeFile(out, { counted: false, responses: 0, steps: 0, kinds: [], sites: [] } satisfies Steps)
      return
    }
    counting = false
    writeProbeFile(out, {
      counted: steps > 0,
      responses,
      steps,
      kinds: sorted(kinds),
      sites: sorted(sites).slice(0, 60)
    } satisfies Steps)
  })
}
