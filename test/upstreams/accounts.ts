/**
 * The account providers' protocols, one fake server each. Each checks what the real API checks — the auth
 * header, the method, the path, the required fields — and answers the way the real API does.
 */
import { type Fault, json, type RecordedRequest, type Reply, upstream } from "../../src/testing/harness.js"

/**
 * A Monkeytype ApeKey as Monkeytype hands it out: base64url of `<key id>.<secret>`, the key id a MongoDB
 * ObjectId (backend/src/middlewares/auth.ts `authenticateWithApeKey`, backend/src/dal/ape-keys.ts).
 */
const apeKey = (keyId: string, secret: string) => Buffer.from(`${keyId}.${secret}`).toString("base64url")

export const CREDENTIALS = {
  delta: { identifier: "alice.test", app_password: "app-pass-1234" },
  zeta: { access_token: "zeta-token" },
  eta: { ape_key: apeKey("6564a1f0c2b7d3e4f5a6b7c8", "ape-secret-1") },
  theta: { access_token: "trakt-token", client_id: "trakt-client" },
  iota: { api_key: "rnd_key" },
  kappa: { access_token: "polar_oat_1" },
  lambda: { api_key: "re_key" },
  mu: { token: "secret_notion" },
  nu: { token: "ghp_token" }
} as const

const objectBody = (req: RecordedRequest): Record<string, unknown> | undefined => {
  const body = req.json
  return typeof body === "object" && body !== null && !Array.isArray(body) ? { ...body } : undefined
}

// delta: Bluesky (XRPC), as the reference PDS speaks it (bluesky-social/atproto, packages/pds):
// - com.atproto.server.createSession {identifier, password} → {accessJwt, refreshJwt, handle, did, didDoc?}; limited
//   per account to 30 in 5 minutes and 300 a day (api/com/atproto/server/createSession.ts `rateLimit`), answered
//   429 RateLimitExceeded with RateLimit-* headers (RateLimit-Reset in epoch seconds);
// - com.atproto.server.refreshSession, authenticated with the refresh token (scope com.atproto.refresh): a new
//   pair, the old refresh token revoked (account-manager rotateRefreshToken); an access token there, or a revoked
//   refresh token, is refused (auth-verifier: InvalidToken / ExpiredToken);
// - an access token expires after two hours: a 400 ExpiredToken (lexicon: https://docs.bsky.app/docs/api/
//   com-atproto-server-refresh-session); a refresh token is not accepted where an access token is.
// Tokens live in one table shared by every fake server, as accounts are shared by the entryway and the PDSes.
const blueskyTokens = new Map<string, { readonly kind: "access" | "refresh"; state: "valid" | "expired" | "revoked" }>()
let blueskyTokenCount = 0
const blueskyLogins: Array<number> = []
let blueskyPds: string | undefined
const mintJwt = (kind: "access" | "refresh") => {
  const part = (o: unknown) => Buffer.from(JSON.stringify(o)).toString("base64url")
  blueskyTokenCount += 1
  const lifetime = kind === "access" ? 7200 : 90 * 86400
  const exp = Math.floor(Date.now() / 1000) + lifetime
  const scope = kind === "access" ? "com.atproto.appPass" : "com.atproto.refresh"
  const jwt = `${part({ typ: kind === "access" ? "at+jwt" : "refresh+jwt", alg: "ES256K" })}.${part({ scope, sub: "did:plc:alice", exp, n: blueskyTokenCount })}.sig`
  blueskyTokens.set(jwt, { kind, state: "valid" })
  return jwt
}
/** Expire every open access token, as the PDS does after two hours (refresh tokens live on). */
export const expireBlueskySessions = () => {
  for (const token of blueskyTokens.values()) if (token.kind === "access") token.state = "expired"
}
/** Revoke every refresh token too (a changed app password): only createSession works then. */
export const revokeBlueskyRefreshTokens = () => {
  for (const token of blueskyTokens.values()) token.state = token.kind === "refresh" ? "revoked" : "expired"
}
/**
 * Forget the account's past logins, as if its createSession windows had passed: the tests connect one account for
 * many orgs, and each org opens a session of its own, where in life each would be logging in to its own account.
 */
