/**
 * A JWKS endpoint like Google's securetoken one (https://www.googleapis.com/service_accounts/v1/jwk/securetoken@system.gserviceaccount.com,
 * which Firebase's "Verify ID tokens using a third-party JWT library" names: https://firebase.google.com/docs/auth/admin/verify-id-tokens):
 * `{keys: [JWK]}`, RS256 keys each with its `kid`, rotated by publishing new ones; here with keys the test mints
 * tokens with.
 */
import { exportJWK, generateKeyPair, type JWK, SignJWT } from "jose"
import * as Http from "node:http"

export interface SigningKey {
  readonly kid: string
  readonly privateKey: Awaited<ReturnType<typeof generateKeyPair>>["privateKey"]
  readonly publicJwk: JWK
}

export const signingKey = async (kid: string): Promise<SigningKey> => {
  const { privateKey, publicKey } = await generateKeyPair("RS256")
  return { kid, privateKey, publicJwk: { ...(await exportJWK(publicKey)), kid, alg: "RS256", use: "sig" } }
}

export interface JwksServer {
  readonly url: string
  readonly hits: () => number
  /** Replace the published keys. */
  readonly publish: (keys: ReadonlyArray<SigningKey>) => void
  readonly close: () => Promise<void>
}

export const startJwks = (keys: ReadonlyArray<SigningKey>): Promise<JwksServer> =>
  new Promise((resolve) => {
    let published = keys
    let hits = 0
    const server = Http.createServer((_req, res) => {
      hits += 1
      res.writeHead(200, { "content-type": "application/json", "cache-control": "public, max-age=19000" })
      res.end(JSON.stringify({ keys: published.map((k) => k.publicJwk) }))
    })
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      resolve({
        url: `http://127.0.0.1:${port}/jwks`,
        hits: () => hits,
        publish: (next) => {
          published = next
        },
        close: () => new Promise((done) => server.close(() => done()))
      })
    })
  })

export interface TokenOptions {
  readonly project: string
  readonly sub?: string
  readonly iss?: string
  readonly aud?: string
  readonly iatOffset?: number
  readonly expOffset?: number
}

/** A Firebase-shaped ID token signed with `key`. */
export const firebaseToken = (key: SigningKey, o: TokenOptions) => {
  const now = Math.floor(Date.now() / 1000)
  return new SignJWT({ auth_time: now, firebase: { sign_in_provider: "password" } })
    .setProtectedHeader({ alg: "RS256", kid: key.kid, typ: "JWT" })
    .setIssuer(o.iss ?? `https://securetoken.google.com/${o.project}`)
    .setAudience(o.aud ?? o.project)
    .setSubject(o.sub ?? "firebase-user-1")
    .setIssuedAt(now + (o.iatOffset ?? 0))
    .setExpirationTime(now + (o.expOffset ?? 3600))
    .sign(key.privateKey)
}
