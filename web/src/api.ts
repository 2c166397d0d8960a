/**
 * The Dashboard API, through the project's own typed client (`HttpApiClient` over `FetchHttpClient`) on this
 * page's origin. Each call answers an outcome: the value, or the envelope's code and message (the gateway's
 * error classes are decoded by the client; a failed connection is `network`).
 */
import { Cause, type Context, Effect, Exit, ManagedRuntime, ParseResult, Schema } from "effect"
import { envelopeOf, isGatewayError, ToolGatewayClient } from "../../src/client.js"
import { describeParseError } from "../../src/domain/parse.js"
import type { FirebaseSignIn } from "./firebase.js"

export type Client = Context.Tag.Service<ToolGatewayClient>

export type Outcome<A> =
  | { readonly ok: true; readonly value: A }
  | { readonly ok: false; readonly code: string; readonly message: string }

/** The codes that say the session itself is refused: its token (expired, revoked) or its membership. */
const SESSION_REFUSED: ReadonlySet<string> = new Set([envelopeOf.InvalidToken.code, envelopeOf.NotAMember.code])

const failureOf = (error: unknown): Outcome<never> => {
  if (isGatewayError(error)) return { ok: false, code: envelopeOf[error._tag].code, message: error.message }
  // a value the client's schema refused before sending it (a form field out of range): said as the gateway
  // would say it, `field: problem`, not as the schema library's tree
  if (ParseResult.isParseError(error)) {
    return { ok: false, code: envelopeOf.InvalidRequest.code, message: `Invalid request: ${describeParseError(error)}` }
  }
  const transport = typeof error === "object" && error !== null && "_tag" in error && error._tag === "RequestError"
  const message = !transport && typeof error === "object" && error !== null && "message" in error && typeof error.message === "string"
    ? error.message
    : "The gateway could not be reached; try again."
  return { ok: false, code: "network", message }
}

export interface Api {
  readonly run: <A, E>(call: (client: Client) => Effect.Effect<A, E>) => Promise<Outcome<A>>
  readonly dispose: () => Promise<void>
}

/**
 * A client for the signed-in user's ID token (none: only the public and dev routes answer). Any call the gateway
 * refuses for the session itself (the token expired or was revoked, the user is no longer a member) calls
 * `onSessionRefused` with the gateway's reason, whichever page made it.
 */
export const makeApi = (idToken: string | undefined, onSessionRefused: (reason: string) => void = () => {}): Api => {
  const runtime = ManagedRuntime.make(ToolGatewayClient.layer({ baseUrl: window.location.origin, idToken }))
  return {
    run: (call) =>
      runtime.runPromiseExit(Effect.flatMap(ToolGatewayClient, call)).then((exit) => {
        if (Exit.isSuccess(exit)) return { ok: true, value: exit.value }
        const failure = failureOf(Cause.squash(exit.cause))
        if (!failure.ok && idToken !== undefined && SESSION_REFUSED.has(failure.code)) onSessionRefused(failure.message)
        return failure
      }),
    dispose: () => runtime.dispose()
  }
}

/** A Firebase web app's configuration, as the gateway tells it (`FIREBASE_*`). */
const FirebaseConfig = Schema.Struct({
  project_id: Schema.String,
  api_key: Schema.String,
  auth_domain: Schema.String,
  /** A Firebase Auth emulator to talk to instead of Google's hosts (local development, tests). */
  emulator_url: Schema.NullOr(Schema.String)
})
export type FirebaseConfig = typeof FirebaseConfig.Type

const ConfigJson = Schema.Struct({
  sign_in: Schema.Struct({ dev: Schema.Boolean, firebase: Schema.NullOr(FirebaseConfig) })
})

/** How users sign in on this gateway (`/dashboard/config.json`). */
export type SignInConfig = typeof ConfigJson.Type["sign_in"]

/** A config that cannot be read offers only the pasted ID token. */
export const signInConfig = (): Promise<SignInConfig> =>
  fetch("/dashboard/config.json")
    .then((r) => r.json())
    .then(Schema.decodeUnknownPromise(ConfigJson))
    .then((config) => config.sign_in)
    .catch((): SignInConfig => ({ dev: false, firebase: null }))

let firebase: Promise<FirebaseSignIn> | undefined

/**
 * Firebase Authentication in this page: its SDK is a chunk of its own, fetched on the first call (so a gateway
 * without Firebase never loads it) and started once.
 */
export const loadFirebase = (config: FirebaseConfig): Promise<FirebaseSignIn> => {
  firebase ??= import("./firebase.js").then((m) => m.startFirebase(config)).catch((error: unknown) => {
    firebase = undefined
    throw error
  })
  return firebase
}
