/**
 * The dashboard: a single-page app built into `dist/dashboard/` at install time (`npm run build`, from
 * web/), served by the gateway itself at `/dashboard` — `/` leads there. Every file is read when the dashboard is
 * first asked for (a process that only serves tool calls never holds them) and served from memory, compressed for
 * a client that accepts it (`compression.ts`); a path under `/dashboard` that names no file is the app's own route
 * and gets its page. `/dashboard/config.json` tells the
 * page how users sign in here. The page loads nothing from another host: its Content-Security-Policy allows only
 * this origin (and Firebase's hosts when Firebase sign-in is on, with the Auth emulator's origin when
 * `FIREBASE_AUTH_EMULATOR_HOST` names one).
 *
 * Also the CORS middleware, for dashboards served elsewhere (`CORS_ORIGINS`; none by default).
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { NotFound } from "../domain/errors.js"
import { IdentityConfig, ServerConfig } from "../config.js"
import { cachedSuccess } from "../services/cachedSuccess.js"
import { negotiatedEncoding, varyOn } from "./compression.js"

/** Where the build puts the app: dist/dashboard/ of the package, from src/http/ or dist/http/ alike. */
export const DASHBOARD_DIR = Path.resolve(fileURLToPath(new URL("../../dist/dashboard/", import.meta.url)))

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".json": "application/json",
  ".map": "application/json",
  ".txt": "text/plain; charset=utf-8"
}

/** Every file of the built app, by its path under /dashboard/ (none when the app is not built). */
const readFiles = (dir: string) =>
  Effect.promise(async () => {
    const files = new Map<string, Uint8Array>()
    const names = await Fs.readdir(dir, { recursive: true, encoding: "utf8" }).catch((): Array<string> => [])
    for (const file of names) {
      const full = Path.join(dir, file)
      if (!(await Fs.stat(full)).isFile()) continue
      files.set(file.split(Path.sep).join("/"), await Fs.readFile(full))
    }
    return files
  })

/** The answer for each file: its headers, and its compressed variants for the clients that accept them. */
type Assets = ReadonlyMap<string, Effect.Effect<HttpServerResponse.HttpServerResponse, never, HttpServerRequest.HttpServerRequest>>

const readAssets = (dir: string, headers: Record<string, string>): Effect.Effect<Assets> =>
  Effect.flatMap(readFiles(dir), (files) =>
    Effect.map(
      Effect.forEach(files, ([name, body]) => {
        // names under assets/ carry their content hash: they never change
        const cacheControl = name.startsWith("assets/") ? "public, max-age=31536000, immutable" : "no-cache"
        const response = HttpServerResponse.uint8Array(body, {
          contentType: TYPES[Path.extname(name)] ?? "application/octet-stream",
          headers: { ...headers, "cache-control": cacheControl }
        })
        return Effect.map(negotiatedEncoding(response), (served) => [name, served] as const)
      }),
      (assets) => new Map(assets)
    ))

const FIREBASE_HOSTS = [
  "https://identitytoolkit.googleapis.com",
  "https://securetoken.googleapis.com",
  "https://www.googleapis.com",
  "https://apis.google.com"
]

