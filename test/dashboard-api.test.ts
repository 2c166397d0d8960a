/**
 * What the dashboard needs of the API: keys changed after creation (`PATCH /v1/keys/{id}`) and keys that
 * expire, the usage log filtered by time and outcome and exported as CSV, daily and per-tool summaries, the
 * dev sign-in's token, and CORS for a dashboard served from another origin — over HTTP against a real
 * gateway, and through the typed client.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import * as Net from "node:net"
import { Deferred, Effect, Either, Fiber, Schema } from "effect"
import { InvalidRequest, NotFound, ToolGatewayClient } from "../src/client.js"
import type { OrgId } from "../src/domain/ids.js"
import { USAGE_CSV_MAX } from "../src/domain/dashboard.js"
import { Members } from "../src/services/Members.js"
import { expectEnvelope, expectOk } from "./support/assert.js"
import { baseUrl, callTool, dashboard, gatewayLayer, givenManyUsage, givenMember, givenOrg, type HttpResult, request, requestBytes, requestChunked } from "./support/gateway.js"

const JsonObject = Schema.Record({ key: Schema.String, value: Schema.Unknown })
const bodyOf = (r: HttpResult) => Schema.decodeUnknownSync(JsonObject)(r.body)
const listOf = (r: HttpResult) => Schema.decodeUnknownSync(Schema.Struct({ data: Schema.Array(JsonObject) }))(r.body).data

const invalidRequest = { status: 400, type: "validation", code: "invalid_request", retryable: false, billable: false } as const
const notFound = { status: 404, type: "not_found", code: "not_found", retryable: false, billable: false } as const
const invalidKey = { status: 401, type: "auth", code: "invalid_key", retryable: false, billable: false } as const
const toolNotAllowed = { status: 401, type: "auth", code: "tool_not_allowed", retryable: false, billable: false } as const

/** A key created through the API: its id and the full key. */
const createKey = (token: string, body: Record<string, unknown>) =>
  Effect.map(dashboard("POST", "/v1/keys", token, body), (r) => {
    expect(r.status, r.text).toBe(201)
    // the key's secret is in this answer alone: no cache keeps it
    expect(r.headers.get("cache-control")).toBe("no-store")
    const created = bodyOf(r)
    return { id: String(created["id"]), key: String(created["key"]), body: created }
  })

/** Usage records written straight into the log, at chosen times (the log's own table, as the gateway writes it). */
const givenUsage = (orgId: OrgId, keyId: string, rows: ReadonlyArray<{ readonly at: string; readonly tool: string; readonly status: number; readonly credits: number }>) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql`INSERT INTO usage ${sql.insert(rows.map((r, i) => ({
      org_id: orgId,
      key_id: keyId,
      tool: r.tool,
      request_id: `req_seed${i}`,
      status: r.status,
      code: r.status < 400 ? "ok" : "insufficient_credits",
      credits: r.credits,
      latency_ms: 5,
      provider: r.status < 400 ? "open-meteo" : null,
      created_at: new Date(r.at)
    })))}`).pipe(Effect.orDie)

