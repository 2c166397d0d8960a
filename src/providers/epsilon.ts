/**
 * epsilon is a generic REST API: the connection names its base URL and token; the call names the method,
 * path, query and JSON body. The URL came from a user, so it goes through the SSRF guard.
 */
import * as Effect from "effect/Effect"
import type { Credentials } from "../domain/connections.js"
import type { ToolInput, ToolOutput } from "../domain/tools.js"
import { EPSILON_METHODS } from "../domain/schemas.js"
import { ProviderCredentialRejected } from "../domain/errors.js"
import { headerSecrets, idempotencyHeader, ProviderClient, upstreamMessage, type UpstreamResponse, withoutSecrets } from "../services/ProviderClient.js"
import { parseUpstreamJson } from "../domain/json.js"
import { invalid, type ProviderTool, requestText, urlUnder } from "./common.js"

export const PROVIDER = "epsilon"

const queryValue = (v: unknown): string => (typeof v === "string" ? v : JSON.stringify(v))

/**
 * The URL a call goes to: the connection's base URL and the call's path, which may leave neither its host nor
 * its base path (`..` segments, spelled, percent-encoded or behind an encoded slash, are resolved before the check).
 */
const targetOf = (input: ToolInput<"epsilon_request">, credentials: Credentials["epsilon"]) => {
  const base = credentials.base_url.replace(/\/+$/, "")
  const path = input.path.startsWith("/") ? input.path : `/${input.path}`
  if (!URL.canParse(`${base}${path}`)) return Effect.fail(invalid("path does not make a valid URL"))
  const url = urlUnder(base, path)
  return url === undefined ? Effect.fail(invalid("path must stay on the connection's base URL")) : Effect.succeed(url)
}

/**
 * The method sent: the input's in any case, upper-case as the standard methods are spelled (a server reads "get" as
 * another method, RFC 9110 §9.1). The input's schema has already refused a method that is none of them.
 */
const methodOf = (input: ToolInput<"epsilon_request">) => {
  const asked = (input.method ?? "GET").toUpperCase()
  const method = EPSILON_METHODS.find((m) => m === asked)
  return method === undefined
    ? Effect.fail(invalid(`method must be one of ${EPSILON_METHODS.join(", ")} (in any case)`))
    : Effect.succeed(method)
}

/** An answer's text as JSON where it parses as JSON; else, and where JSON nests too deep to read further, the text. */
const jsonOrText = (text: string): unknown => {
  try {
    const parsed = parseUpstreamJson(text)
    return parsed === undefined ? text : parsed.value
  } catch {
    return text
  }
}

/**
 * Any REST API's 403 as RFC 9110 §15.5.4 has it: the server understood the request and refuses it; credentials it
 * was given are "insufficient to grant access" — to this path with this method, which another path may not be. The
 * call is `provider_credential_rejected`, but the connection is not shown `rejected` for it (any key of the org can
 * call a path the token may not reach); a 401 says the token itself is refused, and is (the general rule).
 */
const restStatus = (response: UpstreamResponse) =>
  response.status === 403
    ? new ProviderCredentialRejected({
      message: `${PROVIDER} refused this request with the connection's token (HTTP 403): ${upstreamMessage(response.body)}. ` +
        "The token may lack a permission this path needs.",
      forbidden: true
    })
    : undefined

export const request: ProviderTool<ToolInput<"epsilon_request">, Credentials["epsilon"], ToolOutput<"epsilon_request">> = {
  check: (input, credentials) => Effect.asVoid(targetOf(input, credentials)),
  fetch: (input, credentials) =>
    Effect.gen(function* () {
      const url = yield* targetOf(input, credentials)
      for (const [k, v] of Object.entries(input.query ?? {})) url.searchParams.append(k, queryValue(v))
      const method = yield* methodOf(input)
      // a write carries the call's derived Idempotency-Key (the IETF httpapi header), for an API that honours it
      const headers: Record<string, string> = method === "GET" ? {} : { ...(yield* idempotencyHeader) }
      // the token as its header carries it: in `header`, or as a Bearer token
      const sent = credentials.token === undefined
        ? undefined
        : credentials.header !== undefined
        ? { name: credentials.header.toLowerCase(), value: credentials.token }
        : { name: "authorization", value: `Bearer ${credentials.token}` }
      if (sent !== undefined) headers[sent.name] = sent.value
      const raw = yield* requestText({
        provider: PROVIDER,
        method,
        url: url.toString(),
        headers,
        ...(input.body !== undefined ? { json: input.body } : {}),
        idempotent: method === "GET",
        guarded: true,
        callerUrl: true,
        credentialed: true,
        // a redirect may not take the token out of the base URL's path either
        scope: credentials.base_url,
        classify: restStatus
      })
      // Any REST API: JSON when it parses as JSON, whatever its media type says. The connection's token is never in
      // what the call answers (an API that echoes its request's headers would give it to any holder of an API key).
      // (as the header carried it, and each word of it: an API may echo the part after a scheme it knows)
      const secrets = sent === undefined ? [] : headerSecrets(sent.value)
      const text = raw.body
      if (typeof text === "string" && text.trim() === "") return { ...raw, body: null }
      // a large answer is parsed and searched in its turn, as requestText read it (one already read as JSON, its media
      // type said so, is searched in its turn too)
      return yield* (yield* ProviderClient).digest(
        typeof text === "string" ? text.length : raw.bytes ?? 0,
        Effect.sync(() => ({ ...raw, body: withoutSecrets(typeof text === "string" ? jsonOrText(text) : text, secrets) }))
      )
    }),
  normalize: (_input, raw) => Effect.succeed({ provider: PROVIDER, status: raw.status, body: raw.body })
}
