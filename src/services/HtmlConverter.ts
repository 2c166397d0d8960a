/**
 * HTML to markdown off the event loop: a pool of worker threads (piscina), one per core but the one the event
 * loop needs (at least one), each converting one page at a time at the lowest priority. A conversion is
 * bounded by the call's deadline and by `htmlConvertTimeoutMs` of work: past either, its thread is terminated
 * (a synchronous conversion cannot be interrupted any other way) and replaced, and the call gets
 * `normalization_failed` — the page was fetched, and `POST /v1/run` still answers it raw. One hostile page
 * therefore costs one thread for a bounded time, never the process.
 *
 * The pool starts its threads on the first page and lets them go when idle: a gateway that never reads a
 * page does not carry them.
 */
import { Context, Effect, Layer } from "effect"
import * as Os from "node:os"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { MessageChannel } from "node:worker_threads"
import { Piscina } from "piscina"
import { NormalizationFailed } from "../domain/errors.js"
import type { Extracted } from "../providers/html/extract.js"
import type { ConvertTask } from "../providers/html/worker.js"
import { GatewayConfig } from "./GatewayConfig.js"
import { CallDeadline } from "./ProviderClient.js"
import { nowMillis } from "./time.js"

export class HtmlConverter extends Context.Tag("HtmlConverter")<HtmlConverter, {
  /** The page's title and main content as markdown, within the call's deadline. */
  readonly convert: (html: string, tool: string) => Effect.Effect<Extracted, NormalizationFailed>
}>() {}

/**
 * The worker's compiled file. The gateway runs from `dist/`; its tests run the TypeScript sources, whose
 * worker thread still needs JavaScript — the build beside them (`npm test` builds first).
 */
const workerFile = (): string => {
  const here = fileURLToPath(import.meta.url)
  const compiled = here.endsWith(".ts") ? here.replace(`${Path.sep}src${Path.sep}`, `${Path.sep}dist${Path.sep}`) : here
  return Path.join(Path.dirname(compiled), "..", "providers", "html", "worker.js")
}

// setTimeout's limit
const MAX_TIMER_MS = 2 ** 31 - 1

export const make = Effect.gen(function* () {
  const config = yield* GatewayConfig
  const pool = yield* Effect.acquireRelease(
    Effect.sync(() =>
      new Piscina<ConvertTask, Extracted>({
        filename: workerFile(),
        minThreads: 0,
        maxThreads: Math.max(1, Os.availableParallelism() - 1),
        idleTimeout: 30_000,
        // a conversion gets a stack of its own, and no more heap than a page is worth
        resourceLimits: { maxOldGenerationSizeMb: 256, stackSizeMb: 4 }
      })
    ),
    (pool) => Effect.promise(() => pool.destroy())
  )

  const convert = (html: string, tool: string) =>
    Effect.gen(function* () {
      const deadline = yield* CallDeadline
      const now = yield* nowMillis
      const remaining = Math.max(0, Math.min(deadline.at - now, MAX_TIMER_MS))
      const budget = config.htmlConvertTimeoutMs
      const failed = (why: string) =>
        new NormalizationFailed({
          message: `The page was fetched, but ${why}. POST /v1/run with {"tool":"${tool}","input":...} returns the raw page.`
        })
      return yield* Effect.tryPromise({
        try: (signal) => {
          // Two limits, each a timer of our own (an AbortSignal.timeout can be collected before it fires): the
          // call's deadline from now, and the conversion's budget from the moment a thread starts on it (a page
          // waiting behind others is not charged their time). An aborted task's thread is terminated by the pool.
          const controller = new AbortController()
          const abort = (why: string) => () => controller.abort(new Error(why))
          const timers = [setTimeout(abort("deadline"), remaining)]
          const channel = new MessageChannel()
          channel.port1.once("message", () => timers.push(setTimeout(abort("budget"), budget)))
          const onAbort = () => controller.abort(signal.reason)
          signal.addEventListener("abort", onAbort, { once: true })
          return pool.run({ html, started: channel.port2 }, { signal: controller.signal, transferList: [channel.port2] }).finally(() => {
            for (const timer of timers) clearTimeout(timer)
            channel.port1.close()
            signal.removeEventListener("abort", onAbort)
          })
        },
        catch: (error) => {
          if (!(error instanceof Error && error.name === "AbortError")) return failed("it could not be converted to markdown")
          const cause: unknown = error.cause
          return cause instanceof Error && cause.message === "budget"
            ? failed(`converting it to markdown took longer than ${budget} ms`)
            : failed("it could not be converted to markdown before the call's deadline")
        }
      })
    })

  return HtmlConverter.of({ convert })
})

export const HtmlConverterLive = Layer.scoped(HtmlConverter, make)