export const forgetBlueskyLogins = () => {
  blueskyLogins.length = 0
}
/** The PDS the account's DID document names (none: the DID document is left out, as an entryway may). */
export const setBlueskyPds = (url: string | undefined) => {
  blueskyPds = url
}
const session = () => ({
  accessJwt: mintJwt("access"),
  refreshJwt: mintJwt("refresh"),
  handle: "alice.test",
  did: "did:plc:alice",
  ...(blueskyPds === undefined ? {} : {
    didDoc: {
      "@context": ["https://www.w3.org/ns/did/v1"],
      id: "did:plc:alice",
      alsoKnownAs: ["at://alice.test"],
      service: [{ id: "#atproto_pds", type: "AtprotoPersonalDataServer", serviceEndpoint: blueskyPds }]
    }
  }),
  active: true
})
const bearer = (req: RecordedRequest, kind: "access" | "refresh"): Reply | undefined => {
  const header = req.headers["authorization"]
  if (header === undefined) return json(401, { error: "AuthMissing", message: "Authentication Required" })
  const token = blueskyTokens.get(header.replace(/^Bearer /, ""))
  if (token === undefined || token.kind !== kind) return json(400, { error: "InvalidToken", message: "Invalid token type" })
  if (token.state === "expired") return json(400, { error: "ExpiredToken", message: "Token has expired" })
  if (token.state === "revoked") return json(400, { error: "ExpiredToken", message: "Token has been revoked" })
  return undefined
}
export const handleBluesky = (req: RecordedRequest): Reply => {
  if (req.method === "POST" && req.path === "/xrpc/com.atproto.server.createSession") {
    const now = Date.now()
    const recent = blueskyLogins.filter((t) => t > now - 5 * 60_000).length
    const today = blueskyLogins.filter((t) => t > now - 86_400_000).length
    if (recent >= 30 || today >= 300) {
      const reset = Math.ceil((recent >= 30 ? now + 5 * 60_000 : now + 86_400_000) / 1000)
      return json(429, { error: "RateLimitExceeded", message: "Rate Limit Exceeded" }, {
        "ratelimit-limit": recent >= 30 ? "30" : "300",
        "ratelimit-remaining": "0",
        "ratelimit-reset": String(reset),
        "ratelimit-policy": recent >= 30 ? "30;w=300" : "300;w=86400"
      })
    }
    blueskyLogins.push(now)
    const body = objectBody(req)
    if (body?.["identifier"] !== CREDENTIALS.delta.identifier || body["password"] !== CREDENTIALS.delta.app_password) {
      return json(401, { error: "AuthenticationRequired", message: "Invalid identifier or password" })
    }
    return json(200, session())
  }
  if (req.method === "POST" && req.path === "/xrpc/com.atproto.server.refreshSession") {
    const refused = bearer(req, "refresh")
    if (refused !== undefined) return refused
    const used = blueskyTokens.get((req.headers["authorization"] ?? "").replace(/^Bearer /, ""))
    if (used !== undefined) used.state = "revoked"
    return json(200, session())
  }
  if (req.method === "POST" && req.path === "/xrpc/com.atproto.repo.createRecord") {
    const refused = bearer(req, "access")
    if (refused !== undefined) return refused
    const body = objectBody(req)
    const record = body?.["record"]
    if (body?.["repo"] !== "did:plc:alice" || typeof body["collection"] !== "string" || typeof record !== "object" || record === null) {
      return json(400, { error: "InvalidRequest", message: "Input must have the properties repo, collection, record" })
    }
    // the PDS validates a record of a known collection against its lexicon (packages/pds repo/prepare.ts
    // assertValidRecord: InvalidRecord): its $type is the collection, createdAt a datetime (lexicon `datetime`:
    // RFC 3339 with a time zone)
    const type: unknown = Reflect.get(record, "$type")
    const createdAt: unknown = Reflect.get(record, "createdAt")
    if (type !== body["collection"]) {
      return json(400, { error: "InvalidRecord", message: `Invalid $type: expected ${String(body["collection"])}, got ${String(type)}` })
    }
    if (typeof createdAt !== "string" || !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(createdAt)) {
      return json(400, { error: "InvalidRecord", message: "Record/createdAt must be an valid atproto datetime (both RFC-3339 and ISO-8601)" })
    }
    const rkey = "3kabc" + String(Math.floor(Math.random() * 1e6))
    return json(200, { uri: `at://did:plc:alice/${body["collection"]}/${rkey}`, cid: "bafyreib2rxk3rh6kzwq", validationStatus: "valid" })
  }
  return json(404, { error: "MethodNotImplemented", message: "Method Not Implemented" })
}

// epsilon: any REST API; this one echoes what it got, behind a Bearer token (the README's demo token too)
export const EPSILON_TOKEN = "rest-token"
/**
 * A token sent in its scheme's words, `Authorization: Token <key>` as Django REST framework's TokenAuthentication
 * takes it (https://www.django-rest-framework.org/api-guide/authentication/#tokenauthentication), whose key has
 * characters each way of percent-encoding treats its own way.
 */
export const EPSILON_WORDY_TOKEN = { header: "Authorization", token: "Token tok!en(secret)*xy~z" } as const
const EPSILON_TOKENS: ReadonlyArray<string> = [`Bearer ${EPSILON_TOKEN}`, "Bearer demo-token", EPSILON_WORDY_TOKEN.token]
export const handleRest = (req: RecordedRequest): Reply => {
  const authorization = req.headers["authorization"] ?? ""
  if (!EPSILON_TOKENS.includes(authorization)) return json(401, { message: "unauthorized" })
  // httpbin's GET /headers (https://httpbin.org/#/Request_inspection): the request's headers, as received
  if (req.path.endsWith("/headers")) return json(200, { headers: req.headers })
  const key = authorization.split(" ")[1] ?? ""
  // Django REST framework's obtain_auth_token view (the page above): `{"token": "<key>"}`, the key alone
  if (req.path.endsWith("/api-token-auth")) return json(200, { token: key })
  // paging links that carry the caller's key in their query, as Graph's `paging.next` carries `access_token`
  // (https://developers.facebook.com/docs/graph-api/results): written by a form encoder and by an RFC 3986 one
  if (req.path.endsWith("/links")) {
    const strict = encodeURIComponent(key).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)
    return json(200, {
      next: `https://api.example.com/items?${new URLSearchParams({ page: "2", access_token: key }).toString()}`,
      previous: `https://api.example.com/items?page=0&access_token=${strict}`
    })
  }
  // a key-value store's entries, whatever they are named (a member named __proto__ too), and who asked
  if (req.path.endsWith("/entries")) {
    const entries: unknown = JSON.parse(`{"__proto__":{"kept":1},"asked_by":${JSON.stringify(req.headers["authorization"] ?? "")}}`)
    return json(200, entries)
  }
  return json(200, { method: req.method, path: req.path, query: Object.fromEntries(req.query), body: req.json ?? null })
}

