/**
 * Export of what `Telemetry` records: metrics in Prometheus text (pulled at `GET /metrics`, nothing
 * runs between scrapes), and traces over OTLP/HTTP when `OTEL_EXPORTER_OTLP_ENDPOINT` is set. Without an
 * endpoint the tracer is disabled: spans become no-ops, so tracing costs nothing on the request path.
 */
import * as Metrics from "@effect/opentelemetry/Metrics"
import * as Resource from "@effect/opentelemetry/Resource"
import { PrometheusExporter, PrometheusSerializer } from "@opentelemetry/exporter-prometheus"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { ServerConfig } from "../config.js"

export const SERVICE_VERSION = "0.1.0"

export class MetricsExporter extends Context.Tag("MetricsExporter")<MetricsExporter, {
  /** Every metric of the process, in Prometheus text exposition format. */
  readonly scrape: Effect.Effect<string>
}>() {}

export const MetricsExporterLive = Layer.scoped(
  MetricsExporter,
  Effect.gen(function* () {
    const exporter = new PrometheusExporter({ preventServerStart: true })
    yield* Metrics.registerProducer(yield* Metrics.makeProducer, () => exporter)
    const serializer = new PrometheusSerializer()
    return MetricsExporter.of({
      scrape: Effect.promise(() => exporter.collect()).pipe(
        Effect.map(({ resourceMetrics }) => serializer.serialize(resourceMetrics))
      )
    })
  })
).pipe(
  Layer.provide(Layer.unwrapEffect(Effect.map(ServerConfig, (config) =>
    Resource.layer({ serviceName: config.serviceName, serviceVersion: SERVICE_VERSION })
  )))
)

/**
 * OTLP/HTTP (JSON) export of every span when an endpoint is configured; otherwise the tracer is off. The
 * exporter and its HTTP client (undici) are loaded only when an endpoint is configured.
 */
export const TracingLive = Layer.unwrapEffect(
  Effect.map(ServerConfig, (config) =>
    Option.match(config.otlpEndpoint, {
      onNone: () => Layer.setTracerEnabled(false),
      onSome: (endpoint) =>
        Layer.unwrapEffect(
          Effect.promise(() =>
            Promise.all([
              import("@effect/opentelemetry/OtlpTracer"),
              import("@effect/opentelemetry/OtlpSerialization"),
              import("@effect/platform-node/NodeHttpClient")
            ])
          ).pipe(Effect.map(([OtlpTracer, OtlpSerialization, NodeHttpClient]) =>
            OtlpTracer.layer({
              url: `${endpoint}/v1/traces`,
              resource: { serviceName: config.serviceName, serviceVersion: SERVICE_VERSION },
              exportInterval: Duration.seconds(1)
            }).pipe(Layer.provide(OtlpSerialization.layerJson), Layer.provide(NodeHttpClient.layerUndici))
          ))
        )
    })
  )
)
