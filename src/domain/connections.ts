/**
 * What each account provider needs to act on the org's own account, as the credentials of a connection.
 * Validated when a connection is created; stored encrypted; decoded again for each call.
 */
import * as Schema from "effect/Schema"
import { BaseUrl, NonEmpty, opt, strict } from "./schema-helpers.js"

/**
 * Header names a token may not be sent in: the Fetch standard's forbidden request-header names (those that frame
 * the message or name its connection or host — https://fetch.spec.whatwg.org/#forbidden-request-header — with
 * the `proxy-` and `sec-` prefixes) and the ones the gateway sets on the request itself. A token in
 * `Content-Length` would reframe the request on a connection the agent pool shares.
 */
const RESERVED_HEADERS: ReadonlySet<string> = new Set([
  "accept-charset", "accept-encoding", "access-control-request-headers", "access-control-request-method",
  "connection", "content-length", "cookie", "cookie2", "date", "dnt", "expect", "host", "keep-alive", "origin",
  "referer", "set-cookie", "te", "trailer", "transfer-encoding", "upgrade", "via",
  "accept", "content-type", "idempotency-key", "user-agent"
])

const HeaderName = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9-]{1,64}$/, { message: () => "must be an HTTP header name" }),
  Schema.filter((name) => {
    const lower = name.toLowerCase()
    return !(RESERVED_HEADERS.has(lower) || lower.startsWith("proxy-") || lower.startsWith("sec-"))
  }, { message: () => "must not be a header the request's framing or the gateway sets (Content-Length, Host, Transfer-Encoding, Connection, Content-Type, Proxy-*, …)" })
)

/**
 * A secret sent in a request header: visible ASCII, words separated by single spaces or tabs (RFC 9110's field
 * value without obsolete text). A control character or a non-ASCII letter would be refused by the HTTP client on
 * every call; it is refused once here instead.
 */
/** The longest secret a connection sends in a header. */
export const MAX_HEADER_TOKEN = 4096

const HeaderToken = NonEmpty.pipe(
  Schema.pattern(/^[\x21-\x7e]+(?:[ \t]+[\x21-\x7e]+)*$/, {
    message: () => "must be visible ASCII characters (a header value: no control characters, line breaks or letters outside ASCII)"
  }),
  // a longer header is refused by most servers (431), which would be a failure of every later call
  Schema.maxLength(MAX_HEADER_TOKEN, { message: () => `must be at most ${MAX_HEADER_TOKEN} characters (a header value)` })
)

/**
 * epsilon's token: an API that echoes its request gives it back, and it is taken out of every answer, which a
 * secret of a few characters could not be told apart from (MIN_SECRET_LENGTH in ProviderClient.ts).
 */
const EpsilonToken = HeaderToken.pipe(
  Schema.minLength(8, {
    message: () => "must be at least 8 characters: it is taken out of every answer, and a shorter one could not be told from the answer's own text"
  })
)

const schemas = {
  delta: strict({
    identifier: NonEmpty.annotations({ description: "Handle (alice.bsky.social) or DID" }),
    app_password: NonEmpty.annotations({ description: "An app password" }),
    service: opt(BaseUrl.annotations({ description: "The account's PDS; default the configured DELTA_BASE_URL" }))
  }, "DeltaCredentials", "delta: a handle and an app password"),
  epsilon: strict({
    base_url: BaseUrl.annotations({ description: "The REST API's base URL" }),
    token: opt(EpsilonToken.annotations({ description: "Sent as a Bearer token, or in `header`" })),
    header: opt(HeaderName.annotations({ description: "Send the token in this header instead of Authorization" }))
  }, "EpsilonCredentials", "epsilon: a base URL and an optional token"),
  zeta: strict({ access_token: HeaderToken }, "ZetaCredentials", "zeta: an access token"),
  eta: strict({ ape_key: HeaderToken }, "EtaCredentials", "eta: an Ape key"),
  theta: strict({ access_token: HeaderToken, client_id: HeaderToken }, "ThetaCredentials", "theta: an OAuth access token and the app's client id"),
  iota: strict({ api_key: HeaderToken }, "IotaCredentials", "iota: an API key"),
  kappa: strict({ access_token: HeaderToken }, "KappaCredentials", "kappa: an organization access token"),
  lambda: strict({ api_key: HeaderToken }, "LambdaCredentials", "lambda: an API key"),
  mu: strict({ token: HeaderToken }, "MuCredentials", "mu: an integration token"),
  nu: strict({ token: HeaderToken }, "NuCredentials", "nu: a personal access token")
} as const

export type AccountProvider = keyof typeof schemas
export type Credentials = { readonly [P in AccountProvider]: Schema.Schema.Type<(typeof schemas)[P]> }
export type CredentialsEncoded = { readonly [P in AccountProvider]: Schema.Schema.Encoded<(typeof schemas)[P]> }

/** Each provider's credential schema, typed per provider (so a generic provider keeps its credential type). */
export const credentialSchemas: {
  readonly [P in AccountProvider]: Schema.Schema<Credentials[P], CredentialsEncoded[P]>
} = schemas

export const accountProviders: ReadonlyArray<AccountProvider> = ["delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu", "nu"]

export const AccountProviderSchema = Schema.Literal(...accountProviders)

export const isAccountProvider = (s: string): s is AccountProvider => Object.hasOwn(schemas, s)

/**
 * Whether a provider's answer proves the connection's credentials accepted: every request of its tools carries and
 * needs them. Not epsilon's: its caller picks the path, which may need no token (and its token is optional).
 */
export const answerProvesCredentials = (provider: AccountProvider): boolean => provider !== "epsilon"
