/**
 * The worker thread of `HtmlConverter`'s pool (piscina loads this file): one HTML document in, its title and
 * markdown out.
 */
import * as Os from "node:os"
import type { MessagePort } from "node:worker_threads"
import { extractHtml } from "./extract.js"
import type { Extracted } from "./extracted.js"

export interface ConvertTask {
  readonly html: string
  /** Told when this thread starts on the page: the conversion's time budget counts from then. */
  readonly started: MessagePort
}

// This thread yields the CPU to everything else: on Linux, setpriority(0) concerns the calling thread only,
// so the event loop (and the database) keep their share while a hostile page is being converted.
try {
  Os.setPriority(Os.constants.priority.PRIORITY_LOW)
} catch {
  // not permitted here: the conversion still runs, at the usual priority
}

export default ({ html, started }: ConvertTask): Extracted => {
  started.postMessage(true)
  started.close()
  return extractHtml(html)
}
