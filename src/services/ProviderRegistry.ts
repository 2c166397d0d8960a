/**
 * The one way to the providers: for each tool of the catalog, whether this gateway can run it, the
 * credentials a call runs with (the org's connection, for account tools), what its provider refuses on the
 * input's face, the call itself (normalized, or raw for `POST /v1/run`), and what a raw answer delivered in
 * the tool's price units. The gateway's pipeline, the hosted MCP server and the public catalog depend on
 * this service; the bindings (src/providers/index.ts) are its table.
 *
 * The providers' own needs (the HTTP client, their configuration, the HTML converter, Bluesky's sessions)
 * are provided here; a call brings what belongs to it (`CallContext`), and both are provided together, as
 * one context (each `provide` copies the fiber's whole context).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { ProvidersConfig } from "../config.js"
import type { InvalidRequest, UrlNotAllowed } from "../domain/errors.js"
import type { OrgId } from "../domain/ids.js"
import { catalog, type ConnectionError, type CredentialFor, type ToolInput, type ToolName, type ToolOutput } from "../domain/tools.js"
import { type Answered, failedAt, type ProviderFailure, type Raw } from "../providers/common.js"
import { bindings, configured, type Implementation } from "../providers/index.js"
import type { ArtifactSink } from "./Artifacts.js"
import { Connections } from "./Connections.js"
import { DeltaSessions } from "./DeltaSessions.js"
import { type ConversionOwner, HtmlConverter } from "./HtmlConverter.js"
import { type CallDeadline, type CallOrg, ProviderClient, type ProviderIdempotencyKey } from "./ProviderClient.js"

/** What belongs to one call: where its files go, its deadline, its key at providers, whose pages it converts. */
export type CallContext = Context.Context<ArtifactSink | CallDeadline | ProviderIdempotencyKey | ConversionOwner | CallOrg>

export class ProviderRegistry extends Context.Tag("ProviderRegistry")<ProviderRegistry, {
  /** Whether this gateway can run the tool (its provider is configured; an account tool also needs a connection). */
  readonly configured: (tool: ToolName) => boolean
  /** The credentials of the org's connection to the tool's provider (`credential_required` without one). */
  readonly credentials: <T extends ToolName>(tool: T, orgId: OrgId) => Effect.Effect<CredentialFor<T>, ConnectionError<T>>
  /** What the tool's provider refuses from the input alone (no I/O), before any credit is reserved. */
  readonly preflight: <T extends ToolName>(
    tool: T,
    input: ToolInput<T>,
    credentials: CredentialFor<T>
  ) => Effect.Effect<void, UrlNotAllowed | InvalidRequest>
  /**
   * Call the tool's provider(s) and normalize the answer. The answer names the provider that gave it; a failure, the
   * provider it is put down to (`ProviderFailure`).
   */
  readonly call: <T extends ToolName>(
    tool: T,
    input: ToolInput<T>,
    credentials: CredentialFor<T>,
    context: CallContext
  ) => Effect.Effect<Answered<ToolOutput<T>>, ProviderFailure>
  /** Call the tool's provider(s) and answer the raw upstream answer (`POST /v1/run`); named as `call`'s. */
  readonly callRaw: <T extends ToolName>(
    tool: T,
    input: ToolInput<T>,
    credentials: CredentialFor<T>,
    context: CallContext
  ) => Effect.Effect<Answered<Raw>, ProviderFailure>
  /**
   * What a raw answer delivered, in the tool's price units: what its normalization would count, so that
   * `POST /v1/run` is charged as the tool would be; an answer the tool cannot normalize counts nothing.
   */
  readonly units: <T extends ToolName>(tool: T, input: ToolInput<T>, raw: Raw) => Effect.Effect<number>
  /**
   * Work on an answer made from an upstream answer of `bytes` bytes (its encoding), in the turn large answers take
   * (`ProviderClient.digest`): one at a time, each after the event loop has had a turn.
   */
  readonly inTurn: <A, E, R>(bytes: number, work: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}>() {}

/** An answer's `bytes`: its upstream answer's. */
const sizeOf = (raw: Raw): { readonly bytes?: number } => (raw.bytes === undefined ? {} : { bytes: raw.bytes })

export const make = Effect.gen(function* () {
  const config = yield* ProvidersConfig
  const connections = yield* Connections
  // the providers' services, built once
  const client = yield* ProviderClient
  const context = Context.make(ProvidersConfig, config).pipe(
    Context.add(ProviderClient, client),
    Context.add(HtmlConverter, yield* HtmlConverter),
    Context.add(DeltaSessions, yield* DeltaSessions)
  )
  // a call runs with them and its own context, provided as one (each `provide` copies the fiber's whole context)
  const withCall = (own: CallContext) => Effect.provide(Context.merge(context, own))
  const implementation = <T extends ToolName>(tool: T): Implementation<T> => bindings[tool].tool
  // the configuration does not change while the process runs
  const runnable = new Map(Object.entries(bindings).map(([name, binding]) => [name, configured(binding.tool, config)]))

  return ProviderRegistry.of({
    configured: (tool) => runnable.get(tool) === true,
    credentials: (tool, orgId) => bindings[tool].credentials(connections, orgId),
    preflight: (tool, input, credentials) => {
      const impl = implementation(tool)
      return impl.check === undefined ? Effect.void : impl.check(input, credentials, config)
    },
    call: (tool, input, credentials, own) => {
      const impl = implementation(tool)
      return Effect.flatMap(impl.fetch(input, credentials), (raw) =>
        // a failure of the normalization is the answering provider's
        failedAt(raw.provider, Effect.map(impl.normalize(input, raw), (output) => ({ provider: raw.provider, output, ...sizeOf(raw) }))))
        .pipe(withCall(own))
    },
    callRaw: (tool, input, credentials, own) =>
      Effect.map(implementation(tool).fetch(input, credentials), (raw) => ({ provider: raw.provider, output: raw, ...sizeOf(raw) })).pipe(
        withCall(own)
      ),
    units: (tool, input, raw) => {
      const def: { readonly units: (output: ToolOutput<typeof tool>) => number } = catalog[tool]
      return Effect.match(implementation(tool).normalize(input, raw), {
        onFailure: () => 0,
        onSuccess: (output) => def.units(output)
      }).pipe(Effect.provide(context))
    },
    inTurn: client.digest
  })
})

export const ProviderRegistryLive = Layer.effect(ProviderRegistry, make)
