#!/usr/bin/env node
/**
 * The `tool-gateway` command.
 */
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Effect, Layer, Logger, LogLevel } from "effect"
import { cli } from "./cli/main.js"

const level = (process.env["LOG_LEVEL"] ?? "info").toLowerCase()
const minimum = LogLevel.allLevels.find((l) => l.label.toLowerCase() === level) ?? LogLevel.Info

cli(process.argv).pipe(
  Effect.provide(Layer.mergeAll(NodeContext.layer, Logger.minimumLogLevel(minimum))),
  NodeRuntime.runMain({ disableErrorReporting: false })
)