/**
 * zeta: Meta's Graph API.
 *
 * - Versions (https://developers.facebook.com/docs/graph-api/changelog, as of 2026-11): each is available until
 *   the date below; "once a version is no longer usable, any calls made to it will be defaulted to the next
 *   oldest usable version" (https://developers.facebook.com/docs/graph-api/guides/versioning). This stand-in
 *   answers which version served the call (`version`), so a retired default shows.
 * - Errors are `{error: {message, type, code, fbtrace_id}}` (https://developers.facebook.com/docs/graph-api/
 *   guides/error-handling); an invalid token is an `OAuthException` with code 190, sent as HTTP 400.
 * - Throttling (https://developers.facebook.com/docs/graph-api/overview/rate-limiting): `GRAPH_THROTTLED` holds
 *   the page's own samples, with the usage headers it describes.
 */
const GRAPH_VERSIONS: ReadonlyArray<readonly [version: string, availableUntil: string | undefined]> = [
  ["v19.0", "2026-05-21"],
  ["v20.0", "2026-09-24"],
  ["v21.0", "2027-01-21"],
  ["v22.0", "2027-05-20"],
  ["v23.0", "2027-10-08"],
  ["v24.0", "2028-02-18"],
  ["v25.0", "2028-07-29"],
  ["v26.0", undefined]
]
const majorOf = (version: string) => Number(version.slice(1).split(".")[0])

/** The version that serves a call to `version` today, or undefined for one Graph does not have. */
const servedVersion = (version: string): string | undefined => {
  const today = new Date().toISOString().slice(0, 10)
  const usable = GRAPH_VERSIONS.filter(([, until]) => until === undefined || until > today)
  const oldest = usable[0]?.[0]
  const asked = usable.find(([v]) => v === version)
  if (asked !== undefined) return asked[0]
  const newest = GRAPH_VERSIONS[GRAPH_VERSIONS.length - 1]?.[0] ?? ""
  return oldest !== undefined && /^v\d+\.0$/.test(version) && majorOf(version) <= majorOf(newest) ? oldest : undefined
}

const graphError = (status: number, code: number, message: string, type = "OAuthException") =>
  json(status, { error: { message, type, code, fbtrace_id: "AbCdEfGhIjK" } })

/** Graph's throttle answers as its "Rate Limits" page shows them; Meta does not say which HTTP status each has. */
export const GRAPH_THROTTLED = {
  /** Platform rate limit of the app (code 4), with the X-App-Usage header at 100%. */
  app: {
    status: 403,
    body: { error: { message: "(#4) Application request limit reached", type: "OAuthException", code: 4, fbtrace_id: "AbCdEfGhIjK" } },
    headers: { "x-app-usage": JSON.stringify({ call_count: 100, total_cputime: 25, total_time: 25 }) }
  },
  /** The page's "Sample Response" (code 32). */
  page: {
    status: 400,
    body: { error: { message: "(#32) Page request limit reached", type: "OAuthException", code: 32, fbtrace_id: "Fz54k3GZrio" } }
  },
  /** A Business Use Case limit (code 80001) and its X-Business-Use-Case-Usage: access again in 19 minutes. */
  pages: {
    status: 400,
    body: {
      error: {
        message: "(#80001) There have been too many calls to this Page account. Wait a bit and try again. For more info, please refer to https://developers.facebook.com/docs/graph-api/overview/rate-limiting.",
        type: "OAuthException",
        code: 80001,
        fbtrace_id: "AmFGcW_3hwDB7qFbl_QdebZ"
      }
    },
    headers: {
      "x-business-use-case-usage": JSON.stringify({
        "1234": [{ type: "pages", call_count: 100, total_cputime: 25, total_time: 25, estimated_time_to_regain_access: 19 }]
      })
    }
  }
} satisfies Readonly<Record<string, Fault>>

/**
 * Where an operator's proxy in front of Graph serves it (`ZETA_BASE_URL` with a path, an internal proxy say): the
 * stand-in answers under it as Graph does at its root. Anything else there is Graph's "Unknown path components".
 */
export const GRAPH_PROXY_PATH = "/graph"

