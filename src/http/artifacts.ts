/**
 * `GET /v1/artifacts/{id}`: the bytes of a file kept from a tool answer, unchanged, to the org that owns it.
 * `Content-Type`, `Content-Length`, `ETag` (its SHA-256); a single `Range` (206, or 416 when it cannot be
 * served), honoured only while `If-Range` (when sent) still names this ETag; `If-None-Match` (304) with a
 * list of ETags, weak ones, or `*`. The file never runs as a page of the gateway's origin: `nosniff` and a
 * sandboxing `Content-Security-Policy`.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
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
        const { data, ref } = yield* artifacts.get(caller.orgId, path.id)
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
        const range = ifRange !== undefined && ifRange.trim() !== etag
          ? undefined
          : parseRange(request.headers["range"], data.length)
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
