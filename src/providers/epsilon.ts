/**
 * epsilon is a generic REST API: the connection names its base URL and token; the call names the method,
 * path, query and JSON body. The URL came from a user, so it goes through the SSRF guard.
 */
import { Effect } from "effect"
import type { Credentials } from "../domain/connections.js"
import { InvalidRequest } from "../domain/errors.js"
import type { ToolInput, ToolOutput } from "../domain/tools.js"
import { bodyText, ProviderClient } from "../services/ProviderClient.js"
import type { Answered, ProviderEffect } from "./common.js"

export const PROVIDER = "epsilon"

const queryValue = (v: unknown): string => (typeof v === "string" ? v : JSON.stringify(v))

export const request = (
  input: ToolInput<"epsilon_request">,
  credentials: Credentials["epsilon"]
): ProviderEffect<Answered<ToolOutput<"epsilon_request">>> =>
  Effect.gen(function* () {
    const client = yield* ProviderClient
    const base = credentials.base_url.replace(/\/+$/, "")
    const path = input.path.startsWith("/") ? input.path : `/${input.path}`
    if (!URL.canParse(`${base}${path}`)) return yield* new InvalidRequest({ message: "path does not make a valid URL" })
    const url = new URL(`${base}${path}`)
    // The path may not leave the connection's host.
    if (url.origin !== new URL(base).origin) {
      return yield* new InvalidRequest({ message: "path must stay on the connection's base URL" })
    }
    for (const [k, v] of Object.entries(input.query ?? {})) url.searchParams.append(k, queryValue(v))
    const method = input.method ?? "GET"
    const headers: Record<string, string> = {}
    if (credentials.token !== undefined) {
      if (credentials.header !== undefined) headers[credentials.header.toLowerCase()] = credentials.token
      else headers["authorization"] = `Bearer ${credentials.token}`
    }
    const response = yield* client.request({
      provider: PROVIDER,
      method,
      url: url.toString(),
      headers,
      ...(input.body !== undefined ? { json: input.body } : {}),
      idempotent: method === "GET",
      guarded: true
    })
    const text = bodyText(response)
    let body: unknown = text
    try {
      body = text === "" ? null : JSON.parse(text)
    } catch {
      body = text
    }
    return { provider: PROVIDER, output: { status: response.status, body } }
  })