export const handleGraph = (req: RecordedRequest): Reply => {
  const authorization = req.headers["authorization"]
  if (authorization === undefined) {
    return graphError(400, 2500, "An active access token must be used to query information about the current user.")
  }
  if (authorization !== `Bearer ${CREDENTIALS.zeta.access_token}`) {
    return graphError(400, 190, "Invalid OAuth access token - Cannot parse access token")
  }
  const path = req.path.startsWith(`${GRAPH_PROXY_PATH}/`) ? req.path.slice(GRAPH_PROXY_PATH.length) : req.path
  const match = /^\/(v\d+\.\d+)\/(.+)$/.exec(path)
  const version = match === null ? undefined : servedVersion(match[1] ?? "")
  if (req.method !== "GET" || match === null || version === undefined) {
    return graphError(400, 2500, `Unknown path components: ${req.path}`)
  }
  const edge = /^(\d+)\/posts$/.exec(match[2] ?? "")
  if (edge !== null) return graphPosts(req, `${match[1]}/${match[2]}`, edge[1] ?? "")
  return json(200, { id: "1234", name: "Alice", version, path: match[2], fields: req.query.get("fields") })
}

/**
 * A cursor-paginated edge, as "Paginated Results" (https://developers.facebook.com/docs/graph-api/results) shows
 * one: `{data, paging: {cursors: {before, after}, previous, next}}`, where `previous` and `next` are Graph URLs for
 * the pages around this one. Graph builds them from the call's own query — `limit`, `fields`, … — and the access
 * token the call used, which is how they come back in practice (the docs' sample leaves the token out): here the
 * token of the call's `Authorization` header is written into them as `access_token`, so a gateway that passes them on
 * as they came shows it. A post's `comments` is an edge of its own inside the answer, with paging of its own.
 */
const graphPosts = (req: RecordedRequest, path: string, node: string): Reply => {
  const token = (req.headers["authorization"] ?? "").replace(/^Bearer /, "")
  const pageUrl = (cursor: "before" | "after", value: string, of = path) => {
    const query = new URLSearchParams(req.query)
    query.delete("before")
    query.delete("after")
    query.set("access_token", token)
    query.set(cursor, value)
    return `https://graph.facebook.com/${of}?${query.toString()}`
  }
  return json(200, {
    data: [{
      id: `${node}_1`,
      message: "hello",
      comments: {
        data: [{ id: `${node}_1_9`, message: "hi" }],
        paging: { cursors: { before: "QVFIUmM5", after: "QVFIUmM5" }, next: pageUrl("after", "QVFIUmM5", `${path.split("/")[0]}/${node}_1/comments`) }
      }
    }],
    paging: {
      cursors: { before: "NDMyNzQyODI3OTQw", after: "MTAxNTExOTQ1MjAwNzI5NDE=" },
      previous: pageUrl("before", "NDMyNzQyODI3OTQw"),
      next: pageUrl("after", "MTAxNTExOTQ1MjAwNzI5NDE=")
    }
  })
}

/**
 * eta: Monkeytype, as its backend answers (monkeytypegame/monkeytype):
 *
 * - backend/src/middlewares/auth.ts `authenticateWithAuthHeader`/`authenticateWithApeKey`: an ApeKey is
 *   base64url `<key id>.<secret>`; without both parts 400 "Malformed ApeKey", a key id that is no ObjectId 472
 *   "ApeKey is malformed", an unknown key 404 "ApeKey not found", a disabled one 471 "ApeKey is inactive", a
 *   wrong secret 470 "Invalid ApeKey" (codes from backend/src/constants/monkey-status-codes.ts);
 * - backend/src/middlewares/error.ts: errors are `{message, data}` with the status;
 * - backend/src/middlewares/rate-limit.ts and packages/contracts/src/rate-limit/index.ts: an ApeKey may make 30
 *   requests a minute (`defaultApeRateLimit`); past that, 479 "ApeKey rate limit exceeded". The limiter is
 *   express-rate-limit's (source/headers.ts): `X-RateLimit-Limit`, `-Remaining`, `-Reset` (epoch seconds) on
 *   each answer, and `Retry-After` (seconds) on the refused one.
 */
export const MONKEYTYPE_APE_LIMIT = 30
const APE_KEY_IDS = { active: "6564a1f0c2b7d3e4f5a6b7c8", inactive: "6564a1f0c2b7d3e4f5a6b7c9" }
const apeKeyStore = new Map([
  [APE_KEY_IDS.active, { secret: "ape-secret-1", enabled: true }],
  [APE_KEY_IDS.inactive, { secret: "ape-secret-2", enabled: false }]
])
/** ApeKeys in every state Monkeytype refuses. */
export const APE_KEYS = {
  inactive: apeKey(APE_KEY_IDS.inactive, "ape-secret-2"),
  wrongSecret: apeKey(APE_KEY_IDS.active, "not-the-secret"),
  deleted: apeKey("6564a1f0c2b7d3e4f5a6b7ff", "ape-secret-3"),
  badId: apeKey("not-an-object-id", "ape-secret-1"),
  noSecret: "ape-key-1"
}
const apeWindows = new Map<string, { count: number; resetAt: number }>()
/** Use up the connection's ApeKey's requests for the current minute. */
export const exhaustApeKey = () => {
  apeWindows.set(APE_KEY_IDS.active, { count: MONKEYTYPE_APE_LIMIT, resetAt: Date.now() + 60_000 })
}
/** Start the connection's ApeKey on a fresh minute. */
export const restoreApeKey = () => {
  apeWindows.delete(APE_KEY_IDS.active)
}

const monkeyError = (status: number, message: string, headers?: Readonly<Record<string, string>>) =>
  json(status, { message, data: {} }, headers)

