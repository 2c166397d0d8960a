/**
 * `tool-gateway serve`: the HTTP server over the services and the database; on the first start of an
 * empty embedded database, a `default` org and a key, printed once.
 *
 * `--workers N` (N > 1) runs N server processes with Node's cluster module: they share the port (the
 * primary hands out connections round-robin) and one PostgreSQL. The primary starts the embedded database
 * if there is one, migrates and bootstraps once, then starts the workers with `DATABASE_URL` pointing at
 * it, restarts a worker that dies, and on SIGTERM or SIGINT stops them all (each drains its in-flight
 * calls) before it stops the database and exits.
 */
import * as HttpServer from "@effect/platform/HttpServer"
import * as Console from "effect/Console"
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Runtime from "effect/Runtime"
import Cluster from "node:cluster"
import { databaseUrl, EmbeddedDatabaseRole, MigrationsLive, pgLayer } from "../db/Database.js"
import { CLUSTER_METRICS_ENV, serveClusterMetrics } from "../http/clusterMetrics.js"
import { HttpServerLive } from "../http/server.js"
import { GatewayLive } from "../layers.js"
import { currentKeyText } from "../services/Encryption.js"
import { ConfigFromEnv, IdentityConfig, ServerConfig } from "../config.js"
import { IdentityError, isLoopback } from "../services/Identity.js"
import { KeyStore, KeyStoreLive } from "../services/KeyStore.js"
import { Orgs, OrgsLive } from "../services/Orgs.js"

const curlExample = (base: string, key: string) =>
  `curl -s ${base}/v1/weather -H "X-API-Key: ${key}" -H "Content-Type: application/json" -d '{"q":"Berlin"}'`

/**
 * First start on an empty embedded database, on a terminal: a `default` org with 1000 credits and one key,
 * printed once. Without a terminal (a service manager, a container) nobody may be there to read the key while
 * a log collector keeps it, so nothing is created: the log says how to create an org and a key with the CLI.
 */
export const bootstrap = (base: string, terminal: boolean) =>
  Effect.gen(function* () {
    const config = yield* ServerConfig
    if (!config.bootstrap || Option.isSome(config.databaseUrl)) return
    const orgs = yield* Orgs
    if ((yield* orgs.count) > 0) return
    if (!terminal) {
      return yield* Effect.logInfo(
        "No org yet. Standard output is not a terminal, so no API key is printed: create an org and a key with " +
          "`npx tool-gateway org create --name default --credits 1000` and `npx tool-gateway keys create --org <its id>` " +
          "(from the project's directory, with this server's GATEWAY_DATA_DIR)."
      )
    }
    const org = yield* orgs.create({ name: "default", credits: 1000 })
    const key = yield* Effect.orDie(KeyStore.pipe(Effect.flatMap((keys) => keys.create(org.id, { name: "default" }))))
    yield* Console.log(
      [
        "",
        `Created org "default" (${org.id}) with 1000 credits and an API key. It is shown only this once:`,
        "",
        `  ${Redacted.value(key.key)}`,
        "",
        "Try it:",
        `  ${curlExample(base, Redacted.value(key.key))}`,
        ""
      ].join("\n")
    )
  })

const serverBase = Effect.map(HttpServer.HttpServer, (server) => {
  const address = server.address
  return address._tag === "TcpAddress" ? `http://${address.hostname}:${address.port}` : "http://localhost"
})

/**
 * Said when the process is told to stop (its layers close in the reverse of their making, so this first): the
 * drain that follows lasts as long as the slowest call in flight, and an operator should know why it waits.
 */
const announceStop = Effect.addFinalizer(() =>
  Effect.logInfo(
    "Stopping: no new connections; the calls in flight finish and are charged first (each within its deadline), " +
      "then the usage log is written and the database closed"
  )
)

/** One server process until interrupted (SIGINT, SIGTERM). */
const single = Layer.launch(
  Layer.scopedDiscard(
    Effect.flatMap(serverBase, (base) => bootstrap(base, process.stdout.isTTY === true)).pipe(Effect.zipRight(announceStop))
  ).pipe(
    Layer.provideMerge(HttpServerLive),
    Layer.provideMerge(GatewayLive),
    Layer.provideMerge(ConfigFromEnv),
    Layer.provide(Layer.succeed(EmbeddedDatabaseRole, "server"))
  )
)

export class WorkerStartError extends Data.TaggedError("WorkerStartError")<{ readonly message: string }> {}

