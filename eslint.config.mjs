/**
 * ESLint: the house rules that a lint rule can check, for src/, test/ and bench/.
 *
 * The rule set, and why:
 * - `@eslint/js` recommended and `typescript-eslint` recommended, WITHOUT type information. The type-aware
 *   sets build a whole TypeScript program for every lint (about the cost of `npm run typecheck` again, over
 *   a minute of CPU on two cores), and `tsc` with `strict`, `noUnusedLocals` and `exactOptionalPropertyTypes`
 *   already checks what they add that matters here. So every rule below reads syntax only and the whole
 *   lint stays a few seconds.
 * - No `any` (`@typescript-eslint/no-explicit-any`) and no type assertions anywhere
 *   (`@typescript-eslint/consistent-type-assertions` with `assertionStyle: "never"`, which bans `x as T` and
 *   `<T>x` but allows `as const`), nor non-null assertions (`x!`) in src/: decode with Schema instead.
 * - No wall clock in src/: `Date.now()`, `new Date()` and `Date()` are refused; read time from Effect's
 *   `Clock`/`DateTime` so that `TestClock` drives it. Tests and benchmarks measure real time and may use them.
 * - The stack is fixed (effect, @effect/platform, @effect/sql): src/ may not import another HTTP framework,
 *   ORM or validation library, nor anything's `internal` modules, nor test/ (which is not in the package).
 * - `@effect/eslint-plugin` (0.3.x exports exactly two rules): `no-import-from-barrel-package` is on for
 *   `@effect/opentelemetry`, whose index loads every SDK flavour (web and node) and their optional peers,
 *   and in src/ also for `effect`, `@effect/platform`, `@effect/platform-node`, `@effect/sql`, `@effect/cli`
 *   and `@effect/experimental`: an index loads every module of its package, and `@effect/platform`'s holds
 *   the `/docs` page's Scalar and Swagger UI bundles (about 20 MB of a process's idle memory); src/ imports
 *   each module by its own path (`import * as Effect from "effect/Effect"`). Tests and benchmarks may use
 *   the barrels (the documented style).
 *   `@effect/dprint` is off: it runs a formatter inside the lint (slow) and the code has no formatter
 *   configuration to agree with.
 * - Unused variables are errors; a name starting with `_` is deliberately unused, and destructuring a
 *   property away to keep the rest (`const { a: _, ...rest } = o`) is allowed.
 */
import js from "@eslint/js"
import effect from "@effect/eslint-plugin"
import tseslint from "typescript-eslint"

/** The Node globals the plain .mjs scripts use (TypeScript files are checked by tsc, not `no-undef`). */
const nodeGlobals = Object.fromEntries(
  [
    "AbortController", "AbortSignal", "Buffer", "URL", "URLSearchParams", "clearInterval", "clearTimeout",
    "console", "fetch", "global", "globalThis", "performance", "process", "queueMicrotask", "setImmediate",
    "setInterval", "setTimeout", "structuredClone"
  ].map((name) => [name, "readonly"])
)

const wallClock = [
  {
    selector: "CallExpression[callee.type='MemberExpression'][callee.object.name='Date'][callee.property.name='now']",
    message: "No wall clock in the gateway: use Clock.currentTimeMillis (or DateTime.now) so TestClock drives it."
  },
  {
    selector: "NewExpression[callee.name='Date']",
    message: "No `new Date()` in the gateway: use Clock/DateTime (src/services/time.ts converts a Clock reading)."
  },
  {
    selector: "CallExpression[callee.name='Date']",
    message: "No `Date()` in the gateway: use Clock/DateTime."
  }
]

export default tseslint.config(
  {
    ignores: ["dist/", "bench/.build/", "bench/.data/", "bench/results/", ".data/", "coverage/", "node_modules/"]
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    plugins: { "@effect": effect },
    linterOptions: { reportUnusedDisableDirectives: "error" },
    rules: {
      "@typescript-eslint/no-explicit-any": "error",
      "@typescript-eslint/consistent-type-assertions": ["error", { assertionStyle: "never" }],
      "@typescript-eslint/no-unused-vars": ["error", {
        args: "after-used",
        argsIgnorePattern: "^_",
        varsIgnorePattern: "^_",
        caughtErrorsIgnorePattern: "^_",
        destructuredArrayIgnorePattern: "^_",
        ignoreRestSiblings: true
      }],
      "@effect/no-import-from-barrel-package": ["error", { packageNames: ["@effect/opentelemetry"] }],
      "@effect/dprint": "off"
    }
  },
  {
    files: ["src/**/*.ts"],
    rules: {
      "@typescript-eslint/no-non-null-assertion": "error",
      "@effect/no-import-from-barrel-package": ["error", {
        packageNames: [
          "effect", "@effect/platform", "@effect/platform-node", "@effect/sql", "@effect/cli", "@effect/experimental",
          "@effect/opentelemetry"
        ]
      }],
      "no-restricted-syntax": ["error", ...wallClock],
      "no-restricted-imports": ["error", {
        paths: [
          "express", "fastify", "koa", "hono", "@hapi/hapi", "axios", "node-fetch", "got",
          "zod", "yup", "joi", "io-ts", "class-validator", "ajv",
          "@prisma/client", "typeorm", "sequelize", "knex", "kysely", "drizzle-orm", "mikro-orm"
        ].map((name) => ({ name, message: "The stack is effect, @effect/platform and @effect/sql (DESIGN.md §2)." })),
        patterns: [{
          group: ["effect/internal/*", "@effect/*/internal/*"],
          message: "Internal modules are no API: import the public module."
        }, {
          group: ["**/test/*", "**/test/**"],
          message: "test/ is not in the package: what src/ needs from it (a fake upstream) moves to src/testing/."
        }]
      }]
    }
  },
  {
    files: ["**/*.{js,mjs,cjs}"],
    languageOptions: { globals: nodeGlobals }
  }
)
