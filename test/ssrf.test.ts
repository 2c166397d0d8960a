/**
 * The SSRF guard on `read` and on the generic REST provider's base URL: loopback, private, link-local, metadata and reserved addresses are refused in
 * every spelling, through a hostname that resolves to one, and through a redirect; the operator's
 * allow-list is the only way in. A refusal costs nothing.
 */
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as Dns from "node:dns/promises"
import * as Os from "node:os"
import { errorOf, expectEnvelope, expectOk } from "./support/assert.js"
import { books, callTool, dashboard, gatewayLayer, givenMember, givenOrg, TestUpstreams } from "./support/gateway.js"

const refused = { status: 400, type: "validation", code: "url_not_allowed", retryable: false, billable: false } as const

layer(gatewayLayer(), { excludeTestServices: true })("SSRF guard", (it) => {
  it.effect("refuses private and special addresses in every spelling", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      const port = new URL(u.pages.url).port
      const { key, orgId } = yield* givenOrg({ credits: 50 })
      const urls = [
        `http://127.0.0.1:${port}/article`,
        "http://169.254.169.254/latest/meta-data/",
        `http://[::1]:${port}/`,
        "http://10.0.0.1/",
        "http://172.16.5.4/",
        "http://192.168.1.1/",
        "http://100.64.0.1/",
        "http://0.0.0.0/",
        "http://[::ffff:127.0.0.1]/",
        "http://[::ffff:a9fe:a9fe]/",
        "http://[fd00:ec2::254]/",
        "http://[fe80::1]/",
        "http://2130706433/",
        "http://0177.0.0.1/",
        "http://0x7f.0.0.1/",
        "http://127.1/",
        "http://localhost/",
        "http://api.localhost/",
        "http://user:pass@example.com/"
      ]
      for (const url of urls) {
        const result = yield* callTool("read", { url }, { key })
        expectEnvelope(result, refused)
        expect(errorOf(result)?.message).toContain("not allowed")
      }
      expect(yield* books(orgId)).toEqual(expect.objectContaining({ balance: 50, held: 0, holdsByStatus: {} }))
      expect(u.pages.hits()).toBe(0)
    }))

  it.effect("a refused URL is refused before the reservation: an empty balance still gets url_not_allowed, not 402", () =>
    Effect.gen(function* () {
      const { key, orgId } = yield* givenOrg({ credits: 0 })
      const result = yield* callTool("read", { url: "http://169.254.169.254/latest/meta-data/" }, { key })
      expectEnvelope(result, refused)
      expect(yield* books(orgId)).toEqual(expect.objectContaining({ balance: 0, held: 0, holdsByStatus: {} }))
    }))

  it.effect("refuses a hostname that resolves to loopback", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      const host = Os.hostname()
      const addresses = yield* Effect.promise(() => Dns.lookup(host, { all: true }).catch(() => []))
      if (!addresses.some((a) => a.address.startsWith("127.") || a.address === "::1")) {
        console.log(`skipped: ${host} does not resolve to a loopback address on this machine`)
        return
      }
      const { key } = yield* givenOrg()
      const result = yield* callTool("read", { url: `http://${host}:${new URL(u.pages.url).port}/article` }, { key })
      expectEnvelope(result, { ...refused, message: "resolves to" })
    }))

  it.effect("refuses a redirect to a private address; the hold is voided", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const port = new URL(u.pages.url).port
      const { key, orgId } = yield* givenOrg({ credits: 50 })
      for (const target of [`http://127.0.0.1:${port}/article`, "http://169.254.169.254/latest/", "http://[::1]/"]) {
        const result = yield* callTool("read", { url: `${u.pages.url}/redirect?to=${encodeURIComponent(target)}` }, { key })
        expectEnvelope(result, refused)
      }
      expect(u.pages.hits("/redirect")).toBe(3)
      expect(u.pages.hits("/article")).toBe(0)
      expect(yield* books(orgId)).toMatchObject({ balance: 50, held: 0, holdsByStatus: { voided: 3 } })
    }))

  it.effect("the generic REST provider: a connection's base URL to any special address is refused, at no cost", () =>
    Effect.gen(function* () {
      const { key, token, orgId } = yield* givenMember({ credits: 50 })
      const bases = [
        "http://127.0.0.1:9",
        "http://10.0.0.1",
        "http://192.168.0.1",
        "http://169.254.169.254",
        "http://[::1]:9",
        "http://0.0.0.0",
        "http://[::ffff:127.0.0.1]",
        "http://2130706433",
        "http://0177.0.0.1",
        "http://0x7f000001",
        "http://localhost:9"
      ]
      for (const base_url of bases) {
        const connected = yield* dashboard("POST", "/v1/connections", token, { provider: "epsilon", credentials: { base_url, token: "x" } })
        if (connected.status !== 201) {
          // refused when connecting: just as good
          expect(connected.status, `${base_url}: ${connected.text}`).toBe(400)
          continue
        }
        const result = yield* callTool("epsilon_request", { path: "/anything" }, { key })
        expectEnvelope(result, refused)
      }
      expect(yield* books(orgId)).toMatchObject({ balance: 50, held: 0 })
    }))

  it.effect("lets through what the operator allow-listed (127.0.0.2 here)", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      const { key } = yield* givenOrg()
      expectOk(yield* callTool("read", { url: `${u.pages.url}/article` }, { key }))
    }))
})

layer(gatewayLayer({ ssrfAllow: ["127.0.0.0/8"] }), { excludeTestServices: true })("SSRF allow-list by CIDR", (it) => {
  it.effect("an allow-listed range is reachable, others still are not", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      const port = new URL(u.pages.url).port
      const { key } = yield* givenOrg()
      // 127.0.0.2 is where the pages server listens; 127.0.0.1 is allowed by the range but nothing answers there.
      expectOk(yield* callTool("read", { url: `http://127.0.0.2:${port}/plain` }, { key }))
      expectEnvelope(yield* callTool("read", { url: "http://10.1.2.3/" }, { key }), refused)
    }))
})
