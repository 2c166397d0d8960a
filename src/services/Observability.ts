/**
 * Export of what `Telemetry` records: metrics in Prometheus text (pulled at `GET /metrics`, nothing
 * runs between scrapes), and traces over OTLP/HTTP when `OTEL_EXPORTER_OTLP_ENDPOINT` is set. Without an
 * endpoint the tracer is disabled: spans become no-ops, so tracing costs nothing on the request path.
 */
import * as Headers from "@effect/platform/Headers"
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Scope from "effect/Scope"
import * as Tracer from "effect/Tracer"
import { ServerConfig } from "../config.js"
import { withoutApiKeys } from "../domain/ids.js"
import { cachedSuccess } from "./cachedSuccess.js"
import * as Crypto from "node:crypto"

export const SERVICE_VERSION = "0.1.0"

export class MetricsExporter extends Context.Tag("MetricsExporter")<MetricsExporter, {
  /** Every metric of the process, in Prometheus text exposition format. */
  readonly scrape: Effect.Effect<string>
}>() {}

/**
 * The exporter (OpenTelemetry's metrics SDK and Prometheus serializer, about 1 MB of modules) is loaded at the
 * first scrape, not at start: a process nobody scrapes never loads it. What a scrape reports is the same either
 * way — the metrics are recorded in Effect's registry from the start, and the exporter reads their cumulative
 * values at each scrape.
 */
export const MetricsExporterLive = Layer.scoped(
  MetricsExporter,
  Effect.gen(function* () {
    const config = yield* ServerConfig
    // the producer is registered in the layer's scope: it ends with the service, however late it began
    const scope = yield* Effect.scope
    const loaded = yield* cachedSuccess(
      Effect.promise(() =>
        Promise.all([
          import("@effect/opentelemetry/Metrics"),
          import("@effect/opentelemetry/Resource"),
          import("@opentelemetry/exporter-prometheus")
        ])
      ).pipe(
        Effect.flatMap(([Metrics, Resource, Prometheus]) =>
          Effect.gen(function* () {
            const exporter = new Prometheus.PrometheusExporter({ preventServerStart: true })
            yield* Metrics.registerProducer(yield* Metrics.makeProducer, () => exporter).pipe(Scope.extend(scope))
            return { exporter, serializer: new Prometheus.PrometheusSerializer() }
          }).pipe(Effect.provide(Resource.layer({ serviceName: config.serviceName, serviceVersion: SERVICE_VERSION })))
        )
      )
    )
    return MetricsExporter.of({
      scrape: Effect.flatMap(loaded, ({ exporter, serializer }) =>
        Effect.promise(() => exporter.collect()).pipe(
          Effect.map(({ resourceMetrics }) => serializer.serialize(resourceMetrics))
        ))
    })
  })
)

/**
 * OTLP/HTTP export of every span (JSON, or binary protobuf with `OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf`; the
 * configured headers on each request) when an endpoint is configured; otherwise the tracer is off, the HTTP
 * server's span included. The exporter and its HTTP client (undici) are loaded only when an endpoint is
 * configured.
 */
/**
 * The request headers a server span shows as `<redacted>`: the platform's own (`authorization`, `cookie`,
 * `set-cookie`, `x-api-key`), and any other whose name says it carries a credential (`proxy-authorization`,
 * `x-firebase-appcheck`, `x-auth-token`, an API key or session of any spelling, the signed assertions an identity
 * proxy in front adds: Cloudflare Access's `cf-access-jwt-assertion`, Google IAP's `x-goog-iap-jwt-assertion`, an AWS
 * ALB's `x-amzn-oidc-data`, Azure's `x-ms-client-principal`).
 */
export const REDACTED_HEADERS: ReadonlyArray<string | RegExp> = [
  "authorization", "cookie", "set-cookie", "x-api-key", "proxy-authorization", "x-firebase-appcheck",
  /auth|token|secret|key|pass|session|cookie|signature|credential|jwt|assertion|oidc|principal|saml|csrf|xsrf/i
]

/**
 * A span of a trace that is not sampled: the W3C trace context's sampled flag, which OpenTelemetry's default sampler
 * (parent-based, https://opentelemetry.io/docs/specs/otel/trace/sdk/#parentbased) follows, and which the OTLP tracer
 * does not read. It records nothing and is exported nowhere; its children are not sampled either.
 */
class UnsampledSpan implements Tracer.Span {
  readonly _tag = "Span"
  readonly spanId = Crypto.randomBytes(8).toString("hex")
  readonly sampled = false
  readonly attributes: ReadonlyMap<string, unknown> = new Map()
  readonly links: ReadonlyArray<Tracer.SpanLink>
  status: Tracer.SpanStatus
  constructor(
    readonly name: string,
    readonly traceId: string,
    readonly parent: Option.Option<Tracer.AnySpan>,
    readonly context: Context.Context<never>,
    links: Iterable<Tracer.SpanLink>,
    startTime: bigint,
    readonly kind: Tracer.SpanKind
  ) {
    this.links = Array.from(links)
    this.status = { _tag: "Started", startTime }
  }
  end(endTime: bigint, exit: Exit.Exit<unknown, unknown>): void {
    this.status = { _tag: "Ended", startTime: this.status.startTime, endTime, exit }
  }
  attribute(): void {}
  event(): void {}
  addLinks(): void {}
}

