/**
 * The pure rules under the services: canonical JSON, prices, months, the SSRF address classes, truncation,
 * nesting depth, and the upstream error message.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import { chargeFor, reserveFor } from "../src/domain/pricing.js"
import { tools } from "../src/domain/tools.js"
import { deeperThan, jsonProblem } from "../src/domain/json.js"
import { truncate } from "../src/providers/text.js"
import { canonicalJson, fingerprint, validateKey } from "../src/services/Idempotency.js"
import { decodeText, upstreamMessage } from "../src/services/ProviderClient.js"
import { charsetOf, checkedContentType } from "../src/domain/contentType.js"
import { withoutApiKeys } from "../src/domain/ids.js"
import { parseDataUrl } from "../src/providers/common.js"
import { base62 } from "../src/services/random.js"
import { makePolicy, refusedAddress, refusedUrl } from "../src/services/Ssrf.js"
import { millisToNextMonth, monthOf } from "../src/services/time.js"
import { makeUsageIds, USAGE_ID_LIMIT } from "../src/services/usageIds.js"

describe("canonical JSON and fingerprints", () => {
  it("sorts keys at every level and keeps array order", () => {
    expect(canonicalJson({ b: 1, a: { d: [3, { z: 1, y: 2 }], c: null } })).toBe("{\"a\":{\"c\":null,\"d\":[3,{\"y\":2,\"z\":1}]},\"b\":1}")
    expect(fingerprint("weather", { q: "x", lat: 1 })).toBe(fingerprint("weather", { lat: 1, q: "x" }))
    expect(fingerprint("weather", { q: "x" })).not.toBe(fingerprint("read", { q: "x" }))
    expect(fingerprint("weather", { q: "x" })).not.toBe(fingerprint("weather", { q: "y" }))
  })

  it("validates Idempotency-Key: 1 to 255 visible ASCII characters", () => {
    for (const ok of ["a", "k".repeat(255), "order-123_ABC:x/y", "~!@#"]) {
      expect(Exit.isSuccess(Effect.runSyncExit(validateKey(ok)))).toBe(true)
    }
    for (const bad of ["", "k".repeat(256), "a b", "tab\tx", "é", "line\n"]) {
      expect(Exit.isFailure(Effect.runSyncExit(validateKey(bad)))).toBe(true)
    }
  })
})

describe("prices", () => {
  it("per call, per block of results, per block of characters", () => {
    expect(reserveFor(tools.weather.price, 1)).toBe(1)
    expect(reserveFor(tools.search.price, 10)).toBe(1)
    expect(reserveFor(tools.search.price, 11)).toBe(2)
    expect(reserveFor(tools.search.price, 100)).toBe(10)
    expect(chargeFor(tools.search.price, 0, 10)).toBe(1)
    expect(chargeFor(tools.search.price, 25, 10)).toBe(3)
    expect(reserveFor(tools.read.price, 100_000)).toBe(5)
    expect(reserveFor(tools.read.price, 500_000)).toBe(25)
    expect(chargeFor(tools.read.price, 20_001, 5)).toBe(2)
  })

  it("a charge never exceeds the hold", () => {
    expect(chargeFor(tools.search.price, 1_000, 2)).toBe(2)
  })
})

describe("months", () => {
  it("are UTC calendar months", () => {
    expect(monthOf(Date.parse("2026-01-31T23:59:59Z"))).toBe(202601)
    expect(monthOf(Date.parse("2026-02-01T00:00:00Z"))).toBe(202602)
    expect(monthOf(Date.parse("2026-12-31T23:00:00Z"))).toBe(202612)
    expect(millisToNextMonth(Date.parse("2026-12-31T23:00:00Z"))).toBe(3_600_000)
    expect(millisToNextMonth(Date.parse("2026-02-28T00:00:00Z"))).toBe(24 * 3_600_000)
  })
})

describe("the SSRF guard's address classes", () => {
  const policy = makePolicy([])
  it("refuses loopback, private, link-local, metadata, reserved and mapped forms", () => {
    for (const address of [
      "127.0.0.1", "127.255.0.9", "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.0.1", "169.254.169.254",
      "100.64.1.1", "0.0.0.0", "224.0.0.1", "255.255.255.255", "::1", "::", "fe80::1", "fd00:ec2::254", "fc00::1",
      "::ffff:127.0.0.1", "::ffff:7f00:1", "::ffff:10.0.0.1", "::ffff:a9fe:a9fe", "64:ff9b::a9fe:a9fe", "ff02::1"
    ]) {
      expect(refusedAddress(policy, address), address).toBeDefined()
    }
  })

  it("lets public addresses through", () => {
    for (const address of ["93.184.216.34", "8.8.8.8", "172.32.0.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"]) {
      expect(refusedAddress(policy, address), address).toBeUndefined()
    }
  })

  it("normalizes URL spellings of IPs before checking", () => {
    for (const url of ["http://2130706433/", "http://0177.0.0.1/", "http://0x7f000001/", "http://127.1/", "http://[::ffff:127.0.0.1]/"]) {
      expect(refusedUrl(policy, new URL(url)), url).toBeDefined()
    }
    expect(refusedUrl(policy, new URL("https://example.com/"))).toBeUndefined()
    expect(refusedUrl(policy, new URL("file:///etc/passwd"))).toBeDefined()
  })

  it("the allow-list takes hosts and CIDRs", () => {
    const allow = makePolicy(["internal.example", "10.0.0.0/8", "::1"])
    expect(refusedUrl(allow, new URL("http://internal.example/"))).toBeUndefined()
    expect(refusedAddress(allow, "10.9.9.9")).toBeUndefined()
    expect(refusedAddress(allow, "::1")).toBeUndefined()
    expect(refusedAddress(allow, "192.168.0.1")).toBeDefined()
  })
})

describe("helpers", () => {
  it("truncate keeps surrogate pairs whole", () => {
    expect(truncate("abcdef", 3)).toEqual({ text: "abc", truncated: true })
    expect(truncate("ab😀", 3)).toEqual({ text: "ab", truncated: true })
    expect(truncate("abc", 3)).toEqual({ text: "abc", truncated: false })
  })

  it("jsonProblem finds an infinite number or a __proto__ key at any depth, in objects and arrays alike", () => {
    expect(jsonProblem(JSON.parse('{"a":[1,"x",{"b":[true,null,2.5]}]}'), 8)).toBeUndefined()
    expect(jsonProblem(JSON.parse("1e400"), 8)).toBe("infinite_number")
    expect(jsonProblem(JSON.parse('[1,"x",-1e400]'), 8)).toBe("infinite_number")
    expect(jsonProblem(JSON.parse('{"a":{"b":[{"c":1e999}]}}'), 8)).toBe("infinite_number")
    expect(jsonProblem(JSON.parse('{"__proto__":{}}'), 8)).toBe("proto_key")
    expect(jsonProblem(JSON.parse('[{"a":[{"__proto__":1}]}]'), 8)).toBe("proto_key")
    expect(jsonProblem(JSON.parse('{"a":[[[[1]]]]}'), 4)).toBe("too_deep")
    expect(jsonProblem(JSON.parse('{"a":[[[1]]]}'), 4)).toBeUndefined()
    expect(deeperThan(JSON.parse('[1e400,{"__proto__":1}]'), 8)).toBe(false)
  })

  it("deeperThan measures nesting without recursion", () => {
    expect(deeperThan({ a: { b: 1 } }, 2)).toBe(false)
    expect(deeperThan({ a: { b: { c: 1 } } }, 2)).toBe(true)
    let deep: unknown = 1
    for (let i = 0; i < 100_000; i++) deep = [deep]
    expect(deeperThan(deep, 64)).toBe(true)
  })

  it("upstreamMessage finds the message in common error bodies", () => {
    const enc = (s: string) => new TextEncoder().encode(s)
    expect(upstreamMessage(enc("{\"error\":{\"message\":\"nested\"}}"))).toBe("nested")
    expect(upstreamMessage(enc("{\"message\":\"top\"}"))).toBe("top")
    expect(upstreamMessage(enc("{\"error\":\"plain\"}"))).toBe("plain")
    expect(upstreamMessage(enc("{\"error\":true,\"reason\":\"bad latitude\"}"))).toBe("bad latitude")
    expect(upstreamMessage(enc("Service down"))).toBe("Service down")
    expect(upstreamMessage(enc("x".repeat(1000))).length).toBeLessThanOrEqual(301)
  })

  it("base62 draws from the whole alphabet", () => {
    const s = base62(10_000)
    expect(s).toMatch(/^[0-9A-Za-z]{10000}$/)
    expect(new Set(s).size).toBe(62)
  })
})

describe("usage ids shown", () => {
  const ids = makeUsageIds(Buffer.from("000102030405060708090a0b0c0d0e0f", "hex"))

  it("read gives back every row id shown, and different row ids are shown differently", () => {
    const rowIds = [0, 1, 2, 3, 1000, 1001, 2 ** 26 - 1, 2 ** 26, 2 ** 31, 2 ** 32 + 7, USAGE_ID_LIMIT - 1]
    for (let i = 0; i < 2000; i++) rowIds.push(Math.floor(Math.random() * USAGE_ID_LIMIT))
    const shown = new Set<string>()
    for (const rowId of rowIds) {
      const id = ids.show(rowId)
      expect(id).toMatch(/^\d{1,16}$/)
      expect(ids.read(id)).toBe(rowId)
      shown.add(id)
    }
    expect(shown.size).toBe(new Set(rowIds).size)
  })

  it("consecutive row ids are shown neither consecutive nor in order: gaps between an org's ids count nothing", () => {
    const shown = Array.from({ length: 1000 }, (_, i) => Number(ids.show(5000 + i)))
    const steps = shown.slice(1).map((n, i) => n - (shown[i] ?? 0))
    // about half the steps go up and half down; none is the row ids' 1
    const up = steps.filter((d) => d > 0).length
    expect(up).toBeGreaterThan(400)
    expect(up).toBeLessThan(600)
    expect(steps.filter((d) => Math.abs(d) === 1)).toEqual([])
    // another key, other ids
    const other = makeUsageIds(Buffer.from("ff0102030405060708090a0b0c0d0e0f", "hex"))
    expect(other.show(5000)).not.toBe(ids.show(5000))
  })

  it("a value no row id is shown as is refused", () => {
    for (const bad of ["", "-1", "1.5", "abc", "1e3", String(USAGE_ID_LIMIT), "99999999999999999", " 12"]) expect(ids.read(bad)).toBeUndefined()
    expect(() => ids.show(-1)).toThrow(RangeError)
    expect(() => ids.show(USAGE_ID_LIMIT)).toThrow(RangeError)
  })
})

describe("an upstream answer's charset", () => {
  it("is read trimmed and in lower case; a label padded any way is one decoder, JSON is UTF-8", () => {
    const latin1 = Uint8Array.from([0x63, 0x61, 0x66, 0xe9])
    for (const type of ["text/plain; charset=ISO-8859-1", "text/plain; charset=\"  iso-8859-1  \"", "text/plain;charset = latin1"]) {
      expect(decodeText(latin1, type), type).toBe("café")
    }
    expect(charsetOf("text/plain; charset=\"utf-8   \"")).toBe("utf-8")
    expect(decodeText(Buffer.from("café"), "application/problem+json; charset=iso-8859-1")).toBe("café")
  })
})

describe("what is said of an API key, a media type, a data: URL", () => {
  it("an API key is shortened wherever it is in a text, whatever follows it", () => {
    const key = `tg_${"A1b2".repeat(8)}`
    expect(withoutApiKeys(`/v1/keys/${key}`)).toBe("/v1/keys/tg_A1b2…")
    // followed by a letter or digit, it was left whole
    expect(withoutApiKeys(`/v1/keys/${key}x9`)).toBe("/v1/keys/tg_A1b2…")
    expect(withoutApiKeys("tg_short")).toBe("tg_short")
  })

  it("a media type as RFC 9110 writes one, an empty parameter included; anything else application/octet-stream", () => {
    for (const valid of ["image/png", "text/html;", "application/json; charset=utf-8;", "text/html; ; charset=utf-8", 'text/plain; name="a b"']) {
      expect(checkedContentType(valid), valid).toBe(valid)
    }
    for (const invalid of ["", "text", "text/plain\r\nSet-Cookie: a=b", "image/p\u00e9ng", "a/b; c"]) {
      expect(checkedContentType(invalid), invalid).toBe("application/octet-stream")
    }
  })

  it("a data: URL as the URL standard reads it: its fragment not data, no type text/plain, spaces around it dropped", () => {
    expect(Buffer.from(parseDataUrl("data:image/png;base64,aGk=#frag")?.data ?? []).toString()).toBe("hi")
    expect(Buffer.from(parseDataUrl("data:,hi#x")?.data ?? []).toString()).toBe("hi")
    expect(parseDataUrl("data:,hi")?.contentType).toBe("text/plain;charset=US-ASCII")
    expect(parseDataUrl("data:;charset=utf-8,hi")?.contentType).toBe("text/plain;charset=utf-8")
    expect(parseDataUrl("  data:text/plain,hi ")?.contentType).toBe("text/plain")
    expect(Buffer.from(parseDataUrl("data:text/plain,%E0%A4%A")?.data ?? []).toString("latin1")).toBe("\u00e0\u00a4%A")
  })
})
