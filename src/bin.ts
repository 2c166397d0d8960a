#!/usr/bin/env node
/**
 * The `tool-gateway` command.
 */
import * as ValidationError from "@effect/cli/ValidationError"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import Cluster from "node:cluster"
import { cli } from "./cli/main.js"
import { argumentMistake, describeStartupError } from "./cli/errors.js"
import { outputLayer, wantsJson } from "./cli/terminal.js"
import { envelope, InvalidRequest } from "./domain/errors.js"

const level = (process.env["LOG_LEVEL"] ?? "info").toLowerCase()
const aliases: Record<string, string> = { warning: "warn", none: "off", silent: "off" }
const minimum = LogLevel.allLevels.find((l) => l.label.toLowerCase() === (aliases[level] ?? level)) ?? LogLevel.Info
// One JSON object per line for log collectors; readable lines on a terminal; colour only there.
const output = outputLayer({
  logFormat: process.env["LOG_FORMAT"],
  noColor: process.env["NO_COLOR"],
  argv: process.argv,
  isTerminal: process.stdout.isTTY === true
})
const asJson = wantsJson(process.argv)

// The first SIGINT or SIGTERM starts the drain (the runtime's own listener, which then goes): calls in flight
// finish and are charged, and the embedded database stops last. A second must not kill the process in the
// middle of it (Node's default once that listener is gone) — an impatient Ctrl-C, or a worker of
// `serve --workers` told to stop by the terminal (Ctrl-C signals the whole process group) and by its primary.
let signals = 0
const again = () => {
  signals += 1
  if (signals === 2 && !Cluster.isWorker) {
    console.error("Stopping already: the calls in flight finish first (each within its deadline). SIGKILL stops at once and leaves them unanswered.")
  }
}
process.on("SIGINT", again)
process.on("SIGTERM", again)

cli(process.argv).pipe(
  // Configuration mistakes, an unreachable database: one clear line, no stack trace.
  Effect.catchAll((error) => {
    const message = describeStartupError(error)
    // with --json, a mistake in the arguments is the error envelope on stdout too
    const asEnvelope = asJson && ValidationError.isValidationError(error) && !ValidationError.isHelpRequested(error)
      ? Console.log(JSON.stringify(envelope(new InvalidRequest({ message: argumentMistake(error) })), null, 2))
      : Effect.void
    return Effect.zipRight(
      Effect.zipRight(asEnvelope, message === "" ? Effect.void : Console.error(message)),
      Effect.sync(() => {
        process.exitCode = 2
        // a cluster worker stays alive on its channel to the primary: leave, so that the primary sees why
        if (Cluster.isWorker) process.exit(2)
      })
    )
  }),
  Effect.provide(Layer.mergeAll(NodeContext.layer, output, Logger.minimumLogLevel(minimum))),
  NodeRuntime.runMain({ disableErrorReporting: false, disablePrettyLogger: true })
)
