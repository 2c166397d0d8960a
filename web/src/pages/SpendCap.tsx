/** The org's monthly spend cap: set or remove. */
import { useState } from "preact/hooks"
import type { Api } from "../api.js"
import { Card, Field, formatCredits, Loading, Problem, useLoad } from "../ui.js"

export const SpendCap = (props: { readonly api: Api }) => {
  const { state, reload } = useLoad(() => props.api.run((c) => c.dashboard.getOrg()))
  const [value, setValue] = useState("")
  const [saving, setSaving] = useState(false)
  const [error, setError] = useState<{ readonly code: string; readonly message: string } | null>(null)
  if (state === null) return <Loading />
  if (!state.ok) return <Problem error={state} onRetry={reload} />
  const org = state.value
  // one change at a time (a Remove sent while a Set was on its way could be answered first, and lost to it); the
  // field is emptied once its value is taken, unless the user has typed another meanwhile
  const save = (cap: number | null) => {
    if (saving) return
    setSaving(true)
    const sent = value
    void props.api.run((c) => c.dashboard.setSpendCap({ payload: { spend_cap: cap } })).then((outcome) => {
      setSaving(false)
      setError(outcome.ok ? null : outcome)
      if (outcome.ok) setValue((now) => (now === sent ? "" : now))
      reload()
    })
  }
  return (
    <Card title="Monthly spend cap" wide>
      <p data-testid="current-cap">
        {org.spend_cap === null ? "No cap: calls stop only when the balance runs out." : <>The cap is <strong>{formatCredits(org.spend_cap)}</strong> credits per UTC month.</>}
        {" "}Spent this month: {formatCredits(org.month_spend)}.
      </p>
      <form
        class="form inline"
        onSubmit={(e) => {
          e.preventDefault()
          save(Number(value))
        }}
      >
        <Field label="New cap" hint="credits per month; calls over it answer spend_cap_exceeded">
          <input name="spend_cap" type="number" min={0} step={1} inputMode="numeric" required value={value} onInput={(e) => setValue(e.currentTarget.value)} />
        </Field>
        <div class="actions">
          <button type="submit" class="primary" disabled={saving}>Set cap</button>
          {org.spend_cap !== null && <button type="button" class="danger" disabled={saving} onClick={() => save(null)}>Remove cap</button>}
        </div>
      </form>
      <Problem error={error} />
    </Card>
  )
}
