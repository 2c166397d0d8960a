// Run by test/embedded-lifecycle.test.ts, two at a time: claims each data directory given (each holds a dead owner's
// pg-owner file) as `serve` does, the i-th at the instant `at + i * slot` ms (wall clock, to the microsecond) — both
// processes at the same instant. Prints one JSON line, the directories it owns, and keeps them until stdin ends (so
// that each sees the other's files live).
import { Effect } from "effect"
import * as Readline from "node:readline"
import { ownership } from "../../dist/db/embedded.js"

const [at, slot, ...dirs] = process.argv.slice(2)
const now = () => performance.timeOrigin + performance.now()
const lines = Readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]()
await Effect.runPromise(Effect.scoped(Effect.gen(function* () {
  const mine = []
  for (const [i, dir] of dirs.entries()) {
    const instant = Number(at) + i * Number(slot)
    while (now() < instant) {
      // the two processes leave this loop within microseconds of each other
    }
    if ((yield* ownership(dir, "server")) === undefined) mine.push(dir)
  }
  console.log(JSON.stringify(mine))
  yield* Effect.promise(() => lines.next())
})))
