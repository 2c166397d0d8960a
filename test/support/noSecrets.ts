/**
 * Runs after every test file (vitest `setupFiles`): no registered secret in any captured log line of the
 * file's in-process gateways, and none in a response received after the secret was known.
 */
import { afterAll, expect } from "vitest"
import { capturedLogs, registerSecret, responses, secrets, TEST_ENCRYPTION_KEY } from "./secrets.js"

registerSecret(TEST_ENCRYPTION_KEY)

afterAll(() => {
  const leaks: Array<string> = []
  for (const [secret, since] of secrets) {
    for (const line of capturedLogs) if (line.includes(secret)) leaks.push(`log line: ${line.slice(0, 300)}`)
    for (const r of responses) if (r.seq > since && r.text.includes(secret)) leaks.push(`response to ${r.what}: ${r.text.slice(0, 300)}`)
  }
  expect(leaks).toEqual([])
})
