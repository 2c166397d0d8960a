/** Small building blocks shared by the pages. */
import type { ComponentChildren } from "preact"
import { useEffect, useRef, useState } from "preact/hooks"
import type { Outcome } from "./api.js"

export const formatCredits = (n: number) => n.toLocaleString("en-US")

export const formatTime = (iso: string | null) => (iso === null ? "—" : iso.replace("T", " ").slice(0, 16) + " UTC")

export const Card = (props: { readonly title?: string; readonly children: ComponentChildren; readonly wide?: boolean }) => (
  <section class={props.wide === true ? "card wide" : "card"}>
    {props.title !== undefined && <h2>{props.title}</h2>}
    {props.children}
  </section>
)

/** An error as the gateway said it; one that never reached the gateway offers to try again, with `onRetry`. */
export const Problem = (props: {
  readonly error: { readonly code: string; readonly message: string } | null
  readonly onRetry?: () => void
}) =>
  props.error === null ? null : (
    <p class="problem" role="alert">
      <code>{props.error.code}</code> {props.error.message}
      {props.error.code === "network" && props.onRetry !== undefined && (
        <> <button type="button" class="link" onClick={props.onRetry}>Try again</button></>
      )}
    </p>
  )

/**
 * A change whose answer never came (the gateway could not be reached, or the connection broke on its way back) may
 * have been made: the page reads its list again, and the message says where to look — true still after a Try again.
 */
export const lostAnswer = (
  error: { readonly code: string; readonly message: string },
  shows: string
): { readonly code: string; readonly message: string } =>
  error.code === "network" ? { code: error.code, message: `No answer came back from the gateway: ${shows}` } : error

export const Field = (props: { readonly label: string; readonly hint?: string; readonly children: ComponentChildren }) => (
  <label class="field">
    <span class="label">{props.label}</span>
    {props.children}
    {props.hint !== undefined && <span class="hint">{props.hint}</span>}
  </label>
)

/** Load something when the page opens (and again when `deps` change); `reload` loads it again. */
export const useLoad = <A,>(load: () => Promise<Outcome<A>>, deps: ReadonlyArray<unknown> = []) => {
  const [state, setState] = useState<Outcome<A> | null>(null)
  // while a load (again, or for other `deps`) is on its way, `state` is the one before: `loading` says so
  const [loading, setLoading] = useState(true)
  const [round, setRound] = useState(0)
  useEffect(() => {
    let live = true
    setLoading(true)
    void load().then((outcome) => {
      if (!live) return
      setState(outcome)
      setLoading(false)
    })
    return () => {
      live = false
    }
  }, [...deps, round])
  return { state, loading, reload: () => setRound((n) => n + 1) }
}

export const Loading = () => <p class="muted">Loading…</p>

/**
 * A question before something that cannot be undone: it takes the focus (on its safer answer), and Escape answers
 * no. Its yes is taken once (a double click sent the removal twice, and the second's 404 read as a failure).
 * Answered no, it gives the focus back to the button that asked it (`opener`, the text of a button beside it); answered
 * yes, to the item it was about (whose buttons change with what was done) — not to the top of the page, where a
 * keyboard's next Tab starts over.
 */
export const Confirm = (props: {
  readonly label: string
  readonly yes: string
  readonly opener: string
  readonly onYes: () => void
  readonly onNo: () => void
  readonly children: ComponentChildren
}) => {
  const no = useRef<HTMLButtonElement>(null)
  const box = useRef<HTMLDivElement>(null)
  const [answered, setAnswered] = useState(false)
  const yes = useRef(false)
  useEffect(() => {
    no.current?.focus()
    const around = box.current?.parentElement ?? null
    return () => {
      // once the page has drawn what replaces the question, and only if the focus went with it
      setTimeout(() => {
        const lost = document.activeElement === null || document.activeElement === document.body
        if (around === null || !around.isConnected || !lost) return
        const opener = yes.current ? undefined : Array.from(around.querySelectorAll("button")).find((b) => b.textContent === props.opener)
        if (opener !== undefined) return opener.focus()
        around.tabIndex = -1
        around.focus()
      }, 0)
    }
  }, [])
  return (
    <div
      ref={box}
      class="confirm"
      role="alertdialog"
      aria-label={props.label}
      onKeyDown={(e) => {
        if (e.key === "Escape") props.onNo()
      }}
    >
      <p>{props.children}</p>
      <div class="actions">
        <button
          type="button"
          class="danger"
          disabled={answered}
          onClick={() => {
            if (answered) return
            setAnswered(true)
            yes.current = true
            props.onYes()
          }}
        >
          {props.yes}
        </button>
        <button type="button" ref={no} onClick={props.onNo}>Cancel</button>
      </div>
    </div>
  )
}
