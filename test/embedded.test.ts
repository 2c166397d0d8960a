/**
 * The embedded PostgreSQL (the one `npm test` starts, as `npm start` does) is reached over its Unix-domain
 * socket, not TCP: a statement's round trip skips the TCP stack. TCP on 127.0.0.1 stays open for other tools.
 */
import { describe, expect, it } from "@effect/vitest"
import Pg from "pg"
import { inject } from "vitest"

const serverAddress = async (config: string | Pg.ClientConfig) => {
  const client = new Pg.Client(config)
  await client.connect()
  try {
    const result = await client.query<{ readonly addr: string | null }>("SELECT inet_server_addr()::text AS addr")
    return result.rows[0]?.addr
  } finally {
    await client.end()
  }
}

describe("the embedded database", () => {
  it.skipIf(process.env["TEST_DATABASE_URL"] !== undefined)("is reached over its Unix-domain socket, and over TCP on 127.0.0.1 too", async () => {
    const url = inject("adminDatabaseUrl")
    // over a Unix-domain socket the server has no address of its own
    expect(await serverAddress(url)).toBeNull()
    const parsed = new URL(url)
    expect(parsed.searchParams.get("host")).toMatch(/\/pg$/)
    const tcp = await serverAddress({
      host: "127.0.0.1",
      port: Number(parsed.port),
      user: decodeURIComponent(parsed.username),
      password: decodeURIComponent(parsed.password),
      database: parsed.pathname.slice(1)
    })
    expect(tcp).toBe("127.0.0.1/32")
  })
})
