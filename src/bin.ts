#!/usr/bin/env node
/**
 * The `tool-gateway` command.
 */
import * as ValidationError from "@effect/cli/ValidationError"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { defaultTeardown, type Teardown } from "@effect/platform/Runtime"
import * as Cause from "effect/Cause"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import Cluster from "node:cluster"
import { cli } from "./cli/main.js"
import { describeStartupError, startupEnvelopeError } from "./cli/errors.js"
import { commandOf, envelopeOnFailure, outputLayer, wantsJson } from "./cli/terminal.js"
import { databaseUrlIsSet, logging } from "./config.js"
import { envelope } from "./domain/errors.js"

// LOG_LEVEL and LOG_FORMAT, checked like every other variable (a mistake stops the command below)
const logs = Effect.runSync(Effect.either(logging))
const logFormat = Either.match(logs, { onLeft: () => undefined, onRight: (l) => Option.getOrUndefined(l.format) })
// One JSON object per line for log collectors; readable lines on a terminal; colour only there.
const output = outputLayer({
  logFormat,
  noColor: process.env["NO_COLOR"],
  argv: process.argv,
  isTerminal: process.stdout.isTTY === true
})
const databaseUrlSet = Effect.runSync(Effect.orElseSucceed(databaseUrlIsSet, () => false))

/**
 * A command that cannot start — its arguments, the configuration, the database: one line on stderr, no stack
 * trace, and status 2. With `--json` the error envelope is printed on stdout too: for a mistake in the arguments
 * always, for the rest by every command but `serve` (whose output is log lines).
 */
const refuseToStart = (error: unknown) => {
  const line = describeStartupError(error, { databaseUrlSet })
  const printed = ValidationError.isValidationError(error) ? wantsJson(process.argv) : envelopeOnFailure(process.argv)
  const asError = printed ? startupEnvelopeError(error, line) : undefined
  return Effect.all([
    asError === undefined ? Effect.void : Console.log(JSON.stringify(envelope(asError), null, 2)),
    line === "" ? Effect.void : Console.error(line),
    Effect.sync(() => {
      process.exitCode = 2
      // a cluster worker stays alive on its channel to the primary: leave, so that the primary sees why
      if (Cluster.isWorker) process.exit(2)
    })
  ], { discard: true })
}

// The first SIGINT or SIGTERM starts the drain (the runtime's own listener, which then goes): calls in flight
// finish and are charged, and the embedded database stops last. A second must not kill the process in the
// middle of it (Node's default once that listener is gone) — an impatient Ctrl-C, or a worker of
// `serve --workers` told to stop by the terminal (Ctrl-C signals the whole process group) and by its primary.
let signals = 0
/** The signal that stopped the process, for its exit status (128 + its number, as a shell reports it). */
let stoppedBy: NodeJS.Signals | undefined
const again = (signal: NodeJS.Signals) => {
  stoppedBy ??= signal
  signals += 1
  if (signals === 2 && !Cluster.isWorker) {
    console.error("Stopping already: the calls in flight finish first (each within its deadline). SIGKILL stops at once and leaves them unanswered.")
  }
}
process.on("SIGINT", again)
process.on("SIGTERM", again)

/**
 * A command stopped by SIGINT or SIGTERM before it finished exits 128 + the signal's number (130, 143: as a shell
 * reports an interrupted command) and says so: what it printed, if anything, is not an answer a script may take for
 * one. `serve` told to stop has drained its calls first: 0, as any stop it was asked for.
 */
const teardown: Teardown = (exit, onExit) => {
  if (Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause) && commandOf(process.argv) !== "serve") {
    process.stderr.write("interrupted: the command did not finish\n")
    return onExit(stoppedBy === "SIGTERM" ? 143 : 130)
  }
  defaultTeardown(exit, onExit)
}

Either.match(logs, {
  onLeft: refuseToStart,
  onRight: ({ level }) =>
    cli(process.argv).pipe(
      Effect.catchAll(refuseToStart),
      // a statement that fails part-way through a command (the database gone, or one that takes no writes), or a
      // bug: the same one line and status 2, never a stack trace — the whole cause at LOG_LEVEL=debug
      Effect.catchAllDefect((defect) =>
        Effect.zipRight(Effect.logDebug("the command failed", Cause.die(defect)), refuseToStart(defect))),
      Effect.provide(Logger.minimumLogLevel(level))
    )
}).pipe(
  Effect.provide(Layer.merge(NodeContext.layer, output)),
  NodeRuntime.runMain({ disableErrorReporting: false, disablePrettyLogger: true, teardown })
)
