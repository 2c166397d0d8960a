/**
 * Which methods each path of the API answers, for `405 method_not_allowed` with an `Allow` header.
 * Built once from the API definition; `/v1/:tool` (the unknown-tool catch-all) is not a route of its own.
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Context from "effect/Context"
import { Api, SecretPayload } from "./Api.js"

interface Route {
  readonly pattern: RegExp
  readonly method: string
}

const toPattern = (path: string) =>
  new RegExp(`^${path.split("/").map((s) => (s.startsWith(":") ? "[^/]+" : s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))).join("/")}/?$`)

const build = (): ReadonlyArray<Route> => {
  const routes: Array<Route> = []
  HttpApi.reflect(Api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint, mergedAnnotations }) => {
      if (Context.get(mergedAnnotations, OpenApi.Exclude)) return
      routes.push({ pattern: toPattern(endpoint.path), method: endpoint.method })
    }
  })
  return routes
}

const routes = build()

/** `METHOD path` of the routes whose payload carries secrets (`SecretPayload`), as the router names them. */
const secretPayloads = ((): ReadonlySet<string> => {
  const found = new Set<string>()
  HttpApi.reflect(Api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => {
      if (Context.getOrElse(endpoint.annotations, SecretPayload, () => false)) found.add(`${endpoint.method} ${endpoint.path}`)
    }
  })
  return found
})()

export const routeTable = {
  methodsFor: (path: string): ReadonlyArray<string> =>
    Array.from(new Set(routes.filter((r) => r.pattern.test(path)).map((r) => r.method))),
  /** Whether the route the router matched (its method and declared path) takes secrets in its payload. */
  hasSecretPayload: (method: string, path: string): boolean => secretPayloads.has(`${method} ${path}`)
}
