/**
 * `GET /v1/artifacts/{id}`: the bytes of a file kept from a tool answer, unchanged, to the org that owns it.
 * `Content-Type`, `Content-Length`, `ETag` (its SHA-256); a single `Range` (206, or 416 when it cannot be
 * served), honoured only while `If-Range` (when sent) still names this ETag; `If-None-Match` (304) with a
 * list of ETags, weak ones, or `*`. The file never runs as a page of the gateway's origin: `nosniff` and a
 * sandboxing `Content-Security-Policy`. What the file is is read first, its bytes only as the answer is written, a
 * chunk at a time (`Artifacts.read`): a 304, a HEAD (the server writes no body) and a 416 read none.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { RangeNotSatisfiable } from "../domain/errors.js"
import { Artifacts, readerOf } from "../services/Artifacts.js"
import { Api, CurrentCaller } from "./Api.js"
import { cutOffOnFailure } from "./envelope.js"

/** The byte range a `Range` header asks for: undefined for the whole file, "unsatisfiable" when it cannot be served. */
export const parseRange = (header: string | undefined, size: number): { start: number; end: number } | undefined | "unsatisfiable" => {
  if (header === undefined) return undefined
  const match = /^bytes=(\d*)-(\d*)$/.exec(header.trim())
  // Several ranges, or another unit: served whole (a server may ignore Range).
  if (match === null) return undefined
  const [, first = "", last = ""] = match
  if (first === "" && last === "") return "unsatisfiable"
  if (first === "") {
    const suffix = Number(last)
    if (suffix === 0) return "unsatisfiable"
    return { start: Math.max(0, size - suffix), end: size - 1 }
  }
  const start = Number(first)
  const end = last === "" ? size - 1 : Math.min(Number(last), size - 1)
  if (start >= size || end < start) return "unsatisfiable"
  return { start, end }
}

/** Whether `If-None-Match` names this file (weak comparison, as RFC 9110 has it for GET): `*`, or a listed ETag. */
export const noneMatch = (header: string | undefined, sha256: string): boolean => {
  if (header === undefined) return false
  if (header.trim() === "*") return true
  return header.split(",").some((tag) => tag.trim().replace(/^W\//, "") === `"${sha256}"`)
}

export const ArtifactsLive = HttpApiBuilder.group(Api, "artifacts", (handlers) =>
  Effect.gen(function* () {
    const artifacts = yield* Artifacts
    return handlers.handle("get", ({ path }) =>
      Effect.gen(function* () {
        const caller = yield* CurrentCaller
        const request = yield* HttpServerRequest.HttpServerRequest
        const reader = readerOf(caller)
        // what the file is first: a 304, a HEAD, a 416 are answered without reading its bytes, a range reads only its own
        const ref = yield* artifacts.find(reader, path.id)
        const size = ref.bytes
        const etag = `"${ref.sha256}"`
        const headers = {
          etag,
          "accept-ranges": "bytes",
          "cache-control": "private, max-age=3600",
          "x-content-type-options": "nosniff",
          "content-security-policy": "default-src 'none'; sandbox"
        }
        if (noneMatch(request.headers["if-none-match"], ref.sha256)) return HttpServerResponse.empty({ status: 304, headers })
        const ifRange = request.headers["if-range"]
        // an empty file has no byte to range over: it is served whole (a server may ignore Range)
        const range = (ifRange !== undefined && ifRange.trim() !== etag) || size === 0
          ? undefined
          : parseRange(request.headers["range"], size)
        if (range === "unsatisfiable") {
          return yield* new RangeNotSatisfiable({
            message: `The range ${request.headers["range"] ?? ""} is outside the file's ${size} bytes.`,
            size
          })
        }
        const { start, end } = range ?? { start: 0, end: size - 1 }
        const length = end + 1 - start
        // (the first chunk is read here, before the headers: a database that fails is a 500, not a cut-off 200; HEAD
        // reads none, the server writing no body)
        const body = length === 0 || request.method === "HEAD"
          ? Stream.empty
          : cutOffOnFailure(request, yield* artifacts.read(reader, ref, { start, end }))
        return HttpServerResponse.stream(body, {
          status: range === undefined ? 200 : 206,
          contentType: ref.content_type,
          // (the platform writes a length only when it is not 0)
          headers: {
            ...headers,
            "content-length": String(length),
            ...(range === undefined ? {} : { "content-range": `bytes ${start}-${end}/${size}` })
          }
        })
      }))
  }))
