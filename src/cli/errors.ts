/**
 * One line for each way the gateway can fail to start, and, for `--json`, the error envelope it is.
 */
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as ValidationError from "@effect/cli/ValidationError"
import * as ConfigError from "effect/ConfigError"
import * as Util from "node:util"
import { describeConfigError } from "../config.js"
import { type GatewayError, InternalError, InvalidRequest } from "../domain/errors.js"

const tagOf = (u: unknown): string | undefined =>
  typeof u === "object" && u !== null && "_tag" in u && typeof u._tag === "string" ? u._tag : undefined

const messageOf = (u: unknown): string =>
  typeof u === "object" && u !== null && "message" in u && typeof u.message === "string" ? u.message : String(u)

/** An error's message and its cause's, joined by a colon: either may be empty (the platform's `ServeError` has none). */
const withCause = (u: unknown): string => {
  const cause = typeof u === "object" && u !== null && "cause" in u ? u.cause : undefined
  return [messageOf(u), cause === undefined ? "" : messageOf(cause)].filter((part) => part !== "").join(": ")
}

/** What the process knows about where the database is, for a database error's hint. */
export interface StartupContext {
  /** `DATABASE_URL` is set: a database error is about it (else it is the embedded database's). */
  readonly databaseUrlSet: boolean
}

export const describeStartupError = (error: unknown, context: StartupContext): string => {
  if (ConfigError.isConfigError(error)) return `configuration error: ${describeConfigError(error)}`
  // The CLI has already said what was wrong with the arguments.
  if (ValidationError.isValidationError(error)) return ""
  switch (tagOf(error)) {
    case "SqlError":
      return `database error: ${withCause(error)}${context.databaseUrlSet ? " (check DATABASE_URL)" : ""}`
    case "MigrationError":
      return `migration failed: ${messageOf(error)}`
    case "EmbeddedPostgresError":
      return `embedded PostgreSQL: ${withCause(error)}`
    case "IdentityError":
      return `sign-in: ${messageOf(error)}`
    case "PricingError":
      return `prices: ${messageOf(error)}`
    case "EncryptionKeyError":
      return `encryption key: ${messageOf(error)}`
    case "WorkerStartError":
      return `workers: ${messageOf(error)}`
    case "ServeError":
      return `cannot listen: ${withCause(error)} (check HOST and PORT)`
    default:
      return `error: ${messageOf(error)}`
  }
}

/** What the CLI library said was wrong with the arguments, as one line of plain text. */
export const argumentMistake = (error: ValidationError.ValidationError): string => {
  const text = Util.stripVTControlCharacters(HelpDoc.toAnsiText(error.error))
  return text.trim().split(/\s*\n\s*/).filter((line) => line !== "").join(" ") || "The arguments are not valid."
}

/** Start-up failures that the operator's settings cause (the rest — the database, say — are the gateway's). */
const operatorMistakes: ReadonlySet<string> = new Set(["IdentityError", "PricingError", "EncryptionKeyError"])

/**
 * A start-up failure as the API's error: a mistake in the arguments or the configuration is `invalid_request`,
 * anything else (the database unreachable, a migration failing) `internal_error`; none for a help request.
 */
export const startupEnvelopeError = (error: unknown, line: string): GatewayError | undefined => {
  if (ValidationError.isValidationError(error)) {
    return ValidationError.isHelpRequested(error) ? undefined : new InvalidRequest({ message: argumentMistake(error) })
  }
  if (ConfigError.isConfigError(error) || operatorMistakes.has(tagOf(error) ?? "")) return new InvalidRequest({ message: line })
  return new InternalError({ message: line })
}
