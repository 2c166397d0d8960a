/**
 * Signing in to the dashboard API: Firebase ID tokens verified against a JWKS endpoint (a local stand-in
 * for Google's), dev tokens, and every way a token can be wrong. API keys are refused on these routes.
 */
import { expect, layer } from "@effect/vitest"
import { Effect, Exit, Layer, Logger, LogLevel, Option, TestClock } from "effect"
import { SignJWT, UnsecuredJWT } from "jose"
import { Identity, IdentityLive } from "../src/services/Identity.js"
import { defaults, IdentityConfig, ServerConfig } from "../src/config.js"
import { expectEnvelope } from "./support/assert.js"
import {
  dashboard,
  devToken,
  FIREBASE_PROJECT,
  gatewayLayer,
  givenMember,
  givenOrg,
  servicesLayer,
  TestUpstreams
} from "./support/gateway.js"
import { firebaseToken, signingKey } from "./upstreams/jwks.js"
import { Members } from "../src/services/Members.js"

const invalidToken = { status: 401, type: "auth", code: "invalid_token", retryable: false, billable: false } as const

/** A member signed in with a Firebase token minted by the test's JWKS stand-in. */
const firebaseMember = (tokenOptions: Partial<Parameters<typeof firebaseToken>[1]> = {}) =>
  Effect.gen(function* () {
    const u = yield* TestUpstreams
    const { orgId } = yield* givenOrg()
    const sub = tokenOptions.sub ?? `fb-${orgId}`
    yield* Effect.orDie(Effect.flatMap(Members, (m) => m.add(orgId, sub)))
    const token = yield* Effect.promise(() => firebaseToken(u.firebaseKey, { project: FIREBASE_PROJECT, sub, ...tokenOptions }))
    return { orgId, token }
  })