layer(gatewayLayer(), { excludeTestServices: true })("dashboard API: keys, usage, dev sign-in", (it) => {
  it.effect("a user added to two orgs at the same moment stays in the first one's: the second is refused, not a silent move", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const members = yield* Members
      const first = yield* givenOrg()
      const second = yield* givenOrg()
      const uid = `both-${first.orgId}`
      // the first add, not committed yet: its row is not there to lock
      const inserted = yield* Deferred.make<void>()
      const commit = yield* Deferred.make<void>()
      const adding = yield* Effect.fork(sql.withTransaction(Effect.gen(function* () {
        yield* sql`INSERT INTO members (uid, org_id, created_at) VALUES (${uid}, ${first.orgId}, now())`
        yield* Deferred.succeed(inserted, undefined)
        yield* Deferred.await(commit)
      })))
      yield* Deferred.await(inserted)
      const second_ = yield* Effect.fork(Effect.either(members.add(second.orgId, uid)))
      // the second add waits for the first (PostgreSQL shows its lock not granted) before the first commits
      const waiting = sql<{ readonly n: number }>`
        SELECT count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
         WHERE NOT l.granted AND a.datname = current_database()`
      yield* Effect.repeat(waiting, { until: (rows) => (rows[0]?.n ?? 0) > 0 || second_.unsafePoll() !== null })
      expect(second_.unsafePoll()).toBeNull()
      yield* Deferred.succeed(commit, undefined)
      yield* Fiber.join(adding)
      const result = yield* Fiber.join(second_)
      expect(result._tag).toBe("Left")
      expect(Either.isLeft(result) ? result.left.message : "").toContain(`${uid} is a member of ${first.orgId}`)
      expect((yield* members.list(first.orgId)).map((m) => m.uid)).toEqual([uid])
      expect(yield* members.list(second.orgId)).toEqual([])
    }))

  it.effect("a member taken out of the org is refused on their next request, with the token they still hold", () =>
    Effect.gen(function* () {
      const { orgId, token, uid } = yield* givenMember()
      expect((yield* dashboard("GET", "/v1/org", token)).status).toBe(200)
      yield* Effect.orDie(Effect.flatMap(Members, (m) => m.remove(orgId, uid)))
      const notAMember = { status: 403, type: "auth", code: "not_a_member", retryable: false, billable: false } as const
      expectEnvelope(yield* dashboard("GET", "/v1/org", token), notAMember)
      expectEnvelope(yield* dashboard("GET", "/v1/keys", token), notAMember)
      // not a member of that org (any more): not found, nothing removed elsewhere
      const other = yield* givenMember()
      const refused = yield* Effect.flip(Effect.flatMap(Members, (m) => m.remove(orgId, other.uid)))
      expect(refused._tag).toBe("NotFound")
      expect((yield* dashboard("GET", "/v1/org", other.token)).status).toBe(200)
    }))

  describe("PATCH /v1/keys/{id}", () => {
    it.effect("changes name, spend limit, tools and rate limit; null removes a limit; the answer is the key", () =>
      Effect.gen(function* () {
        const { token } = yield* givenMember()
        const { id } = yield* createKey(token, { name: "ci", monthly_spend_limit: 5, allowed_tools: ["weather"] })
        const changed = yield* dashboard("PATCH", `/v1/keys/${id}`, token, {
          name: "ci (staging)",
          monthly_spend_limit: 50,
          allowed_tools: ["weather", "search"],
          rate_limit: { per_second: 3, burst: 6 }
        })
        expect(changed.status, changed.text).toBe(200)
        expect(bodyOf(changed)).toMatchObject({
          id,
          name: "ci (staging)",
          monthly_spend_limit: 50,
          allowed_tools: ["weather", "search"],
          rate_limit: { per_second: 3, burst: 6 },
          expires_at: null
        })
        expect(bodyOf(changed)).not.toHaveProperty("key")
        // only what is sent changes; null removes
        const cleared = bodyOf(yield* dashboard("PATCH", `/v1/keys/${id}`, token, { monthly_spend_limit: null, rate_limit: null }))
        expect(cleared).toMatchObject({ name: "ci (staging)", monthly_spend_limit: null, rate_limit: null, allowed_tools: ["weather", "search"] })
        const listed = listOf(yield* dashboard("GET", "/v1/keys", token)).find((k) => k["id"] === id)
        expect(listed).toMatchObject({ name: "ci (staging)", monthly_spend_limit: null, allowed_tools: ["weather", "search"] })
      }))

    it.effect("a changed allow-list applies to the key's very next call", () =>
      Effect.gen(function* () {
        const { token } = yield* givenMember({ credits: 100 })
        const { id, key } = yield* createKey(token, { name: "narrow", allowed_tools: ["weather"] })
        expectOk(yield* callTool("weather", { q: "Berlin" }, { key }))
        expect((yield* dashboard("PATCH", `/v1/keys/${id}`, token, { allowed_tools: ["mobile_app_search"] })).status).toBe(200)
        expectEnvelope(yield* callTool("weather", { q: "Berlin" }, { key }), toolNotAllowed)
        yield* dashboard("PATCH", `/v1/keys/${id}`, token, { allowed_tools: null })
        expectOk(yield* callTool("weather", { q: "Berlin" }, { key }))
      }))

    it.effect("a field of the wrong kind is refused saying what it must be: never a field's description, nor a choice's first member alone", () =>
      Effect.gen(function* () {
        const a = yield* givenMember()
        const { id } = yield* createKey(a.token, { name: "a" })
        const cases = [
          [dashboard("POST", "/v1/connections", a.token, { provider: "github", credentials: { token: "x" } }), "provider: must be one of delta, epsilon, zeta, eta, theta, iota, kappa, lambda, mu or nu"],
          [dashboard("POST", "/v1/connections", a.token, { provider: "nu", credentials: "ghp_token" }), "credentials: must be an object of the provider's credential fields"],
          [dashboard("PATCH", `/v1/keys/${id}`, a.token, { allowed_tools: "weather" }), "allowed_tools: must be a list of tool names, or null"],
          [dashboard("PATCH", `/v1/keys/${id}`, a.token, { allowed_tools: [] }), "allowed_tools: must name at least one tool (null: every tool)"],
          [dashboard("PATCH", `/v1/keys/${id}`, a.token, { rate_limit: 5 }), "rate_limit: must be an object {per_second, burst}, each an integer from 1 to 100000"],
          [dashboard("GET", "/v1/usage?status=failed", a.token), "status: must be ok or error"],
          [dashboard("GET", "/v1/usage?format=xlsx", a.token), "format: must be json or csv"],
          [dashboard("GET", "/v1/usage/summary?group_by=key", a.token), "group_by: must be day or tool"],
          [callTool("eta_personal_bests", { mode: "sprint" }, { key: a.key }), "mode: must be one of time, words, quote, zen or custom"]
        ] as const
        for (const [answer, message] of cases) {
          const result = yield* answer
          expectEnvelope(result, { ...invalidRequest, message })
          const said = String(bodyOf(result)["error"] !== undefined ? JSON.stringify(bodyOf(result)["error"]) : "")
          expect(said).not.toMatch(/Expected "|\(and \d+ more\)|What the provider needs|ghp_token/)
        }
      }))

    it.effect("nothing to change, a bad field, a revoked key: invalid_request; an unknown or another org's key: not_found", () =>
      Effect.gen(function* () {
        const a = yield* givenMember()
        const b = yield* givenMember()
        const { id } = yield* createKey(a.token, { name: "a" })
        expectEnvelope(yield* dashboard("PATCH", `/v1/keys/${id}`, a.token, {}), { ...invalidRequest, message: "Nothing to change" })
        expectEnvelope(yield* dashboard("PATCH", `/v1/keys/${id}`, a.token, { allowed_tools: ["nope"] }), invalidRequest)
        expectEnvelope(yield* dashboard("PATCH", `/v1/keys/${id}`, a.token, { rate_limit: { per_second: 0, burst: 1 } }), invalidRequest)
        expectEnvelope(yield* dashboard("PATCH", `/v1/keys/${id}`, a.token, { name: "" }), invalidRequest)
        expectEnvelope(yield* dashboard("PATCH", `/v1/keys/${id}`, a.token, { colour: "red" }), invalidRequest)
        expectEnvelope(yield* dashboard("PATCH", "/v1/keys/key_nope", a.token, { name: "x" }), notFound)
        expectEnvelope(yield* dashboard("PATCH", `/v1/keys/${id}`, b.token, { name: "mine now" }), notFound)
        expect(listOf(yield* dashboard("GET", "/v1/keys", a.token)).find((k) => k["id"] === id)).toMatchObject({ name: "a" })
        yield* dashboard("DELETE", `/v1/keys/${id}`, a.token)
        expectEnvelope(yield* dashboard("PATCH", `/v1/keys/${id}`, a.token, { name: "revived?" }), { ...invalidRequest, message: "revoked" })
        // a token that is not one is refused with the challenge a 401 carries (RFC 9110 §15.5.2, RFC 6750 §3)
        const malformed = yield* request("/v1/keys", { method: "GET", headers: { authorization: "Bearer not-a-jwt" } })
        expect(malformed.status).toBe(401)
        expect(malformed.headers.get("www-authenticate")).toBe(`Bearer realm="tool-gateway"`)
        // an API key is no dashboard credential
        expectEnvelope(yield* request(`/v1/keys/${id}`, { method: "PATCH", body: "{}", headers: { "content-type": "application/json", "x-api-key": a.key } }), {
          status: 401,
          type: "auth",
          code: "invalid_token",
          retryable: false,
          billable: false
        })
      }))
  })

  describe("key expiry", () => {
    it.effect("an expired key is refused as invalid_key (from the cache too); removing the expiry revives it", () =>
      Effect.gen(function* () {
        const { token } = yield* givenMember({ credits: 100 })
        const expiresAt = new Date(Date.now() + 1_500).toISOString()
        const { id, key, body } = yield* createKey(token, { name: "temp", expires_at: expiresAt })
        expect(body["expires_at"]).toBe(expiresAt)
        // twice: the second call takes the key from the process's cache
        expectOk(yield* callTool("weather", { q: "Berlin" }, { key }))
        expectOk(yield* callTool("weather", { q: "Berlin" }, { key }))
        yield* Effect.sleep("1600 millis")
        expectEnvelope(yield* callTool("weather", { q: "Berlin" }, { key }), invalidKey)
        expectEnvelope(yield* request("/v1/artifacts/art_x", { method: "GET", headers: { "x-api-key": key } }), invalidKey)
        const revived = bodyOf(yield* dashboard("PATCH", `/v1/keys/${id}`, token, { expires_at: null }))
        expect(revived["expires_at"]).toBeNull()
        expectOk(yield* callTool("weather", { q: "Berlin" }, { key }))
        // an expiry brought forward to the past is refused: it must be in the future
        expectEnvelope(yield* dashboard("PATCH", `/v1/keys/${id}`, token, { expires_at: "2001-01-01" }), { ...invalidRequest, message: "future" })
      }))

    it.effect("an expiry must be an ISO 8601 time in the future", () =>
      Effect.gen(function* () {
        const { token } = yield* givenMember()
        expectEnvelope(yield* dashboard("POST", "/v1/keys", token, { name: "x", expires_at: "2001-01-01T00:00:00Z" }), invalidRequest)
        expectEnvelope(yield* dashboard("POST", "/v1/keys", token, { name: "x", expires_at: "next tuesday" }), invalidRequest)
        expectEnvelope(yield* dashboard("POST", "/v1/keys", token, { name: "x", expires_at: "2040-13-45" }), invalidRequest)
        const { body } = yield* createKey(token, { name: "date only", expires_at: "2040-01-31" })
        expect(body["expires_at"]).toBe("2040-01-31T00:00:00.000Z")
      }))
  })

  describe("GET /v1/usage: filters and CSV", () => {
    it.effect("from and to with offsets and digits past the millisecond: a record lands on the side of the instant it is on", () =>
      Effect.gen(function* () {
        const { token, orgId, keyId } = yield* givenMember()
        yield* givenUsage(orgId, keyId, ["2026-03-01T00:00:00.000Z", "2026-03-01T00:00:00.001Z", "2026-03-02T00:00:00.000Z"].map((at) => ({
          at,
          tool: "weather",
          status: 200,
          credits: 1
        })))
        const times = (query: string) =>
          Effect.map(dashboard("GET", `/v1/usage?${query}`, token), (page) => listOf(page).map((record) => record["time"]))
        // 02:00 at +02:00 is midnight UTC; `to` is exclusive
        expect(yield* times("from=2026-03-01T02:00:00%2B02:00&to=2026-03-02")).toEqual(["2026-03-01T00:00:00.001Z", "2026-03-01T00:00:00.000Z"])
        expect(yield* times("from=2026-03-01&to=2026-03-01T00:00:00.001Z")).toEqual(["2026-03-01T00:00:00.000Z"])
        // half a millisecond past midnight: the record at .000 is before it, the one at .001 after (JavaScript drops
        // the digits past the millisecond: the instant was read as midnight itself)
        expect(yield* times("from=2026-03-01T00:00:00.0005Z&to=2026-03-02")).toEqual(["2026-03-01T00:00:00.001Z"])
        expect(yield* times("from=2026-03-01&to=2026-03-01T00:00:00.0005Z")).toEqual(["2026-03-01T00:00:00.000Z"])
      }))

    it.effect("from, to, status, tool and key filter the log; cursor pages keep the filters", () =>
      Effect.gen(function* () {
        const { token, orgId, keyId } = yield* givenMember()
        yield* givenUsage(orgId, keyId, [
          { at: "2026-01-01T10:00:00Z", tool: "weather", status: 200, credits: 1 },
          { at: "2026-01-01T23:59:59Z", tool: "search", status: 402, credits: 0 },
          { at: "2026-01-02T00:00:00Z", tool: "weather", status: 200, credits: 1 },
          { at: "2026-01-03T08:00:00Z", tool: "read", status: 200, credits: 2 },
          { at: "2026-01-03T09:00:00Z", tool: "weather", status: 200, credits: 1 }
        ])
        const times = (query: string) =>
          Effect.map(dashboard("GET", `/v1/usage?${query}`, token), (r) => {
            expect(r.status, r.text).toBe(200)
            return listOf(r).map((u) => String(u["time"]).slice(0, 16))
          })
        expect(yield* times("from=2026-01-02")).toEqual(["2026-01-03T09:00", "2026-01-03T08:00", "2026-01-02T00:00"])
        expect(yield* times("to=2026-01-02")).toEqual(["2026-01-01T23:59", "2026-01-01T10:00"])
        expect(yield* times("from=2026-01-01T12:00:00Z&to=2026-01-03T08:00:00Z")).toEqual(["2026-01-02T00:00", "2026-01-01T23:59"])
        expect(yield* times("status=error")).toEqual(["2026-01-01T23:59"])
        expect(yield* times("status=ok&tool=weather&from=2026-01-02")).toEqual(["2026-01-03T09:00", "2026-01-02T00:00"])
        expect(yield* times(`key_id=${keyId}&status=ok`)).toHaveLength(4)
        const first = bodyOf(yield* dashboard("GET", "/v1/usage?status=ok&limit=2", token))
        expect(first["next_cursor"]).toEqual(expect.any(String))
        expect(yield* times(`status=ok&limit=2&cursor=${String(first["next_cursor"])}`)).toEqual(["2026-01-02T00:00", "2026-01-01T10:00"])
        expectEnvelope(yield* dashboard("GET", "/v1/usage?status=maybe", token), invalidRequest)
        expectEnvelope(yield* dashboard("GET", "/v1/usage?from=yesterday", token), invalidRequest)
      }))

    it.effect("format=csv: every matching record as text/csv, a header line first, as an attachment", () =>
      Effect.gen(function* () {
        const { token, orgId, keyId } = yield* givenMember()
        yield* givenUsage(orgId, keyId, [
          { at: "2026-02-01T10:00:00Z", tool: "weather", status: 200, credits: 1 },
          { at: "2026-02-02T10:00:00Z", tool: "search", status: 402, credits: 0 },
          { at: "2026-02-03T10:00:00Z", tool: "weather", status: 200, credits: 3 }
        ])
        const csv = yield* dashboard("GET", "/v1/usage?format=csv&tool=weather&limit=1", token)
        expect(csv.status).toBe(200)
        expect(csv.headers.get("content-type")).toMatch(/^text\/csv/)
        expect(csv.headers.get("content-disposition")).toBe("attachment; filename=\"usage.csv\"")
        const lines = csv.text.trimEnd().split("\r\n")
        expect(lines[0]).toBe("id,time,key_id,tool,status,code,credits,latency_ms,provider,request_id")
        // the page size does not cut an export short
        expect(lines.slice(1).map((l) => l.split(",").slice(1, 7))).toEqual([
          ["2026-02-03T10:00:00.000Z", keyId, "weather", "200", "ok", "3"],
          ["2026-02-01T10:00:00.000Z", keyId, "weather", "200", "ok", "1"]
        ])
        const errors = yield* dashboard("GET", "/v1/usage?format=csv&status=error", token)
        expect(errors.text.trimEnd().split("\r\n")).toHaveLength(2)
        // everything that matched is in it: nothing says there is more
        expect(csv.headers.get("x-next-cursor")).toBeNull()
        expectEnvelope(yield* dashboard("GET", "/v1/usage?format=xml", token), invalidRequest)
      }))

    it.effect("exports that run at once, or are given up half-way, leave the next one whole: each holds what matched when it was asked for", () =>
      Effect.gen(function* () {
        const { token, orgId, keyId } = yield* givenMember()
        const sql = yield* SqlClient.SqlClient
        yield* givenManyUsage(orgId, keyId, 20000, "2026-06-01T00:00:00Z")
        const base = yield* baseUrl
        const exportUrl = `${base}/v1/usage?format=csv`
        const headers = { authorization: `Bearer ${token}` }
        // three clients that hang up after the first piece of their export (more than the exports a process runs at once)
        yield* Effect.promise(() =>
          Promise.all([1, 2, 3].map(async () => {
            const reader = (await fetch(exportUrl, { headers })).body?.getReader()
            await reader?.read()
            await reader?.cancel()
          })))
        // then four at once: their answers begin (what each holds is fixed) before a record is written, and two of
        // them wait for the others' turn
        const responses = yield* Effect.promise(() => Promise.all([1, 2, 3, 4].map(() => fetch(exportUrl, { headers }))))
        yield* Effect.orDie(sql`
          INSERT INTO usage (org_id, key_id, tool, request_id, status, code, credits, latency_ms, provider, created_at)
          VALUES (${orgId}, ${keyId}, 'weather', 'req_late', 200, 'ok', 1, 5, 'open-meteo', now())`)
        const texts = yield* Effect.promise(() => Promise.all(responses.map((r) => r.text())))
        for (const text of texts) {
          const lines = text.trimEnd().split("\r\n")
          expect(lines).toHaveLength(1 + 20000)
          expect(lines[1]?.split(",")[1]).toBe("2026-06-01T05:33:20.000Z")
          expect(lines.at(-1)?.split(",")[1]).toBe("2026-06-01T00:00:01.000Z")
          expect(text).toBe(texts[0])
        }
      }), { timeout: 30_000 })

    it.effect("an export that fails after its headers is cut off, not ended as if whole", () =>
      Effect.gen(function* () {
        const { token, orgId, keyId } = yield* givenMember()
        yield* givenManyUsage(orgId, keyId, 3000, "2026-07-01T00:00:00Z")
        // a row no id can be shown for (past 2^52): reading it is a defect, after the CSV's header line went out
        const sql = yield* SqlClient.SqlClient
        yield* sql`
          INSERT INTO usage (id, org_id, key_id, tool, request_id, status, code, credits, latency_ms, provider, created_at)
          OVERRIDING SYSTEM VALUE
          VALUES (${2 ** 52 + 5}, ${orgId}, ${keyId}, 'weather', 'req_unshowable', 200, 'ok', 1, 5, 'open-meteo', now())`.pipe(Effect.orDie)
        const base = yield* baseUrl
        const read = yield* Effect.promise(() =>
          fetch(`${base}/v1/usage?format=csv`, { headers: { authorization: `Bearer ${token}` } })
            .then((r) => r.text())
            .then((text) => ({ whole: true, text }), (error: unknown) => ({ whole: false, text: String(error) })))
        // before: a 200 whose body ended cleanly after the header line, a file that looked complete
        expect(read.whole, read.text.slice(0, 200)).toBe(false)
      }))

    it.effect("clients that stop reading their exports hold up no other org's export", () =>
      Effect.gen(function* () {
        const big = yield* givenMember()
        yield* givenManyUsage(big.orgId, big.keyId, USAGE_CSV_MAX + 1, "2026-08-01T00:00:00Z")
        const small = yield* givenMember()
        yield* givenManyUsage(small.orgId, small.keyId, 10, "2026-08-01T00:00:00Z")
        const base = new URL(yield* baseUrl)
        // three downloads whose readers stop reading at once: their answers wait on full sockets
        const stalled = yield* Effect.acquireRelease(
          Effect.promise(() =>
            Promise.all([1, 2, 3].map(() =>
              new Promise<Net.Socket>((resolve) => {
                const socket = Net.connect(Number(base.port), base.hostname, () => {
                  socket.write(`GET /v1/usage?format=csv HTTP/1.1\r\nHost: ${base.host}\r\nAuthorization: Bearer ${big.token}\r\n\r\n`)
                  socket.once("data", () => {
                    socket.pause()
                    resolve(socket)
                  })
                })
              })))),
          (sockets) => Effect.sync(() => sockets.forEach((s) => s.destroy()))
        )
        expect(stalled).toHaveLength(3)
        yield* Effect.sleep("500 millis")
        const other = yield* dashboard("GET", "/v1/usage?format=csv", small.token).pipe(Effect.timeout("10 seconds"))
        expect(other.status).toBe(200)
        expect(other.text.trimEnd().split("\r\n")).toHaveLength(11)
      }).pipe(Effect.scoped), { timeout: 60_000 })

    it.effect("an org's record ids do not count other orgs' calls: the gap across 1,000 of another org's records says nothing", () =>
      Effect.gen(function* () {
        const a = yield* givenMember()
        const b = yield* givenMember()
        const sql = yield* SqlClient.SqlClient
        yield* givenUsage(a.orgId, a.keyId, [{ at: "2026-05-01T00:00:00Z", tool: "weather", status: 200, credits: 1 }])
        yield* givenManyUsage(b.orgId, b.keyId, 1000, "2026-05-01T00:00:01Z", { apart: false })
        yield* givenUsage(a.orgId, a.keyId, [{ at: "2026-05-01T00:00:02Z", tool: "weather", status: 200, credits: 1 }])
        const rowIds = yield* sql<{ readonly id: string }>`SELECT id::text AS id FROM usage WHERE org_id = ${a.orgId} ORDER BY usage.id`.pipe(Effect.orDie)
        // the row ids are 1,001 apart
        expect(Number(rowIds[1]?.id) - Number(rowIds[0]?.id)).toBe(1001)
        const page = yield* dashboard("GET", "/v1/usage?limit=1", a.token)
        expect(page.status, page.text).toBe(200)
        const [newer] = listOf(page)
        const next = bodyOf(page)["next_cursor"]
        const older = listOf(yield* dashboard("GET", `/v1/usage?limit=1&cursor=${String(next)}`, a.token))[0]
        const shown = [String(older?.["id"]), String(newer?.["id"])]
        expect(shown.every((id) => /^\d{1,16}$/.test(id))).toBe(true)
        expect(shown).not.toEqual(rowIds.map((r) => r.id))
        expect(Math.abs(Number(shown[1]) - Number(shown[0]))).not.toBe(1001)
        // the cursor is the page's last id, and it pages on
        expect(next).toBe(newer?.["id"])
        expect(older?.["time"]).toBe("2026-05-01T00:00:00.000Z")
        // a cursor that is not a shown id (2^52 or more, or more than 16 digits): refused, not read as some record
        expectEnvelope(yield* dashboard("GET", "/v1/usage?cursor=9999999999999999", a.token), { ...invalidRequest, message: "cursor" })
        expectEnvelope(yield* dashboard("GET", "/v1/usage?cursor=12345678901234567", a.token), { ...invalidRequest, message: "cursor" })
      }))

    it.effect(`format=csv past ${USAGE_CSV_MAX} rows: the export says where the rest starts, and the rest is one request away`, () =>
      Effect.gen(function* () {
        const { token, orgId, keyId } = yield* givenMember()
        yield* givenManyUsage(orgId, keyId, USAGE_CSV_MAX + 1, "2026-04-01T00:00:00Z")
        const first = yield* dashboard("GET", "/v1/usage?format=csv", token)
        expect(first.status).toBe(200)
        const lines = first.text.trimEnd().split("\r\n")
        expect(lines).toHaveLength(1 + USAGE_CSV_MAX)
        const cursor = first.headers.get("x-next-cursor")
        expect(cursor).toEqual(expect.any(String))
        // newest first: the rest is the oldest record
        const rest = yield* dashboard("GET", `/v1/usage?format=csv&cursor=${cursor ?? ""}`, token)
        const restLines = rest.text.trimEnd().split("\r\n")
        expect(restLines).toHaveLength(2)
        expect(restLines[1]?.split(",")[1]).toBe("2026-04-01T00:00:01.000Z")
        expect(rest.headers.get("x-next-cursor")).toBeNull()
      }))
  })

  describe("GET /v1/usage/summary", () => {
    it.effect("at most 366 lines: a range that touches 367 UTC days is refused, however few hours it lacks of them", () =>
      Effect.gen(function* () {
        const { token } = yield* givenMember()
        // noon to noon, a leap year apart: 366 days of time, 367 days touched
        expectEnvelope(yield* dashboard("GET", "/v1/usage/summary?from=2024-01-01T12:00:00Z&to=2025-01-01T12:00:00Z", token), {
          ...invalidRequest,
          message: "at most 366 days"
        })
        const leap = yield* dashboard("GET", "/v1/usage/summary?from=2024-01-01&to=2025-01-01", token)
        expect(Schema.decodeUnknownSync(Schema.Struct({ data: Schema.Array(JsonObject) }))(leap.body).data).toHaveLength(366)
      }))

    it.effect("per UTC day, every day of the range (empty ones too), and per tool, most credits first", () =>
      Effect.gen(function* () {
        const { token, orgId, keyId } = yield* givenMember()
        yield* givenUsage(orgId, keyId, [
          { at: "2026-03-01T00:00:00Z", tool: "weather", status: 200, credits: 1 },
          { at: "2026-03-01T23:59:59Z", tool: "search", status: 402, credits: 0 },
          { at: "2026-03-03T12:00:00Z", tool: "read", status: 200, credits: 5 },
          { at: "2026-03-03T13:00:00Z", tool: "weather", status: 200, credits: 1 },
          { at: "2026-03-04T00:00:00Z", tool: "weather", status: 200, credits: 1 },
          { at: "2026-03-04T01:00:00Z", tool: "beta_read", status: 200, credits: 12 }
        ])
        const days = yield* dashboard("GET", "/v1/usage/summary?from=2026-03-01&to=2026-03-04", token)
        expect(days.status, days.text).toBe(200)
        expect(days.body).toEqual({
          from: "2026-03-01T00:00:00.000Z",
          to: "2026-03-04T00:00:00.000Z",
          group_by: "day",
          data: [
            { key: "2026-03-01", calls: 2, errors: 1, credits: 1 },
            { key: "2026-03-02", calls: 0, errors: 0, credits: 0 },
            { key: "2026-03-03", calls: 2, errors: 0, credits: 6 }
          ],
          total: { calls: 4, errors: 1, credits: 7 }
        })
        const byTool = yield* dashboard("GET", "/v1/usage/summary?from=2026-03-01&to=2026-03-05&group_by=tool", token)
        // by amount, not as text ("12" before "5")
        expect(bodyOf(byTool)["data"]).toEqual([
          { key: "beta_read", calls: 1, errors: 0, credits: 12 },
          { key: "read", calls: 1, errors: 0, credits: 5 },
          { key: "weather", calls: 3, errors: 0, credits: 3 },
          { key: "search", calls: 1, errors: 1, credits: 0 }
        ])
        // by default: the 30 days up to now
        const recent = bodyOf(yield* dashboard("GET", "/v1/usage/summary", token))
        expect(recent["data"]).toHaveLength(30)
        expectEnvelope(yield* dashboard("GET", "/v1/usage/summary?from=2026-03-04&to=2026-03-01", token), { ...invalidRequest, message: "before" })
        expectEnvelope(yield* dashboard("GET", "/v1/usage/summary?from=2020-01-01&to=2026-01-01", token), { ...invalidRequest, message: "366" })
        expectEnvelope(yield* dashboard("GET", "/v1/usage/summary?group_by=key", token), invalidRequest)
      }))

    it.effect("a field that may be null and is neither null nor valid is told what it should be, once", () =>
      Effect.gen(function* () {
        const { token, keyId } = yield* givenMember()
        const refused = yield* dashboard("PATCH", `/v1/keys/${keyId}`, token, { monthly_spend_limit: -1 })
        expectEnvelope(refused, { ...invalidRequest, message: "monthly_spend_limit: " })
        // not also "Expected null, actual -1": the null branch of the field says nothing more
        expect(refused.text).not.toContain("Expected null")
        expect(refused.text.match(/monthly_spend_limit/g)).toHaveLength(1)
      }))

    it.effect("a key's name may not hold bidirectional controls, which would show it reordered", () =>
      Effect.gen(function* () {
        const { token, keyId } = yield* givenMember()
        for (const name of ["invoice\u202Efdp.exe", "a\u2066b\u2069", "x\u200Fy"]) {
          expectEnvelope(yield* dashboard("POST", "/v1/keys", token, { name }), { ...invalidRequest, message: "bidirectional" })
          expectEnvelope(yield* dashboard("PATCH", `/v1/keys/${keyId}`, token, { name }), { ...invalidRequest, message: "bidirectional" })
        }
        // other scripts and emoji are names
        expect((yield* dashboard("POST", "/v1/keys", token, { name: "مفتاح ☕ ключ" })).status).toBe(201)
      }))

    it.effect("dates that do not exist, a limit that is not digits and a reversed range are 400, on every usage route", () =>
      Effect.gen(function* () {
        const { token, keyId } = yield* givenMember()
        for (const date of ["2026-02-30", "2026-04-31", "2025-02-29", "2026-13-01", "2026-01-01T24:00:00Z", "2026-01-01T12:60:00Z", "0000-06-01", "0001-01-01T00:00:00%2B01:00"]) {
          for (const path of [`/v1/usage?from=${date}`, `/v1/usage?to=${date}`, `/v1/usage/summary?from=${date}&to=2026-06-01`, `/v1/usage/summary?to=${date}`]) {
            expectEnvelope(yield* dashboard("GET", path, token), { ...invalidRequest, message: "exists" })
          }
        }
        // a leap day that exists is a date
        expect((yield* dashboard("GET", "/v1/usage?from=2024-02-29", token)).status).toBe(200)
        // so is a key's expiry
        expectEnvelope(yield* dashboard("PATCH", `/v1/keys/${keyId}`, token, { expires_at: "2030-02-30" }), { ...invalidRequest, message: "exists" })
        for (const limit of ["1e2", "0x10", "%201", "1.0", "+5"]) {
          expectEnvelope(yield* dashboard("GET", `/v1/usage?limit=${limit}`, token), { ...invalidRequest, message: "limit" })
        }
        expect((yield* dashboard("GET", "/v1/usage?limit=007", token)).status).toBe(200)
        // as the summary does: a range that ends before it starts is refused, not an empty page
        expectEnvelope(yield* dashboard("GET", "/v1/usage?from=2026-03-04&to=2026-03-01", token), { ...invalidRequest, message: "before" })
        expectEnvelope(yield* dashboard("GET", "/v1/usage?from=2026-03-01&to=2026-03-01", token), { ...invalidRequest, message: "before" })
      }))

    it.effect("the default summary is 30 whole days, also when to is a midnight, and starts no earlier than the year 1", () =>
      Effect.gen(function* () {
        const { token } = yield* givenMember()
        const Days = Schema.Struct({ from: Schema.String, data: Schema.Array(Schema.Struct({ key: Schema.String })) })
        const midnight = Schema.decodeUnknownSync(Days)((yield* dashboard("GET", "/v1/usage/summary?to=2026-03-31", token)).body)
        expect(midnight.data).toHaveLength(30)
        expect(midnight.from).toBe("2026-03-01T00:00:00.000Z")
        expect(midnight.data.at(-1)?.key).toBe("2026-03-30")
        const noon = Schema.decodeUnknownSync(Days)((yield* dashboard("GET", "/v1/usage/summary?to=2026-03-31T12:00:00Z", token)).body)
        expect(noon.data).toHaveLength(30)
        expect(noon.from).toBe("2026-03-02T00:00:00.000Z")
        expect(noon.data.at(-1)?.key).toBe("2026-03-31")
        const first = Schema.decodeUnknownSync(Days)((yield* dashboard("GET", "/v1/usage/summary?to=0001-01-03", token)).body)
        expect(first.from).toBe("0001-01-01T00:00:00.000Z")
        expect(first.data.map((d) => d.key)).toEqual(["0001-01-01", "0001-01-02"])
      }))

    it.effect("a range in the first century has its days too (Date.UTC reads years 0–99 as 1900–1999)", () =>
      Effect.gen(function* () {
        const { token } = yield* givenMember()
        const cases = [
          ["0050-01-01", "0050-01-03", ["0050-01-01", "0050-01-02"]],
          ["0999-12-31T12:00:00Z", "1000-01-02", ["0999-12-31", "1000-01-01"]]
        ] as const
        for (const [from, to, expected] of cases) {
          const days = yield* dashboard("GET", `/v1/usage/summary?from=${from}&to=${to}`, token)
          expect(days.status, days.text).toBe(200)
          const data = Schema.decodeUnknownSync(Schema.Struct({ data: Schema.Array(Schema.Struct({ key: Schema.String })) }))(days.body).data
          expect(data.map((d) => d.key)).toEqual(expected)
        }
      }))
  })

  describe("the typed client", () => {
    it.effect("updateKey, usage (JSON and CSV) and usageSummary are typed operations with typed errors", () =>
      Effect.gen(function* () {
        const { token } = yield* givenMember()
        const { id } = yield* createKey(token, { name: "typed" })
        const result = yield* Effect.gen(function* () {
          const client = yield* ToolGatewayClient
          const updated = yield* client.dashboard.updateKey({ path: { id }, payload: { name: "renamed", expires_at: "2040-01-01" } })
          const nothing = yield* Effect.flip(client.dashboard.updateKey({ path: { id }, payload: {} }))
          const missing = yield* Effect.flip(client.dashboard.updateKey({ path: { id: "key_nope" }, payload: { name: "x" } }))
          const summary = yield* client.dashboard.usageSummary({ urlParams: { group_by: "tool" } })
          const page = yield* client.dashboard.usage({ urlParams: { status: "ok" } })
          const csv = yield* client.dashboard.usage({ urlParams: { format: "csv" } })
          return { updated, nothing, missing, summary, page, csv }
        }).pipe(Effect.provide(ToolGatewayClient.layer({ baseUrl: yield* baseUrl, idToken: token })))
        expect(result.updated).toMatchObject({ id, name: "renamed", expires_at: "2040-01-01T00:00:00.000Z" })
        expect(result.nothing).toBeInstanceOf(InvalidRequest)
        expect(result.missing).toBeInstanceOf(NotFound)
        expect(result.summary.group_by).toBe("tool")
        expect(typeof result.page === "string" ? undefined : result.page.data).toEqual([])
        expect(result.csv).toBe("id,time,key_id,tool,status,code,credits,latency_ms,provider,request_id\r\n")
      }))
  })

  it.effect("OpenAPI documents the new operations (the dev issuer's stays out)", () =>
    Effect.gen(function* () {
      const spec = yield* request("/openapi.json", { method: "GET" })
      const Paths = Schema.Struct({ paths: Schema.Record({ key: Schema.String, value: JsonObject }) })
      const paths = Schema.decodeUnknownSync(Paths)(spec.body).paths
      expect(Object.keys(paths["/v1/keys/{id}"] ?? {})).toEqual(expect.arrayContaining(["patch", "delete"]))
      expect(JSON.stringify(paths["/v1/keys/{id}"]?.["patch"])).toContain("UpdateKey")
      expect(JSON.stringify(paths["/v1/usage/summary"]?.["get"])).toContain("group_by")
      const usage = JSON.stringify(paths["/v1/usage"]?.["get"])
      for (const text of ["text/csv", "\"from\"", "\"to\"", "\"status\"", "\"format\""]) expect(usage).toContain(text)
      expect(paths["/dev/token"]).toBeUndefined()
    }))

  describe("POST /dev/token (the dashboard's dev sign-in)", () => {
    it.effect("mints a dev ID token for a user id that signs in to the dashboard API", () =>
      Effect.gen(function* () {
        const { uid } = yield* givenMember()
        const minted = yield* request("/dev/token", { body: JSON.stringify({ uid }), headers: { "content-type": "application/json" } })
        expect(minted.status, minted.text).toBe(200)
        expect(minted.headers.get("cache-control")).toBe("no-store")
        const token = String(bodyOf(minted)["token"])
        expect(bodyOf(minted)["expires_at"]).toEqual(expect.any(String))
        const org = yield* dashboard("GET", "/v1/org", token)
        expect(org.status, org.text).toBe(200)
        expectEnvelope(yield* request("/dev/token", { body: JSON.stringify({ uid: "" }), headers: { "content-type": "application/json" } }), invalidRequest)
        // a form's fields, as a page of another site could post them: refused as every other body that is not JSON
        for (const [type, body] of [
          ["application/x-www-form-urlencoded", `uid=${uid}`],
          ["multipart/form-data; boundary=b", `--b\r\nContent-Disposition: form-data; name="uid"\r\n\r\n${uid}\r\n--b--\r\n`],
          ["text/plain", JSON.stringify({ uid })]
        ] as const) {
          const form = yield* request("/dev/token", { body, headers: { "content-type": type } })
          expectEnvelope(form, { status: 415, type: "validation", code: "unsupported_media_type", retryable: false, billable: false })
          expect(form.text).not.toContain("token\":")
        }
      }))

    it.effect("only for a loopback Host: a page whose name was rebound to 127.0.0.1 gets none", () =>
      Effect.gen(function* () {
        const refused = yield* requestChunked("/dev/token", [JSON.stringify({ uid: "someone" })], {
          host: "attacker.example:8787",
          "content-type": "application/json"
        })
        expectEnvelope(refused, { ...invalidRequest, message: "only to a loopback Host" })
        expect(refused.text).not.toContain("token\":")
        // the same request with a loopback Host gets its token: the Host alone made the difference
        for (const host of ["localhost:8787", "127.0.0.1:8787"]) {
          const allowed = yield* requestChunked("/dev/token", [JSON.stringify({ uid: "someone" })], { host, "content-type": "application/json" })
          expect(allowed.status, `${host}: ${allowed.text}`).toBe(200)
          expect(bodyOf(allowed)["token"]).toEqual(expect.any(String))
        }
      }))
  })

  describe("CORS off by default", () => {
    it.effect("no CORS headers, and a preflight is not answered as one", () =>
      Effect.gen(function* () {
        const { token } = yield* givenMember()
        const read = yield* dashboard("GET", "/v1/org", token, undefined, { origin: "https://dash.example.com" })
        expect(read.status).toBe(200)
        expect(read.headers.get("access-control-allow-origin")).toBeNull()
        const preflight = yield* request("/v1/keys", {
          method: "OPTIONS",
          headers: { origin: "https://dash.example.com", "access-control-request-method": "PATCH" }
        })
        expect(preflight.status).toBe(405)
        expect(preflight.headers.get("access-control-allow-origin")).toBeNull()
      }))
  })
})

