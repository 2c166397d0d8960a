/**
 * `GET /v1/artifacts/{id}`: the bytes of a file kept from a tool answer, unchanged, to the org that owns it.
 * `Content-Type`, `Content-Length`, `ETag` (its SHA-256); a single `Range` (206, or 416 when it cannot be
 * served); `If-None-Match` (304).
 */
import { HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { RangeNotSatisfiable } from "../domain/errors.js"
import { Artifacts } from "../services/Artifacts.js"
import { Api, CurrentCaller } from "./Api.js"

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

export const ArtifactsLive = HttpApiBuilder.group(Api, "artifacts", (handlers) =>
  Effect.gen(function* () {
    const artifacts = yield* Artifacts
    return handlers.handle("get", ({ path }) =>
      Effect.gen(function* () {
        const caller = yield* CurrentCaller
        const request = yield* HttpServerRequest.HttpServerRequest
        const { data, ref } = yield* artifacts.get(caller.orgId, path.id)
        const etag = `"${ref.sha256}"`
        const headers = {
          etag,
          "accept-ranges": "bytes",
          "cache-control": "private, max-age=3600"
        }
        if (request.headers["if-none-match"] === etag) return HttpServerResponse.empty({ status: 304, headers })
        const range = parseRange(request.headers["range"], data.length)
        if (range === "unsatisfiable") {
          return yield* new RangeNotSatisfiable({
            message: `The range ${request.headers["range"] ?? ""} is outside the file's ${data.length} bytes.`,
            size: data.length
          })
        }
        if (range === undefined) {
          return HttpServerResponse.uint8Array(data, { status: 200, contentType: ref.content_type, headers })
        }
        return HttpServerResponse.uint8Array(data.subarray(range.start, range.end + 1), {
          status: 206,
          contentType: ref.content_type,
          headers: { ...headers, "content-range": `bytes ${range.start}-${range.end}/${data.length}` }
        })
      }))
  }))
