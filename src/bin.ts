#!/usr/bin/env node
/**
 * The `tool-gateway` command.
 */
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Layer, Logger, LogLevel } from "effect"
import Cluster from "node:cluster"
import { cli } from "./cli/main.js"
import { describeStartupError } from "./cli/errors.js"

const level = (process.env["LOG_LEVEL"] ?? "info").toLowerCase()
const aliases: Record<string, string> = { warning: "warn", none: "off", silent: "off" }
const minimum = LogLevel.allLevels.find((l) => l.label.toLowerCase() === (aliases[level] ?? level)) ?? LogLevel.Info
// One JSON object per line for log collectors; readable lines on a terminal.
const format = process.env["LOG_FORMAT"] ?? (process.stdout.isTTY ? "pretty" : "json")
const logger = format === "pretty" ? Logger.pretty : Logger.json

// A worker of `serve --workers` can be told to stop twice: by the terminal (Ctrl-C signals the whole process
// group) and by the primary, which stops its workers when it stops. The first signal starts the drain; a
// second must not kill the worker in the middle of it (Node's default once the runtime's own listener is gone).
if (Cluster.isWorker) {
  const ignore = () => {}
  process.on("SIGINT", ignore)
  process.on("SIGTERM", ignore)
}

cli(process.argv).pipe(
  // Configuration mistakes, an unreachable database: one clear line, no stack trace.
  Effect.catchAll((error) => {
    const message = describeStartupError(error)
    return Effect.zipRight(
      message === "" ? Effect.void : Console.error(message),
      Effect.sync(() => {
        process.exitCode = 2
        // a cluster worker stays alive on its channel to the primary: leave, so that the primary sees why
        if (Cluster.isWorker) process.exit(2)
      })
    )
  }),
  Effect.provide(Layer.mergeAll(NodeContext.layer, logger, Logger.minimumLogLevel(minimum))),
  NodeRuntime.runMain({ disableErrorReporting: false, disablePrettyLogger: true })
)
