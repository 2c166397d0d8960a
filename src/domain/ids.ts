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

/** What looks like one of our API keys (used to refuse keys sent in the wrong header). */
export const looksLikeApiKey = (s: string): boolean => s.startsWith(API_KEY_PREFIX)