layer(gatewayLayer({ server: { corsOrigins: ["https://dash.example.com", "http://localhost:5173"] } }), { excludeTestServices: true })(
  "dashboard API: CORS_ORIGINS",
  (it) => {
    it.effect("a listed origin's preflight is answered, and its requests carry the CORS headers (errors too)", () =>
      Effect.gen(function* () {
        const { token } = yield* givenMember()
        const preflight = yield* request("/v1/keys/key_1", {
          method: "OPTIONS",
          headers: {
            origin: "https://dash.example.com",
            "access-control-request-method": "PATCH",
            "access-control-request-headers": "authorization, content-type"
          }
        })
        expect(preflight.status).toBe(204)
        expect(preflight.headers.get("access-control-allow-origin")).toBe("https://dash.example.com")
        expect(preflight.headers.get("access-control-allow-methods")).toContain("PATCH")
        expect(preflight.headers.get("access-control-allow-headers")).toContain("authorization")
        expect(preflight.headers.get("access-control-max-age")).toBe("600")
        const read = yield* dashboard("GET", "/v1/org", token, undefined, { origin: "http://localhost:5173" })
        expect(read.status).toBe(200)
        expect(read.headers.get("access-control-allow-origin")).toBe("http://localhost:5173")
        expect(read.headers.get("access-control-expose-headers")).toContain("x-request-id")
        expect(read.headers.get("access-control-expose-headers")).toContain("x-original-request-id")
        // an export past its rows says where the rest starts: a dashboard on another origin reads it too
        expect(read.headers.get("access-control-expose-headers")).toContain("x-next-cursor")
        const refused = yield* dashboard("GET", "/v1/org", undefined, undefined, { origin: "https://dash.example.com" })
        expect(refused.status).toBe(401)
        expect(refused.headers.get("access-control-allow-origin")).toBe("https://dash.example.com")
      }))

    it.effect("an origin not listed gets no CORS headers", () =>
      Effect.gen(function* () {
        const { token } = yield* givenMember()
        const corsHeaders = (headers: Headers) => [...headers.keys()].filter((name) => name.startsWith("access-control-"))
        const read = yield* dashboard("GET", "/v1/org", token, undefined, { origin: "https://evil.example" })
        expect(read.status).toBe(200)
        expect(corsHeaders(read.headers)).toEqual([])
        // its preflight is answered as if CORS were off: 405, the envelope, no CORS headers
        const preflight = yield* request("/v1/keys", {
          method: "OPTIONS",
          headers: { origin: "https://evil.example", "access-control-request-method": "POST" }
        })
        expect(preflight.status).toBe(405)
        expect(corsHeaders(preflight.headers)).toEqual([])
        // and so is a request with no Origin at all (not a browser's cross-origin request)
        const plain = yield* dashboard("GET", "/v1/org", token)
        expect(corsHeaders(plain.headers)).toEqual([])
        // each says that it depends on the Origin, for the caches between (a listed origin's answer differs)
        expect(read.headers.get("vary")).toBe("Origin")
        expect(plain.headers.get("vary")).toBe("Origin")
      }))

    it.effect("a document sent compressed varies on its encoding and on the Origin, whatever the Origin", () =>
      Effect.gen(function* () {
        for (const origin of ["https://dash.example.com", "https://evil.example", undefined]) {
          const page = yield* requestBytes("/dashboard", { "accept-encoding": "gzip", ...(origin === undefined ? {} : { origin }) })
          expect(page.status, origin).toBe(200)
          expect(page.headers["content-encoding"], origin).toBe("gzip")
          expect((page.headers["vary"] ?? "").split(",").map((v) => v.trim().toLowerCase()).sort(), origin).toEqual(["accept-encoding", "origin"])
        }
      }))
  }
)

layer(gatewayLayer({ identity: { devIssuer: false } }), { excludeTestServices: true })("dashboard API: dev issuer off", (it) => {
  it.effect("POST /dev/token is not found", () =>
    Effect.gen(function* () {
      const minted = yield* request("/dev/token", { body: JSON.stringify({ uid: "u" }), headers: { "content-type": "application/json" } })
      expectEnvelope(minted, notFound)
    }))
})

layer(gatewayLayer(), { excludeTestServices: true })("the dashboard's files", (it) => {
  it.effect("a path that is not valid percent-encoding is a 404 envelope, not a 500", () =>
    Effect.gen(function* () {
      expectEnvelope(yield* request("/dashboard/%E0%A4%A", { method: "GET" }), notFound)
      expectEnvelope(yield* request("/dashboard/assets/%ZZ.js", { method: "GET" }), notFound)
    }))
})
