/**
 * Operations endpoints, outside the API key: `GET /healthz` (the process answers), `GET /readyz` (the
 * database answers and every migration this build knows is applied; a load balancer sends traffic only
 * to a ready process, and `/readyz` answers 503 while the database is unreachable) and `GET /metrics`
 * (Prometheus text; behind `Authorization: Bearer $METRICS_TOKEN` when that is set). A browser's
 * `GET /favicon.ico` is answered 204 (no icon), not with a 404 envelope.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Fiber from "effect/Fiber"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Crypto from "node:crypto"
import { DatabasePool } from "../db/Database.js"
import { migrationCount } from "../db/migrations/index.js"
import { BEARER_CHALLENGE, InvalidToken, type NotFound, NotReady } from "../domain/errors.js"
import { ServerConfig } from "../config.js"
import { Ledger } from "../services/Ledger.js"
import { MetricsExporter } from "../services/Observability.js"
import { clusterScrape } from "./clusterMetrics.js"
import { noRoute, pathOf } from "./envelope.js"
import { creditsHeld, holdsOutstanding, poolConnections, processMemory, unlabelledCounters } from "../services/Telemetry.js"

const READY_TIMEOUT = Duration.seconds(2)
/** How long a reading of the database (readiness, the holds' gauges) answers every probe and scrape after it ended. */
const READING_TTL_MS = 1_000

/**
 * A reading of the database shared by every caller: at most one runs at a time, in a fiber of its own that a caller
 * who leaves (a probe whose client hung up) does not interrupt, and its answer is kept for `READING_TTL_MS` after it
 * ended. A caller waits for it `READY_TIMEOUT` at most, then answers `late`; the reading goes on, and its answer is
 * the next callers'. So probes and scrapes, however many and however impatient, hold one pooled connection at most.
 */
const sharedReading = <A>(read: Effect.Effect<A>, late: A) =>
  Effect.sync(() => {
    let last: { readonly at: number; readonly value: A } | undefined
    let running: Fiber.RuntimeFiber<A> | undefined
    const kept = (value: A) => Effect.map(Clock.currentTimeMillis, (at) => void (last = { at, value }))
    return Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      if (last !== undefined && now - last.at < READING_TTL_MS) return last.value
      running ??= yield* Effect.forkDaemon(Effect.tap(read, kept).pipe(Effect.ensuring(Effect.sync(() => (running = undefined)))))
      return yield* Fiber.join(running).pipe(Effect.timeout(READY_TIMEOUT), Effect.orElseSucceed(() => late))
    })
  })

const poolGauge = (state: string) => Metric.tagged(poolConnections, "state", state)
const memoryGauges = {
  rss: Metric.tagged(processMemory, "kind", "rss"),
  heapTotal: Metric.tagged(processMemory, "kind", "heap_total"),
  heapUsed: Metric.tagged(processMemory, "kind", "heap_used"),
  external: Metric.tagged(processMemory, "kind", "external")
}

const AppliedRow = Schema.Struct({ applied: Schema.Number, read_only: Schema.String })

