/**
 * Promises about types, proved by the compiler (`npm run typecheck` checks this file; at run time the
 * assertions are no-ops). The typed failure channel maps exactly onto the envelope: the wire union is the
 * gateway's errors, each client operation fails with exactly the errors its part of the API can answer, a
 * tag that is not one of them cannot be caught, an error without a table entry does not compile, and a
 * route cannot answer an error that is not its own.
 */
import { HttpApiBuilder } from "@effect/platform"
import { describe, expectTypeOf, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import {
  type ApiKeyError,
  type ArtifactError,
  type BodyError,
  type CallError,
  type ClientError,
  type DashboardError,
  type EnvelopeTable,
  envelopeOf,
  type GatewayError,
  gatewayErrors,
  type IdTokenError,
  InsufficientCredits,
  NotFound,
  type ServerError,
  ToolGatewayClient
} from "tool-gateway/client"
import { Api } from "../src/http/Api.js"
import { isArray } from "../src/domain/json.js"
import { wireOf, wireUnion } from "../src/http/wire.js"
import { inputExamples, outputExamples } from "../src/domain/examples.js"
import type { ToolName } from "../src/domain/tools.js"
import { bindings } from "../src/providers/index.js"
import type { Caller } from "../src/services/KeyStore.js"

type Client = ToolGatewayClient["Type"]
type ErrorOf<F> = F extends (...args: ReadonlyArray<never>) => Effect.Effect<infer _A, infer E, infer _R> ? E : never

class Unlisted extends Schema.TaggedError<Unlisted>()("Unlisted", { message: Schema.String }) {}

describe("the typed failure channel", () => {
  it("the wire union of every error is exactly the gateway's errors; one class's wire form keeps its class", () => {
    // eslint-disable-next-line @typescript-eslint/no-unused-vars -- a value examined only through its type
    const all = wireUnion(...gatewayErrors)
    expectTypeOf<Schema.Schema.Type<typeof all>>().toEqualTypeOf<GatewayError>()
    expectTypeOf<Schema.Schema.Type<ReturnType<typeof wireOf<typeof NotFound>>>>().toEqualTypeOf<NotFound>()
    expectTypeOf<GatewayError>().not.toBeAny()
  })

  it("each client operation fails with exactly its part of the API's errors, what any route can answer, plus the client's own", () => {
    expectTypeOf<ErrorOf<Client["tools"]["weather"]>>().toEqualTypeOf<ApiKeyError | BodyError | CallError | ServerError | ClientError>()
    expectTypeOf<ErrorOf<Client["tools"]["run"]>>().toEqualTypeOf<ApiKeyError | BodyError | CallError | ServerError | ClientError>()
    expectTypeOf<ErrorOf<Client["dashboard"]["listKeys"]>>().toEqualTypeOf<
      IdTokenError | BodyError | DashboardError | ServerError | ClientError
    >()
    expectTypeOf<ErrorOf<Client["artifacts"]["get"]>>().toEqualTypeOf<ApiKeyError | ArtifactError | ServerError | ClientError>()
    expectTypeOf<ErrorOf<Client["catalog"]["list"]>>().toEqualTypeOf<ServerError | ClientError>()
    // a tool call's failures include a 402; the catalog's do not
    expectTypeOf<Extract<ErrorOf<Client["tools"]["weather"]>, InsufficientCredits>>().not.toBeNever()
    expectTypeOf<Extract<ErrorOf<Client["dashboard"]["listKeys"]>, InsufficientCredits>>().toBeNever()
  })

  it("a tag that is not one of an operation's errors cannot be caught", () => {
    const call = Effect.flatMap(ToolGatewayClient, (client) => client.tools.weather({ payload: { q: "Berlin" } }))
    call.pipe(Effect.catchTag("InsufficientCredits", () => Effect.void))
    // @ts-expect-error: no error of a tool call has this tag
    call.pipe(Effect.catchTag("NoSuchTag", () => Effect.void))
    const keys = Effect.flatMap(ToolGatewayClient, (client) => client.dashboard.listKeys())
    // @ts-expect-error: a dashboard route never answers insufficient_credits
    keys.pipe(Effect.catchTag("InsufficientCredits", () => Effect.void))
  })

  it("an error class without a table entry does not compile", () => {
    // @ts-expect-error: the table has no entry for Unlisted
    const table: EnvelopeTable<GatewayError | Unlisted> = envelopeOf
    // checked by the compiler, never run (there is nothing to build a wire form from)
    const compileOnly = () =>
      // @ts-expect-error: a class outside the one list has no wire form
      wireOf(Unlisted)
    expectTypeOf(table).not.toBeAny()
    expectTypeOf(compileOnly).toBeFunction()
  })

  it("a dashboard route cannot answer insufficient_credits: its handler does not compile", () => {
    HttpApiBuilder.group(Api, "dashboard", (handlers) =>
      // @ts-expect-error: InsufficientCredits is not an error of the dashboard
      handlers.handle("getOrg", () => Effect.fail(new InsufficientCredits({ message: "no" }))))
    HttpApiBuilder.group(Api, "catalog", (handlers) =>
      // @ts-expect-error: the catalog answers no NotFound either
      handlers.handle("list", () => Effect.fail(new NotFound({ message: "no" }))))
  })


})

describe("callers", () => {
  it("a Caller can only be made by KeyStore (verifying a key): an object of the same fields is not one", () => {
    const forged = { keyId: "key_x", orgId: "org_x", allowedTools: null, confirmed: true, rateLimit: null }
    // @ts-expect-error: the mark of a caller is KeyStore's own
    const caller: Caller = forged
    expectTypeOf(caller).not.toBeAny()
  })
})

describe("the tool list is written once", () => {
  it("the HTTP API's tool operations are exactly the catalog's tools and run", () => {
    // src/http/Api.ts names each tool once per line (a union cannot be mapped onto distinct typed endpoints
    // without casts); this proves that list equals the catalog's. Handlers are complete by HttpApiBuilder.group.
    expectTypeOf<keyof Client["tools"]>().toEqualTypeOf<ToolName | "run">()
  })

  it("every tool has a provider binding and an example input and answer", () => {
    expectTypeOf<keyof typeof bindings>().toEqualTypeOf<ToolName>()
    expectTypeOf<keyof typeof inputExamples>().toEqualTypeOf<ToolName>()
    expectTypeOf<keyof typeof outputExamples>().toEqualTypeOf<ToolName>()
  })
})

describe("parsed JSON stays unknown", () => {
  it("an array found in a value of unknown type is an array of unknown values, not any[]", () => {
    const value: unknown = JSON.parse("[1]")
    if (isArray(value)) {
      expectTypeOf(value).toEqualTypeOf<ReadonlyArray<unknown>>()
      expectTypeOf(value[0]).toEqualTypeOf<unknown>()
    }
  })
})
