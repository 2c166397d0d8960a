/**
 * The account providers' protocols, one fake server each. Each checks what the real API checks — the auth
 * header, the method, the path, the required fields — and answers the way the real API does.
 */
import { json, type RecordedRequest, type Reply, upstream } from "./harness.js"

export const CREDENTIALS = {
  delta: { identifier: "alice.test", app_password: "app-pass-1234" },
  zeta: { access_token: "zeta-token" },
  eta: { ape_key: "ape-key-1" },
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

// delta: Bluesky PDS (XRPC). Sessions are JWTs with an `exp`; a token the PDS expired is a 400 ExpiredToken.
const blueskySessions = new Map<string, "valid" | "expired">()
let blueskySessionCount = 0
const mintAccessJwt = () => {
  const part = (o: unknown) => Buffer.from(JSON.stringify(o)).toString("base64url")
  blueskySessionCount += 1
  const exp = Math.floor(Date.now() / 1000) + 7200
  return `${part({ typ: "at+jwt", alg: "ES256K" })}.${part({ scope: "com.atproto.appPass", sub: "did:plc:alice", exp, n: blueskySessionCount })}.sig`
}
/** Expire every open session, as the PDS does after two hours. */
export const expireBlueskySessions = () => {
  for (const token of blueskySessions.keys()) blueskySessions.set(token, "expired")
}
export const handleBluesky = (req: RecordedRequest): Reply => {
  if (req.method === "POST" && req.path === "/xrpc/com.atproto.server.createSession") {
    const body = objectBody(req)
    if (body?.["identifier"] !== CREDENTIALS.delta.identifier || body["password"] !== CREDENTIALS.delta.app_password) {
      return json(401, { error: "AuthenticationRequired", message: "Invalid identifier or password" })
    }
    const accessJwt = mintAccessJwt()
    blueskySessions.set(accessJwt, "valid")
    return json(200, { accessJwt, refreshJwt: `refresh-${blueskySessionCount}`, handle: "alice.test", did: "did:plc:alice" })
  }
  if (req.method === "POST" && req.path === "/xrpc/com.atproto.repo.createRecord") {
    const token = (req.headers["authorization"] ?? "").replace(/^Bearer /, "")
    const state = blueskySessions.get(token)
    if (req.headers["authorization"] === undefined) return json(401, { error: "AuthMissing", message: "Authentication Required" })
    if (state === undefined) return json(400, { error: "InvalidToken", message: "Token could not be verified" })
    if (state === "expired") return json(400, { error: "ExpiredToken", message: "Token has expired" })
    const body = objectBody(req)
    const record = body?.["record"]
    if (body?.["repo"] !== "did:plc:alice" || typeof body["collection"] !== "string" || typeof record !== "object" || record === null) {
      return json(400, { error: "InvalidRequest", message: "Input must have the properties repo, collection, record" })
    }
    const rkey = "3kabc" + String(Math.floor(Math.random() * 1e6))
    return json(200, { uri: `at://did:plc:alice/${body["collection"]}/${rkey}`, cid: "bafyreib2rxk3rh6kzwq", validationStatus: "valid" })
  }
  return json(404, { error: "MethodNotImplemented", message: "Method Not Implemented" })
}

// epsilon: any REST API; this one echoes what it got, behind a Bearer token (the README's demo token too)
export const EPSILON_TOKEN = "rest-token"
const EPSILON_TOKENS = [`Bearer ${EPSILON_TOKEN}`, "Bearer demo-token"]
export const handleRest = (req: RecordedRequest): Reply => {
  if (!EPSILON_TOKENS.includes(req.headers["authorization"] ?? "")) return json(401, { message: "unauthorized" })
  return json(200, { method: req.method, path: req.path, query: Object.fromEntries(req.query), body: req.json ?? null })
}

// zeta: a versioned Graph API
export const handleGraph = (req: RecordedRequest): Reply => {
  if (req.headers["authorization"] !== `Bearer ${CREDENTIALS.zeta.access_token}`) {
    return json(401, { error: { message: "Invalid OAuth access token.", type: "OAuthException", code: 190 } })
  }
  const match = /^\/(v\d+\.\d+)\/(.+)$/.exec(req.path)
  if (req.method !== "GET" || match === null) return json(400, { error: { message: "Unknown path components", code: 2500 } })
  return json(200, { id: "1234", name: "Alice", version: match[1], path: match[2], fields: req.query.get("fields") })
}

// eta: Monkeytype
export const handleMonkeytype = (req: RecordedRequest): Reply => {
  if (req.headers["authorization"] !== `ApeKey ${CREDENTIALS.eta.ape_key}`) return json(401, { message: "Invalid ApeKey" })
  if (req.method !== "GET" || req.path !== "/users/personalBests") return json(404, { message: "Unknown request URL" })
  const mode = req.query.get("mode")
  if (mode === null) return json(422, { message: "Invalid query schema", validationErrors: ["\"mode\" Required"] })
  return json(200, { message: "Personal bests retrieved", data: { "60": [{ acc: 97.2, wpm: 112.5, raw: 118, timestamp: 1700000000000 }] } })
}

// theta: Trakt
export const handleTrakt = (req: RecordedRequest): Reply => {
  if (req.headers["authorization"] !== `Bearer ${CREDENTIALS.theta.access_token}` || req.headers["trakt-api-key"] !== CREDENTIALS.theta.client_id) {
    return json(401, { error: "invalid_grant" })
  }
  if (req.headers["trakt-api-version"] !== "2") return json(412, { error: "trakt-api-version must be 2" })
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
  return json(200, [{ rated_at: "2026-01-01T00:00:00.000Z", rating: 9, type: "movie", movie: { title: "Inception", year: 2010, ids: { trakt: 16662 } } }], {
    "x-pagination-page": req.query.get("page") ?? "1",
    "x-pagination-limit": String(limit),
    "x-pagination-page-count": "3",
    "x-pagination-item-count": "25"
  })
}

// iota: Render
export const handleRender = (req: RecordedRequest): Reply => {
  if (req.headers["authorization"] !== `Bearer ${CREDENTIALS.iota.api_key}`) return json(401, { message: "unauthorized" })
  const match = /^\/v1\/services\/([^/]+)$/.exec(req.path)
  if (req.method !== "DELETE" || match === null) return json(404, { message: "not found" })
  if (match[1] === "srv-missing") return json(404, { id: "not-found", message: "service not found" })
  return { status: 204, body: "", raw: true }
}

// kappa: Polar
const polarExternalIds = new Set<string>()

export const handlePolar = (req: RecordedRequest): Reply => {
  if (req.headers["authorization"] !== `Bearer ${CREDENTIALS.kappa.access_token}`) {
    return json(401, { error: "invalid_token", error_description: "The access token is invalid" })
  }
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

// lambda: Resend
const resendIdempotency = new Map<string, { readonly body: string; readonly reply: Reply }>()
let resendBatches = 0
/** Batches Resend actually sent (not counting answers replayed for an Idempotency-Key). */
export const resendBatchesSent = () => resendBatches

export const handleResend = (req: RecordedRequest): Reply => {
  if (req.headers["authorization"] !== `Bearer ${CREDENTIALS.lambda.api_key}`) {
    return json(401, { statusCode: 401, name: "missing_api_key", message: "Missing API key in the authorization header." })
  }
  const broadcast = /^\/broadcasts\/([^/]+)$/.exec(req.path)
  if (req.method === "PATCH" && broadcast !== null) return json(200, { id: broadcast[1] })
  if (req.method === "POST" && req.path === "/emails/batch") {
    if (!Array.isArray(req.json)) return json(422, { statusCode: 422, name: "validation_error", message: "The request body must be an array." })
    // Resend's Idempotency-Key (https://resend.com/docs/dashboard/emails/idempotency-keys): up to 256
    // characters, kept 24 hours; the same key and body answer the first answer without sending again, the
    // same key with another body is a 409 invalid_idempotent_request.
    const idempotencyKey = req.headers["idempotency-key"]
    if (typeof idempotencyKey === "string") {
      if (idempotencyKey.length > 256) {
        return json(422, { statusCode: 422, name: "invalid_idempotency_key", message: "The key must be between 1-256 chars." })
      }
      const seen = resendIdempotency.get(idempotencyKey)
      if (seen !== undefined) {
        return seen.body === req.body
          ? seen.reply
          : json(409, { statusCode: 409, name: "invalid_idempotent_request", message: "Same idempotency key used with a different request payload. Change your idempotency key or payload." })
      }
    }
    resendBatches += 1
    const reply = json(200, { data: req.json.map((_, i) => ({ id: `email-${i}` })) })
    if (typeof idempotencyKey === "string") resendIdempotency.set(idempotencyKey, { body: req.body, reply })
    return reply
  }
  return json(404, { statusCode: 404, name: "not_found", message: "The requested endpoint does not exist." })
}

// mu: Notion
export const handleNotion = (req: RecordedRequest): Reply => {
  if (req.headers["authorization"] !== `Bearer ${CREDENTIALS.mu.token}`) {
    return json(401, { object: "error", status: 401, code: "unauthorized", message: "API token is invalid." })
  }
  if (req.headers["notion-version"] === undefined) {
    return json(400, { object: "error", status: 400, code: "missing_version", message: "Notion-Version header failed validation" })
  }
  const match = /^\/v1\/databases\/([^/]+)$/.exec(req.path)
  if (req.method !== "GET" || match === null) return json(400, { object: "error", status: 400, code: "invalid_request_url", message: "Invalid request URL." })
  return json(200, { object: "database", id: match[1], title: [{ plain_text: "Tasks" }], properties: { Name: { type: "title" } } })
}

// nu: GitHub's account endpoint
export const handleGitHub = (req: RecordedRequest): Reply => {
  if (req.headers["authorization"] !== `Bearer ${CREDENTIALS.nu.token}`) {
    return json(401, { message: "Bad credentials", documentation_url: "https://docs.github.com/rest" })
  }
  if (req.method !== "GET" || req.path !== "/user") return json(404, { message: "Not Found" })
  return json(200, { login: "alice", id: 42, name: "Alice", public_repos: 7 })
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