export const OperationsLive = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const config = yield* ServerConfig
    const exporter = yield* MetricsExporter
    const ledger = yield* Ledger
    const pool = yield* DatabasePool
    for (const counter of unlabelledCounters) yield* Metric.incrementBy(counter, 0)

    const countApplied = SqlSchema.findOne({
      Request: Schema.Void,
      Result: AppliedRow,
      // a database that has become a standby (a failover) takes no writes: every call would fail
      execute: () => sql`SELECT count(*)::int AS applied, current_setting('transaction_read_only') AS read_only FROM gateway_migrations`
    })

    // One reading at a time, shared by every probe (sharedReading): a probe needs no key, and while a statement waits
    // (a migration holding its table's lock, a slow database) each probe's own statement held a pooled connection —
    // twenty probes at once took the pool, and every tool call failed.
    const checkDatabase = yield* sharedReading(countApplied(undefined).pipe(
      // an answer of another shape is a bug, not an unreachable database
      Effect.catchTag("ParseError", Effect.die),
      Effect.map((row) => {
        const applied = Option.match(row, { onNone: () => 0, onSome: (r) => r.applied })
        const readOnly = Option.exists(row, (r) => r.read_only === "on")
        const all = applied >= migrationCount
        return {
          ok: all && !readOnly,
          database: readOnly ? "read-only (a standby, or default_transaction_read_only)" : "ok",
          migrations: all ? `${applied} applied` : `${applied} of ${migrationCount} applied`
        }
      }),
      Effect.catchAll(() => Effect.succeed({ ok: false, database: "unreachable (connection failed)", migrations: "unknown" }))
    ), { ok: false, database: "unreachable (timed out)", migrations: "unknown" })

    // The operations endpoints answer at their own path only: the router also takes `/METRICS`, `/metrics/`,
    // `//metrics` and `/metrics;x`, which a proxy's rule for the exact path lets through.
    const exactly = <E, R>(path: string, answer: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
      Effect.flatMap(HttpServerRequest.HttpServerRequest, (request): Effect.Effect<HttpServerResponse.HttpServerResponse, E | NotFound, R> => {
        const asked = pathOf(request.url)
        return asked === path
          ? answer
          : Effect.fail(noRoute(request.method, asked))
      })

    yield* router.get("/healthz", exactly("/healthz", Effect.succeed(HttpServerResponse.unsafeJson({ status: "ok" }))))
    yield* router.get("/favicon.ico", Effect.succeed(HttpServerResponse.empty({ status: 204 })))
    yield* router.get(
      "/readyz",
      exactly("/readyz", Effect.flatMap(checkDatabase, (check) =>
        check.ok
          ? Effect.succeed(HttpServerResponse.unsafeJson({
            status: "ready",
            checks: { database: check.database, migrations: check.migrations }
          }))
          : new NotReady({ message: `Not ready: database ${check.database}; migrations ${check.migrations}.` })))
    )

    // the holds' gauges, read as readiness is: once a second at most, shared
    const pendingHolds = yield* sharedReading(Effect.option(ledger.pendingHolds), Option.none())

    // Gauges that describe shared state are read when scraped (the database may be down: then they keep
    // their last value and the scrape still answers).
    const refreshGauges = Effect.gen(function* () {
      const stats = pool.stats()
      yield* Metric.set(poolGauge("total"), stats.total)
      yield* Metric.set(poolGauge("idle"), stats.idle)
      yield* Metric.set(poolGauge("waiting"), stats.waiting)
      const memory = process.memoryUsage()
      yield* Metric.set(memoryGauges.rss, memory.rss)
      yield* Metric.set(memoryGauges.heapTotal, memory.heapTotal)
      yield* Metric.set(memoryGauges.heapUsed, memory.heapUsed)
      yield* Metric.set(memoryGauges.external, memory.external)
      const holds = yield* pendingHolds
      if (Option.isSome(holds)) {
        yield* Metric.set(holdsOutstanding, holds.value.count)
        yield* Metric.set(creditsHeld, holds.value.amount)
      }
    })

    const authorized = Effect.gen(function* () {
      if (Option.isNone(config.metricsToken)) return
      const request = yield* HttpServerRequest.HttpServerRequest
      const bearer = request.headers["authorization"]?.match(/^\s*bearer\s+(\S+)\s*$/i)?.[1]
      // compared in constant time (their digests, of equal length): how long the comparison takes says nothing of the token
      const digest = (text: string) => Crypto.createHash("sha256").update(text).digest()
      if (bearer === undefined || !Crypto.timingSafeEqual(digest(bearer), digest(Redacted.value(config.metricsToken.value)))) {
        return yield* new InvalidToken({ message: "GET /metrics needs Authorization: Bearer <METRICS_TOKEN>.", challenge: BEARER_CHALLENGE })
      }
    })

    // under `serve --workers N`, every worker's metrics, each sample labelled with its worker (clusterMetrics.ts)
    const scrape = yield* clusterScrape(Effect.zipRight(refreshGauges, exporter.scrape))
    yield* router.get(
      "/metrics",
      exactly("/metrics", Effect.gen(function* () {
        yield* authorized
        const text = yield* scrape
        return HttpServerResponse.text(text, { contentType: "text/plain; version=0.0.4; charset=utf-8" })
      }))
    )
  }))
