/**
 * Who is signed in to the dashboard API: `Authorization: Bearer <ID token>`, verified with `jose`.
 *
 * - Firebase ID tokens (`FIREBASE_PROJECT_ID`): RS256 against Google's securetoken JWKS (or
 *   `FIREBASE_JWKS_URL`), `iss = https://securetoken.google.com/<project>`, `aud = <project>`.
 * - Dev tokens (`DEV_IDENTITY=true`, loopback `HOST` only): signed by a key generated into the data
 *   directory, minted by `tool-gateway dev token`; the gateway serves its public JWKS at `/dev/jwks.json`.
 *
 * Both: RS256 only, `exp` in the future, `iat` not in the future beyond a minute of skew, a non-empty `sub`;
 * keys cached, and fetched again for an unknown `kid` (at most once per `JWKS_COOLDOWN_MS`). Time is the
 * Effect `Clock`.
 */
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Fs from "node:fs/promises"
import * as Net from "node:net"
import * as Path from "node:path"
import {
  createLocalJWKSet,
  createRemoteJWKSet,
  decodeJwt,
  decodeProtectedHeader,
  exportJWK,
  generateKeyPair,
  importJWK,
  type JSONWebKeySet,
  type JWK,
  jwtVerify,
  SignJWT
} from "jose"
import { BEARER_CHALLENGE, InvalidToken, ProviderUnavailable } from "../domain/errors.js"
import { IdentityConfig, ServerConfig } from "../config.js"
import { base62 } from "./random.js"
import { nowMillis, toDate } from "./time.js"
import { traced } from "./tracing.js"

export const DEV_ISSUER = "tool-gateway-dev"
export const DEV_AUDIENCE = "tool-gateway-dev"
const DEV_KEY_FILE = "dev-identity-key.json"

/** The dev key file: an RSA private JWK (anything else there is refused rather than trusted). */
const DevKeyFile = Schema.parseJson(Schema.Struct({
  kty: Schema.Literal("RSA"),
  kid: Schema.String,
  alg: Schema.Literal("RS256"),
  use: Schema.Literal("sig"),
  n: Schema.String,
  e: Schema.String,
  d: Schema.String,
  p: Schema.String,
  q: Schema.String,
  dp: Schema.String,
  dq: Schema.String,
  qi: Schema.String
}))
const IAT_SKEW_SECONDS = 60

export interface Principal {
  /** The user id: the token's `sub`. */
  readonly uid: string
  readonly issuer: "firebase" | "dev"
}

export class IdentityError extends Data.TaggedError("IdentityError")<{ readonly message: string }> {}

export class Identity extends Context.Tag("Identity")<Identity, {
  /** A signed-in user's ID token; `provider_unavailable` (retryable) when the signing keys cannot be fetched. */
  readonly verify: (token: string) => Effect.Effect<Principal, InvalidToken | ProviderUnavailable>
  /** The dev issuer's public keys, when it is enabled. */
  readonly devJwks: Option.Option<JSONWebKeySet>
  /** When the dev issuer is enabled: a dev ID token for a user id, valid for `ttlSeconds` from now. */
  readonly mintDevToken: Option.Option<(uid: string, ttlSeconds: number) => Effect.Effect<string, IdentityError>>
}>() {}

export const isLoopback = (host: string) =>
  host === "localhost" || host === "::1" || (Net.isIPv4(host) && host.startsWith("127."))

// -- the dev issuer's key ------------------------------------------------------------------------------

interface DevKey {
  readonly privateJwk: JWK
  readonly publicJwk: JWK
}

