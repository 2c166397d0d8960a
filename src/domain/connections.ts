/**
 * What each account provider needs to act on the org's own account, as the credentials of a connection.
 * Validated when a connection is created; stored encrypted; decoded again for each call.
 */
import * as Schema from "effect/Schema"
import { HttpUrl, NonEmpty, opt, strict } from "./schema-helpers.js"

const HeaderName = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9-]{1,64}$/, { message: () => "must be an HTTP header name" })
)

const schemas = {
  delta: strict({
    identifier: NonEmpty.annotations({ description: "Handle (alice.bsky.social) or DID" }),
    app_password: NonEmpty.annotations({ description: "An app password" }),
    service: opt(HttpUrl.annotations({ description: "The account's PDS; default the configured DELTA_BASE_URL" }))
  }, "DeltaCredentials", "delta: a handle and an app password"),
  epsilon: strict({
    base_url: HttpUrl.annotations({ description: "The REST API's base URL" }),
    token: opt(NonEmpty.annotations({ description: "Sent as a Bearer token, or in `header`" })),
    header: opt(HeaderName.annotations({ description: "Send the token in this header instead of Authorization" }))
  }, "EpsilonCredentials", "epsilon: a base URL and an optional token"),
  zeta: strict({ access_token: NonEmpty }, "ZetaCredentials", "zeta: an access token"),
  eta: strict({ ape_key: NonEmpty }, "EtaCredentials", "eta: an Ape key"),
  theta: strict({ access_token: NonEmpty, client_id: NonEmpty }, "ThetaCredentials", "theta: an OAuth access token and the app's client id"),
  iota: strict({ api_key: NonEmpty }, "IotaCredentials", "iota: an API key"),
  kappa: strict({ access_token: NonEmpty }, "KappaCredentials", "kappa: an organization access token"),
  lambda: strict({ api_key: NonEmpty }, "LambdaCredentials", "lambda: an API key"),
  mu: strict({ token: NonEmpty }, "MuCredentials", "mu: an integration token"),
  nu: strict({ token: NonEmpty }, "NuCredentials", "nu: a personal access token")
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
