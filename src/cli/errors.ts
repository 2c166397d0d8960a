/**
 * One line for each way the gateway can fail to start.
 */
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as ValidationError from "@effect/cli/ValidationError"
import * as ConfigError from "effect/ConfigError"
import * as Util from "node:util"

const tagOf = (u: unknown): string | undefined =>
  typeof u === "object" && u !== null && "_tag" in u && typeof u._tag === "string" ? u._tag : undefined

const messageOf = (u: unknown): string =>
  typeof u === "object" && u !== null && "message" in u && typeof u.message === "string" ? u.message : String(u)

const causeMessage = (u: unknown): string => {
  const cause = typeof u === "object" && u !== null && "cause" in u ? u.cause : undefined
  return cause === undefined ? "" : `: ${messageOf(cause)}`
}

export const describeStartupError = (error: unknown): string => {
  if (ConfigError.isConfigError(error)) return `configuration error: ${String(error)}`
  // The CLI has already said what was wrong with the arguments.
  if (ValidationError.isValidationError(error)) return ""
  switch (tagOf(error)) {
    case "SqlError":
      return `database error: ${messageOf(error)}${causeMessage(error)} (check DATABASE_URL)`
    case "MigrationError":
      return `migration failed: ${messageOf(error)}`
    case "EmbeddedPostgresError":
      return `embedded PostgreSQL: ${messageOf(error)}${causeMessage(error)}`
    case "IdentityError":
      return `sign-in: ${messageOf(error)}`
    case "PricingError":
      return `prices: ${messageOf(error)}`
    case "EncryptionKeyError":
      return `encryption key: ${messageOf(error)}`
    case "WorkerStartError":
      return `workers: ${messageOf(error)}`
    case "ServeError":
      return `cannot listen: ${messageOf(error)}${causeMessage(error)} (check HOST and PORT)`
    default:
      return `error: ${messageOf(error)}`
  }
}

/** What the CLI library said was wrong with the arguments, as one line of plain text. */
export const argumentMistake = (error: ValidationError.ValidationError): string => {
  const text = Util.stripVTControlCharacters(HelpDoc.toAnsiText(error.error))
  return text.trim().split(/\s*\n\s*/).filter((line) => line !== "").join(" ") || "The arguments are not valid."
}