export const handleMonkeytype = (req: RecordedRequest): Reply => {
  const [scheme, token] = (req.headers["authorization"] ?? "").split(" ")
  if (token === undefined) return monkeyError(401, "Missing authentication token")
  if (scheme !== "ApeKey") return monkeyError(401, "Unknown authentication scheme")
  const [keyId, secret] = Buffer.from(token, "base64url").toString().split(".")
  if (keyId === undefined || keyId === "" || secret === undefined || secret === "") return monkeyError(400, "Malformed ApeKey")
  if (!/^[0-9a-f]{24}$/i.test(keyId)) return monkeyError(472, "ApeKey is malformed")
  const key = apeKeyStore.get(keyId)
  if (key === undefined) return monkeyError(404, "ApeKey not found")
  if (!key.enabled) return monkeyError(471, "ApeKey is inactive")
  if (key.secret !== secret) return monkeyError(470, "Invalid ApeKey")
  const now = Date.now()
  const current = apeWindows.get(keyId)
  const window = current !== undefined && current.resetAt > now ? current : { count: 0, resetAt: now + 60_000 }
  window.count += 1
  apeWindows.set(keyId, window)
  const limit = {
    "x-ratelimit-limit": String(MONKEYTYPE_APE_LIMIT),
    "x-ratelimit-remaining": String(Math.max(0, MONKEYTYPE_APE_LIMIT - window.count)),
    "x-ratelimit-reset": String(Math.ceil(window.resetAt / 1000))
  }
  if (window.count > MONKEYTYPE_APE_LIMIT) {
    return monkeyError(479, "ApeKey rate limit exceeded", { ...limit, "retry-after": String(Math.ceil((window.resetAt - now) / 1000)) })
  }
  if (req.method !== "GET" || req.path !== "/users/personalBests") return json(404, { message: "Unknown request URL" })
  // the query's schema is strict, `mode` one of Monkeytype's modes (packages/contracts users.ts
  // GetPersonalBestsQuerySchema); with `mode2` the answer is that length's list, personalBests[mode][mode2]
  // (backend/src/dal/user.ts getPersonalBests), else the mode's lists by length
  const mode = req.query.get("mode")
  if (mode === null) return json(422, { message: "Invalid query schema", validationErrors: ["\"mode\" Required"] })
  if (!["time", "words", "quote", "zen", "custom"].includes(mode)) {
    return json(422, { message: "Invalid query schema", validationErrors: [`"mode" Invalid enum value. Expected 'time' | 'words' | 'quote' | 'zen' | 'custom', received '${mode}'`] })
  }
  const bests: Record<string, ReadonlyArray<unknown>> = mode === "time" ? { "60": [{ acc: 97.2, wpm: 112.5, raw: 118, timestamp: 1700000000000 }] } : {}
  const mode2 = req.query.get("mode2")
  return json(200, { message: "Personal bests retrieved", data: mode2 === null ? bests : bests[mode2] ?? null }, limit)
}

/**
 * theta: Trakt API version 2. Every request carries the headers Trakt requires
 * (https://github.com/trakt/trakt-api projects/developer/src/lib/guides/required-headers.md, formerly
 * trakt.docs.apiary.io "Required Headers"): `Content-Type: application/json`, `User-Agent`, `trakt-api-key`
 * (the app's client id) and `trakt-api-version: 2`; and OAuth as `Authorization: Bearer`. Refused as
 * guides/status-codes.md says: 403 "Forbidden - invalid API key or unapproved app", 412 "Precondition Failed - use
 * application/json content type", 401 "Unauthorized - OAuth must be provided". Trakt does not document what it
 * answers without a User-Agent or `trakt-api-version`; this fake refuses those with a 400 "Bad Request" so that
 * a request without them cannot pass unnoticed.
 */
export const handleTrakt = (req: RecordedRequest): Reply => {
  if (req.headers["trakt-api-key"] !== CREDENTIALS.theta.client_id) return json(403, { error: "Forbidden - invalid API key or unapproved app" })
  if (!(req.headers["content-type"] ?? "").startsWith("application/json")) {
    return json(412, { error: "Precondition Failed - use application/json content type" })
  }
  if (req.headers["trakt-api-version"] !== "2" || (req.headers["user-agent"] ?? "") === "") {
    return json(400, { error: "Bad Request - request couldn't be parsed" })
  }
  if (req.headers["authorization"] !== `Bearer ${CREDENTIALS.theta.access_token}`) return json(401, { error: "Unauthorized - OAuth must be provided" })
  const match = /^\/users\/me\/ratings(?:\/(movies|shows|seasons|episodes|all)(?:\/[\d,]+)?)?$/.exec(req.path)
  if (req.method !== "GET" || match === null) return json(404, { error: "not found" })
  // paginated with page and limit, and says so in headers
  const limit = Number(req.query.get("limit") ?? "10")
  if (match[1] === "episodes") {
    return json(200, [{
      rated_at: "2026-02-01T00:00:00.000Z",
      rating: 10,
      type: "episode",
      episode: { season: 1, number: 1, title: "Good News About Hell", ids: { trakt: 73482 } },
      show: { title: "Severance", year: 2022, ids: { trakt: 154997 } }
    }])
  }
  // the items a rating is not about are null (ratedItemResponseSchema: each `.nullish()`)
  return json(200, [{
    rated_at: "2026-01-01T00:00:00.000Z",
    rating: 9,
    type: "movie",
    movie: { title: "Inception", year: 2010, ids: { trakt: 16662 } },
    show: null,
    season: null,
    episode: null
  }], {
    "x-pagination-page": req.query.get("page") ?? "1",
    "x-pagination-limit": String(limit),
    "x-pagination-page-count": "3",
    "x-pagination-item-count": "25"
  })
}

