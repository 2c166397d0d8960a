/**
 * `GET /metrics` under `serve --workers N`: the workers share one port, so a scrape reaches whichever worker the
 * primary hands the connection to. That worker asks the primary (over the cluster's IPC channel) for every
 * worker's metrics; the primary asks each live worker for its own scrape, and answers with them merged into one
 * exposition: each metric family once, every sample labelled `worker="<the worker's id>"` — except the families
 * read from the database (`DATABASE_WIDE`), the same in every worker, given once without the label. A worker that
 * does not answer within `COLLECT_TIMEOUT_MS` (busy, or dying) is left out of that scrape; a worker whose primary
 * does not answer serves its own.
 */
import Cluster, { type Worker } from "node:cluster"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import * as Schema from "effect/Schema"

/** How long the primary waits for the workers' scrapes, and a worker for the primary's answer (a bit longer). */
export const COLLECT_TIMEOUT_MS = 5_000

/** Families read from the database at scrape time: the same whichever worker reads them. */
const DATABASE_WIDE: ReadonlySet<string> = new Set(["tool_gateway_holds_outstanding", "tool_gateway_credits_held"])

/** The messages of the exchange (`toolGatewayMetrics` keeps them apart from any other on the channel). */
const Message = Schema.Union(
  /** worker → primary: a scrape arrived; `id` is the worker's own. */
  Schema.Struct({ toolGatewayMetrics: Schema.Literal("request"), id: Schema.Number }),
  /** primary → worker: send your own scrape for collection `id`. */
  Schema.Struct({ toolGatewayMetrics: Schema.Literal("collect"), id: Schema.Number }),
  /** worker → primary: its scrape for collection `id`. */
  Schema.Struct({ toolGatewayMetrics: Schema.Literal("snapshot"), id: Schema.Number, text: Schema.String }),
  /** primary → worker: every worker's scrape, merged, for the worker's request `id`. */
  Schema.Struct({ toolGatewayMetrics: Schema.Literal("merged"), id: Schema.Number, text: Schema.String })
)
type Message = typeof Message.Type
const decodeMessage = Schema.decodeUnknownOption(Message)

interface Family {
  readonly head: Array<string>
  readonly samples: Array<string>
  readonly labelled: boolean
  /** The scrape that first had it (its head lines, and a database-wide family's samples, are that scrape's). */
  readonly first: number
}

/** A sample line with `worker="<worker>"` as its first label. */
const labelled = (line: string, worker: string) => {
  const brace = line.indexOf("{")
  const space = line.indexOf(" ")
  const label = `worker="${worker}"`
  if (brace !== -1 && (space === -1 || brace < space)) {
    return line[brace + 1] === "}"
      ? `${line.slice(0, brace)}{${label}${line.slice(brace + 1)}`
      : `${line.slice(0, brace + 1)}${label},${line.slice(brace + 1)}`
  }
  return space === -1 ? line : `${line.slice(0, space)}{${label}}${line.slice(space)}`
}

/**
 * The workers' scrapes (Prometheus text exposition) as one: each family's `# HELP`/`# UNIT`/`# TYPE` lines once,
 * then the samples of every worker, labelled with it (the families in `DATABASE_WIDE`: the first worker's, as
 * they are).
 */
export const mergeScrapes = (parts: ReadonlyArray<{ readonly worker: string; readonly text: string }>): string => {
  const families = new Map<string, Family>()
  for (const [index, part] of parts.entries()) {
    let current: Family | undefined
    for (const line of part.text.split("\n")) {
      if (line.trim() === "") continue
      const help = /^# HELP (\S+)/.exec(line)
      if (help !== null) {
        const name = help[1] ?? ""
        current = families.get(name)
        if (current === undefined) {
          current = { head: [], samples: [], labelled: !DATABASE_WIDE.has(name), first: index }
          families.set(name, current)
        }
      }
      if (current === undefined) continue
      if (line.startsWith("#")) {
        if (current.first === index && !current.head.includes(line)) current.head.push(line)
      } else if (current.labelled) {
        current.samples.push(labelled(line, part.worker))
      } else if (current.first === index) {
        current.samples.push(line)
      }
    }
  }
  return [...families.values()].map((f) => [...f.head, ...f.samples].join("\n")).join("\n") + "\n"
}