/**
 * What a span says of a request's URL, as its log line says it: the path without its query (a key or token sent there
 * by mistake, `?api_key=…`, `?token=<METRICS_TOKEN>`), an API key in the path shortened. The platform's server span
 * writes `url.full` and `url.query` as sent; this tracer takes those attributes out of every span it makes.
 */
const withoutQueries = (tracer: Tracer.Tracer): Tracer.Tracer =>
  Tracer.make({
    context: tracer.context,
    span: (name, parent, context, links, startTime, kind, options) => {
      // a trace its caller did not sample (a `traceparent` whose flags say so) is not exported, nor its spans' children
      if (Option.isSome(parent) && !parent.value.sampled) return new UnsampledSpan(name, parent.value.traceId, parent, context, links, startTime, kind)
      const span = tracer.span(name, parent, context, links, startTime, kind, options)
      return new Proxy(span, {
        get: (target, property, receiver) =>
          property === "attribute"
            ? (key: string, value: unknown) => {
              if (key === "url.query") return
              if ((key === "url.full" || key === "url.path") && typeof value === "string") {
                return target.attribute(key, withoutApiKeys(value.split("?")[0] ?? ""))
              }
              return target.attribute(key, value)
            }
            : Reflect.get(target, property, receiver)
      })
    }
  })

/** What a failed export's transport error says: its code (`ECONNREFUSED`) or message, through its causes. */
const causeOf = (cause: unknown): string | undefined => {
  for (let c = cause, depth = 0; c instanceof Error && depth < 5; c = c.cause, depth++) {
    const code: unknown = Reflect.get(c, "code")
    if (typeof code === "string") return code
    if (!(c.cause instanceof Error) && c.message !== "") return c.message
  }
  return undefined
}

/** The least time between two WARN lines that say spans could not be exported. */
const EXPORT_WARNING_INTERVAL_MS = 60_000

export const TracingLive = Layer.unwrapEffect(
  Effect.map(ServerConfig, (config) =>
    Option.match(config.otlpTracesUrl, {
      // Off means off for the HTTP server's per-request span too: `HttpMiddleware.tracer` makes a no-op span
      // then, but still parses each request's URL, copies its headers to redact them and provides the span to
      // the request's context. The server inherits both settings from the layers it is built on.
      onNone: () =>
        Layer.mergeAll(Layer.setTracerEnabled(false), Layer.locallyScoped(HttpMiddleware.currentTracerDisabledWhen, () => true)),
      onSome: (tracesUrl) =>
        Layer.unwrapEffect(
          Effect.promise(() =>
            Promise.all([
              import("@effect/opentelemetry/OtlpTracer"),
              import("@effect/opentelemetry/OtlpSerialization"),
              import("@effect/platform-node/NodeHttpClient"),
              import("@effect/platform/HttpClient"),
              import("@effect/platform/HttpClientError")
            ])
          ).pipe(Effect.map(([OtlpTracer, OtlpSerialization, NodeHttpClient, HttpClient, HttpClientError]) => {
            const ms = config.otlpTimeoutMs
            // Each export request cut short after OTEL_EXPORTER_OTLP_TIMEOUT. The exporter sets no timeout and its
            // client none either (undici's is an hour): a collector that takes connections and does not answer held
            // each export, its spans and its socket, while every further batch started another, and the exporter's
            // pause after a failed export never came. Now such an export fails in time (after its retries) and the
            // exporter pauses as for a collector that is down (Effect-TS/effect#5374 is the same growth for an
            // unreachable one).
            //
            // A failed export is said at WARN, at most once a minute (the exporter says it at DEBUG only: a collector
            // that is down, or refuses the API key, went unnoticed), with where the spans went but not the headers.
            const where = new URL(tracesUrl)
            const shown = `${where.origin}${where.pathname}`
            let warnedAt = Number.NEGATIVE_INFINITY
            const warn = (reason: string) =>
              Effect.flatMap(Clock.currentTimeMillis, (now) => {
                if (now - warnedAt < EXPORT_WARNING_INTERVAL_MS) return Effect.void
                warnedAt = now
                return Effect.logWarning(
                  `could not export spans to ${shown} (${reason}): they are dropped while the collector does not take them`
                )
              })
            const timedOut = Layer.effect(
              HttpClient.HttpClient,
              Effect.map(HttpClient.HttpClient, (client) =>
                HttpClient.transform(client, (response, request) =>
                  Effect.timeoutFail(response, {
                    duration: Duration.millis(ms),
                    onTimeout: () => new HttpClientError.RequestError({ request, reason: "Transport", description: `no answer within ${ms} ms` })
                  }).pipe(
                    Effect.tap((answer) => answer.status >= 300 ? warn(`HTTP ${answer.status}`) : Effect.void),
                    Effect.tapError((error) => warn(error.description ?? causeOf(error.cause) ?? error.reason))
                  )))
            )
            return Layer.merge(Layer.unwrapScoped(Effect.map(OtlpTracer.make({
              url: tracesUrl,
              headers: Redacted.value(config.otlpHeaders),
              resource: { serviceName: config.serviceName, serviceVersion: SERVICE_VERSION },
              exportInterval: Duration.seconds(1)
            }), (tracer) => Layer.setTracer(withoutQueries(tracer)))).pipe(
              Layer.provide(config.otlpProtocol === "http/protobuf" ? OtlpSerialization.layerProtobuf : OtlpSerialization.layerJson),
              Layer.provide(timedOut),
              Layer.provide(NodeHttpClient.layerUndici)
            ), Layer.locallyScoped(Headers.currentRedactedNames, REDACTED_HEADERS))
          }))
        )
    })
  )
)
