/**
 * The dashboard API and connections: connect a provider account, the credentials stored only encrypted,
 * account tools using them, keys with spend limits and tool allow-lists, the org, betas, usage — and no
 * way for one org to see or use another's.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Clock, Context, Effect, Exit, Fiber, Layer, Option, Redacted, Schema } from "effect"
import * as Crypto from "node:crypto"
import { type AccountProvider, accountProviders, MAX_HEADER_TOKEN } from "../src/domain/connections.js"
import { OrgId } from "../src/domain/ids.js"
import { type ToolName, tools } from "../src/domain/tools.js"
import { Betas } from "../src/services/Betas.js"
import { Connections, ConnectionsLive } from "../src/services/Connections.js"
import { DeltaSessions, DeltaSessionsLive } from "../src/services/DeltaSessions.js"
import { Encryption, type EncryptionKeyError, EncryptionLive, parseKey } from "../src/services/Encryption.js"
import { IdentityConfig, ProvidersConfig, ServerConfig } from "../src/config.js"
import { errorOf, expectEnvelope, expectOk } from "./support/assert.js"
import {
  books,
  callTool,
  dashboard,
  devToken,
  gatewayLayer,
  givenMember,
  type HttpResult,
  TEST_ENCRYPTION_KEY,
  TestUpstreams,
  type Upstreams
} from "./support/gateway.js"
import { CREDENTIALS, EPSILON_TOKEN } from "./upstreams/accounts.js"
import { type Upstream, upstream } from "../src/testing/harness.js"

const JsonObject = Schema.Record({ key: Schema.String, value: Schema.Unknown })
const bodyOf = (r: HttpResult) => Schema.decodeUnknownSync(JsonObject)(r.body)
const listOf = (r: HttpResult) => Schema.decodeUnknownSync(Schema.Struct({ data: Schema.Array(JsonObject) }))(r.body).data

/** The credentials each provider's fake expects (epsilon's names the fake's URL). */
const credentialsFor = (u: Upstreams, provider: AccountProvider): Record<string, unknown> =>
  provider === "epsilon" ? { base_url: u.rest.url, token: EPSILON_TOKEN } : { ...CREDENTIALS[provider] }

interface AccountCase {
  readonly tool: ToolName
  readonly input: Record<string, unknown>
  readonly upstream: (u: Upstreams) => Upstream
  /** What the fake must have received. */
  readonly sent: { readonly method: string; readonly path: string | RegExp; readonly header?: readonly [string, string | RegExp] }
  readonly answer: Record<string, unknown>
}

