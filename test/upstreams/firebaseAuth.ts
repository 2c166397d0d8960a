/**
 * A Firebase Auth emulator as Firebase's web SDK talks to one after `connectAuthEmulator(auth, "http://host:port")`:
 * the Identity Toolkit REST API under `/identitytoolkit.googleapis.com/v1/…` and the Secure Token API under
 * `/securetoken.googleapis.com/v1/token`, each with `?key=<web API key>`
 * (`_getFinalTarget` and `_emulatorUrl` in node_modules/@firebase/auth/dist/esm/index-*.js).
 *
 * Written from https://firebase.google.com/docs/reference/rest/auth:
 * - `POST accounts:signInWithPassword` `{email, password, returnSecureToken}` → `{kind, localId, email,
 *   displayName, idToken, registered, refreshToken, expiresIn}`; a wrong email is `EMAIL_NOT_FOUND`, a wrong
 *   password `INVALID_PASSWORD`, each as `{error: {code: 400, message}}`;
 * - `POST accounts:lookup` `{idToken}` → `{kind, users: [{localId, email, emailVerified, providerUserInfo,
 *   passwordHash, createdAt, lastLoginAt, …}]}`; a bad token is `INVALID_ID_TOKEN`;
 * - `POST securetoken.googleapis.com/v1/token` (form: `grant_type=refresh_token&refresh_token=…`) →
 *   `{expires_in, token_type, refresh_token, id_token, user_id, project_id}`, and `access_token` (the same ID
 *   token: the SDK's `requestStsToken` reads that one); an unknown refresh token is `INVALID_REFRESH_TOKEN`.
 *
 * ID tokens carry the claims https://firebase.google.com/docs/auth/admin/verify-id-tokens lists (`iss`
 * `https://securetoken.google.com/<project>`, `aud` `<project>`, `sub`, `iat`, `exp`, `auth_time`) and are
 * signed RS256 with the key the test's securetoken JWKS publishes. (Firebase's own emulator signs none.)
 * Requests come from the dashboard's page, on another origin: CORS is answered as for any origin.
 */
import { createLocalJWKSet, jwtVerify, SignJWT } from "jose"
import * as Crypto from "node:crypto"
import * as Http from "node:http"
import { registerSecret } from "../support/secrets.js"
import type { SigningKey } from "./jwks.js"

export interface EmulatedUser {
  readonly localId: string
  readonly email: string
  readonly password: string
}

export interface EmulatorRequest {
  readonly method: string
  readonly path: string
  readonly key: string | null
}

export interface AuthEmulator {
  /** `host:port`, as `FIREBASE_AUTH_EMULATOR_HOST` names it. */
  readonly host: string
  /** Sign ID tokens with this key (the one the gateway's JWKS publishes). */
  readonly signWith: (key: SigningKey) => void
  readonly addUser: (user: EmulatedUser) => void
  /** Every request but CORS preflights, in order. */
  readonly requests: () => ReadonlyArray<EmulatorRequest>
  /** Every ID token issued, in order: at sign-in, then at each refresh. */
  readonly issued: () => ReadonlyArray<string>
  readonly close: () => Promise<void>
}

export interface EmulatorOptions {
  readonly project: string
  readonly apiKey: string
  /** The lifetime of an ID token issued at sign-in (refreshed ones live an hour, as Firebase's do). */
  readonly signInTokenSeconds?: number
}

const HOUR = 3600