/** Set in the environment of the workers `serve --workers N` starts: their primary answers for every worker. */
export const CLUSTER_METRICS_ENV = "TOOL_GATEWAY_CLUSTER_METRICS"

/**
 * In a worker of `serve --workers N`: `local` answers collections the primary asks for, and what a scrape of this
 * worker answers is every worker's, merged by the primary (`local` alone if it does not answer in time, or had no
 * worker's). Elsewhere (one process, an in-process gateway, a worker of another primary — PM2's cluster mode, say,
 * which would never answer): `local`.
 */
export const clusterScrape = (local: Effect.Effect<string>) =>
  Effect.gen(function* () {
    const send = process.send?.bind(process)
    if (!Cluster.isWorker || send === undefined || process.env[CLUSTER_METRICS_ENV] !== "1") return local
    const runtime = yield* Effect.runtime<never>()
    const waiting = new Map<number, (text: string) => void>()
    let next = 0
    const onMessage = (raw: unknown) => {
      const message = Option.getOrUndefined(decodeMessage(raw))
      if (message?.toolGatewayMetrics === "collect") {
        const id = message.id
        Runtime.runFork(runtime)(Effect.flatMap(local, (text) =>
          Effect.sync(() => send({ toolGatewayMetrics: "snapshot", id, text } satisfies Message))))
      } else if (message?.toolGatewayMetrics === "merged") {
        waiting.get(message.id)?.(message.text)
        waiting.delete(message.id)
      }
    }
    process.on("message", onMessage)
    yield* Effect.addFinalizer(() => Effect.sync(() => process.off("message", onMessage)))
    const merged = Effect.async<string>((resume) => {
      const id = next++
      waiting.set(id, (text) => resume(Effect.succeed(text)))
      send({ toolGatewayMetrics: "request", id } satisfies Message)
      return Effect.sync(() => waiting.delete(id))
    })
    return merged.pipe(
      Effect.timeout(COLLECT_TIMEOUT_MS + 1_000),
      // no worker's scrape came in time (the primary answers "" then): this worker's own is better than nothing
      Effect.flatMap((text) => (text === "" ? local : Effect.succeed(text))),
      Effect.catchTag("TimeoutException", () => local)
    )
  })

interface Collection {
  readonly requester: Worker
  readonly requestId: number
  readonly left: Set<number>
  readonly parts: Array<{ readonly worker: number; readonly text: string }>
  readonly timer: ReturnType<typeof setTimeout>
}

/**
 * In the primary of `serve --workers N`: answers a worker's request for every worker's metrics (see the module's
 * comment), with one listener for every collection in flight. Installed once, before the workers start.
 */
export const serveClusterMetrics = () => {
  let next = 0
  const collections = new Map<number, Collection>()
  const finish = (id: number) => {
    const c = collections.get(id)
    if (c === undefined) return
    collections.delete(id)
    clearTimeout(c.timer)
    if (!c.requester.isConnected()) return
    const parts = c.parts.sort((a, b) => a.worker - b.worker).map((p) => ({ worker: String(p.worker), text: p.text }))
    const text = parts.length === 0 ? "" : mergeScrapes(parts)
    c.requester.send({ toolGatewayMetrics: "merged", id: c.requestId, text } satisfies Message)
  }
  Cluster.on("message", (worker: Worker, raw: unknown) => {
    const message = Option.getOrUndefined(decodeMessage(raw))
    if (message?.toolGatewayMetrics === "snapshot") {
      const c = collections.get(message.id)
      if (c === undefined || !c.left.delete(worker.id)) return
      c.parts.push({ worker: worker.id, text: message.text })
      if (c.left.size === 0) finish(message.id)
      return
    }
    if (message?.toolGatewayMetrics !== "request") return
    const id = next++
    const asked = Object.values(Cluster.workers ?? {}).flatMap((w) => (w !== undefined && w.isConnected() ? [w] : []))
    collections.set(id, {
      requester: worker,
      requestId: message.id,
      left: new Set(asked.map((w) => w.id)),
      parts: [],
      timer: setTimeout(() => finish(id), COLLECT_TIMEOUT_MS)
    })
    for (const w of asked) w.send({ toolGatewayMetrics: "collect", id } satisfies Message)
  })
}
