/**
 * HTML to markdown off the event loop: a pool of worker threads (piscina), one per core but the one the event
 * loop needs (at least one), each converting one page at a time at the lowest priority. A conversion is
 * bounded by the call's deadline and by `htmlConvertTimeoutMs` of work: past either, its thread is terminated
 * (a synchronous conversion cannot be interrupted any other way) and replaced, and the call gets
 * `normalization_failed` — the page was fetched, and `POST /v1/run` still answers it raw. One hostile page
 * therefore costs one thread for a bounded time, never the process.
 *
 * The pool is made on the first page, and piscina loaded then: a gateway that never reads a page carries
 * neither. Then it keeps one thread, and lets the others go when idle.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import * as Os from "node:os"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { MessageChannel } from "node:worker_threads"
import { NormalizationFailed } from "../domain/errors.js"
import type { Extracted } from "../providers/html/extracted.js"
import type { ConvertTask } from "../providers/html/worker.js"
import { ProvidersConfig } from "../config.js"
import { CallDeadline } from "./ProviderClient.js"
import { nowMillis } from "./time.js"
import { cachedSuccess } from "./cachedSuccess.js"

/**
 * Whose page is being converted (the call's org): the pool serves owners in turn, so that one org's pages
 * wait behind each other and not in front of everybody else's.
 */
export class ConversionOwner extends Context.Reference<ConversionOwner>()("ConversionOwner", {
  defaultValue: (): string => ""
}) {}

/**
 * Waiting work, fair across owners: each owner's items in the order they came, owners served in turn (round
 * robin). An org that sends fifty hostile pages waits for its own; another org's page is next.
 */
export class FairQueue<A> {
  readonly #queues = new Map<string, Array<A>>()
  /** Owners with items waiting, the next one to serve first. */
  readonly #turns: Array<string> = []
  #size = 0

  get size(): number {
    return this.#size
  }

  push(owner: string, item: A): void {
    const queue = this.#queues.get(owner)
    if (queue === undefined) {
      this.#queues.set(owner, [item])
      this.#turns.push(owner)
    } else {
      queue.push(item)
    }
    this.#size += 1
  }

  shift(): A | undefined {
    const owner = this.#turns.shift()
    if (owner === undefined) return undefined
    const queue = this.#queues.get(owner) ?? []
    const item = queue.shift()
    if (queue.length > 0) this.#turns.push(owner)
    else this.#queues.delete(owner)
    if (item !== undefined) this.#size -= 1
    return item
  }

  remove(owner: string, item: A): void {
    const queue = this.#queues.get(owner)
    const index = queue?.indexOf(item) ?? -1
    if (queue === undefined || index < 0) return
    queue.splice(index, 1)
    this.#size -= 1
    if (queue.length === 0) {
      this.#queues.delete(owner)
      const turn = this.#turns.indexOf(owner)
      if (turn >= 0) this.#turns.splice(turn, 1)
    }
  }
}

/**
 * As many slots as the pool has threads, handed out in turn across owners. The pool itself then never queues
 * (piscina keeps abortable tasks in a first-come queue of its own, whatever queue it is given).
 */
const makeSlots = (slots: number) => {
  let free = slots
  const waiting = new FairQueue<() => void>()
  const give = Effect.sync(() => {
    const next = waiting.shift()
    if (next === undefined) free += 1
    else next()
  })
  /** Wait for a slot; interruptible (a call's deadline ends the wait), and a slot granted as it ends is given back. */
  const take = (owner: string) =>
    Effect.async<void>((resume) => {
      if (free > 0) {
        free -= 1
        return resume(Effect.void)
      }
      let granted = false
      const wake = () => {
        granted = true
        resume(Effect.void)
      }
      waiting.push(owner, wake)
      return granted ? give : Effect.suspend(() => (granted ? give : Effect.sync(() => waiting.remove(owner, wake))))
    })
  return { take, give }
}

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
  const config = yield* ProvidersConfig
  // Made on the first page, and from then on at least one thread: the pool replaces a thread it terminated
  // only up to its minimum, and tasks waiting for a thread must always have one to come.
  const threads = Math.max(1, Os.availableParallelism() - 1)
  const slots = makeSlots(threads)
  const scope = yield* Effect.scope
  const pool = yield* cachedSuccess(
    Effect.acquireRelease(
      // piscina itself is imported with the pool: a process that reads no page does not load it either
      Effect.promise(() => import("piscina")).pipe(Effect.map((module) =>
        new module.Piscina<ConvertTask, Extracted>({
          filename: workerFile(),
          minThreads: 1,
          maxThreads: threads,
          idleTimeout: 30_000,
          // a conversion gets a stack of its own, and no more heap than a page is worth
          resourceLimits: { maxOldGenerationSizeMb: 256, stackSizeMb: 4 }
        })
      )),
      (pool) => Effect.promise(() => pool.destroy())
    ).pipe(Scope.extend(scope))
  )

  const convert = (html: string, tool: string) =>
    Effect.gen(function* () {
      const converters = yield* pool
      const deadline = yield* CallDeadline
      const owner = yield* ConversionOwner
      const now = yield* nowMillis
      const remaining = Math.max(0, Math.min(deadline.at - now, MAX_TIMER_MS))
      const budget = config.htmlConvertTimeoutMs
      const failed = (why: string) =>
        new NormalizationFailed({
          message: `The page was fetched, but ${why}. POST /v1/run with {"tool":"${tool}","input":...} returns the raw page.`
        })
      const run = Effect.tryPromise({
        try: (signal) => {
          // The conversion's budget counts from the moment the thread starts on it, on a timer of our own (an
          // AbortSignal.timeout can be collected before it fires). An aborted task's thread is terminated by
          // the pool; so is one whose call gave up (its deadline: the signal).
          const controller = new AbortController()
          let timer: ReturnType<typeof setTimeout> | undefined
          const channel = new MessageChannel()
          channel.port1.once("message", () => (timer = setTimeout(() => controller.abort(new Error("budget")), budget)))
          const onAbort = () => controller.abort(signal.reason)
          signal.addEventListener("abort", onAbort, { once: true })
          return converters.run({ html, started: channel.port2 }, { signal: controller.signal, transferList: [channel.port2] }).finally(() => {
            clearTimeout(timer)
            channel.port1.close()
            signal.removeEventListener("abort", onAbort)
          })
        },
        catch: (error) =>
          error instanceof Error && error.name === "AbortError"
            ? failed(`converting it to markdown took longer than ${budget} ms`)
            : failed("it could not be converted to markdown")
      })
      // a slot in turn across orgs, then a thread; all of it within the call's deadline. The wait for a slot is
      // interruptible so that the deadline can end it, on a fiber of its own (`disconnect`): as a child of the call's
      // fiber it was interrupted the moment the call's client hung up (a call is not: `Gateway.run`).
      return yield* Effect.disconnect(
        Effect.acquireUseRelease(Effect.interruptible(slots.take(owner)), () => run, () => slots.give).pipe(
          Effect.timeoutFail({
            duration: remaining,
            onTimeout: () => failed("it could not be converted to markdown before the call's deadline (the converters were busy)")
          })
        )
      )
    })

  return HtmlConverter.of({ convert })
})

export const HtmlConverterLive = Layer.scoped(HtmlConverter, make)
