/**
 * Secrets a test file has handed to the gateway (API keys, ID tokens, connection credentials, the
 * encryption key) and every response it received, so that a check after the file's tests
 * (`test/support/noSecrets.ts`) can assert that no secret ever appears in a log line, and none in a
 * response after the one that created it (a new key is shown once, in the answer that creates it).
 */
export interface Recorded {
  readonly seq: number
  readonly what: string
  readonly text: string
}

/** The credentials encryption key of test gateways (32 bytes, base64). */
export const TEST_ENCRYPTION_KEY = Buffer.alloc(32, 7).toString("base64")

/**
 * Every log line of the test run's gateways, JSON-formatted, kept in memory (tests assert on them). Here, not in
 * gateway.ts, so that the check after each file loads only this module: a file that starts no gateway does not
 * load the gateway's whole source (about 3 s a file).
 */
export const capturedLogs: Array<string> = []

let seq = 0
export const secrets = new Map<string, number>()
export const responses: Array<Recorded> = []

/** A secret known from now on: no later response and no log line may contain it. */
export const registerSecret = (value: string) => {
  if (value.length >= 8 && !secrets.has(value)) secrets.set(value, seq)
}

/** The secret fields of a connection's credentials (keys, tokens, passwords; not handles or URLs). */
export const registerSecretsIn = (value: unknown) => {
  if (typeof value !== "object" || value === null) return
  for (const [name, v] of Object.entries(value)) {
    if (typeof v === "string" && /key|token|password|secret/i.test(name)) registerSecret(v)
  }
}

/** A response as the test saw it; returns its sequence number. */
export const recordResponse = (what: string, text: string) => {
  seq += 1
  responses.push({ seq, what, text })
  return seq
}