layer(gatewayLayer(), { excludeTestServices: true })("ID tokens", (it) => {
  it.effect("a valid Firebase ID token signs the user in to their org", () =>
    Effect.gen(function* () {
      const { orgId, token } = yield* firebaseMember()
      const result = yield* dashboard("GET", "/v1/org", token)
      expect(result.status).toBe(200)
      expect(result.body).toMatchObject({ id: orgId, balance: 100 })
    }))

  it.effect("a dev token signs in too (the dev issuer is on)", () =>
    Effect.gen(function* () {
      const { orgId, token } = yield* givenMember()
      const result = yield* dashboard("GET", "/v1/org", token)
      expect(result.status).toBe(200)
      expect(result.body).toMatchObject({ id: orgId })
    }))

  it.effect("expired, not yet valid, wrong audience, wrong issuer, empty sub", () =>
    Effect.gen(function* () {
      for (const [options, message] of [
        [{ expOffset: -60 }, "expired"],
        [{ iatOffset: 3600, expOffset: 7200 }, "not valid yet"],
        [{ aud: "another-project" }, "\"aud\""],
        [{ iss: "https://securetoken.google.com/another-project" }, "\"iss\""],
        [{ iss: "https://evil.example" }, "\"iss\""],
        [{ sub: "" }, "sub"]
      ] as const) {
        const { token } = yield* firebaseMember(options)
        expectEnvelope(yield* dashboard("GET", "/v1/org", token), { ...invalidToken, message })
      }
    }))

  it.effect("a signed token whose sub is not a string is invalid_token, not an internal error", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      const now = Math.floor(Date.now() / 1000)
      for (const sub of [123, true, ["alice"], { id: "alice" }]) {
        // the claims a token's issuer wrote, signed by a key the gateway trusts: `sub` is whatever it is
        const claims: Record<string, unknown> = { sub, iss: `https://securetoken.google.com/${FIREBASE_PROJECT}`, aud: FIREBASE_PROJECT, iat: now, exp: now + 3600 }
        const token = yield* Effect.promise(() =>
          new SignJWT(claims).setProtectedHeader({ alg: "RS256", kid: u.firebaseKey.kid, typ: "JWT" }).sign(u.firebaseKey.privateKey))
        // (it was 500 internal_error: `sub.includes is not a function`, or a ParseError in the members lookup)
        expectEnvelope(yield* dashboard("GET", "/v1/org", token), { ...invalidToken, message: "sub" })
      }
    }))

  it.effect("HS256 and alg none are refused", () =>
    Effect.gen(function* () {
      const now = Math.floor(Date.now() / 1000)
      const claims = { iss: `https://securetoken.google.com/${FIREBASE_PROJECT}`, aud: FIREBASE_PROJECT, sub: "u1", iat: now, exp: now + 600 }
      const hs256 = yield* Effect.promise(() =>
        new SignJWT(claims).setProtectedHeader({ alg: "HS256", kid: "firebase-key-1" }).sign(new TextEncoder().encode("x".repeat(32))))
      expectEnvelope(yield* dashboard("GET", "/v1/org", hs256), { ...invalidToken, message: "RS256" })
      const none = new UnsecuredJWT(claims).encode()
      expectEnvelope(yield* dashboard("GET", "/v1/org", none), { ...invalidToken, message: "RS256" })
    }))

  it.effect("a tampered payload fails the signature", () =>
    Effect.gen(function* () {
      const { token } = yield* firebaseMember()
      const [header, payload, signature] = token.split(".")
      const claims = JSON.parse(Buffer.from(payload ?? "", "base64url").toString("utf8"))
      const forged = Buffer.from(JSON.stringify({ ...claims, sub: "someone-else" })).toString("base64url")
      expectEnvelope(yield* dashboard("GET", "/v1/org", `${header}.${forged}.${signature}`), { ...invalidToken, message: "signature" })
    }))

  it.effect("an unknown kid fetches the keys again: a rotated key is then accepted, an unknown one refused", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      const { orgId, token } = yield* firebaseMember()
      expect((yield* dashboard("GET", "/v1/org", token)).status).toBe(200)
      // Google rotates: a second key is published.
      const rotated = yield* Effect.promise(() => signingKey("firebase-key-2"))
      u.jwks.publish([u.firebaseKey, rotated])
      const before = u.jwks.hits()
      const sub = `fb-${orgId}`
      const newToken = yield* Effect.promise(() => firebaseToken(rotated, { project: FIREBASE_PROJECT, sub }))
      expect((yield* dashboard("GET", "/v1/org", newToken)).status).toBe(200)
      expect(u.jwks.hits()).toBe(before + 1)
      // A key nobody published: fetched again, still unknown, refused.
      const stranger = yield* Effect.promise(() => signingKey("firebase-key-9"))
      const strangerToken = yield* Effect.promise(() => firebaseToken(stranger, { project: FIREBASE_PROJECT, sub }))
      expectEnvelope(yield* dashboard("GET", "/v1/org", strangerToken), { ...invalidToken, message: "unknown key" })
      expect(u.jwks.hits()).toBe(before + 2)
      u.jwks.publish([u.firebaseKey])
    }))

  it.effect("a missing or malformed token", () =>
    Effect.gen(function* () {
      expectEnvelope(yield* dashboard("GET", "/v1/org", undefined), invalidToken)
      expectEnvelope(yield* dashboard("GET", "/v1/org", "not-a-jwt"), { ...invalidToken, message: "malformed" })
      expectEnvelope(yield* dashboard("GET", "/v1/keys", undefined, undefined, { authorization: "Basic dXNlcjpwYXNz" }), invalidToken)
    }))

  it.effect("API keys are refused on these routes, in Authorization and in X-API-Key", () =>
    Effect.gen(function* () {
      const { key, token } = yield* givenMember()
      expectEnvelope(yield* dashboard("GET", "/v1/keys", key), { ...invalidToken, message: "never an API key" })
      expectEnvelope(yield* dashboard("GET", "/v1/keys", undefined, undefined, { "x-api-key": key }), invalidToken)
      expectEnvelope(yield* dashboard("GET", "/v1/keys", token, undefined, { "x-api-key": key }), invalidToken)
      // the Connections routes above all (the contract's rule 3)
      for (const [method, path, body] of [
        ["GET", "/v1/connections", undefined],
        ["POST", "/v1/connections", { provider: "nu", credentials: { token: "ghp_token" } }],
        ["DELETE", "/v1/connections/nu", undefined]
      ] as const) {
        expectEnvelope(yield* dashboard(method, path, key, body), { ...invalidToken, message: "never an API key" })
        expectEnvelope(yield* dashboard(method, path, undefined, body, { "x-api-key": key }), invalidToken)
        expectEnvelope(yield* dashboard(method, path, token, body, { "x-api-key": key }), invalidToken)
      }
    }))

  it.effect("an ID token is not an API key on tool routes", () =>
    Effect.gen(function* () {
      const { token } = yield* givenMember()
      const result = yield* dashboard("POST", "/v1/weather", token, { q: "Berlin" })
      expectEnvelope(result, { status: 401, type: "auth", code: "invalid_key", retryable: false, billable: false })
    }))

  it.effect("the dev issuer's public keys are served at /dev/jwks.json", () =>
    Effect.gen(function* () {
      const result = yield* dashboard("GET", "/dev/jwks.json", undefined)
      expect(result.status).toBe(200)
      expect(result.body).toMatchObject({ keys: [expect.objectContaining({ kty: "RSA", alg: "RS256" })] })
      expect(JSON.stringify(result.body)).not.toMatch(/"d":/)
      // a dev token still verifies against them
      expect((yield* dashboard("GET", "/v1/org", (yield* givenMember()).token)).status).toBe(200)
    }))
})