// A worker that dies is started again after this; one that keeps failing to start (a database away), after twice
// the wait of the last try, up to RESTART_DELAY_MAX, until one starts.
const RESTART_DELAY = Duration.seconds(1)
const RESTART_DELAY_MAX = Duration.seconds(30)

/** The primary of `--workers N`: database, migrations and bootstrap once, then N workers, supervised. */
const primary = (count: number) =>
  Effect.gen(function* () {
    const config = yield* ServerConfig
    const identity = yield* IdentityConfig
    // what would stop every worker from starting is refused here, once
    if (identity.devIssuer && !isLoopback(config.host)) {
      return yield* new IdentityError({ message: `DEV_IDENTITY only runs on a loopback HOST (HOST is ${config.host})` })
    }
    // the workers reach the database by DATABASE_URL, so they get the key (on the embedded database, the
    // one generated into the data dir) explicitly
    const encryptionKey = yield* currentKeyText(identity, config)
    const url = yield* Effect.provideService(databaseUrl, EmbeddedDatabaseRole, "server")
    yield* bootstrap(`http://${config.host}:${config.port}`, process.stdout.isTTY === true).pipe(
      // only what bootstrapping needs: no rate-limit store, metrics, usage writer or provider pools here
      Effect.provide(
        Layer.mergeAll(OrgsLive, KeyStoreLive).pipe(Layer.provideMerge(MigrationsLive), Layer.provideMerge(pgLayer(url, { maxConnections: 2 })))
      )
    )
    const env = {
      DATABASE_URL: Redacted.value(url),
      GATEWAY_BOOTSTRAP: "false",
      GATEWAY_ENCRYPTION_KEY: encryptionKey,
      [CLUSTER_METRICS_ENV]: "1"
    }
    let stopping = false
    const fork = () => Cluster.fork(env)
    // a scrape of /metrics, whichever worker takes it, answers for every worker
    serveClusterMetrics()
    // A worker that cannot start (exit code 2) before any has started: its configuration, which would only fail
    // again, and everything stops. Once one has served, a worker that exits 2 could not start for a reason of the
    // moment (the database away while it started): it is started again, later each time, and the others serve on.
    const unstartable = yield* Deferred.make<never, WorkerStartError>()
    let served = false
    let failedStarts = 0
    // said through the log, as the workers' lines are (one JSON object a line, unless LOG_FORMAT=pretty)
    const log = Runtime.runFork(yield* Effect.runtime<never>())
    Cluster.on("listening", (_worker, address) => {
      if (!served) log(Effect.logInfo(`Started ${count} workers on http://${config.host}:${address.port}`))
      served = true
      failedStarts = 0
    })
    Cluster.on("exit", (worker, code, signal) => {
      if (stopping) return
      if (code === 2 && !served) {
        Deferred.unsafeDone(unstartable, Effect.fail(new WorkerStartError({ message: `worker ${worker.process.pid} could not start; stopping` })))
        return
      }
      failedStarts = code === 2 ? failedStarts + 1 : 0
      const delay = Math.min(Duration.toMillis(RESTART_DELAY) * 2 ** failedStarts, Duration.toMillis(RESTART_DELAY_MAX))
      log(Effect.logWarning(
        code === 2
          ? `worker ${worker.process.pid} could not start; starting another in ${delay / 1000} s`
          : `worker ${worker.process.pid} exited (${signal ?? code}); starting another`
      ))
      setTimeout(() => {
        if (!stopping) fork()
      }, delay)
    })
    yield* Effect.acquireRelease(
      Effect.sync(() => Array.from({ length: count }, fork)),
      () =>
        Effect.zipRight(
          Effect.logInfo("Stopping the workers: each finishes its calls in flight first"),
          Effect.async<void>((resume) => {
            stopping = true
            const alive = Object.values(Cluster.workers ?? {}).filter((w) => w !== undefined && !w.isDead())
            if (alive.length === 0) return resume(Effect.void)
            let left = alive.length
            for (const worker of alive) {
              worker?.once("exit", () => {
                if (--left === 0) resume(Effect.void)
              })
              worker?.process.kill("SIGTERM")
            }
          })
        )
    )
    return yield* Deferred.await(unstartable)
  }).pipe(Effect.scoped, Effect.provide(ConfigFromEnv))

/** Run the gateway: one process, or a primary and `workers` server processes. */
export const serve = (
  workers: number
): Effect.Effect<never, Effect.Effect.Error<typeof single> | Effect.Effect.Error<ReturnType<typeof primary>>> => {
  if (workers > 1 && Cluster.isPrimary) return primary(workers)
  return single
}
