/**
 * What a client sees of a fixed document's content codings (RFC 9110 §12.5.3): compressed for a client that
 * accepts it, the same bytes once decoded, as they are for any other client; `Vary: Accept-Encoding` on each;
 * `HEAD` answered as `GET`, without the body.
 */
import { Effect } from "effect"
import * as Zlib from "node:zlib"
import { expect } from "vitest"
import { requestBytes } from "./gateway.js"

const varies = (vary: string | undefined) => (vary ?? "").split(",").map((v) => v.trim().toLowerCase())

/** Checks `path` (a `GET` answered 200) in each coding; its sizes, identity and compressed. */
export const expectNegotiatedEncoding = (path: string) =>
  Effect.gen(function* () {
    const identity = yield* requestBytes(path)
    expect(identity.status).toBe(200)
    expect(identity.headers["content-encoding"]).toBeUndefined()
    expect(varies(identity.headers["vary"])).toContain("accept-encoding")
    expect(identity.body.length).toBeGreaterThan(0)

    const gzip = yield* requestBytes(path, { "accept-encoding": "gzip" })
    expect(gzip.status).toBe(200)
    expect(gzip.headers["content-encoding"]).toBe("gzip")
    expect(varies(gzip.headers["vary"])).toContain("accept-encoding")
    expect(gzip.headers["content-type"]).toBe(identity.headers["content-type"])
    expect(gzip.headers["cache-control"]).toBe(identity.headers["cache-control"])
    expect(Number(gzip.headers["content-length"])).toBe(gzip.body.length)
    expect(gzip.body.length).toBeLessThan(identity.body.length)
    expect(Zlib.gunzipSync(gzip.body).equals(identity.body)).toBe(true)

    // what browsers send: brotli is preferred among equals
    const br = yield* requestBytes(path, { "accept-encoding": "gzip, deflate, br, zstd" })
    expect(br.headers["content-encoding"]).toBe("br")
    expect(varies(br.headers["vary"])).toContain("accept-encoding")
    expect(Zlib.brotliDecompressSync(br.body).equals(identity.body)).toBe(true)

    // weights are honoured, and q=0 refuses
    expect((yield* requestBytes(path, { "accept-encoding": "br;q=0.5, gzip" })).headers["content-encoding"]).toBe("gzip")
    for (const refused of ["gzip;q=0", "br;q=0, gzip;q=0", "identity, gzip;q=0.5, br;q=0.5", ""]) {
      const answer = yield* requestBytes(path, { "accept-encoding": refused })
      expect(answer.headers["content-encoding"], refused).toBeUndefined()
      expect(answer.body.equals(identity.body), refused).toBe(true)
      expect(varies(answer.headers["vary"]), refused).toContain("accept-encoding")
    }

    // HEAD: the headers of GET (the length of the variant it would send), no body
    const headGzip = yield* requestBytes(path, { "accept-encoding": "gzip" }, "HEAD")
    expect(headGzip.status).toBe(200)
    expect(headGzip.headers["content-encoding"]).toBe("gzip")
    expect(varies(headGzip.headers["vary"])).toContain("accept-encoding")
    expect(headGzip.headers["content-length"]).toBe(String(gzip.body.length))
    expect(headGzip.body.length).toBe(0)
    const head = yield* requestBytes(path, {}, "HEAD")
    expect(head.status).toBe(200)
    expect(head.headers["content-encoding"]).toBeUndefined()
    expect(head.headers["content-length"]).toBe(String(identity.body.length))
    expect(head.body.length).toBe(0)
    return { identity: identity.body.length, gzip: gzip.body.length, br: br.body.length }
  })
