/**
 * The SSRF guard on `read` and on the generic REST provider's base URL: loopback, private, link-local, metadata and reserved addresses are refused in
 * every spelling, through a hostname that resolves to one, and through a redirect; the operator's
 * allow-list is the only way in. A refusal costs nothing.
 */
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as Dns from "node:dns/promises"
import * as Os from "node:os"
import { isToolName, tools } from "../src/domain/tools.js"
import { Betas } from "../src/services/Betas.js"
import { Connections } from "../src/services/Connections.js"
import { EPSILON_TOKEN, EPSILON_WORDY_TOKEN } from "./upstreams/accounts.js"
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
        "http://[::ffff:0:7f00:1]/",
        "http://[2002:7f00:1::]/",
        "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/",
        "http://[64:ff9b::7f00:1]/",
        // NAT64 of 0.0.0.1 (the URL parser writes it [64:ff9b::1]), IPv4-compatible 0.0.0.10
        "http://[64:ff9b::0.0.0.1]/",
        "http://[::a]/",
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

  it.effect("an address of this machine's own interfaces is refused as such (a public one reaches what listens on every address)", () =>
    Effect.gen(function* () {
      const { key } = yield* givenOrg()
      for (const address of Object.values(Os.networkInterfaces()).flat()) {
        if (address === undefined || address.family !== "IPv4") continue
        const result = yield* callTool("read", { url: `http://${address.address}:5432/` }, { key })
        expectEnvelope(result, { ...refused, message: `${address.address} is an address of this machine` })
      }
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
      expectEnvelope(result, { ...refused, message: `${host} resolves to a private, loopback, link-local or reserved address.` })
      // which address it is, is not said: the gateway's resolver is no map of a network's private names
      expect(errorOf(result)?.message).not.toContain("127.")
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

  // `read` here tries builtin, then beta (Jina) and gamma (Firecrawl), as by default. A self-hosted reader may sit
  // in the operator's network, where a name public DNS does not know may resolve: what the guard refused, or
  // could not resolve, is never handed to them.
  it.effect("read hands no other provider a URL the guard refused or could not resolve: beta and gamma are never asked", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const { key, orgId } = yield* givenOrg({ credits: 50 })
      // `.invalid` never resolves (RFC 2606 §2); where this machine's resolver cannot be reached at all, the
      // lookup fails for now (EAI_AGAIN) rather than finding no such name
      const dns = yield* Effect.promise(() =>
        Dns.lookup("page.example.invalid").then(() => "resolved", (e: NodeJS.ErrnoException) => e.code ?? "failed"))
      const unresolved = dns === "ENOTFOUND"
        ? { ...refused, message: "page.example.invalid does not resolve" }
        : { status: 502, type: "provider", code: "provider_unavailable", retryable: true, billable: false, message: "could not be resolved" } as const
      const direct = yield* callTool("read", { url: "http://page.example.invalid/article" }, { key })
      expectEnvelope(direct, unresolved)
      // a public page's redirect to such a name: the same
      const redirected = yield* callTool("read", {
        url: `${u.pages.url}/redirect?to=${encodeURIComponent("http://page.example.invalid/admin")}`
      }, { key })
      expectEnvelope(redirected, dns === "ENOTFOUND" ? { ...refused, message: "page.example.invalid does not resolve" } : unresolved)
      // private addresses: written as one, and reached by a redirect
      expectEnvelope(yield* callTool("read", { url: "http://10.0.0.1/" }, { key }), refused)
      expectEnvelope(yield* callTool("read", { url: `${u.pages.url}/redirect?to=${encodeURIComponent("http://169.254.169.254/latest/")}` }, { key }), refused)
      expect(u.pages.hits("/redirect")).toBe(2)
      expect({ jina: u.jina.hits(), firecrawl: u.firecrawl.hits() }).toEqual({ jina: 0, firecrawl: 0 })
      expect(yield* books(orgId)).toMatchObject({ balance: 50, held: 0 })
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
        "http://localhost:9",
        // IPv6 spellings that carry an IPv4 address: translated, 6to4, Teredo, local-use NAT64
        "http://[::ffff:0:a9fe:a9fe]",
        "http://[2002:a9fe:a9fe::1]",
        "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]",
        "http://[64:ff9b:1::a9fe:a9fe]"
      ]
      for (const base_url of bases) {
        // refused when it is connected, and so never called
        const connected = yield* dashboard("POST", "/v1/connections", token, { provider: "epsilon", credentials: { base_url, token: "x-token-1" } })
        expectEnvelope(connected, { ...refused, message: "credentials.base_url is not allowed" })
        expect(connected.text).not.toContain(base_url)
        const result = yield* callTool("epsilon_request", { path: "/anything" }, { key })
        expectEnvelope(result, { status: 401, type: "auth", code: "credential_required", retryable: false, billable: false })
      }
      // a PDS named in a delta connection too
      const pds = yield* dashboard("POST", "/v1/connections", token, {
        provider: "delta",
        credentials: { identifier: "alice.test", app_password: "pw-1", service: "http://169.254.169.254" }
      })
      expectEnvelope(pds, { ...refused, message: "credentials.service is not allowed" })
      expect(yield* books(orgId)).toMatchObject({ balance: 50, held: 0 })
    }))

  it.effect("lets through what the operator allow-listed (127.0.0.2 here)", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      const { key } = yield* givenOrg()
      expectOk(yield* callTool("read", { url: `${u.pages.url}/article` }, { key }))
    }))
})