/**
 * iota: Render's public API (https://api-docs.render.com/reference/delete-service): `DELETE /v1/services/{serviceId}`
 * with `Authorization: Bearer <API key>` answers 204 with no body; its errors are the spec's `error` object,
 * `{id, message}` (401 for a key it does not take, 404 for a service it does not have) — the same operation as the
 * client generated from Render's OpenAPI document has it (the render-api crate, src/request/delete_service.rs).
 */
export const handleRender = (req: RecordedRequest): Reply => {
  if (req.headers["authorization"] !== `Bearer ${CREDENTIALS.iota.api_key}`) return json(401, { message: "unauthorized" })
  const match = /^\/v1\/services\/([^/]+)$/.exec(req.path)
  if (req.method !== "DELETE" || match === null) return json(404, { message: "not found" })
  if (match[1] === "srv-missing") return json(404, { id: "not-found", message: "service not found" })
  return { status: 204, body: "", raw: true }
}

/**
 * kappa: Polar. Errors are `{error: <name>, detail}` (polarsource/polar-js src/models/errors/*.ts). Deleting a
 * benefit Polar does not let go — its built-in ones are not `deletable` — is a 403 `NotPermitted` with detail
 * "Not permitted" (polarsource/polar server/polar/benefit/service.py `delete`, server/polar/exceptions.py).
 */
export const UNDELETABLE_BENEFIT = "ben-builtin"
const polarExternalIds = new Set<string>()

export const handlePolar = (req: RecordedRequest): Reply => {
  if (req.headers["authorization"] !== `Bearer ${CREDENTIALS.kappa.access_token}`) {
    return json(401, { error: "invalid_token", error_description: "The access token is invalid" })
  }
  if (req.method === "DELETE" && req.path === `/v1/benefits/${UNDELETABLE_BENEFIT}`) return json(403, { error: "NotPermitted", detail: "Not permitted" })
  if (req.method === "DELETE" && /^\/v1\/benefits\/[^/]+$/.test(req.path)) return { status: 204, body: "", raw: true }
  if (req.method === "POST" && req.path === "/v1/events/ingest") {
    const events = objectBody(req)?.["events"]
    if (!Array.isArray(events)) return json(422, { detail: [{ loc: ["body", "events"], msg: "Field required", type: "missing" }] })
    // each event names itself and its customer (Polar's id, or the merchant's own)
    const bad = events.findIndex((e: unknown) =>
      typeof e !== "object" || e === null || !("name" in e) || typeof e.name !== "string" ||
      !("customer_id" in e || "external_customer_id" in e)
    )
    if (bad >= 0) {
      return json(422, { detail: [{ loc: ["body", "events", bad], msg: "An event needs name and customer_id or external_customer_id", type: "value_error" }] })
    }
    // deduplicated on (organization, external_id), as polarsource/polar server/polar/event/repository.py
    // inserts them (ON CONFLICT DO NOTHING); events without an external_id are never duplicates
    let duplicates = 0
    for (const e of events) {
      const id: unknown = typeof e === "object" && e !== null && "external_id" in e ? e.external_id : undefined
      if (typeof id !== "string") continue
      if (polarExternalIds.has(id)) duplicates++
      else polarExternalIds.add(id)
    }
    return json(200, { inserted: events.length - duplicates, duplicates })
  }
  return json(404, { detail: "Not Found" })
}

/**
 * lambda: Resend (https://resend.com/docs/api-reference/introduction; shapes from resend/resend-openapi
 * resend.yaml; errors from https://resend.com/docs/api-reference/errors as `{statusCode, name, message}`).
 *
 * - Every request needs a `User-Agent`: without one Resend's edge answers 403 "error code: 1010" before the API
 *   (https://resend.com/docs/knowledge-base/403-error-1010).
 * - `PATCH /broadcasts/{id}` takes `UpdateBroadcastOptions`: `name`, `segment_id`, `audience_id`, `from`,
 *   `subject`, `preview_text`, `html`, `text` (strings), `reply_to` (an array of strings), `topic_id` (a string,
 *   or null in the SDK's src/broadcasts/interfaces/update-broadcast.interface.ts); it answers
 *   `{id, object: "broadcast"}`. The broadcasts it was sent are kept (`resendBroadcasts`) as Resend keeps them.
 * - `POST /emails/batch` takes an array and answers `{data: [{id}]}`. Its `Idempotency-Key`
 *   (https://resend.com/docs/dashboard/emails/idempotency-keys): 1–256 characters or a 400
 *   `invalid_idempotency_key`; kept 24 hours; the same key and body answer the first answer without sending
 *   again, the same key with another body is a 409 `invalid_idempotent_request`.
 */
