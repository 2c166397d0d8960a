/** Small helpers shared by the benchmark's processes. */
import type * as Http from "node:http"

export const argValue = (name: string): string | undefined => {
  const i = process.argv.indexOf(name)
  return i >= 0 ? process.argv[i + 1] : undefined
}

/** Tell the parent process which port the server listens on. */
export const ready = (server: Http.Server) => {
  const address = server.address()
  const port = typeof address === "object" && address !== null ? address.port : 0
  process.stdout.write(`${JSON.stringify({ port })}\n`)
}