layer(gatewayLayer({ providers: { ssrfAllow: ["127.0.0.0/8"] } }), { excludeTestServices: true })("SSRF allow-list by CIDR", (it) => {
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

/**
 * Redirects carry nothing to another origin. An account tool's request is not followed there at all (the
 * answer says where it pointed); any other request keeps only harmless headers and no body. A 301/302 turns
 * a POST into a GET, a 303 anything but GET — as in the Fetch standard.
 */
layer(gatewayLayer({ providers: { ssrfAllow: ["127.0.0.0/8"] } }), { excludeTestServices: true })("redirects", (it) => {
  const connectTo = (baseUrl: string, orgId: Parameters<typeof connectionFor>[0]) => connectionFor(orgId, { base_url: baseUrl, token: EPSILON_TOKEN })

  it.effect("the generic REST provider: an API that echoes its request's headers does not give a key holder the connection's token", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      const member = yield* givenMember({ credits: 10 })
      const connected = yield* dashboard("POST", "/v1/connections", member.token, {
        provider: "epsilon",
        credentials: { base_url: `${u.rest.url}/api`, token: EPSILON_TOKEN }
      })
      expect(connected.status).toBe(201)
      for (const tool of ["epsilon_request", "run"] as const) {
        const result = tool === "run"
          ? yield* callTool("run", { tool: "epsilon_request", input: { path: "/headers" } }, { key: member.key })
          : yield* callTool(tool, { path: "/headers" }, { key: member.key })
        expectOk(result)
        expect(result.text).not.toContain(EPSILON_TOKEN)
        expect(result.text).toContain(`"authorization":"[redacted]"`)
      }
      // an answer searched for it loses nothing else: a `__proto__` member stays (an assignment dropped it)
      const entries = yield* callTool("epsilon_request", { path: "/entries" }, { key: member.key })
      expectOk(entries)
      expect(entries.text).toContain(`"body":{"__proto__":{"kept":1},"asked_by":"[redacted]"}`)
    }))

  it.effect("the generic REST provider: a token in words is not given back by its key alone, nor percent-encoded as a form or RFC 3986 writes it", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      const member = yield* givenMember({ credits: 10 })
      const connected = yield* dashboard("POST", "/v1/connections", member.token, {
        provider: "epsilon",
        credentials: { base_url: `${u.rest.url}/api`, ...EPSILON_WORDY_TOKEN }
      })
      expect(connected.status).toBe(201)
      // the key after the scheme's word: a 2xx was searched for the whole header value only (an error answer word by word)
      const issued = yield* callTool("epsilon_request", { path: "/api-token-auth" }, { key: member.key })
      expectOk(issued)
      expect(issued.text).toContain(`"body":{"token":"[redacted]"}`)
      const links = yield* callTool("epsilon_request", { path: "/links" }, { key: member.key })
      expectOk(links)
      expect(links.text).toContain("page=2&access_token=[redacted]\"")
      expect(links.text).toContain("page=0&access_token=[redacted]\"")
      const key = EPSILON_WORDY_TOKEN.token.split(" ")[1] ?? ""
      for (const spelling of [key, encodeURIComponent(key), new URLSearchParams({ t: key }).toString().slice(2), "tok%21en%28secret%29"]) {
        expect(issued.text + links.text).not.toContain(spelling)
      }
    }))

  it.effect("the generic REST provider: a caller's many long credential-like query values do not push the connection's token out of an error answer's search", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const { key, orgId } = yield* givenOrg({ credits: 10 })
      yield* connectTo(u.rest.url, orgId)
      // an API that quotes the request's Authorization in its refusal
      u.rest.fault({ status: 400, body: { message: `refused for Bearer ${EPSILON_TOKEN}` }, times: 1 })
      // ten values, each with characters every percent-encoding writes its own way: 80 spellings, all longer than the token's
      const query = Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`token${i}`, `${"v".repeat(100)} *:${i}`]))
      const refused = yield* callTool("epsilon_request", { path: "/items", query }, { key })
      expectEnvelope(refused, { status: 502, type: "provider", code: "provider_rejected", retryable: false, billable: false, message: "refused for [redacted]" })
      expect(refused.text).not.toContain(EPSILON_TOKEN)
    }))

  it.effect("an account tool's cross-origin redirect is not followed: the token and the body stay home, the answer says where", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const { key, orgId } = yield* givenOrg({ credits: 10 })
      yield* connectTo(u.rest.url, orgId)
      // the other origin: another port (the GitHub fake records whatever reaches it)
      u.rest.fault({ status: 302, headers: { location: `${u.github.url}/collect?x=1` }, times: 1 })
      const result = yield* callTool("epsilon_request", { method: "POST", path: "/items", body: { card: "4242" } }, { key })
      expectEnvelope(result, { status: 502, type: "provider", code: "provider_rejected", retryable: false, billable: false, message: `${u.github.url}/collect` })
      expect(errorOf(result)?.message).not.toContain("x=1")
      expect(u.github.requests).toHaveLength(0)
      expect(yield* books(orgId)).toMatchObject({ balance: 10, held: 0 })

      // a delta connection with its own PDS: the app password never reaches the other host either
      u.resetAll()
      yield* Effect.orDie(Effect.flatMap(Connections, (c) =>
        c.connect(orgId, "delta", { identifier: "alice.test", app_password: "pw-stays-home", service: u.rest.url }, null)))
      u.rest.fault({ status: 307, headers: { location: `${u.github.url}/xrpc/com.atproto.server.createSession` }, times: 1 })
      const post = yield* callTool("delta_post", { text: "hello" }, { key })
      expectEnvelope(post, { status: 502, type: "provider", code: "provider_rejected", retryable: false, billable: false, message: "not followed" })
      expect(u.github.requests).toHaveLength(0)
    }))

  it.effect("on the same origin, 301/302 turn a POST into a GET and 303 anything but GET; 307 keeps method and body; the token stays", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      const { key, orgId } = yield* givenOrg({ credits: 20 })
      yield* connectTo(u.rest.url, orgId)
      const cases = [
        { status: 301, method: "POST", followed: "GET" },
        { status: 302, method: "POST", followed: "GET" },
        { status: 302, method: "PUT", followed: "PUT" },
        { status: 303, method: "PATCH", followed: "GET" },
        { status: 307, method: "POST", followed: "POST" },
        { status: 308, method: "DELETE", followed: "DELETE" }
      ] as const
      for (const c of cases) {
        u.resetAll()
        u.rest.fault({ status: c.status, headers: { location: "/moved" }, times: 1 })
        const result = yield* callTool("epsilon_request", { method: c.method, path: "/items", body: { n: 1 } }, { key })
        expectOk(result)
        const second = u.rest.requests[1]
        expect(second?.method, `${c.status} after ${c.method}`).toBe(c.followed)
        expect(second?.path).toBe("/moved")
        expect(second?.headers["authorization"]).toBe(`Bearer ${EPSILON_TOKEN}`)
        if (c.followed === "GET") {
          expect(second?.body).toBe("")
          expect(second?.headers["content-type"]).toBeUndefined()
        } else {
          expect(second?.json).toEqual({ n: 1 })
        }
      }
    }))

  it.effect("an account tool's same-origin redirect out of the base URL's path is not followed: the token and the body stay under it", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const { key, orgId } = yield* givenOrg({ credits: 10 })
      yield* connectTo(`${u.rest.url}/api`, orgId)
      const rejected = { status: 502, type: "provider", code: "provider_rejected", retryable: false, billable: false } as const
      // the same host, another path (its admin API, say); then the same, behind an encoded slash a server may decode
      for (const location of ["/admin/echo?token=1", "/api/..%2Fadmin/echo", "/api-other/echo"]) {
        u.rest.fault({ status: 307, headers: { location }, times: 1 })
        const result = yield* callTool("epsilon_request", { method: "POST", path: "/items", body: { card: "4242" } }, { key })
        expectEnvelope(result, { ...rejected, message: `redirected the request to ${u.rest.url}${location.split("?")[0]} (HTTP 307)` })
        expect(errorOf(result)?.message).not.toContain("token=1")
      }
      expect(u.rest.requests.map((r) => `${r.method} ${r.path}`)).toEqual(Array.from({ length: 3 }, () => "POST /api/items"))
      expect(yield* books(orgId)).toMatchObject({ balance: 10, held: 0 })
      // under the base path, a redirect is followed with the token and the body
      u.resetAll()
      u.rest.fault({ status: 307, headers: { location: "/api/moved" }, times: 1 })
      expectOk(yield* callTool("epsilon_request", { method: "POST", path: "/items", body: { card: "4242" } }, { key }))
      expect(u.rest.requests.map((r) => [r.path, r.headers["authorization"], r.json])).toEqual([
        ["/api/items", `Bearer ${EPSILON_TOKEN}`, { card: "4242" }],
        ["/api/moved", `Bearer ${EPSILON_TOKEN}`, { card: "4242" }]
      ])
    }))

  it.effect("a page's cross-origin redirect is followed with only harmless headers, and every hop passes the guard", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const { key } = yield* givenOrg()
      const result = yield* callTool("read", { url: `${u.pages.url}/redirect?to=${encodeURIComponent(`${u.itunes.url}/search?term=x&entity=software`)}` }, { key })
      expect(result.status, result.text).toBe(200)
      const hop = u.itunes.requests[0]
      expect(Object.keys(hop?.headers ?? {}).filter((h) => !["host", "connection", "accept", "user-agent", "accept-encoding", "accept-language", "sec-fetch-mode"].includes(h))).toEqual([])
    }))
})