export const DashboardSiteLive = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function* () {
    const identity = yield* IdentityConfig
    const firebase = Option.map(identity.firebaseProjectId, (projectId) => ({
      project_id: projectId,
      api_key: Option.getOrNull(identity.firebaseWebApiKey),
      auth_domain: Option.getOrElse(identity.firebaseAuthDomain, () => `${projectId}.firebaseapp.com`),
      emulator_url: Option.getOrNull(Option.map(identity.firebaseAuthEmulatorHost, (host) => `http://${host}`))
    }))
    const signIn = {
      dev: identity.devIssuer,
      firebase: Option.getOrNull(Option.filter(firebase, (f) => f.api_key !== null))
    }
    const firebaseOrigins = Option.match(Option.fromNullable(signIn.firebase), {
      onNone: () => [],
      onSome: (f) => [...FIREBASE_HOSTS, `https://${f.auth_domain}`, ...(f.emulator_url === null ? [] : [f.emulator_url])]
    })
    const policy = [
      "default-src 'self'",
      `script-src 'self'${firebaseOrigins.length > 0 ? " https://apis.google.com" : ""}`,
      "style-src 'self'",
      "img-src 'self' data:",
      `connect-src 'self' ${firebaseOrigins.join(" ")}`.trim(),
      `frame-src ${firebaseOrigins.length > 0 ? firebaseOrigins.join(" ") : "'none'"}`,
      "base-uri 'none'",
      "form-action 'self'",
      "frame-ancestors 'none'"
    ].join("; ")
    const securityHeaders = {
      "content-security-policy": policy,
      "x-content-type-options": "nosniff",
      "referrer-policy": "no-referrer"
    }
    const assets = yield* cachedSuccess(readAssets(DASHBOARD_DIR, securityHeaders))

    const notBuilt = new NotFound({ message: "The dashboard is not built: run npm run build (npm ci does) and restart." })

    const serve = (name: string) => Effect.flatMap(assets, (assets) => serveFrom(assets, name))
    const serveFrom = (assets: Assets, name: string) => {
      const asset = assets.get(name)
      if (asset !== undefined) return asset
      // a path that names a file, and no such file
      if (/\.[a-z0-9]+$/i.test(name)) return Effect.fail(new NotFound({ message: `No file /dashboard/${name}.` }))
      return assets.get("index.html") ?? Effect.fail(notBuilt)
    }

    yield* router.get("/", Effect.succeed(HttpServerResponse.redirect("/dashboard", { status: 302 })))
    yield* router.get("/dashboard", serve("index.html"))
    yield* router.get(
      "/dashboard/config.json",
      Effect.succeed(HttpServerResponse.unsafeJson({ sign_in: signIn }, { headers: { "cache-control": "no-cache" } }))
    )
    yield* router.get(
      "/dashboard/*",
      HttpServerRequest.HttpServerRequest.pipe(
        // a path that is not valid percent-encoding names no file: 404, not a thrown URIError (a 500)
        Effect.flatMap((request) =>
          Effect.try({
            try: () => decodeURIComponent(request.url.split("?")[0] ?? ""),
            catch: () => new NotFound({ message: "No such file under /dashboard." })
          })),
        Effect.flatMap((path) => {
          const name = path.replace(/^\/dashboard\/?/, "")
          // no way out of the app's folder: only names of files it holds are served
          if (name.includes("..")) return Effect.fail(new NotFound({ message: "No such file under /dashboard." }))
          return serve(name === "" ? "index.html" : name)
        })
      )
    )
  }))

const EXPOSED = [
  "x-request-id",
  "x-credits-charged",
  "idempotent-replayed",
  "x-original-request-id",
  "www-authenticate",
  "ratelimit",
  "ratelimit-policy",
  "retry-after",
  "content-disposition",
  // a usage export past its rows: where the rest starts
  "x-next-cursor"
]

/**
 * CORS for the origins of `CORS_ORIGINS` (preflight answered); nothing at all when it names none. A request from
 * any other origin (or with none) is served as if CORS were off: no CORS headers, its preflight `405` (the
 * platform's CORS middleware alone would expose the headers and answer the preflight `204` for every origin).
 */
export const CorsLive = Layer.unwrapEffect(
  Effect.map(ServerConfig, (config) =>
    config.corsOrigins.length === 0
      ? Layer.empty
      : HttpApiBuilder.middleware((app) => {
        // the platform's CORS headers replace the answer's Vary with `Origin`: what the answer varied on already
        // (its encoding) is added back after them
        const keepingVary = Effect.tap(app, (response) => {
          const vary = response.headers["vary"]
          return vary === undefined ? Effect.void : HttpApp.appendPreResponseHandler((_, answer) => Effect.succeed(varyOn(vary)(answer)))
        })
        const withCors = HttpMiddleware.cors({
          allowedOrigins: config.corsOrigins,
          allowedHeaders: ["authorization", "content-type", "x-api-key", "idempotency-key"],
          exposedHeaders: EXPOSED,
          maxAge: 600
        })(keepingVary)
        // the answer depends on the Origin either way: a shared cache must not give one origin's to another
        const withoutCors = Effect.map(app, varyOn("Origin"))
        return Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
          const origin = request.headers["origin"]
          return origin !== undefined && config.corsOrigins.includes(origin) ? withCors : withoutCors
        })
      }))
)