const resendIdempotency = new Map<string, { readonly body: string; readonly reply: Reply }>()
let resendBatches = 0
/** Batches Resend actually sent (not counting answers replayed for an Idempotency-Key). */
export const resendBatchesSent = () => resendBatches
const broadcasts = new Map<string, Record<string, unknown>>()
/** A broadcast as Resend holds it after the updates it was sent. */
export const resendBroadcast = (id: string) => broadcasts.get(id)

const BROADCAST_STRINGS = ["name", "segment_id", "audience_id", "from", "subject", "preview_text", "html", "text"]
const resendError = (statusCode: number, name: string, message: string) => json(statusCode, { statusCode, name, message })

/** What is wrong with an `UpdateBroadcastOptions` body, if anything. */
const broadcastUpdateProblem = (body: unknown): string | undefined => {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return "The request body must be an object."
  for (const [field, value] of Object.entries(body)) {
    if (BROADCAST_STRINGS.includes(field) && typeof value !== "string") return `\`${field}\` must be a string.`
    if (field === "reply_to" && !(Array.isArray(value) && value.every((v) => typeof v === "string"))) return "`reply_to` must be an array of strings."
    if (field === "topic_id" && value !== null && typeof value !== "string") return "`topic_id` must be a string."
  }
  return undefined
}

export const handleResend = (req: RecordedRequest): Reply => {
  if ((req.headers["user-agent"] ?? "") === "") return { status: 403, body: "error code: 1010", raw: true, headers: { "content-type": "text/plain" } }
  if (req.headers["authorization"] === undefined) return resendError(401, "missing_api_key", "Missing API key in the authorization header.")
  if (req.headers["authorization"] !== `Bearer ${CREDENTIALS.lambda.api_key}`) return resendError(403, "invalid_api_key", "API key is invalid.")
  const broadcast = /^\/broadcasts\/([^/]+)$/.exec(req.path)
  if (req.method === "PATCH" && broadcast !== null) {
    const id = broadcast[1] ?? ""
    const problem = broadcastUpdateProblem(req.json)
    if (problem !== undefined) return resendError(422, "validation_error", problem)
    broadcasts.set(id, { ...broadcasts.get(id), ...objectBody(req) })
    return json(200, { id, object: "broadcast" })
  }
  if (req.method === "POST" && req.path === "/emails/batch") {
    if (!Array.isArray(req.json)) return resendError(422, "validation_error", "The request body must be an array.")
    const idempotencyKey = req.headers["idempotency-key"]
    if (typeof idempotencyKey === "string") {
      if (idempotencyKey.length < 1 || idempotencyKey.length > 256) {
        return resendError(400, "invalid_idempotency_key", "The key must be between 1-256 chars.")
      }
      const seen = resendIdempotency.get(idempotencyKey)
      if (seen !== undefined) {
        return seen.body === req.body
          ? seen.reply
          : resendError(409, "invalid_idempotent_request", "Same idempotency key used with a different request payload.")
      }
    }
    resendBatches += 1
    const reply = json(200, { data: req.json.map((_, i) => ({ id: `email-${i}` })) })
    if (typeof idempotencyKey === "string") resendIdempotency.set(idempotencyKey, { body: req.body, reply })
    return reply
  }
  return resendError(404, "not_found", "The requested endpoint does not exist.")
}

/**
 * mu: Notion. Errors are `{object: "error", status, code, message}` (https://developers.notion.com/reference/
 * status-codes). Every request names a `Notion-Version`.
 *
 * From 2025-09-03 on (https://developers.notion.com/docs/upgrade-guide-2025-09-03) a database is a container of
 * data sources: `GET /v1/databases/{id}` answers `data_sources: [{id, name}]` and no properties
 * (https://developers.notion.com/reference/database), `GET /v1/data_sources/{id}` one data source with its
 * `properties` (https://developers.notion.com/reference/data-source; shapes as in notion-sdk-js
 * src/api-endpoints/databases.ts and data-sources.ts). The databases here have two data sources, and the guide
 * says a database with several cannot be read under an earlier version: this stand-in refuses that read with
 * a 400 `validation_error` (the guide gives no wording; the message is ours), and the data source endpoints,
 * which do not exist before 2025-09-03, with Notion's 400 `invalid_request_url`.
 */
const notionError = (status: number, code: string, message: string) => json(status, { object: "error", status, code, message })
const richText = (content: string) => [{
  type: "text",
  text: { content, link: null },
  annotations: { bold: false, italic: false, strikethrough: false, underline: false, code: false, color: "default" },
  plain_text: content,
  href: null
}]
const NOTION_SOURCES = [
  { suffix: "tasks", name: "Tasks", properties: { Name: { id: "title", name: "Name", type: "title", title: {} }, Status: { id: "s%3Ft", name: "Status", type: "status", status: { options: [], groups: [] } } } },
  { suffix: "archive", name: "Archive", properties: { Name: { id: "title", name: "Name", type: "title", title: {} }, "Archived on": { id: "a%3Do", name: "Archived on", type: "date", date: {} } } }
]
const notionUser = { object: "user", id: "7f03dda0-f8ec-4a1e-9b1a-2d5f4d7c1e10" }