const connectionFor = (orgId: import("../src/domain/ids.js").OrgId, credentials: Record<string, unknown>) =>
  Effect.orDie(Effect.flatMap(Connections, (c) => c.connect(orgId, "epsilon", credentials, null)))

// The readers (Jina, Firecrawl) fetch the caller's URL themselves, and may be the operator's own, inside its network:
// `beta_read`, `gamma_scrape`, and `read` on them alone hand them no URL the guard refuses — by its text, or by
// where its name resolves — or cannot resolve.
layer(gatewayLayer({ providers: { readProviders: ["beta", "gamma"] } }), { excludeTestServices: true })("the readers' URLs", (it) => {
  it.effect("beta_read, gamma_scrape and read on beta and gamma: a URL the guard refuses or cannot resolve reaches no reader, at no cost", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      u.resetAll()
      const { key, orgId } = yield* givenOrg({ credits: 50 })
      yield* Effect.orDie(Effect.flatMap(Betas, (b) => Effect.all(["beta_read", "gamma_scrape"].filter(isToolName).filter((t) => tools[t].beta).map((t) => b.enable(orgId, t)))))
      const host = Os.hostname()
      const loopback = (yield* Effect.promise(() => Dns.lookup(host, { all: true }).catch(() => []))).some((a) => a.address.startsWith("127."))
      const dns = yield* Effect.promise(() =>
        Dns.lookup("page.example.invalid").then(() => "resolved", (e: NodeJS.ErrnoException) => e.code ?? "failed"))
      const unresolved = dns === "ENOTFOUND"
        ? { ...refused, message: "page.example.invalid does not resolve" }
        : { status: 502, type: "provider", code: "provider_unavailable", retryable: true, billable: false, message: "could not be resolved" } as const
      for (const tool of ["beta_read", "gamma_scrape", "read"] as const) {
        expectEnvelope(yield* callTool(tool, { url: "http://169.254.169.254/latest/meta-data/iam/" }, { key }), refused)
        expectEnvelope(yield* callTool(tool, { url: "http://page.example.invalid/admin" }, { key }), unresolved)
        // a name that resolves to a loopback address (this machine's own name, where it does)
        if (loopback) {
          expectEnvelope(yield* callTool(tool, { url: `http://${host}:5432/` }, { key }), {
            ...refused,
            message: `${host} resolves to a private, loopback, link-local or reserved address`
          })
        }
      }
      expect({ jina: u.jina.hits(), firecrawl: u.firecrawl.hits() }).toEqual({ jina: 0, firecrawl: 0 })
      expect(yield* books(orgId)).toMatchObject({ balance: 50, held: 0 })
      // a public page is read by them as before
      expectOk(yield* callTool("beta_read", { url: "https://example.com/page" }, { key }))
      expectOk(yield* callTool("read", { url: "https://example.com/page" }, { key }))
    }))
})