const accountCases: ReadonlyArray<AccountCase> = [
  {
    tool: "delta_post",
    input: { text: "Hello from the gateway", langs: ["en"] },
    upstream: (u) => u.bluesky,
    sent: { method: "POST", path: "/xrpc/com.atproto.repo.createRecord", header: ["authorization", /^Bearer [\w-]+\.[\w-]+\.sig$/] },
    answer: { provider: "delta", uri: expect.stringMatching(/^at:\/\/did:plc:alice\/app\.bsky\.feed\.post\//), cid: "bafyreib2rxk3rh6kzwq" }
  },
  {
    tool: "delta_like",
    input: { uri: "at://did:plc:bob/app.bsky.feed.post/1", cid: "bafy-bob" },
    upstream: (u) => u.bluesky,
    sent: { method: "POST", path: "/xrpc/com.atproto.repo.createRecord" },
    answer: { uri: expect.stringContaining("app.bsky.feed.like"), cid: "bafyreib2rxk3rh6kzwq" }
  },
  {
    tool: "epsilon_request",
    input: { path: "/items", method: "POST", query: { page: 2 }, body: { name: "x" } },
    upstream: (u) => u.rest,
    sent: { method: "POST", path: "/items", header: ["authorization", `Bearer ${EPSILON_TOKEN}`] },
    answer: { provider: "epsilon", status: 200, body: { method: "POST", path: "/items", query: { page: "2" }, body: { name: "x" } } }
  },
  {
    tool: "zeta_request",
    input: { path: "me", params: { fields: "id,name" } },
    upstream: (u) => u.graph,
    sent: { method: "GET", path: /^\/v\d+\.\d+\/me$/, header: ["authorization", "Bearer zeta-token"] },
    answer: { provider: "zeta", data: { id: "1234", name: "Alice", path: "me", fields: "id,name" } }
  },
  {
    tool: "eta_personal_bests",
    input: { mode: "time", mode2: "60" },
    upstream: (u) => u.monkeytype,
    sent: { method: "GET", path: "/users/personalBests", header: ["authorization", `ApeKey ${CREDENTIALS.eta.ape_key}`] },
    answer: { provider: "eta", mode: "time", mode2: "60", personal_bests: [expect.objectContaining({ mode2: "60", wpm: 112.5, acc: 97.2 })] }
  },
  {
    tool: "theta_ratings",
    input: { type: "movies", limit: 10 },
    upstream: (u) => u.trakt,
    sent: { method: "GET", path: "/users/me/ratings/movies", header: ["trakt-api-key", "trakt-client"] },
    answer: { provider: "theta", type: "movies", ratings: [expect.objectContaining({ rating: 9, type: "movie", title: "Inception", year: 2010 })] }
  },
  {
    tool: "iota_delete_service",
    input: { service_id: "srv-123" },
    upstream: (u) => u.render,
    sent: { method: "DELETE", path: "/v1/services/srv-123", header: ["authorization", "Bearer rnd_key"] },
    answer: { deleted: true, service_id: "srv-123" }
  },
  {
    tool: "kappa_delete_benefit",
    input: { benefit_id: "ben-1" },
    upstream: (u) => u.polar,
    sent: { method: "DELETE", path: "/v1/benefits/ben-1", header: ["authorization", "Bearer polar_oat_1"] },
    answer: { deleted: true, benefit_id: "ben-1" }
  },
  {
    tool: "kappa_ingest_events",
    input: { events: [{ name: "signup", external_customer_id: "c1" }, { name: "login", external_customer_id: "c1" }] },
    upstream: (u) => u.polar,
    sent: { method: "POST", path: "/v1/events/ingest" },
    answer: { inserted: 2 }
  },
  {
    tool: "lambda_update_broadcast",
    input: { id: "bc-1", subject: "March news" },
    upstream: (u) => u.resend,
    sent: { method: "PATCH", path: "/broadcasts/bc-1", header: ["authorization", "Bearer re_key"] },
    answer: { id: "bc-1" }
  },
  {
    tool: "lambda_batch_emails",
    input: { emails: [{ from: "a@example.com", to: ["b@example.com"], subject: "Hi", text: "Hello" }] },
    upstream: (u) => u.resend,
    sent: { method: "POST", path: "/emails/batch" },
    answer: { provider: "lambda", ids: ["email-0"] }
  },
  {
    tool: "mu_database",
    input: { database_id: "db-1" },
    upstream: (u) => u.notion,
    sent: { method: "GET", path: "/v1/data_sources/db-1-tasks", header: ["notion-version", "2025-09-03"] },
    answer: {
      provider: "mu",
      id: "db-1",
      title: "Tasks",
      properties: [{ name: "Name", type: "title" }, { name: "Status", type: "status" }, { name: "Archived on", type: "date" }],
      data_sources: [expect.objectContaining({ id: "db-1-tasks", name: "Tasks" }), expect.objectContaining({ id: "db-1-archive", name: "Archive" })]
    }
  },
  {
    tool: "nu_account",
    input: {},
    upstream: (u) => u.github,
    sent: { method: "GET", path: "/user", header: ["authorization", "Bearer ghp_token"] },
    answer: { provider: "nu", login: "alice", id: 42, name: "Alice", public_repos: 7 }
  }
]

const providerOf = (tool: ToolName): AccountProvider => {
  const p = tools[tool].provider
  const found = accountProviders.find((a) => a === p)
  if (found === undefined) throw new Error(`${tool} is not an account tool`)
  return found
}

layer(gatewayLayer({ providers: { ssrfAllow: ["127.0.0.1"] } }), { excludeTestServices: true })("dashboard API", (it) => {
  describe("connections", () => {
    it.effect("connect, list, replace and remove; credentials are never returned", () =>
      Effect.gen(function* () {
        const { token } = yield* givenMember()
        const created = yield* dashboard("POST", "/v1/connections", token, {
          provider: "nu",
          credentials: { token: "ghp_secret_value" },
          label: "work"
        })
        expect(created.status).toBe(201)
        expect(bodyOf(created)).toEqual({
          id: expect.stringMatching(/^conn_/),
          provider: "nu",
          label: "work",
          status: "active",
          created_at: expect.any(String),
          updated_at: expect.any(String)
        })
        const replaced = yield* dashboard("POST", "/v1/connections", token, { provider: "nu", credentials: { token: "ghp_other" } })
        expect(replaced.status).toBe(201)
        expect(bodyOf(replaced)).toMatchObject({ id: bodyOf(created)["id"], label: null })
        const listed = yield* dashboard("GET", "/v1/connections", token)
        expect(listOf(listed)).toHaveLength(1)
        for (const r of [created, replaced, listed]) expect(r.text).not.toContain("ghp_")
        const removed = yield* dashboard("DELETE", "/v1/connections/nu", token)
        expect(removed.status).toBe(200)
        expect(listOf(yield* dashboard("GET", "/v1/connections", token))).toHaveLength(0)
        expectEnvelope(yield* dashboard("DELETE", "/v1/connections/nu", token), {
          status: 404,
          type: "not_found",
          code: "not_found",
          retryable: false,
          billable: false
        })
      }))

    it.effect("credentials are validated per provider", () =>
      Effect.gen(function* () {
        const { token } = yield* givenMember()
        const invalid = { status: 400, type: "validation", code: "invalid_request", retryable: false, billable: false } as const
        expectEnvelope(
          yield* dashboard("POST", "/v1/connections", token, { provider: "delta", credentials: { identifier: "alice.test" } }),
          { ...invalid, message: "credentials.app_password" }
        )
        expectEnvelope(
          yield* dashboard("POST", "/v1/connections", token, { provider: "epsilon", credentials: { base_url: "ftp://x" } }),
          { ...invalid, message: "credentials.base_url" }
        )
        // a query or fragment would swallow the path appended to it (`/api?k=v` sent `/api?k=v%2Fitems`)
        for (const base_url of ["https://api.example.com/api?k=v", "https://api.example.com/api#top", "https://api.example.com/?"]) {
          expectEnvelope(
            yield* dashboard("POST", "/v1/connections", token, { provider: "epsilon", credentials: { base_url } }),
            { ...invalid, message: "no query (?) or fragment (#)" }
          )
        }
        expectEnvelope(
          yield* dashboard("POST", "/v1/connections", token, { provider: "delta", credentials: { identifier: "alice.test", app_password: "abcd-efgh-ijkl-mnop", service: "https://pds.example.com/?x" } }),
          { ...invalid, message: "credentials.service" }
        )
        expectEnvelope(
          yield* dashboard("POST", "/v1/connections", token, { provider: "nu", credentials: { token: "x", extra: 1 } }),
          { ...invalid, message: "extra" }
        )
        expectEnvelope(
          yield* dashboard("POST", "/v1/connections", token, { provider: "alpha", credentials: { api_key: "x" } }),
          { ...invalid, message: "provider" }
        )
        expectEnvelope(yield* dashboard("POST", "/v1/connections", token, { provider: "nu" }), { ...invalid, message: "credentials" })
      }))

    it.effect("a token or header that HTTP cannot carry, or that would reframe the request, is refused when connecting", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        const { token } = yield* givenMember()
        const invalid = { status: 400, type: "validation", code: "invalid_request", retryable: false, billable: false } as const
        for (const header of ["Content-Length", "host", "Transfer-Encoding", "connection", "Proxy-Authorization", "content-type", "Sec-Fetch-Site"]) {
          expectEnvelope(
            yield* dashboard("POST", "/v1/connections", token, { provider: "epsilon", credentials: { base_url: u.rest.url, token: "t0ken-value", header } }),
            { ...invalid, message: "credentials.header" }
          )
        }
        for (const bad of ["abc\r\nX-Evil: 1", "t\u0001oken", "tök", "line\u2028sep", " leading"]) {
          expectEnvelope(
            yield* dashboard("POST", "/v1/connections", token, { provider: "nu", credentials: { token: bad } }),
            { ...invalid, message: "credentials.token" }
          )
          expectEnvelope(
            yield* dashboard("POST", "/v1/connections", token, { provider: "theta", credentials: { access_token: "ok-token", client_id: bad } }),
            { ...invalid, message: "credentials.client_id" }
          )
        }
        // a header longer than servers take (they answer 431, every later call a 502); the limit itself is taken
        const longest = "t".repeat(MAX_HEADER_TOKEN)
        expectEnvelope(
          yield* dashboard("POST", "/v1/connections", token, { provider: "nu", credentials: { token: `${longest}t` } }),
          { ...invalid, message: `credentials.token: must be at most ${MAX_HEADER_TOKEN} characters` }
        )
        expect((yield* dashboard("POST", "/v1/connections", token, { provider: "nu", credentials: { token: longest } })).status).toBe(201)
        // epsilon's token is taken out of every answer: one of a few characters could not be (it was given back whole)
        expectEnvelope(
          yield* dashboard("POST", "/v1/connections", token, { provider: "epsilon", credentials: { base_url: u.rest.url, token: "s3cr3t7" } }),
          { ...invalid, message: "credentials.token: must be at least 8 characters" }
        )
        // a header of the API's own, and a token with a space inside it, are what HTTP carries
        expect((yield* dashboard("POST", "/v1/connections", token, { provider: "epsilon", credentials: { base_url: u.rest.url, token: "t0ken-value", header: "X-Api-Token" } })).status).toBe(201)
        expect((yield* dashboard("POST", "/v1/connections", token, { provider: "nu", credentials: { token: "token with spaces" } })).status).toBe(201)
      }))

    it.effect("a stored connection whose credentials a later rule refuses: credential_required, not an outage", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const encryption = yield* Encryption
        const { key, orgId, token } = yield* givenMember({ credits: 10 })
        expect((yield* dashboard("POST", "/v1/connections", token, { provider: "nu", credentials: { token: "ghp_token" } })).status).toBe(201)
        // what an older version stored: a token with a line break, sealed as the service seals it
        const sealed = yield* encryption.seal(JSON.stringify({ token: "ghp_token\r\nX-Evil: 1" }), `connection:${orgId}:nu`)
        yield* sql`UPDATE connections SET key_id = ${sealed.keyId}, iv = ${sealed.iv}, ciphertext = ${sealed.ciphertext}, tag = ${sealed.tag}
                    WHERE org_id = ${orgId} AND provider = 'nu'`
        const result = yield* callTool("nu_account", {}, { key })
        expectEnvelope(result, { status: 401, type: "auth", code: "credential_required", retryable: false, billable: false, message: "connect it again" })
        expect(yield* books(orgId)).toEqual(expect.objectContaining({ balance: 10, held: 0 }))
      }))

    it.effect("an answer never carries a credential back, even one sent in the wrong shape", () =>
      Effect.gen(function* () {
        const { token } = yield* givenMember()
        const bodies = [
          { provider: "nu", credentials: "ghp_SECRET_as_string" },
          { provider: "delta", credentials: { identifier: "alice.test", app_password: ["pw-SECRET-in-array"] } },
          { provider: "nu", credentials: { token: 98765432109876 } },
          { provider: "epsilon", credentials: { base_url: "not a url SECRET-URL", token: "tok-SECRET-epsilon" } }
        ]
        for (const body of bodies) {
          const answer = yield* dashboard("POST", "/v1/connections", token, body)
          expect(answer.status).toBe(400)
          for (const secret of ["ghp_SECRET_as_string", "pw-SECRET-in-array", "98765432109876", "SECRET-URL", "tok-SECRET-epsilon"]) {
            expect(answer.text, JSON.stringify(body)).not.toContain(secret)
          }
          expect(errorOf(answer)?.message).toContain("credentials")
        }
      }))

    it.effect("the database row never holds the plaintext", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const { orgId, token } = yield* givenMember()
        const secret = "app-password-PLAINTEXT-42"
        yield* dashboard("POST", "/v1/connections", token, {
          provider: "delta",
          credentials: { identifier: "alice.test", app_password: secret }
        })
        const rows = yield* sql<{ readonly row: string }>`
          SELECT row_to_json(c)::text AS row FROM connections c WHERE org_id = ${orgId}`
        expect(rows).toHaveLength(1)
        const raw = rows[0]?.row ?? ""
        expect(raw).not.toContain(secret)
        expect(raw).not.toContain(Buffer.from(secret).toString("hex"))
        expect(raw).not.toContain("alice.test")
        const bytes = yield* sql<{ readonly ciphertext: Uint8Array }>`SELECT ciphertext FROM connections WHERE org_id = ${orgId}`
        expect(Buffer.from(bytes[0]?.ciphertext ?? new Uint8Array()).includes(Buffer.from(secret))).toBe(false)
      }))
  })

  describe("account tools", () => {
    it("the cases below are every account tool of the catalog", () => {
      const account = Object.values(tools).filter((t) => t.account).map((t) => t.name).sort()
      expect(accountCases.map((c) => c.tool).sort()).toEqual(account)
    })

    for (const c of accountCases) {
      it.effect(`${c.tool}: credential_required until connected, then the provider on the org's account`, () =>
        Effect.gen(function* () {
          const u = yield* TestUpstreams
          u.resetAll()
          const { key, orgId, token } = yield* givenMember({ credits: 10 })
          if (tools[c.tool].beta) yield* Effect.orDie(Effect.flatMap(Betas, (b) => b.enable(orgId, c.tool)))
          const missing = yield* callTool(c.tool, c.input, { key })
          expectEnvelope(missing, { status: 401, type: "auth", code: "credential_required", retryable: false, billable: false, message: "POST /v1/connections" })
          expect(yield* books(orgId)).toEqual(expect.objectContaining({ balance: 10, held: 0, holdsByStatus: {} }))
          expect(c.upstream(u).hits()).toBe(0)

          const provider = providerOf(c.tool)
          const connected = yield* dashboard("POST", "/v1/connections", token, { provider, credentials: credentialsFor(u, provider) })
          expect(connected.status).toBe(201)

          const result = yield* callTool(c.tool, c.input, { key })
          expectOk(result, 1)
          expect(result.body).toMatchObject(c.answer)
          const sent = c.upstream(u).requests.find((r) =>
            r.method === c.sent.method && (typeof c.sent.path === "string" ? r.path === c.sent.path : c.sent.path.test(r.path)))
          expect(sent, `${c.tool} sent ${JSON.stringify(c.upstream(u).requests.map((r) => `${r.method} ${r.path}`))}`).toBeDefined()
          if (c.sent.header !== undefined) {
            const [name, value] = c.sent.header
            if (typeof value === "string") expect(sent?.headers[name]).toBe(value)
            else expect(sent?.headers[name]).toMatch(value)
          }
          expect(yield* books(orgId)).toMatchObject({ balance: 9, held: 0 })
        }))
    }

    it.effect("a provider that refuses the credentials: provider_credential_rejected, and the connection shows it", () =>
      Effect.gen(function* () {
        const { key, token } = yield* givenMember()
        yield* dashboard("POST", "/v1/connections", token, { provider: "nu", credentials: { token: "wrong" } })
        const result = yield* callTool("nu_account", {}, { key })
        expectEnvelope(result, { status: 502, type: "provider", code: "provider_credential_rejected", retryable: false, billable: false, message: "reconnect" })
        expect(listOf(yield* dashboard("GET", "/v1/connections", token))[0]).toMatchObject({ provider: "nu", status: "rejected" })
        yield* dashboard("POST", "/v1/connections", token, { provider: "nu", credentials: { token: "ghp_token" } })
        expect(listOf(yield* dashboard("GET", "/v1/connections", token))[0]).toMatchObject({ status: "active" })
        expectOk(yield* callTool("nu_account", {}, { key }))
      }))

    it.effect("epsilon: a 403 refuses the call, not the token (the connection stays active); a 401 shows it rejected until it is replaced; another provider's answered call shows it active again", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const { key, token } = yield* givenMember()
        expect((yield* dashboard("POST", "/v1/connections", token, { provider: "epsilon", credentials: { base_url: u.rest.url, token: EPSILON_TOKEN } })).status).toBe(201)
        const status = Effect.map(dashboard("GET", "/v1/connections", token), (listed) => listOf(listed)[0]?.status)
        // any key of the org can call a path the token may not reach
        u.rest.fault({ status: 403, body: { detail: "You do not have permission to perform this action." }, times: 1 })
        expectEnvelope(yield* callTool("epsilon_request", { path: "/admin" }, { key }), {
          status: 502, type: "provider", code: "provider_credential_rejected", retryable: false, billable: false,
          message: "You do not have permission to perform this action"
        })
        expect(yield* status).toBe("active")
        // a 401 refuses the token: shown; the next call the API takes with it (the refusal has passed) shows it active
        u.rest.fault({ status: 401, body: { detail: "Invalid token." }, times: 1 })
        expectEnvelope(yield* callTool("epsilon_request", { path: "/items" }, { key }), {
          status: 502, type: "provider", code: "provider_credential_rejected", retryable: false, billable: false
        })
        expect(yield* status).toBe("rejected")
        // a 2xx of a path the caller picked proves nothing of the token (the path may need none): still rejected
        expectOk(yield* callTool("epsilon_request", { path: "/items" }, { key }))
        expect(yield* status).toBe("rejected")
        // GitHub's account endpoint needs the token: its answer after a 401 (the refusal has passed) shows it active
        yield* dashboard("DELETE", "/v1/connections/epsilon", token)
        yield* dashboard("POST", "/v1/connections", token, { provider: "nu", credentials: { token: "ghp_token" } })
        u.github.fault({ status: 401, body: { message: "Bad credentials" }, times: 1 })
        expectEnvelope(yield* callTool("nu_account", {}, { key }), {
          status: 502, type: "provider", code: "provider_credential_rejected", retryable: false, billable: false
        })
        expect(yield* status).toBe("rejected")
        expectOk(yield* callTool("nu_account", {}, { key }))
        expect(yield* status).toBe("active")
      }))

    it.effect("a refusal of the old credentials that arrives after the connection was replaced leaves the new one active", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const { key, token } = yield* givenMember()
        yield* dashboard("POST", "/v1/connections", token, { provider: "nu", credentials: { token: "wrong" } })
        u.github.fault({ delayMs: 700, times: 1 })
        const late = yield* Effect.fork(callTool("nu_account", {}, { key }))
        // the call has its credentials (the old ones) and waits for its answer while the connection is replaced
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 250)))
        expect(u.github.requests).toHaveLength(1)
        expect((yield* dashboard("POST", "/v1/connections", token, { provider: "nu", credentials: { token: "ghp_token" } })).status).toBe(201)
        expectEnvelope(yield* Fiber.join(late), { status: 502, type: "provider", code: "provider_credential_rejected", retryable: false, billable: false })
        expect(listOf(yield* dashboard("GET", "/v1/connections", token))[0]).toMatchObject({ provider: "nu", status: "active" })
        // deleted and made again with the same credentials: refused, and shown
        yield* dashboard("DELETE", "/v1/connections/nu", token)
        yield* dashboard("POST", "/v1/connections", token, { provider: "nu", credentials: { token: "wrong" } })
        expectEnvelope(yield* callTool("nu_account", {}, { key }), { status: 502, type: "provider", code: "provider_credential_rejected", retryable: false, billable: false })
        expect(listOf(yield* dashboard("GET", "/v1/connections", token))[0]).toMatchObject({ provider: "nu", status: "rejected" })
      }))

    it.effect("an upstream error that echoes the credential it was sent: the message carries it redacted", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const { key, token } = yield* givenMember()
        expect((yield* dashboard("POST", "/v1/connections", token, { provider: "epsilon", credentials: { base_url: u.rest.url, token: EPSILON_TOKEN } })).status).toBe(201)
        u.rest.fault({ status: 400, body: { message: `Invalid API key: Bearer ${EPSILON_TOKEN}` }, times: 1 })
        const rejected = yield* callTool("epsilon_request", { path: "/items" }, { key })
        expectEnvelope(rejected, { status: 502, type: "provider", code: "provider_rejected", retryable: false, billable: false, message: "Invalid API key: [redacted]" })
        expect(rejected.text).not.toContain(EPSILON_TOKEN)
        u.rest.fault({ status: 401, body: { error: { message: `token ${EPSILON_TOKEN} is not valid` } }, times: 1 })
        const refused = yield* callTool("epsilon_request", { path: "/items" }, { key })
        expectEnvelope(refused, { status: 502, type: "provider", code: "provider_credential_rejected", retryable: false, billable: false, message: "token [redacted] is not valid" })
        expect(refused.text).not.toContain(EPSILON_TOKEN)
      }))

    it.effect("an upstream error that echoes the credential escaped, percent-encoded or in UTF-16: still redacted", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const { key, token } = yield* givenMember()
        // a token with slashes, which PHP's json_encode writes as \/ by default
        const secret = "sk_live/AbCdEf+GhIjKl/MnOp=="
        expect((yield* dashboard("POST", "/v1/connections", token, { provider: "epsilon", credentials: { base_url: u.rest.url, token: secret } })).status).toBe(201)
        const escapedSlashes = JSON.stringify({ message: `Invalid token: Bearer ${secret}` }).replaceAll("/", "\\/")
        const unicodeEscaped = JSON.stringify({ message: `Invalid token: ${secret}` }).replace("AbCdEf", "\\u0041bCdEf")
        const utf16 = (s: string) => [...s].map((c) => `${c}\u0000`).join("")
        const answers: ReadonlyArray<{ readonly text: string; readonly headers?: Record<string, string> }> = [
          { text: escapedSlashes },
          { text: unicodeEscaped },
          { text: JSON.stringify({ message: `Invalid token: ${encodeURIComponent(secret)}` }) },
          { text: JSON.stringify({ message: `Invalid token: ${encodeURIComponent(secret).replace(/%[0-9A-F]{2}/g, (hex) => hex.toLowerCase())}` }) },
          // JSON too long to parse whole (past the 64 KiB a refusal reads), its slashes escaped
          { text: JSON.stringify({ message: `Invalid token ${secret}`, trace: "x".repeat(100_000) }).replaceAll("/", "\\/") },
          // as UTF-16LE bytes (an ASCII text with a NUL after each letter), said so, and said to be JSON
          { text: utf16(`Invalid token: ${secret}`), headers: { "content-type": "text/plain; charset=utf-16le" } },
          { text: utf16(JSON.stringify({ message: `Invalid token: ${secret}` })), headers: { "content-type": "application/json; charset=utf-16le" } }
        ]
        for (const answer of answers) {
          u.rest.fault({ status: 400, text: answer.text, ...(answer.headers ? { headers: answer.headers } : {}), times: 1 })
          const rejected = yield* callTool("epsilon_request", { path: "/items" }, { key })
          expectEnvelope(rejected, { status: 502, type: "provider", code: "provider_rejected", retryable: false, billable: false, message: "[redacted]" })
          const shown = rejected.text.replaceAll("\\u0000", "").replaceAll("\\/", "/")
          expect(shown, answer.text.slice(0, 200)).not.toContain("AbCdEf")
          expect(shown.toLowerCase(), answer.text.slice(0, 200)).not.toContain(encodeURIComponent(secret).toLowerCase())
        }
      }))

    it.effect("a connection's header of hundreds of words and a large error answer: the search for secrets stays quick", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const { key, token } = yield* givenMember()
        // as many words of 8 letters as a header value may hold (20,000 before its limit), and a 1 MB error answer of
        // near misses (each word's first seven letters): a pass over the answer per word held the event loop for seconds
        const words = Array.from({ length: Math.floor((MAX_HEADER_TOKEN + 1) / 9) }, (_, i) => `w${String(i).padStart(7, "0")}`)
        const connected = yield* dashboard("POST", "/v1/connections", token, {
          provider: "epsilon",
          credentials: { base_url: u.rest.url, token: words.join(" "), header: "x-words" }
        })
        expect(connected.status, connected.text).toBe(201)
        u.rest.fault({ status: 400, text: `bad request ${"w000000 ".repeat(125_000)}`, headers: { "content-type": "text/plain" }, times: 1 })
        const started = performance.now()
        const rejected = yield* callTool("epsilon_request", { path: "/items" }, { key })
        expectEnvelope(rejected, { status: 502, type: "provider", code: "provider_rejected", retryable: false, billable: false, message: "bad request" })
        expect(performance.now() - started).toBeLessThan(3_000)
      }))

    it.effect("the generic REST connection's path stays under its base URL's path", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const { key, token } = yield* givenMember()
        expect((yield* dashboard("POST", "/v1/connections", token, { provider: "epsilon", credentials: { base_url: `${u.rest.url}/api/`, token: EPSILON_TOKEN } })).status).toBe(201)
        const ok = yield* callTool("epsilon_request", { path: "/v2/../items" }, { key })
        expectOk(ok, 1)
        expect(ok.body).toMatchObject({ body: { path: "/api/items" } })
        for (const path of ["/../secret", "/%2e%2e/secret", "/v2/../../secret", "..", "/./../api-other"]) {
          const refused = yield* callTool("epsilon_request", { path }, { key })
          expectEnvelope(refused, { status: 400, type: "validation", code: "invalid_request", retryable: false, billable: false, message: "stay on the connection's base URL" })
        }
        expect(u.rest.requests.map((r) => r.path)).toEqual(["/api/items"])
      }))

    it.effect("the generic REST connection's path stays under its base URL's path at a server that decodes %2F and %5C", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const { key, orgId, token } = yield* givenMember({ credits: 10 })
        expect((yield* dashboard("POST", "/v1/connections", token, { provider: "epsilon", credentials: { base_url: `${u.rest.url}/api/v1`, token: EPSILON_TOKEN } })).status).toBe(201)
        // each was sent as one segment (/api/v1/..%2F..%2Fadmin): a server that decodes it before routing lands on /admin
        for (const path of ["/..%2F..%2Fadmin", "/x/..%2f..%2f..%2fadmin", "/..%5C..%5Cadmin", "/%2e%2e%2F%2e%2e%2Fadmin", "..%2F"]) {
          const refused = yield* callTool("epsilon_request", { path }, { key })
          expectEnvelope(refused, { status: 400, type: "validation", code: "invalid_request", retryable: false, billable: false, message: "stay on the connection's base URL" })
        }
        expect(u.rest.requests).toHaveLength(0)
        expect(yield* books(orgId)).toMatchObject({ balance: 10, held: 0, holdsByStatus: {} })
        // an encoded slash that stays under the base path is sent as it is (a GitLab project's "group%2Fproject")
        const ok = yield* callTool("epsilon_request", { path: "/projects/group%2Fproject/issues" }, { key })
        expectOk(ok, 1)
        // and one that a decoding server resolves under it, too
        expectOk(yield* callTool("epsilon_request", { path: "/v2/..%2Fitems" }, { key }), 1)
        expect(u.rest.requests.map((r) => r.rawPath)).toEqual(["/api/v1/projects/group%2Fproject/issues", "/api/v1/v2/..%2Fitems"])
      }))

    it.scoped("the generic REST connection's answer is read in the charset its Content-Type names", () =>
      Effect.gen(function* () {
        // bytes one a character (latin1), so the answers below are the legacy encodings' own bytes
        const answers: Record<string, { readonly body: string; readonly type: string }> = {
          "/latin1": { body: "caf\u00e9 cr\u00e8me", type: "text/plain; charset=ISO-8859-1" },
          "/sjis": { body: "\x82\xa0\x82\xa2", type: "text/plain; charset=\" Shift_JIS \"" },
          "/utf8": { body: Buffer.from("{\"name\":\"caf\u00e9\"}", "utf8").toString("latin1"), type: "application/json" },
          // JSON is UTF-8 whatever charset it names (RFC 8259 defines none for it)
          "/json-labelled-latin1": { body: Buffer.from("{\"name\":\"caf\u00e9\"}", "utf8").toString("latin1"), type: "application/json; charset=ISO-8859-1" },
          "/unknown": { body: Buffer.from("caf\u00e9", "utf8").toString("latin1"), type: "text/plain; charset=x-no-such" }
        }
        const api = yield* upstream((req) => {
          const answer = answers[req.path]
          return answer === undefined
            ? { status: 404, body: { message: "not found" } }
            : { status: 200, body: answer.body, raw: true, binary: true, headers: { "content-type": answer.type } }
        })
        const { key, token } = yield* givenMember()
        expect((yield* dashboard("POST", "/v1/connections", token, { provider: "epsilon", credentials: { base_url: api.url } })).status).toBe(201)
        const bodyAt = (path: string) => Effect.map(callTool("epsilon_request", { path }, { key }), (r) => {
          expectOk(r, 1)
          return bodyOf(r)["body"]
        })
        expect(yield* bodyAt("/latin1")).toBe("café crème")
        expect(yield* bodyAt("/sjis")).toBe("あい")
        expect(yield* bodyAt("/utf8")).toEqual({ name: "café" })
        expect(yield* bodyAt("/json-labelled-latin1")).toEqual({ name: "café" })
        expect(yield* bodyAt("/unknown")).toBe("café")
      }))

    it.effect("the generic REST connection's URL passes the SSRF guard when it is connected", () =>
      Effect.gen(function* () {
        const { key, token } = yield* givenMember()
        const connected = yield* dashboard("POST", "/v1/connections", token, { provider: "epsilon", credentials: { base_url: "http://169.254.169.254", token: "x-token-1" } })
        expectEnvelope(connected, { status: 400, type: "validation", code: "url_not_allowed", retryable: false, billable: false, message: "credentials.base_url" })
        // nothing was saved: the tool still needs a connection
        const result = yield* callTool("epsilon_request", { path: "/latest/meta-data/" }, { key })
        expectEnvelope(result, { status: 401, type: "auth", code: "credential_required", retryable: false, billable: false })
      }))
  })

  describe("keys", () => {
    it.effect("create (shown once), list, revoke — effective at once", () =>
      Effect.gen(function* () {
        const { token } = yield* givenMember()
        const created = yield* dashboard("POST", "/v1/keys", token, { name: "laptop" })
        expect(created.status).toBe(201)
        const body = bodyOf(created)
        expect(body).toMatchObject({ name: "laptop", monthly_spend_limit: null, allowed_tools: null, revoked_at: null, month_spend: 0 })
        const key = String(body["key"])
        expect(key).toMatch(/^tg_[0-9A-Za-z]{32}$/)
        expectOk(yield* callTool("weather", { q: "Berlin" }, { key }))
        const listed = yield* dashboard("GET", "/v1/keys", token)
        expect(listed.text).not.toContain(key)
        expect(listOf(listed).find((k) => k["id"] === body["id"])).toMatchObject({ month_spend: 1, last_used_at: expect.any(String) })
        const revoked = yield* dashboard("DELETE", `/v1/keys/${String(body["id"])}`, token)
        expect(bodyOf(revoked)).toMatchObject({ id: body["id"], revoked_at: expect.any(String) })
        expectEnvelope(yield* callTool("weather", { q: "Berlin" }, { key }), { status: 401, type: "auth", code: "invalid_key", retryable: false, billable: false })
      }))

    it.effect("a key's monthly spend limit and tool allow-list", () =>
      Effect.gen(function* () {
        const { token } = yield* givenMember({ credits: 100 })
        const limited = bodyOf(yield* dashboard("POST", "/v1/keys", token, { name: "limited", monthly_spend_limit: 2, allowed_tools: ["weather"] }))
        const key = String(limited["key"])
        expectOk(yield* callTool("weather", { q: "Berlin" }, { key }))
        expectOk(yield* callTool("weather", { q: "Paris" }, { key }))
        expectEnvelope(yield* callTool("weather", { q: "Berlin" }, { key }), {
          status: 429,
          type: "rate_limited",
          code: "key_spend_limit_exceeded",
          retryable: false,
          billable: false
        })
        expectEnvelope(yield* callTool("mobile_app_search", { query: "x" }, { key }), {
          status: 401,
          type: "auth",
          code: "tool_not_allowed",
          retryable: false,
          billable: false
        })
        expectEnvelope(yield* dashboard("POST", "/v1/keys", token, { name: "x", allowed_tools: ["nope"] }), {
          status: 400,
          type: "validation",
          code: "invalid_request",
          retryable: false,
          billable: false,
          message: "not a tool"
        })
      }))
  })

  describe("the org", () => {
    it.effect("balance, spend cap, betas", () =>
      Effect.gen(function* () {
        const { key, orgId, token } = yield* givenMember({ credits: 40 })
        expect(bodyOf(yield* dashboard("GET", "/v1/org", token))).toEqual({
          id: orgId,
          name: "test",
          balance: 40,
          held: 0,
          available: 40,
          month_spend: 0,
          spend_cap: null,
          betas: []
        })
        expect(bodyOf(yield* dashboard("PUT", "/v1/org/spend-cap", token, { spend_cap: 0 }))).toMatchObject({ spend_cap: 0 })
        expectEnvelope(yield* callTool("weather", { q: "Berlin" }, { key }), { status: 429, type: "rate_limited", code: "spend_cap_exceeded", retryable: false, billable: false })
        expect(bodyOf(yield* dashboard("PUT", "/v1/org/spend-cap", token, { spend_cap: null }))).toMatchObject({ spend_cap: null })
        expectEnvelope(yield* dashboard("PUT", "/v1/org/spend-cap", token, { spend_cap: -1 }), {
          status: 400,
          type: "validation",
          code: "invalid_request",
          retryable: false,
          billable: false,
          message: "spend_cap"
        })

        expectEnvelope(yield* callTool("kappa_ingest_events", { events: [{ name: "a", customer_id: "c-1" }] }, { key }), {
          status: 401,
          type: "auth",
          code: "beta_unavailable",
          retryable: false,
          billable: false
        })
        expect(bodyOf(yield* dashboard("PUT", "/v1/org/betas/kappa_ingest_events", token, { enabled: true }))).toMatchObject({ betas: ["kappa_ingest_events"] })
        expect(errorOf(yield* callTool("kappa_ingest_events", { events: [{ name: "a", customer_id: "c-1" }] }, { key }))?.code).toBe("credential_required")
        expect(bodyOf(yield* dashboard("PUT", "/v1/org/betas/kappa_ingest_events", token, { enabled: false }))).toMatchObject({ betas: [] })
        expectEnvelope(yield* dashboard("PUT", "/v1/org/betas/weather", token, { enabled: true }), {
          status: 400,
          type: "validation",
          code: "invalid_request",
          retryable: false,
          billable: false,
          message: "not a beta tool"
        })
      }))

    it.effect("usage: a record's time is when its call was answered and charged, so newest first is by time", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const { key, token } = yield* givenMember({ credits: 5 })
        // the first call waits 1 s at its provider (the test gateway's timeout is 1.5 s); a second starts 0.3 s later
        // and is answered first
        u.openMeteo.fault({ delayMs: 1000, times: 1 })
        const slow = yield* Effect.fork(callTool("weather", { q: "Berlin" }, { key }))
        yield* Effect.sleep("300 millis")
        expectOk(yield* callTool("weather", { q: "Paris" }, { key }))
        expectOk(yield* Fiber.join(slow))
        const records = Schema.decodeUnknownSync(Schema.Struct({
          data: Schema.Array(Schema.Struct({ time: Schema.String, latency_ms: Schema.Number, credits: Schema.Number }))
        }))((yield* dashboard("GET", "/v1/usage", token)).body).data
        expect(records).toHaveLength(2)
        const [newest, older] = records
        expect(newest?.latency_ms).toBeGreaterThanOrEqual(1000)
        // listed first, and the later time: the slow call ended last, though it started first
        expect(Date.parse(newest?.time ?? "")).toBeGreaterThan(Date.parse(older?.time ?? ""))
      }))

    it.effect("usage: one record per call, newest first, paginated", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const { key, keyId, token } = yield* givenMember({ credits: 2 })
        expectOk(yield* callTool("weather", { q: "Berlin" }, { key }))
        expectOk(yield* callTool("mobile_app_search", { query: "notes" }, { key }))
        yield* callTool("weather", { q: "Paris" }, { key })
        // usage is written off the caller's path: let it land
        yield* Effect.sleep("200 millis")
        const page = bodyOf(yield* dashboard("GET", "/v1/usage?limit=2", token))
        const data = Schema.decodeUnknownSync(Schema.Array(JsonObject))(page["data"])
        expect(data).toHaveLength(2)
        expect(data[0]).toMatchObject({ key_id: keyId, tool: "weather", status: 402, code: "insufficient_credits", credits: 0, request_id: expect.stringMatching(/^req_/) })
        expect(data[1]).toMatchObject({ tool: "mobile_app_search", status: 200, code: "ok", credits: 1, provider: "itunes", latency_ms: expect.any(Number) })
        expect(page["next_cursor"]).toEqual(expect.any(String))
        const next = bodyOf(yield* dashboard("GET", `/v1/usage?limit=2&cursor=${String(page["next_cursor"])}`, token))
        expect(next).toMatchObject({ data: [expect.objectContaining({ tool: "weather", code: "ok" })], next_cursor: null })
        const filtered = bodyOf(yield* dashboard("GET", "/v1/usage?tool=mobile_app_search", token))
        expect(filtered).toMatchObject({ data: [expect.objectContaining({ tool: "mobile_app_search" })] })
        expectEnvelope(yield* dashboard("GET", "/v1/usage?limit=0", token), {
          status: 400,
          type: "validation",
          code: "invalid_request",
          retryable: false,
          billable: false
        })
      }))
  })

  describe("tenant isolation", () => {
    it.effect("org A cannot see, replace, delete or use org B's connections and keys", () =>
      Effect.gen(function* () {
        const u = yield* TestUpstreams
        u.resetAll()
        const a = yield* givenMember()
        const b = yield* givenMember()
        yield* dashboard("POST", "/v1/connections", b.token, { provider: "nu", credentials: { token: "ghp_token" } })
        // A sees only its own (none), cannot delete B's, and replacing "nu" creates A's own connection.
        expect(listOf(yield* dashboard("GET", "/v1/connections", a.token))).toHaveLength(0)
        expect((yield* dashboard("DELETE", "/v1/connections/nu", a.token)).status).toBe(404)
        expect(listOf(yield* dashboard("GET", "/v1/connections", b.token))).toHaveLength(1)
        // A's key never uses B's connection.
        expectEnvelope(yield* callTool("nu_account", {}, { key: a.key }), { status: 401, type: "auth", code: "credential_required", retryable: false, billable: false })
        expect(u.github.hits()).toBe(0)
        expectOk(yield* callTool("nu_account", {}, { key: b.key }))
        // A connecting "nu" makes A's own connection: B's keeps its id, its time and its credentials.
        const bBefore = listOf(yield* dashboard("GET", "/v1/connections", b.token))
        expect((yield* dashboard("POST", "/v1/connections", a.token, { provider: "nu", credentials: { token: "ghp_a_other" } })).status).toBe(201)
        const aConnections = listOf(yield* dashboard("GET", "/v1/connections", a.token))
        expect(aConnections).toHaveLength(1)
        expect(aConnections[0]?.["id"]).not.toBe(bBefore[0]?.["id"])
        expect(listOf(yield* dashboard("GET", "/v1/connections", b.token))).toEqual(bBefore)
        u.resetAll()
        expectOk(yield* callTool("nu_account", {}, { key: b.key }))
        expect(u.github.requests.map((r) => r.headers["authorization"])).toEqual(["Bearer ghp_token"])
        // Keys: A lists only its own; revoking B's key is "not found" and B's key keeps working.
        const aKeys = listOf(yield* dashboard("GET", "/v1/keys", a.token))
        expect(aKeys.map((k) => k["id"])).toEqual([a.keyId])
        expect((yield* dashboard("DELETE", `/v1/keys/${b.keyId}`, a.token)).status).toBe(404)
        expectOk(yield* callTool("weather", { q: "Berlin" }, { key: b.key }))
        // Usage: A sees its own call and none of B's.
        yield* Effect.sleep("100 millis")
        const usage = listOf(yield* dashboard("GET", "/v1/usage", a.token))
        expect(usage.map((r) => [r["key_id"], r["code"]])).toEqual([[a.keyId, "credential_required"]])
      }))
  })
})