export const startAuthEmulator = (options: EmulatorOptions): Promise<AuthEmulator> => {
  const users = new Map<string, EmulatedUser>()
  const refreshTokens = new Map<string, EmulatedUser>()
  const requests: Array<EmulatorRequest> = []
  const issued: Array<string> = []
  let key: SigningKey | undefined

  const idToken = async (user: EmulatedUser, seconds: number) => {
    if (key === undefined) throw new Error("the fake Auth emulator has no signing key: call signWith first")
    const now = Math.floor(Date.now() / 1000)
    const token = await new SignJWT({
      auth_time: now,
      user_id: user.localId,
      email: user.email,
      email_verified: false,
      firebase: { identities: { email: [user.email] }, sign_in_provider: "password" }
    })
      .setProtectedHeader({ alg: "RS256", kid: key.kid, typ: "JWT" })
      .setIssuer(`https://securetoken.google.com/${options.project}`)
      .setAudience(options.project)
      .setSubject(user.localId)
      .setIssuedAt(now)
      .setExpirationTime(now + seconds)
      .sign(key.privateKey)
    issued.push(token)
    registerSecret(token)
    return token
  }

  const refreshTokenFor = (user: EmulatedUser) => {
    const token = Crypto.randomBytes(32).toString("base64url")
    refreshTokens.set(token, user)
    registerSecret(token)
    return token
  }

  const userOf = async (token: string) => {
    if (key === undefined) return undefined
    const verified = await jwtVerify(token, createLocalJWKSet({ keys: [key.publicJwk] }), { issuer: `https://securetoken.google.com/${options.project}` })
      .catch(() => undefined)
    return [...users.values()].find((u) => u.localId === verified?.payload.sub)
  }

  type Answer = readonly [number, unknown]
  const failure = (message: string): Answer => [400, { error: { code: 400, message, errors: [{ message, domain: "global", reason: "invalid" }] } }]

  const answer = async (method: string, path: string, body: string): Promise<Answer> => {
    if (method !== "POST") return [404, { error: { code: 404, message: "Not Found" } }]
    if (path === "/identitytoolkit.googleapis.com/v1/accounts:signInWithPassword") {
      const request: unknown = JSON.parse(body)
      const email = typeof request === "object" && request !== null && "email" in request ? String(request.email) : ""
      const password = typeof request === "object" && request !== null && "password" in request ? String(request.password) : ""
      const user = users.get(email.toLowerCase())
      if (user === undefined) return failure("EMAIL_NOT_FOUND")
      if (user.password !== password) return failure("INVALID_PASSWORD")
      const seconds = options.signInTokenSeconds ?? HOUR
      return [200, {
        kind: "identitytoolkit#VerifyPasswordResponse",
        localId: user.localId,
        email: user.email,
        displayName: "",
        idToken: await idToken(user, seconds),
        registered: true,
        refreshToken: refreshTokenFor(user),
        expiresIn: String(seconds)
      }]
    }
    if (path === "/identitytoolkit.googleapis.com/v1/accounts:lookup") {
      const request: unknown = JSON.parse(body)
      const token = typeof request === "object" && request !== null && "idToken" in request ? String(request.idToken) : ""
      const user = await userOf(token)
      if (user === undefined) return failure("INVALID_ID_TOKEN")
      return [200, {
        kind: "identitytoolkit#GetAccountInfoResponse",
        users: [{
          localId: user.localId,
          email: user.email,
          emailVerified: false,
          passwordHash: "UkVEQUNURUQ=",
          providerUserInfo: [{ providerId: "password", federatedId: user.email, email: user.email, rawId: user.email }],
          passwordUpdatedAt: 1_700_000_000_000,
          validSince: "1700000000",
          createdAt: "1700000000000",
          lastLoginAt: String(Date.now())
        }]
      }]
    }
    if (path === "/securetoken.googleapis.com/v1/token") {
      const form = new URLSearchParams(body)
      const user = refreshTokens.get(form.get("refresh_token") ?? "")
      if (form.get("grant_type") !== "refresh_token" || user === undefined) return failure("INVALID_REFRESH_TOKEN")
      const token = await idToken(user, HOUR)
      return [200, {
        access_token: token,
        expires_in: String(HOUR),
        token_type: "Bearer",
        refresh_token: refreshTokenFor(user),
        id_token: token,
        user_id: user.localId,
        project_id: options.project
      }]
    }
    return [404, { error: { code: 404, message: "Not Found" } }]
  }

  const server = Http.createServer((req, res) => {
    const cors = {
      "access-control-allow-origin": req.headers.origin ?? "*",
      "access-control-allow-methods": "GET, POST, OPTIONS",
      "access-control-allow-headers": req.headers["access-control-request-headers"] ?? "content-type",
      "access-control-max-age": "600"
    }
    if (req.method === "OPTIONS") {
      res.writeHead(204, cors)
      res.end()
      return
    }
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      const url = new URL(req.url ?? "/", "http://emulator")
      const key = url.searchParams.get("key")
      requests.push({ method: req.method ?? "", path: url.pathname, key })
      const reply = key === options.apiKey
        ? answer(req.method ?? "", url.pathname, Buffer.concat(chunks).toString("utf8"))
        : Promise.resolve(failure("API key not valid. Please pass a valid API key."))
      void reply
        .catch((error: unknown): Answer => [500, { error: { code: 500, message: String(error) } }])
        .then(([status, body]) => {
          res.writeHead(status, { ...cors, "content-type": "application/json; charset=utf-8" })
          res.end(JSON.stringify(body))
        })
    })
  })

  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      resolve({
        host: `127.0.0.1:${port}`,
        signWith: (next) => {
          key = next
        },
        addUser: (user) => {
          users.set(user.email.toLowerCase(), user)
        },
        requests: () => [...requests],
        issued: () => [...issued],
        close: () =>
          new Promise((done) => {
            server.closeAllConnections()
            server.close(() => done())
          })
      })
    })
  })
}
