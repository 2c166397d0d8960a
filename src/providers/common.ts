/**
 * What every provider module shares: decoding an upstream answer with its Schema, and turning a decode
 * failure into `normalization_failed` with a message that names the field and points at `/v1/run`.
 */
import { Effect, Schema } from "effect"
import { describeParseError } from "../domain/parse.js"
import { InvalidRequest, NormalizationFailed, type ProviderError } from "../domain/errors.js"
import type { GatewayConfig } from "../services/GatewayConfig.js"
import type { ProviderClient } from "../services/ProviderClient.js"

/** What a provider call can end in, besides its output. */
export type ProviderCallError = ProviderError | NormalizationFailed | InvalidRequest

export { describeParseError } from "../domain/parse.js"

export type ProviderEffect<A> = Effect.Effect<A, ProviderCallError, ProviderClient | GatewayConfig>

/** A tool's answer together with the provider that produced it. */
export interface Answered<A> {
  readonly provider: string
  readonly output: A
}

/** Decode an upstream answer; a mismatch is a normalization failure (the provider was called and answered). */
export const decodeUpstream = <A, I>(provider: string, schema: Schema.Schema<A, I>, tool: string) => {
  const decode = Schema.decodeUnknown(schema, { errors: "all" })
  return (body: unknown): Effect.Effect<A, NormalizationFailed> =>
    decode(body).pipe(
      Effect.mapError((error) =>
        new NormalizationFailed({
          message: `The ${provider} answer could not be mapped to the ${tool} output (${describeParseError(error)}). ` +
            `POST /v1/run with {"tool":"${tool}","input":...} returns the provider's raw answer.`
        })
      )
    )
}

export const invalid = (message: string) => new InvalidRequest({ message })