layer(servicesLayer())("identity in process", (it) => {
  it.effect("the token's validity is judged by Effect's Clock", () =>
    Effect.gen(function* () {
      const identity = yield* Identity
      yield* TestClock.setTime(Date.now())
      const token = yield* devToken("clock-user", 600)
      expect((yield* identity.verify(token)).uid).toBe("clock-user")
      yield* TestClock.adjust("11 minutes")
      const expired = yield* Effect.flip(identity.verify(token))
      expect(expired.message).toContain("expired")
    }))

  it.effect("the dev issuer refuses to run on a non-loopback HOST", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      const config = Layer.mergeAll(
        Layer.succeed(ServerConfig, { ...defaults.server, host: "0.0.0.0", dataDir: u.dataDir }),
        Layer.succeed(IdentityConfig, { ...defaults.identity, devIssuer: true })
      )
      const exit = yield* Effect.exit(Layer.build(IdentityLive.pipe(Layer.provide(config))).pipe(Effect.scoped))
      expect(Exit.isFailure(exit)).toBe(true)
      expect(String(exit)).toContain("loopback")
    }))

  it.effect("the dev issuer beside a real Firebase project starts with a warning that dev tokens can name its users", () =>
    Effect.gen(function* () {
      const u = yield* TestUpstreams
      const warnings: Array<string> = []
      const logger = Logger.replace(Logger.defaultLogger, Logger.make(({ logLevel, message }) => {
        if (logLevel === LogLevel.Warning) warnings.push(String(message))
      }))
      const build = (identity: Partial<typeof defaults.identity>) =>
        Layer.build(IdentityLive.pipe(Layer.provide(Layer.mergeAll(
          Layer.succeed(ServerConfig, { ...defaults.server, dataDir: u.dataDir }),
          Layer.succeed(IdentityConfig, { ...defaults.identity, devIssuer: true, ...identity })
        )))).pipe(Effect.scoped, Effect.provide(logger), Effect.orDie)
      yield* build({})
      expect(warnings).toEqual([])
      yield* build({ firebaseProjectId: Option.some(FIREBASE_PROJECT) })
      expect(warnings).toEqual([expect.stringContaining("sign in as any Firebase user")])
      // with the Auth emulator, a local run: no warning
      yield* build({ firebaseProjectId: Option.some(FIREBASE_PROJECT), firebaseAuthEmulatorHost: Option.some("127.0.0.1:9099") })
      expect(warnings).toHaveLength(1)
    }))
})

layer(gatewayLayer({
  identity: { firebaseProjectId: Option.some(FIREBASE_PROJECT), firebaseJwksUrl: "http://127.0.0.1:9/jwks", jwksCooldownMs: 0 }
}), { excludeTestServices: true })("ID tokens while the signing keys cannot be fetched", (it) => {
  it.effect("a valid token is answered provider_unavailable (retryable), not invalid_token", () =>
    Effect.gen(function* () {
      const { token } = yield* firebaseMember()
      expectEnvelope(yield* dashboard("GET", "/v1/org", token), {
        status: 502,
        type: "provider",
        code: "provider_unavailable",
        retryable: true,
        billable: false,
        message: "signing keys"
      })
    }))
})