export const handleNotion = (req: RecordedRequest): Reply => {
  if (req.headers["authorization"] !== `Bearer ${CREDENTIALS.mu.token}`) return notionError(401, "unauthorized", "API token is invalid.")
  const version = req.headers["notion-version"]
  if (typeof version !== "string") {
    return notionError(400, "missing_version", "Notion-Version header failed validation: Notion-Version header should be defined, instead was `undefined`.")
  }
  const dataSources = version >= "2025-09-03"
  const database = /^\/v1\/databases\/([^/]+)$/.exec(req.path)
  if (req.method === "GET" && database !== null) {
    const id = database[1] ?? ""
    if (!dataSources) {
      return notionError(400, "validation_error", `Database ${id} has more than one data source, which Notion-Version ${version} cannot read. Use 2025-09-03 or later.`)
    }
    return json(200, {
      object: "database",
      id,
      title: richText("Tasks"),
      description: [],
      parent: { type: "page_id", page_id: "255104cd-477e-808c-b279-d39ab803a7d2" },
      is_inline: false,
      in_trash: false,
      is_locked: false,
      created_time: "2026-01-05T09:30:00.000Z",
      last_edited_time: "2026-11-20T16:45:00.000Z",
      data_sources: NOTION_SOURCES.map((d) => ({ id: `${id}-${d.suffix}`, name: d.name })),
      icon: null,
      cover: null,
      url: `https://www.notion.so/${id.replaceAll("-", "")}`,
      public_url: null
    })
  }
  const dataSource = /^\/v1\/data_sources\/(.+)-([a-z]+)$/.exec(req.path)
  if (req.method === "GET" && dataSources && dataSource !== null) {
    const source = NOTION_SOURCES.find((d) => d.suffix === dataSource[2])
    if (source === undefined) {
      return notionError(404, "object_not_found", `Could not find data_source with ID: ${dataSource[1]}-${dataSource[2]}. Make sure the relevant pages and databases are shared with your integration.`)
    }
    return json(200, {
      object: "data_source",
      id: `${dataSource[1]}-${source.suffix}`,
      title: richText(source.name),
      description: [],
      parent: { type: "database_id", database_id: dataSource[1] },
      database_parent: { type: "page_id", page_id: "255104cd-477e-808c-b279-d39ab803a7d2" },
      is_inline: false,
      in_trash: false,
      archived: false,
      created_time: "2026-01-05T09:30:00.000Z",
      last_edited_time: "2026-11-20T16:45:00.000Z",
      created_by: notionUser,
      last_edited_by: notionUser,
      properties: source.properties,
      icon: null,
      cover: null,
      url: `https://www.notion.so/${dataSource[1]?.replaceAll("-", "")}`,
      public_url: null
    })
  }
  return notionError(400, "invalid_request_url", "Invalid request URL.")
}

/**
 * nu: GitHub's account endpoint. Every answer carries the primary rate limit's headers
 * (https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api#checking-the-status-of-your-rate-limit);
 * `gitHubLimited` holds the refusals that page describes under "Exceeding the rate limit".
 */
const gitHubRate = (remaining: number, resetAt: number) => ({
  "x-ratelimit-limit": "5000",
  "x-ratelimit-remaining": String(remaining),
  "x-ratelimit-used": String(5000 - remaining),
  "x-ratelimit-reset": String(resetAt),
  "x-ratelimit-resource": "core"
})
const nowSeconds = () => Math.floor(Date.now() / 1000)

/** GitHub's rate limit refusals, as the page above says they come: a secondary limit and the primary one. */
export const gitHubLimited = (): Readonly<Record<"secondary" | "secondaryWithoutRetryAfter" | "primary", Fault>> => {
  const secondary = {
    message: "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. " +
      "If you reach out to GitHub Support for help, please include the request ID 0D9C:3A1B:1E2F3A:2B3C4D:6564A1F0.",
    documentation_url: "https://docs.github.com/free-pro-team@latest/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"
  }
  return {
    secondary: { status: 403, body: secondary, headers: { ...gitHubRate(4990, nowSeconds() + 3000), "retry-after": "42" } },
    secondaryWithoutRetryAfter: { status: 429, body: secondary, headers: gitHubRate(4990, nowSeconds() + 3000) },
    primary: {
      status: 403,
      body: {
        message: "API rate limit exceeded for user ID 42. If you reach out to GitHub Support for help, please include the request ID 0D9C:3A1B:1E2F3A:2B3C4D:6564A1F1.",
        documentation_url: "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
      },
      headers: gitHubRate(0, nowSeconds() + 120)
    }
  }
}

export const handleGitHub = (req: RecordedRequest): Reply => {
  if (req.headers["authorization"] !== `Bearer ${CREDENTIALS.nu.token}`) {
    return json(401, { message: "Bad credentials", documentation_url: "https://docs.github.com/rest" })
  }
  if (req.method !== "GET" || req.path !== "/user") return json(404, { message: "Not Found" })
  return json(200, { login: "alice", id: 42, name: "Alice", public_repos: 7 }, gitHubRate(4999, nowSeconds() + 3600))
}

export const bluesky = upstream(handleBluesky)
export const rest = upstream(handleRest)
export const graph = upstream(handleGraph)
export const monkeytype = upstream(handleMonkeytype)
export const trakt = upstream(handleTrakt)
export const render = upstream(handleRender)
export const polar = upstream(handlePolar)
export const resend = upstream(handleResend)
export const notion = upstream(handleNotion)
export const github = upstream(handleGitHub)
