/**
 * How the probes preloaded into the gateway (timeline.ts, survivors.ts) hand what they recorded to the runner: a
 * JSON file written whole (written beside, then renamed), so that the runner, which waits for the file to appear,
 * never reads half of one.
 */
import * as Fs from "node:fs"

export const writeProbeFile = (file: string, value: unknown) => {
  Fs.writeFileSync(`${file}.tmp`, JSON.stringify(value))
  Fs.renameSync(`${file}.tmp`, file)
}
