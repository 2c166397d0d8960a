import { defineConfig } from "vitest/config"

/**
 * Tests that measure time on the machine (the gateway's responsiveness under hostile pages, during a usage export,
 * under large upstream answers) run after the rest, one file at a time: what they measure is the gateway, not the
 * other test files running beside them.
 */
const timed = ["test/pages.test.ts", "test/usage-export.test.ts", "test/large-answers.test.ts"]

export default defineConfig({
  test: {
    globalSetup: ["test/support/globalSetup.ts"],
    // after each file: no API key, ID token, credential or encryption key in a log line or a later response
    setupFiles: ["test/support/noSecrets.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Files share one PostgreSQL server (each gets its own database); two workers fit 2 cores.
    pool: "forks",
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
    reporters: ["default"],
    projects: [
      { extends: true, test: { name: "suite", include: ["test/**/*.test.ts"], exclude: timed, sequence: { groupOrder: 0 } } },
      // one file at a time: each measures the gateway alone, not beside another timed file's load
      { extends: true, test: { name: "timed", include: timed, sequence: { groupOrder: 1 }, poolOptions: { forks: { singleFork: true } } } }
    ]
  }
})
