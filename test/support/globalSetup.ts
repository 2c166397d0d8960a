/**
 * One PostgreSQL server for the whole run: `TEST_DATABASE_URL` when set (a server the run may create
 * databases on), else an embedded one in a temporary directory. Each test file creates its own database.
 */
import { Effect, Exit, Redacted, Scope } from "effect"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"
import type { TestProject } from "vitest/node"
import { startEmbedded } from "../../src/db/embedded.js"

declare module "vitest" {
  export interface ProvidedContext {
    adminDatabaseUrl: string
  }
}

export default async function setup(project: TestProject) {
  const fromEnv = process.env["TEST_DATABASE_URL"]
  if (fromEnv !== undefined && fromEnv !== "") {
    project.provide("adminDatabaseUrl", fromEnv)
    return
  }
  const dir = await Fs.mkdtemp(Path.join(Os.tmpdir(), "tool-gateway-test-"))
  await Fs.chmod(dir, 0o755)
  const scope = Effect.runSync(Scope.make())
  const embedded = await Effect.runPromise(
    startEmbedded(dir, { database: "postgres", ownProcessGroup: false }).pipe(Scope.extend(scope))
  )
  project.provide("adminDatabaseUrl", Redacted.value(embedded.url))
  return async () => {
    await Effect.runPromise(Scope.close(scope, Exit.void))
    await Fs.rm(dir, { recursive: true, force: true })
  }
}
