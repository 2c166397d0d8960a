/**
 * Fixed documents (`/docs`, `/openapi.json`, the dashboard's files) sent compressed to a client that accepts it:
 * each compressed variant is made once, when first asked for, off the event loop (zlib's thread pool), and kept.
 * Which variant a request gets is its `Accept-Encoding` (RFC 9110 §12.5.3); every variant says `Vary:
 * Accept-Encoding`. Tool answers are not compressed: a call's CPU is the gateway's cost (docs/performance.md).
 */
import * as HttpBody from "@effect/platform/HttpBody"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as Zlib from "node:zlib"
import { cachedSuccess } from "../services/cachedSuccess.js"
import { weightedMembers } from "./weighted.js"

/** The content codings sent, the one preferred first: brotli's answer is the smaller. */
const CODINGS = ["br", "gzip"] as const
export type ContentCoding = (typeof CODINGS)[number]

const TOKEN = /^[!#$%&'*+.^_`|~0-9a-z-]+$/

/**
 * The weight of each coding an `Accept-Encoding` value names (`x-gzip` is `gzip`, RFC 9110 §8.4.1.3), `*`
 * included. A member that is not a coding, or whose weight is not valid, is skipped.
 */
const weightsOf = (header: string): ReadonlyMap<string, number> => {
  const weights = new Map<string, number>()
  for (const { value, weight } of weightedMembers(header)) {
    if (!TOKEN.test(value)) continue
    const coding = value === "x-gzip" ? "gzip" : value
    weights.set(coding, Math.max(weights.get(coding) ?? 0, weight))
  }
  return weights
}

/**
 * The coding to answer a request in, by its `Accept-Encoding`: the acceptable one (weight above 0) of highest
 * weight, this gateway's preference among equals (brotli, gzip, then none). A coding not named takes the weight
 * of `*`, if given. `identity` (no coding) is acceptable unless refused (`identity;q=0`, or `*;q=0` without it);
 * not named, it comes last (the lowest weight named: `gzip;q=0.5` asks for gzip). No header: no coding, which
 * every client reads. Nothing acceptable at all: no coding all the same (RFC 9110 §12.1 lets a server disregard
 * the field rather than answer 406).
 */
export const preferredCoding = (acceptEncoding: string | undefined): ContentCoding | "identity" => {
  if (acceptEncoding === undefined) return "identity"
  const weights = weightsOf(acceptEncoding)
  const lowest = Math.min(1, ...Array.from(weights.values()).filter((weight) => weight > 0))
  const weightOf = (coding: string) => weights.get(coding) ?? weights.get("*") ?? (coding === "identity" ? lowest : 0)
  let best: ContentCoding | "identity" = "identity"
  let bestWeight = 0
  for (const coding of [...CODINGS, "identity" as const]) {
    const weight = weightOf(coding)
    if (weight > bestWeight) {
      best = coding
      bestWeight = weight
    }
  }
  return best
}

/** Compressed once per process: gzip at its best, brotli at a quality that costs about twice gzip's time (11 is a hundred times). */
const compress = (coding: ContentCoding, bytes: Uint8Array) =>
  Effect.async<Uint8Array>((resume) => {
    const done = (error: Error | null, result: Buffer) => resume(error === null ? Effect.succeed(result) : Effect.die(error))
    if (coding === "gzip") Zlib.gzip(bytes, { level: Zlib.constants.Z_BEST_COMPRESSION }, done)
    else {
      Zlib.brotliCompress(bytes, {
        params: {
          [Zlib.constants.BROTLI_PARAM_MODE]: Zlib.constants.BROTLI_MODE_TEXT,
          [Zlib.constants.BROTLI_PARAM_QUALITY]: 5,
          [Zlib.constants.BROTLI_PARAM_SIZE_HINT]: bytes.length
        }
      }, done)
    }
  })

/** Text compresses; images and icons here are already compressed, or too small to matter. */
const compressible = (contentType: string) => /^(?:text\/|application\/(?:json|javascript)\b|image\/svg\+xml\b)/.test(contentType)

/** `response` with `name` added to its `Vary` (kept once, whatever its case). */
export const varyOn = (name: string) => (response: HttpServerResponse.HttpServerResponse) => {
  const present = (response.headers["vary"] ?? "").split(",").map((v) => v.trim()).filter((v) => v !== "")
  const added = name.split(",").map((v) => v.trim()).filter((v) => v !== "" && !present.some((p) => p.toLowerCase() === v.toLowerCase()))
  return added.length === 0 ? response : HttpServerResponse.setHeader(response, "vary", [...present, ...added].join(", "))
}

/**
 * A fixed answer, served in the coding each request prefers: its compressed variants are made when first asked
 * for and kept (a variant no smaller than the answer is not sent; a variant's ETag, if the answer has one, is the
 * answer's with the coding added). An answer whose body is not text in memory is served as it is.
 */
export const negotiatedEncoding = (
  response: HttpServerResponse.HttpServerResponse
): Effect.Effect<Effect.Effect<HttpServerResponse.HttpServerResponse, never, HttpServerRequest.HttpServerRequest>> =>
  Effect.gen(function* () {
    const body = response.body
    if (body._tag !== "Uint8Array" || !compressible(body.contentType)) return Effect.succeed(response)
    const identity = varyOn("Accept-Encoding")(response)
    const etag = identity.headers["etag"]
    const variant = (coding: ContentCoding) =>
      cachedSuccess(Effect.map(compress(coding, body.body), (bytes) => {
        if (bytes.length >= body.body.length) return identity
        const encoded = HttpServerResponse.setHeader(HttpServerResponse.setBody(identity, HttpBody.uint8Array(bytes, body.contentType)), "content-encoding", coding)
        // other bytes, another tag (RFC 9110 §8.8.3): a cache must not take one variant for the other
        return etag === undefined ? encoded : HttpServerResponse.setHeader(encoded, "etag", etag.replace(/"$/, `-${coding}"`))
      }))
    const variants: Record<ContentCoding, Effect.Effect<HttpServerResponse.HttpServerResponse>> = {
      br: yield* variant("br"),
      gzip: yield* variant("gzip")
    }
    return Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
      const coding = preferredCoding(request.headers["accept-encoding"])
      return coding === "identity" ? Effect.succeed(identity) : variants[coding]
    })
  })
