/** Beta tools: on or off for the org. */
import { Effect } from "effect"
import { useEffect, useRef, useState } from "preact/hooks"
import type { Api } from "../api.js"
import { Card, Loading, Problem, useLoad } from "../ui.js"

/**
 * A switch shows what the user asked while the gateway has not answered the tool's latest change, then the org as
 * the gateway answers it — the change's own answer is the org: no second read, so the switch never shows the org as
 * it was read before the change (it flicked back off, then on, while a reload was on its way). Answers are taken in
 * the order their changes were sent: one older than an answer shown is not shown (two changes in flight whose
 * answers cross), and a tool's switch keeps the user's last choice until that change is answered.
 */
export const Betas = (props: { readonly api: Api }) => {
  const { state, reload } = useLoad(() =>
    props.api.run((c) => Effect.all({ org: c.dashboard.getOrg(), catalog: c.catalog.list() }, { concurrency: 2 })))
  const [error, setError] = useState<{ readonly code: string; readonly message: string } | null>(null)
  // the org as the newest change answered it (newer than the page's load), and the changes not yet answered
  const [answered, setAnswered] = useState<{ readonly betas: ReadonlyArray<string> } | null>(null)
  const [pending, setPending] = useState<ReadonlyMap<string, boolean>>(new Map())
  // changes are numbered as they are sent: each tool's latest, and the one whose answer is shown
  const sent = useRef(0)
  const latest = useRef(new Map<string, number>())
  const shown = useRef(0)
  // a load of the page (again: after a refused change) is newer than every answer before it
  useEffect(() => {
    if (latest.current.size > 0) return
    shown.current = sent.current
    setAnswered(null)
  }, [state])
  if (state === null) return <Loading />
  if (!state.ok) return <Problem error={state} onRetry={reload} />
  const betas = state.value.catalog.data.filter((t) => t.beta)
  const enabled = new Set((answered ?? state.value.org).betas)
  const set = (tool: string, on: boolean) => {
    const change = ++sent.current
    latest.current.set(tool, change)
    setPending((current) => new Map(current).set(tool, on))
    void props.api.run((c) => c.dashboard.setBeta({ path: { tool }, payload: { enabled: on } })).then((outcome) => {
      if (latest.current.get(tool) === change) {
        latest.current.delete(tool)
        setPending((current) => {
          const next = new Map(current)
          next.delete(tool)
          return next
        })
      }
      if (outcome.ok) {
        setError(null)
        if (change > shown.current) {
          shown.current = change
          setAnswered(outcome.value)
        }
      } else {
        // refused: the switch shows the org as the gateway has it, read again
        setError(outcome)
        reload()
      }
    })
  }
  return (
    <Card title="Beta tools" wide>
      <p class="muted">A beta tool answers <code>beta_unavailable</code> until it is turned on for the org.</p>
      <Problem error={error} />
      {betas.length === 0 ? <p class="muted">This gateway has no beta tools.</p> : (
        <ul class="betas">
          {betas.map((t) => (
            <li key={t.name}>
              <label class="switch">
                <input
                  type="checkbox"
                  role="switch"
                  name={t.name}
                  checked={pending.get(t.name) ?? enabled.has(t.name)}
                  aria-busy={pending.has(t.name)}
                  onChange={(e) => set(t.name, e.currentTarget.checked)}
                />
                <span><code>{t.name}</code> {t.summary}</span>
              </label>
            </li>
          ))}
        </ul>
      )}
    </Card>
  )
}
