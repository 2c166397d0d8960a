/**
 * delta's (Bluesky's) sessions, kept between calls: `createSession` is limited per account (30 in 5 minutes,
 * 300 a day), far below what an agent posts, so a session is reused until shortly before its access token
 * expires. A service the layer owns (closing it forgets them), bounded in size; the oldest goes first.
 */
import { Context, Effect, Layer } from "effect"

/** An open session: its access token, the account's DID, and when to stop using it (a Clock reading). */
export interface DeltaSession {
  readonly accessJwt: string
  readonly did: string
  readonly until: number
}

export class DeltaSessions extends Context.Tag("DeltaSessions")<DeltaSessions, {
  readonly get: (key: string) => Effect.Effect<DeltaSession | undefined>
  readonly set: (key: string, session: DeltaSession) => Effect.Effect<void>
  readonly drop: (key: string) => Effect.Effect<void>
}>() {}

const MAX_SESSIONS = 10_000

export const make = Effect.sync(() => {
  const sessions = new Map<string, DeltaSession>()
  return DeltaSessions.of({
    get: (key) => Effect.sync(() => sessions.get(key)),
    set: (key, session) =>
      Effect.sync(() => {
        if (!sessions.has(key) && sessions.size >= MAX_SESSIONS) {
          const oldest = sessions.keys().next()
          if (oldest.done !== true) sessions.delete(oldest.value)
        }
        sessions.set(key, session)
      }),
    drop: (key) => Effect.sync(() => void sessions.delete(key))
  })
})

export const DeltaSessionsLive = Layer.effect(DeltaSessions, make)
