/**
 * What the command writes to a person and what it writes to a program: colour only on a terminal and
 * without `NO_COLOR` (https://no-color.org), log lines as JSON unless a person reads them, and `--json`
 * output that a program can parse whatever went wrong.
 */
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Util from "node:util"

/** Whether the command was asked for machine-readable output (every command takes `--json`). */
export const wantsJson = (argv: ReadonlyArray<string>): boolean => argv.includes("--json")

/**
 * Whether a failure to start is printed as the error envelope on stdout: with `--json`, for every command but
 * `serve` (whose `--json` is the format of its log lines, and whose output is logs, not an answer).
 */
export const envelopeOnFailure = (argv: ReadonlyArray<string>): boolean =>
  wantsJson(argv) && commandOf(argv) !== "serve"

/** The CLI library's own options that may come before the command and take a value as the next word. */
const VALUED_BUILT_INS: ReadonlySet<string> = new Set(["--log-level", "--completions"])

/**
 * The command named on the command line: its first word that is neither an option nor the value of one of the
 * options the CLI library takes before it (`tool-gateway --log-level debug serve` is `serve`).
 */
export const commandOf = (argv: ReadonlyArray<string>): string | undefined => {
  const words = argv.slice(2)
  for (let i = 0; i < words.length; i++) {
    const word = words[i] ?? ""
    if (VALUED_BUILT_INS.has(word)) i++
    else if (!word.startsWith("-")) return word
  }
  return undefined
}

/** Colour only for a terminal, and not when `NO_COLOR` is set to anything but the empty string. */
const useColour = (noColor: string | undefined, isTerminal: boolean): boolean => isTerminal && (noColor ?? "") === ""

const plain = (u: unknown): unknown => (typeof u === "string" ? Util.stripVTControlCharacters(u) : u)

/**
 * A console that writes no terminal escapes: the CLI library colours its help and its error messages
 * whatever the output is.
 */
const plainConsole = (base: Console.Console): Console.Console => ({
  ...base,
  log: (...args) => base.log(...args.map(plain)),
  error: (...args) => base.error(...args.map(plain)),
  info: (...args) => base.info(...args.map(plain)),
  warn: (...args) => base.warn(...args.map(plain)),
  unsafe: {
    ...base.unsafe,
    log: (...args: ReadonlyArray<unknown>) => base.unsafe.log(...args.map(plain)),
    error: (...args: ReadonlyArray<unknown>) => base.unsafe.error(...args.map(plain)),
    info: (...args: ReadonlyArray<unknown>) => base.unsafe.info(...args.map(plain)),
    warn: (...args: ReadonlyArray<unknown>) => base.unsafe.warn(...args.map(plain))
  }
})

/**
 * JSON log lines to stdout, written together once per turn of the event loop: Node writes to a pipe or a
 * file synchronously, one system call per write, and a served request logs a line. Lines still waiting
 * when the process exits are written by its `exit` handler; only a SIGKILL can lose the last turn's lines.
 */
const stdoutLines = (() => {
  let pending: Array<string> = []
  let scheduled = false
  const flush = () => {
    scheduled = false
    if (pending.length === 0) return
    const chunk = `${pending.join("\n")}\n`
    pending = []
    process.stdout.write(chunk)
  }
  let hooked = false
  return (line: string) => {
    if (!hooked) {
      hooked = true
      process.once("exit", flush)
    }
    pending.push(line)
    if (!scheduled) {
      scheduled = true
      setImmediate(flush)
    }
  }
})()

/** `Logger.json`, written through `stdoutLines` (JSON escapes control characters: no terminal escapes). */
const jsonLines = Logger.replace(
  Logger.defaultLogger,
  Logger.make((options) => stdoutLines(Logger.jsonLogger.log(options)))
)

/**
 * The logger (one JSON object per line for log collectors, readable lines for a person) and the console,
 * for this process. `LOG_FORMAT` chooses the format; `--json` asks for JSON; otherwise a terminal gets
 * readable lines.
 */
export const outputLayer = (options: {
  /** `LOG_FORMAT` */
  readonly logFormat: "json" | "pretty" | undefined
  /** `NO_COLOR` */
  readonly noColor: string | undefined
  readonly argv: ReadonlyArray<string>
  readonly isTerminal: boolean
}): Layer.Layer<never> => {
  const colour = useColour(options.noColor, options.isTerminal)
  const format = wantsJson(options.argv) ? "json" : options.logFormat ?? (options.isTerminal ? "pretty" : "json")
  // `serve`'s output is its log lines; another command's is its answer (a JSON document with `--json`), so its log
  // lines go to stderr, where they cannot break that document
  const serving = commandOf(options.argv) === "serve"
  const logger = format === "pretty"
    ? Logger.replace(Logger.defaultLogger, Logger.prettyLogger({ colors: colour, stderr: !serving }))
    : serving
    ? jsonLines
    : Logger.replace(Logger.defaultLogger, Logger.withConsoleError(Logger.jsonLogger))
  return colour ? logger : Layer.merge(logger, Layer.unwrapEffect(Effect.map(Effect.console, (base) => Console.setConsole(plainConsole(base)))))
}
