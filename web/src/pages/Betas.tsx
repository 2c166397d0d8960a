/** Beta tools: on or off for the org. */
import { Effect } from "effect"
import { useState } from "preact/hooks"
import type { Api } from "../api.js"
import { Card, Loading, Problem, useLoad } from "../ui.js"

export const Betas = (props: { readonly api: Api }) => {
  const { state, reload } = useLoad(() =>
    props.api.run((c) => Effect.all({ org: c.dashboard.getOrg(), catalog: c.catalog.list() }, { concurrency: 2 })))
  const [error, setError] = useState<{ readonly code: string; readonly message: string } | null>(null)
  if (state === null) return <Loading />
  if (!state.ok) return <Problem error={state} onRetry={reload} />
  const betas = state.value.catalog.data.filter((t) => t.beta)
  const enabled = new Set(state.value.org.betas)
  const set = (tool: string, on: boolean) =>
    void props.api.run((c) => c.dashboard.setBeta({ path: { tool }, payload: { enabled: on } })).then((outcome) => {
      setError(outcome.ok ? null : outcome)
      reload()
    })
  return (
    <Card title="Beta tools" wide>
      <p class="muted">A beta tool answers <code>beta_unavailable</code> until it is turned on for the org.</p>
      <Problem error={error} />
      {betas.length === 0 ? <p class="muted">This gateway has no beta tools.</p> : (
        <ul class="betas">
          {betas.map((t) => (
            <li key={t.name}>
              <label class="switch">
                <input type="checkbox" role="switch" name={t.name} checked={enabled.has(t.name)} onChange={(e) => set(t.name, e.currentTarget.checked)} />
                <span><code>{t.name}</code> {t.summary}</span>
              </label>
            </li>
          ))}
        </ul>
      )}
    </Card>
  )
}