layer(gatewayLayer({ identity: { devIssuer: true, autoCreateOrgs: true, signupCredits: 25 } }), {
  excludeTestServices: true
})("personal orgs", (it) => {
  it.effect("with AUTO_CREATE_ORGS, a first sign-in gets a personal org", () =>
    Effect.gen(function* () {
      const token = yield* devToken("newcomer")
      const first = bodyOf(yield* dashboard("GET", "/v1/org", token))
      expect(first).toMatchObject({ name: "personal:newcomer", balance: 25 })
      const again = bodyOf(yield* dashboard("GET", "/v1/org", token))
      expect(again["id"]).toBe(first["id"])
    }))
})

layer(gatewayLayer(), { excludeTestServices: true })("encryption keys", (it) => {
  it.effect("with DATABASE_URL the key must be given: a key generated into one host's data dir is refused", () =>
    Effect.gen(function* () {
      const identity = yield* IdentityConfig
      const server = yield* ServerConfig
      const built = yield* Effect.exit(Effect.scoped(Layer.build(EncryptionLive.pipe(Layer.provide(Layer.mergeAll(
        Layer.succeed(IdentityConfig, { ...identity, encryptionKey: Option.none() }),
        Layer.succeed(ServerConfig, { ...server, databaseUrl: Option.some(Redacted.make("postgres://db.internal/gateway")) })
      ))))))
      expect(Exit.isFailure(built)).toBe(true)
      expect(String(built)).toContain("GATEWAY_ENCRYPTION_KEY is required with DATABASE_URL")
    }))

  it.effect("a key is 64 hex characters, or 32 bytes as canonical base64 or base64url: any other text is refused at start", () =>
    Effect.gen(function* () {
      const bytes = Crypto.randomBytes(32)
      // the last base64 character of 32 bytes carries 4 bits: one whose 2 spare bits are set decodes to the same key
      const canonical = Buffer.alloc(32, 7).toString("base64url")
      const sloppy = canonical.slice(0, 42) + String.fromCharCode(canonical.charCodeAt(42) + 1)
      for (const text of [bytes.toString("hex"), bytes.toString("hex").toUpperCase(), bytes.toString("base64"),
        bytes.toString("base64").replace(/=$/, ""), bytes.toString("base64url"), `${bytes.toString("base64")}\n`]) {
        expect(parseKey(text)?.equals(bytes), text).toBe(true)
      }
      const refused = [
        "!!!!" + "A".repeat(43), // what is not base64 was skipped: 43 letters decoded to 32 bytes
        "short",
        Crypto.randomBytes(33).toString("base64"),
        Crypto.randomBytes(31).toString("base64"),
        bytes.toString("base64").slice(0, 20) + " " + bytes.toString("base64").slice(20, 43),
        bytes.toString("base64").replace(/=$/, "==="),
        sloppy,
        `${"A".repeat(21)}+_${"A".repeat(20)}`, // both alphabets at once
        bytes.toString("hex").slice(0, 63)
      ]
      for (const text of refused) expect(parseKey(text), text).toBeUndefined()
      const identity = yield* IdentityConfig
      const server = yield* ServerConfig
      const build = (current: string, old: ReadonlyArray<string>) =>
        Effect.exit(Effect.scoped(Layer.build(EncryptionLive.pipe(Layer.provide(Layer.mergeAll(
          Layer.succeed(IdentityConfig, {
            ...identity,
            encryptionKey: Option.some(Redacted.make(current)),
            encryptionOldKeys: old.map((k) => Redacted.make(k))
          }),
          Layer.succeed(ServerConfig, server)
        ))))))
      const malformed = yield* build("!!!!" + "A".repeat(43), [])
      expect(Exit.isFailure(malformed)).toBe(true)
      expect(String(malformed)).toContain("GATEWAY_ENCRYPTION_KEY must be 32 bytes")
      const oldMalformed = yield* build(TEST_ENCRYPTION_KEY, ["!!!!" + "A".repeat(43)])
      expect(Exit.isFailure(oldMalformed)).toBe(true)
      expect(String(oldMalformed)).toContain("each of GATEWAY_ENCRYPTION_OLD_KEYS must be 32 bytes")
      expect(Exit.isSuccess(yield* build(bytes.toString("base64url"), [bytes.toString("hex")]))).toBe(true)
    }))

  it.effect("a sealed value opens only with its whole 16-byte tag: a shortened one is refused, not checked as far as it goes", () =>
    Effect.gen(function* () {
      const encryption = yield* Encryption
      const sealed = yield* encryption.seal("{\"token\":\"ghp_token\"}", "connection:org_x:nu")
      expect(sealed.tag.length).toBe(16)
      expect(yield* encryption.open(sealed, "connection:org_x:nu")).toBe("{\"token\":\"ghp_token\"}")
      for (const length of [15, 12, 8, 4]) {
        const shortened = { ...sealed, tag: sealed.tag.subarray(0, length) }
        expect(Exit.isFailure(yield* Effect.exit(encryption.open(shortened, "connection:org_x:nu"))), String(length)).toBe(true)
      }
    }))

  it.effect("a mac is the current key's: the same for the same purpose and data, another under another key or purpose", () =>
    Effect.gen(function* () {
      const encryption = yield* Encryption
      const identity = yield* IdentityConfig
      const server = yield* ServerConfig
      const withKey = (key: string) =>
        Effect.scoped(Effect.map(Layer.build(EncryptionLive.pipe(Layer.provide(Layer.mergeAll(
          Layer.succeed(IdentityConfig, { ...identity, encryptionKey: Option.some(Redacted.make(key)), encryptionOldKeys: [] }),
          Layer.succeed(ServerConfig, server)
        )))), (context) => Context.get(context, Encryption)))
      const data = JSON.stringify(["org_x", "https://bsky.social", "alice.test", "app-pass-1234"])
      const mac = encryption.mac("delta_session", data)
      expect(mac).toMatch(/^[0-9a-f]{64}$/)
      expect(encryption.mac("delta_session", data)).toBe(mac)
      // another process with the same key computes the same; rotated to another key, another
      expect((yield* withKey(TEST_ENCRYPTION_KEY)).mac("delta_session", data)).toBe(mac)
      expect((yield* withKey(Buffer.alloc(32, 9).toString("base64"))).mac("delta_session", data)).not.toBe(mac)
      expect(encryption.mac("other purpose", data)).not.toBe(mac)
      // neither a plain hash of the data nor an HMAC under the key itself
      expect(mac).not.toBe(Crypto.createHash("sha256").update(data).digest("hex"))
      const key = Buffer.from(TEST_ENCRYPTION_KEY, "base64")
      expect(mac).not.toBe(Crypto.createHmac("sha256", key).update(data).digest("hex"))
      expect(mac).not.toBe(Crypto.createHmac("sha256", key).update(`delta_session${data}`).digest("hex"))
    }))

  it.effect("rotation: rows sealed with an old key stay readable; an unknown key cannot read them", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      const { key, orgId, token } = yield* givenMember()
      yield* dashboard("POST", "/v1/connections", token, { provider: "nu", credentials: { token: "ghp_token" } })
      // a Bluesky session, kept sealed with the key of the time
      yield* dashboard("POST", "/v1/connections", token, { provider: "delta", credentials: { ...CREDENTIALS.delta } })
      expectOk(yield* callTool("delta_post", { text: "before the rotation" }, { key }))
      const sql = yield* SqlClient.SqlClient
      const config = yield* IdentityConfig
      const server = yield* ServerConfig
      const providers = yield* ProvidersConfig
      const newKey = Buffer.alloc(32, 9).toString("base64")
      const keysLayer = (current: string, old: ReadonlyArray<string>) =>
        Layer.mergeAll(
          Layer.succeed(IdentityConfig, {
            ...config,
            encryptionKey: Option.some(Redacted.make(current)),
            encryptionOldKeys: old.map((k) => Redacted.make(k))
          }),
          Layer.succeed(ServerConfig, server),
          Layer.succeed(ProvidersConfig, providers),
          Layer.succeed(SqlClient.SqlClient, sql)
        )
      const withKeys = (current: string, old: ReadonlyArray<string>) =>
        ConnectionsLive.pipe(
          Layer.provide(DeltaSessionsLive),
          Layer.provide(EncryptionLive),
          Layer.provide(keysLayer(current, old))
        )
      const read = (layer: Layer.Layer<Connections, EncryptionKeyError>) =>
        Effect.flatMap(Connections, (c) => c.credentials(OrgId.make(orgId), "nu", "nu_account")).pipe(Effect.provide(layer), Effect.exit)
      // rotated: the new key writes, the old one still reads
      const rotated = withKeys(newKey, [TEST_ENCRYPTION_KEY])
      const old = yield* read(rotated)
      expect(Exit.isSuccess(old) && old.value).toEqual({ token: "ghp_token" })
      // forgotten: without the old key the row cannot be read (a defect, not a wrong answer)
      expect(Exit.isFailure(yield* read(withKeys(newKey, [])))).toBe(true)
      // a row written after rotation carries the new key's id
      yield* Effect.flatMap(Connections, (c) => c.connect(OrgId.make(orgId), "mu", { token: "secret_notion" }, null)).pipe(
        Effect.provide(rotated),
        Effect.orDie
      )
      const ids = yield* sql<{ readonly provider: string; readonly key_id: string }>`
        SELECT provider, key_id FROM connections WHERE org_id = ${orgId} ORDER BY provider`
      expect(ids[0]?.key_id).not.toBe(ids[1]?.key_id)
      // a session kept after the rotation: sealed with the new key, found by a mac under it
      const account = { orgId: OrgId.make(orgId), service: u.bluesky.url, identifier: CREDENTIALS.delta.identifier, appPassword: CREDENTIALS.delta.app_password }
      const far = (yield* Clock.currentTimeMillis) + 86_400_000
      const fresh = { accessJwt: "new.access.jwt", refreshJwt: "new.refresh.jwt", did: "did:plc:alice", pds: null, accessUntil: far, refreshUntil: far }
      const rotatedSessions = DeltaSessionsLive.pipe(Layer.provide(EncryptionLive), Layer.provide(keysLayer(newKey, [TEST_ENCRYPTION_KEY])))
      yield* Effect.flatMap(DeltaSessions, (sessions) => sessions.set(account, fresh)).pipe(Effect.provide(rotatedSessions))
      const sessionKeys = sql<{ readonly key_id: string }>`SELECT key_id FROM delta_sessions WHERE org_id = ${orgId} ORDER BY key_id`
      expect(yield* sessionKeys).toHaveLength(2)
      // resealed: every row moves to the new key (the whole database: this is the file's last test), and the
      // old key can then be dropped; the sessions sealed with the old one are deleted (no call finds them again)
      const { resealed, sessionsDeleted } = yield* Effect.flatMap(Connections, (c) => c.reseal).pipe(Effect.provide(rotated))
      expect(resealed).toBeGreaterThanOrEqual(1)
      expect(sessionsDeleted).toBeGreaterThanOrEqual(1)
      const after = yield* sql<{ readonly key_id: string }>`SELECT DISTINCT key_id FROM connections WHERE org_id = ${orgId}`
      expect(after).toHaveLength(1)
      expect((yield* sessionKeys).map((r) => r.key_id)).toEqual([after[0]?.key_id])
      expect(yield* sql`SELECT 1 FROM delta_sessions WHERE key_id <> ${after[0]?.key_id ?? ""}`).toHaveLength(0)
      const dropped = yield* read(withKeys(newKey, []))
      expect(Exit.isSuccess(dropped) && dropped.value).toEqual({ token: "ghp_token" })
      const kept = yield* Effect.flatMap(DeltaSessions, (sessions) => sessions.get(account)).pipe(
        Effect.provide(DeltaSessionsLive.pipe(Layer.provide(EncryptionLive), Layer.provide(keysLayer(newKey, []))))
      )
      expect(kept?.accessJwt).toBe("new.access.jwt")
      // rows of other orgs sealed with a key nobody configured are counted, not touched
      const { unreadable } = yield* Effect.flatMap(Connections, (c) => c.reseal).pipe(Effect.provide(withKeys(Buffer.alloc(32, 3).toString("base64"), [])))
      expect(unreadable).toBeGreaterThanOrEqual(1)
    }))
})
