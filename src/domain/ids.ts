/**
 * Identifiers. Org, key and request ids are random base62 strings behind a short prefix; API keys are
 * `tg_` followed by 32 base62 characters.
 */
import * as Schema from "effect/Schema"

export const OrgId = Schema.String.pipe(Schema.brand("OrgId"))
export type OrgId = typeof OrgId.Type
export const KeyId = Schema.String.pipe(Schema.brand("KeyId"))
export type KeyId = typeof KeyId.Type

export const API_KEY_PREFIX = "tg_"
export const API_KEY_BODY_LENGTH = 32
export const API_KEY_PATTERN = /^tg_[0-9A-Za-z]{32}$/

/**
 * `text` with every API key in it shortened to its prefix and first four characters (`tg_AbCd…`), as the dashboard
 * shows a key: for what is logged of a request (its path) whoever sent it, a key pasted where an id goes included.
 */
export const withoutApiKeys = (text: string): string =>
  text.includes(API_KEY_PREFIX) ? text.replace(/tg_([0-9A-Za-z]{4})[0-9A-Za-z]{28,}/g, "tg_$1…") : text

/** What looks like one of our API keys (used to refuse keys sent in the wrong header). */
export const looksLikeApiKey = (s: string): boolean => s.startsWith(API_KEY_PREFIX)
