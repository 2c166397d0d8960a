import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/support/globalSetup.ts"],
    // after each file: no API key, ID token, credential or encryption key in a log line or a later response
    setupFiles: ["test/support/noSecrets.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Files share one PostgreSQL server (each gets its own database); two workers fit 2 cores.
    pool: "forks",
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
    reporters: ["default"]
  }
})
