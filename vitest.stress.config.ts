import { defineConfig } from "vitest/config"

/** `npm run test:stress`: the multi-process load and the soak (run by `.ci/run` after `npm test`). */
export default defineConfig({
  test: {
    include: ["test/stress/**/*.stress.ts"],
    globalSetup: ["test/support/globalSetup.ts"],
    setupFiles: ["test/support/noSecrets.ts"],
    testTimeout: 600_000,
    hookTimeout: 120_000,
    pool: "forks",
    poolOptions: { forks: { maxForks: 1, minForks: 1 } },
    reporters: ["default"]
  }
})