/** The dev issuer's key pair, generated once into the data directory. */
export const devKey = (dataDir: string): Effect.Effect<DevKey, IdentityError> =>
  Effect.tryPromise({
    try: async () => {
      const file = Path.join(dataDir, DEV_KEY_FILE)
      let text = await Fs.readFile(file, "utf8").catch(() => undefined)
      if (text === undefined) {
        const { privateKey } = await generateKeyPair("RS256", { extractable: true })
        const jwk = await exportJWK(privateKey)
        const kid = `dev-${base62(12)}`
        await Fs.mkdir(dataDir, { recursive: true })
        await Fs.writeFile(file, JSON.stringify({ ...jwk, kid, alg: "RS256", use: "sig" }), { mode: 0o600, flag: "wx" })
          .catch(() => undefined)
        text = await Fs.readFile(file, "utf8")
      }
      const privateJwk: JWK = Schema.decodeUnknownSync(DevKeyFile)(text)
      const { d: _d, dp: _dp, dq: _dq, p: _p, q: _q, qi: _qi, ...publicJwk } = privateJwk
      return { privateJwk, publicJwk }
    },
    catch: () => new IdentityError({ message: `cannot read or create the dev identity key in ${dataDir}` })
  })

/** A dev ID token for `uid`, valid for `ttlSeconds` from `nowMs`. */
export const mintDevToken = (key: DevKey, uid: string, nowMs: number, ttlSeconds: number) =>
  Effect.tryPromise({
    try: async () => {
      const privateKey = await importJWK(key.privateJwk, "RS256")
      const now = Math.floor(nowMs / 1000)
      return await new SignJWT({})
        .setProtectedHeader({ alg: "RS256", kid: key.privateJwk.kid ?? "dev", typ: "JWT" })
        .setIssuer(DEV_ISSUER)
        .setAudience(DEV_AUDIENCE)
        .setSubject(uid)
        .setIssuedAt(now)
        .setExpirationTime(now + ttlSeconds)
        .sign(privateKey)
    },
    catch: () => new IdentityError({ message: "cannot sign a dev token" })
  })

// -- verification --------------------------------------------------------------------------------------

const describeJoseError = (error: unknown): string => {
  const code = typeof error === "object" && error !== null && "code" in error ? String(error.code) : ""
  const claim = typeof error === "object" && error !== null && "claim" in error ? String(error.claim) : ""
  switch (code) {
    case "ERR_JWT_EXPIRED":
      return "The ID token has expired."
    case "ERR_JWT_CLAIM_VALIDATION_FAILED":
      return `The ID token's "${claim}" claim is not valid here.`
    case "ERR_JWS_SIGNATURE_VERIFICATION_FAILED":
      return "The ID token's signature does not verify."
    case "ERR_JWKS_NO_MATCHING_KEY":
      return "The ID token is signed with an unknown key."
    case "ERR_JOSE_ALG_NOT_ALLOWED":
      return "The ID token must be signed with RS256."
    default:
      return "The ID token is not valid."
  }
}

/**
 * Whether verification failed because the identity provider's keys could not be fetched (unreachable, slow,
 * a non-200 or a body that is not a key set): the token may be fine, so that is a retryable provider failure.
 */
const keysUnavailable = (error: unknown): boolean => {
  if (error instanceof TypeError) return true
  const code = typeof error === "object" && error !== null && "code" in error ? String(error.code) : ""
  return code === "ERR_JWKS_TIMEOUT" || code === "ERR_JOSE_GENERIC" || code === "ERR_JWKS_INVALID"
}

