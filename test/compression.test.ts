/**
 * Which content coding a fixed document is sent in, by the request's `Accept-Encoding` (RFC 9110 §12.5.3):
 * weights honoured, `q=0` refuses, `*` stands for what is not named, `identity` acceptable unless refused; and
 * what is sent in it (src/http/compression.ts). The routes that use it are tested with theirs.
 */
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Zlib from "node:zlib"
import { negotiatedEncoding, preferredCoding } from "../src/http/compression.js"

describe("Accept-Encoding", () => {
  it.each([
    // no header: what every client reads; an empty one asks for no coding
    [undefined, "identity"],
    ["", "identity"],
    ["gzip", "gzip"],
    ["GZip", "gzip"],
    ["x-gzip", "gzip"],
    ["br", "br"],
    // equals: brotli, then gzip, then none
    ["gzip, deflate, br, zstd", "br"],
    ["gzip, identity", "gzip"],
    ["*", "br"],
    // weights
    ["br;q=0.5, gzip", "gzip"],
    ["gzip;q=0.2, identity;q=0.5", "identity"],
    ["gzip ; Q=0.9 , br;q=0.8", "gzip"],
    // identity not named comes last, not first with an implied 1
    ["gzip;q=0.5", "gzip"],
    ["gzip;q=0, br;q=0.3", "br"],
    ["*;q=0.5, gzip;q=0.6", "gzip"],
    // q=0 refuses
    ["gzip;q=0", "identity"],
    ["gzip;q=0.000", "identity"],
    ["br;q=0, *", "gzip"],
    ["*;q=0, gzip", "gzip"],
    ["identity;q=0, gzip;q=0.1", "gzip"],
    ["*;q=0, identity", "identity"],
    // nothing acceptable: none all the same (RFC 9110 §12.1), rather than a 406
    ["identity;q=0", "identity"],
    ["*;q=0", "identity"],
    ["deflate, zstd", "identity"],
    // an element that is not a coding with a valid weight counts for nothing
    ["gzip;q=2", "identity"],
    ["gzip;q=0.5x, br;q=1.5", "identity"],
    ["gzip;q=1.0000", "identity"],
    [", ,gzip,,", "gzip"]
  ] as const)("%j → %s", (header, coding) => {
    expect(preferredCoding(header)).toBe(coding)
  })
})

const served = (response: HttpServerResponse.HttpServerResponse, acceptEncoding: string) =>
  Effect.flatMap(negotiatedEncoding(response), (serve) =>
    Effect.provideService(
      serve,
      HttpServerRequest.HttpServerRequest,
      HttpServerRequest.fromWeb(new Request("http://localhost/", { headers: { "accept-encoding": acceptEncoding } }))
    ))

const bytesOf = (response: HttpServerResponse.HttpServerResponse) =>
  response.body._tag === "Uint8Array" ? Buffer.from(response.body.body) : Buffer.alloc(0)

describe("a fixed document's variants", () => {
  const text = "<!doctype html>" + "<p>the same paragraph, again</p>".repeat(200)

  it.effect("a compressed variant's ETag differs from the document's, and from the other coding's", () =>
    Effect.gen(function* () {
      const document = HttpServerResponse.html(text).pipe(HttpServerResponse.setHeader("etag", `W/"v1"`))
      const gzip = yield* served(document, "gzip")
      const br = yield* served(document, "br")
      const identity = yield* served(document, "identity")
      expect(identity.headers["etag"]).toBe(`W/"v1"`)
      expect(gzip.headers["etag"]).toBe(`W/"v1-gzip"`)
      expect(br.headers["etag"]).toBe(`W/"v1-br"`)
      expect(Zlib.gunzipSync(bytesOf(gzip)).toString("utf8")).toBe(text)
      expect(Zlib.brotliDecompressSync(bytesOf(br)).toString("utf8")).toBe(text)
    }))

  it.effect("what compression does not shrink, and what is not text, is sent as it is (and says what it varies on)", () =>
    Effect.gen(function* () {
      const tiny = yield* served(HttpServerResponse.text("ok"), "gzip")
      expect(tiny.headers["content-encoding"]).toBeUndefined()
      expect(tiny.headers["vary"]).toBe("Accept-Encoding")
      expect(bytesOf(tiny).toString("utf8")).toBe("ok")
      const image = yield* served(HttpServerResponse.uint8Array(new Uint8Array(4096), { contentType: "image/png" }), "gzip")
      expect(image.headers["content-encoding"]).toBeUndefined()
      expect(bytesOf(image).length).toBe(4096)
    }))
})