export const make = Effect.gen(function* () {
  const config = yield* ServerConfig
  const identity = yield* IdentityConfig
  const firebaseProject = identity.firebaseProjectId
  const firebaseIssuer = Option.map(firebaseProject, (p) => `https://securetoken.google.com/${p}`)
  const remote = Option.map(firebaseProject, () =>
    createRemoteJWKSet(new URL(identity.firebaseJwksUrl), { cooldownDuration: identity.jwksCooldownMs }))

  let dev: Option.Option<{
    readonly jwks: JSONWebKeySet
    readonly keySet: ReturnType<typeof createLocalJWKSet>
    readonly key: DevKey
  }> = Option.none()
  if (identity.devIssuer) {
    if (!isLoopback(config.host)) {
      return yield* new IdentityError({ message: `DEV_IDENTITY only runs on a loopback HOST (HOST is ${config.host})` })
    }
    if (Option.isSome(firebaseProject) && Option.isNone(identity.firebaseAuthEmulatorHost)) {
      // members are keyed by the token's `sub` whoever issued it: a dev token can name a Firebase user's
      yield* Effect.logWarning("DEV_IDENTITY is on beside FIREBASE_PROJECT_ID: a dev token can name any user id, " +
        "so whoever reaches POST /dev/token through a loopback Host can sign in as any Firebase user. " +
        "Turn DEV_IDENTITY off where real users sign in (the Firebase Auth emulator, FIREBASE_AUTH_EMULATOR_HOST, is for local runs).")
    }
    const key = yield* devKey(config.dataDir)
    const jwks: JSONWebKeySet = { keys: [{ ...key.publicJwk, alg: "RS256", use: "sig" }] }
    dev = Option.some({ jwks, keySet: createLocalJWKSet(jwks), key })
  }

  const invalid = (message: string) => new InvalidToken({ message, challenge: BEARER_CHALLENGE })

  const verify = (token: string): Effect.Effect<Principal, InvalidToken | ProviderUnavailable> =>
    Effect.gen(function* () {
      if (token === "") return yield* invalid("Sign in: send Authorization: Bearer <ID token>.")
      const claims = yield* Effect.try({
        try: () => ({ header: decodeProtectedHeader(token), payload: decodeJwt(token) }),
        catch: () => invalid("The ID token is malformed.")
      })
      if (claims.header.alg !== "RS256") return yield* invalid("The ID token must be signed with RS256.")
      const issuer = claims.payload.iss
      const now = yield* nowMillis
      const options = { algorithms: ["RS256"], currentDate: toDate(now), requiredClaims: ["exp", "iat", "sub"] }
      let verified: Principal["issuer"]
      if (Option.isSome(dev) && issuer === DEV_ISSUER) {
        const keySet = dev.value.keySet
        yield* Effect.tryPromise({
          try: () => jwtVerify(token, keySet, { ...options, issuer: DEV_ISSUER, audience: DEV_AUDIENCE }),
          catch: (error) => invalid(describeJoseError(error))
        })
        verified = "dev"
      } else if (Option.isSome(remote) && Option.isSome(firebaseIssuer) && issuer === firebaseIssuer.value) {
        const keySet = remote.value
        const audience = Option.getOrElse(firebaseProject, () => "")
        yield* Effect.tryPromise({
          try: () => jwtVerify(token, keySet, { ...options, issuer: firebaseIssuer.value, audience }),
          catch: (error) =>
            keysUnavailable(error)
              ? new ProviderUnavailable({ message: "The identity provider's signing keys could not be fetched; retry." })
              : invalid(describeJoseError(error))
        })
        verified = "firebase"
      } else {
        return yield* invalid("The ID token's \"iss\" claim is not valid here.")
      }
      const iat = claims.payload.iat ?? 0
      if (iat > Math.floor(now / 1000) + IAT_SKEW_SECONDS) return yield* invalid("The ID token is not valid yet.")
      // a signed token's claims are what its issuer wrote: `sub` may be a number or an object as well as a string
      const sub: unknown = claims.payload.sub
      // the user id is stored as text, which cannot hold U+0000
      if (typeof sub !== "string" || sub.length === 0 || sub.length > 128 || sub.includes("\u0000")) return yield* invalid("The ID token's \"sub\" claim is not valid here.")
      return { uid: sub, issuer: verified }
    }).pipe(traced("Identity.verify"))

  return Identity.of({
    verify,
    devJwks: Option.map(dev, (d) => d.jwks),
    mintDevToken: Option.map(dev, (d) => (uid: string, ttlSeconds: number) =>
      Effect.flatMap(nowMillis, (now) => mintDevToken(d.key, uid, now, ttlSeconds)))
  })
})

export const IdentityLive = Layer.effect(Identity, make)
