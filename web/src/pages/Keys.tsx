/**
 * API keys: create one (name, monthly spend limit, allowed tools, rate limit, expiry) and see the full key
 * once; change a key's limits; revoke a key after a confirmation.
 */
import { Effect } from "effect"
import { useEffect, useRef, useState } from "preact/hooks"
import type { Api } from "../api.js"
import { Card, Confirm, Field, formatTime, Loading, lostAnswer, Problem, useLoad } from "../ui.js"

interface KeyFields {
  readonly name: string
  readonly limit: string
  readonly tools: ReadonlyArray<string>
  readonly perSecond: string
  readonly burst: string
  readonly expires: string
}

const empty: KeyFields = { name: "", limit: "", tools: [], perSecond: "", burst: "", expires: "" }

interface KeyRow {
  readonly id: string
  readonly name: string
  readonly prefix: string
  readonly created_at: string
  readonly revoked_at: string | null
  readonly last_used_at: string | null
  readonly monthly_spend_limit: number | null
  readonly allowed_tools: ReadonlyArray<string> | null
  readonly month_spend: number
  readonly rate_limit: { readonly per_second: number; readonly burst: number } | null
  readonly expires_at: string | null
}

const fieldsOf = (k: KeyRow): KeyFields => ({
  name: k.name,
  limit: k.monthly_spend_limit === null ? "" : String(k.monthly_spend_limit),
  tools: k.allowed_tools ?? [],
  perSecond: k.rate_limit === null ? "" : String(k.rate_limit.per_second),
  burst: k.rate_limit === null ? "" : String(k.rate_limit.burst),
  expires: k.expires_at === null ? "" : k.expires_at.slice(0, 10)
})

/** A form the API would take otherwise than it reads: a burst with no rate limit is dropped (the rate is the limit). */
const mistakeOf = (f: KeyFields): { readonly code: string; readonly message: string } | null =>
  f.burst.trim() !== "" && f.perSecond.trim() === ""
    ? { code: "invalid_request", message: "Invalid request: rate_limit: a burst needs a rate limit (requests per second) beside it." }
    : null

/** What the API takes, from the form: an empty field is no limit. */
const payloadOf = (f: KeyFields) => {
  const perSecond = Number(f.perSecond)
  const burst = f.burst.trim() === "" ? perSecond : Number(f.burst)
  return {
    name: f.name.trim(),
    monthly_spend_limit: f.limit.trim() === "" ? null : Number(f.limit),
    allowed_tools: f.tools.length === 0 ? null : f.tools,
    rate_limit: f.perSecond.trim() === "" ? null : { per_second: perSecond, burst },
    expires_at: f.expires === "" ? null : f.expires
  }
}

type KeyPayload = ReturnType<typeof payloadOf>

/**
 * What an edit sends: only the fields the user changed (the API changes only the fields sent). The form shows an
 * expiry as its date alone: sent as it is, an unchanged 15:30 expiry would move to that day's midnight, and one
 * later today (or already past) would be refused.
 */
const changesOf = (initial: KeyFields, f: KeyFields): Partial<KeyPayload> => {
  const to = payloadOf(f)
  return {
    ...(f.name.trim() === initial.name ? {} : { name: to.name }),
    ...(f.limit.trim() === initial.limit ? {} : { monthly_spend_limit: to.monthly_spend_limit }),
    ...(f.tools.join(",") === initial.tools.join(",") ? {} : { allowed_tools: to.allowed_tools }),
    ...(f.perSecond.trim() === initial.perSecond && f.burst.trim() === initial.burst ? {} : { rate_limit: to.rate_limit }),
    ...(f.expires === initial.expires ? {} : { expires_at: to.expires_at })
  }
}

/** Today's UTC date, as the date input writes it (an expiry's date is 00:00 UTC of it). */
const today = () => new Date().toISOString().slice(0, 10)

const KeyForm = (props: {
  readonly initial: KeyFields
  readonly tools: ReadonlyArray<string>
  readonly submitLabel: string
  /** The fields as submitted, and as the form opened with them (an edit sends what changed since). */
  readonly onSubmit: (fields: KeyFields, opened: KeyFields) => Promise<boolean>
  readonly onCancel?: () => void
}) => {
  const [opened] = useState<KeyFields>(props.initial)
  const [f, setF] = useState<KeyFields>(props.initial)
  // the tools' list opens by itself where the key names tools; after that it is the user's to open and close (bound
  // to the choice, it closed under the user when the last tool was unticked, and the focus fell out of the page)
  const [toolsOpen] = useState(props.initial.tools.length > 0)
  const [busy, setBusy] = useState(false)
  const set = (patch: Partial<KeyFields>) => setF({ ...f, ...patch })
  const toggle = (tool: string) => set({ tools: f.tools.includes(tool) ? f.tools.filter((t) => t !== tool) : [...f.tools, tool] })
  return (
    <form
      class="form"
      onSubmit={(e) => {
        e.preventDefault()
        setBusy(true)
        void props.onSubmit(f, opened).then((done) => {
          setBusy(false)
          if (done) setF(props.initial)
        })
      }}
    >
      <Field label="Name">
        <input name="name" required maxLength={100} value={f.name} onInput={(e) => set({ name: e.currentTarget.value })} placeholder="e.g. production agent" />
      </Field>
      <div class="row">
        <Field label="Monthly spend limit" hint="credits; empty: none">
          <input name="limit" type="number" min={0} step={1} inputMode="numeric" value={f.limit} onInput={(e) => set({ limit: e.currentTarget.value })} />
        </Field>
        <Field label="Expires on" hint="empty: never">
          {/* no minimum for a key already past its expiry: the browser would refuse to submit any change to it */}
          <input name="expires" type="date" min={props.initial.expires !== "" && props.initial.expires < today() ? undefined : today()} value={f.expires} onInput={(e) => set({ expires: e.currentTarget.value })} />
        </Field>
      </div>
      <div class="row">
        <Field label="Rate limit" hint="requests per second; empty: default">
          <input name="per_second" type="number" min={1} step={1} inputMode="numeric" value={f.perSecond} onInput={(e) => set({ perSecond: e.currentTarget.value })} />
        </Field>
        <Field label="Burst" hint="empty: same as the rate">
          <input name="burst" type="number" min={1} step={1} inputMode="numeric" value={f.burst} onInput={(e) => set({ burst: e.currentTarget.value })} />
        </Field>
      </div>
      <details class="tools" open={toolsOpen}>
        <summary>Allowed tools: {f.tools.length === 0 ? "all" : f.tools.length}</summary>
        <div class="checks">
          {props.tools.map((tool) => (
            <label key={tool} class="check">
              <input type="checkbox" name="tool" value={tool} checked={f.tools.includes(tool)} onChange={() => toggle(tool)} /> {tool}
            </label>
          ))}
        </div>
      </details>
      <div class="actions">
        <button type="submit" class="primary" disabled={busy}>{props.submitLabel}</button>
        {props.onCancel !== undefined && <button type="button" onClick={props.onCancel}>Cancel</button>}
      </div>
    </form>
  )
}

/** The full key, shown once, with a copy button. */
const NewKey = (props: { readonly name: string; readonly secret: string; readonly onDone: () => void }) => {
  const [copied, setCopied] = useState<"no" | "yes" | "select">("no")
  const code = useRef<HTMLElement>(null)
  const box = useRef<HTMLDivElement>(null)
  // the key's box takes the focus from the form that made it (a screen reader reads it out)
  useEffect(() => box.current?.focus(), [])
  /** Without the Clipboard API (a page not served over HTTPS or from localhost): the key selected, to copy by hand. */
  const select = () => {
    const selection = getSelection()
    if (code.current === null || selection === null) return
    selection.selectAllChildren(code.current)
    setCopied("select")
  }
  return (
    <div class="once" role="status" tabIndex={-1} ref={box}>
      <p><strong>{props.name}</strong>: copy this key now. It is shown only this once; the gateway keeps only its hash.</p>
      <div class="secret">
        <code data-testid="new-key" ref={code}>{props.secret}</code>
        <button
          type="button"
          onClick={() => {
            if (typeof navigator.clipboard?.writeText !== "function") return select()
            void navigator.clipboard.writeText(props.secret).then(() => setCopied("yes"), select)
          }}
        >
          {copied === "yes" ? "Copied" : "Copy"}
        </button>
      </div>
      {copied === "select" && <p class="muted">This browser does not let the page copy: the key is selected, press Ctrl+C (⌘C).</p>}
      <button type="button" onClick={props.onDone}>I have saved it</button>
    </div>
  )
}

export const Keys = (props: { readonly api: Api }) => {
  const { state, reload } = useLoad(() =>
    props.api.run((c) => Effect.all({ keys: c.dashboard.listKeys(), catalog: c.catalog.list() }, { concurrency: 2 })))
  const [error, setError] = useState<{ readonly code: string; readonly message: string } | null>(null)
  const [created, setCreated] = useState<{ readonly name: string; readonly secret: string } | null>(null)
  const [editing, setEditing] = useState<string | null>(null)
  // an edit's mistake is said beside its form (at the top of a long list it was out of view)
  const [editError, setEditError] = useState<{ readonly code: string; readonly message: string } | null>(null)
  const [revoking, setRevoking] = useState<string | null>(null)
  if (state === null) return <Loading />
  if (!state.ok) return <Problem error={state} onRetry={reload} />
  const tools = state.value.catalog.data.map((t) => t.name)
  const keys = state.value.keys.data

  const create = async (f: KeyFields) => {
    const mistake = mistakeOf(f)
    if (mistake !== null) {
      setError(mistake)
      return false
    }
    const p = payloadOf(f)
    const outcome = await props.api.run((c) => c.dashboard.createKey({ payload: p }))
    if (!outcome.ok) {
      // an answer lost on its way back may be of a key made: the list shows whether it was
      setError(lostAnswer(outcome, "the list below is read again and shows whether the key was made (if it was, its secret cannot be shown again: revoke it and create another)."))
      if (outcome.code === "network") reload()
      return false
    }
    setError(null)
    setCreated({ name: outcome.value.name, secret: outcome.value.key })
    reload()
    return true
  }
  // what the user changed since the form opened: a change made meanwhile elsewhere (the list reloaded under the
  // form) is not undone by fields the user did not touch
  const update = async (k: KeyRow, f: KeyFields, opened: KeyFields) => {
    const mistake = mistakeOf(f)
    if (mistake !== null) {
      setEditError(mistake)
      return false
    }
    const changes = changesOf(opened, f)
    if (Object.keys(changes).length === 0) {
      setEditing(null)
      return true
    }
    const outcome = await props.api.run((c) => c.dashboard.updateKey({ path: { id: k.id }, payload: changes }))
    if (!outcome.ok) {
      setEditError(lostAnswer(outcome, "the list is read again and shows whether the change was made."))
      if (outcome.code === "network") reload()
      return false
    }
    setEditError(null)
    setEditing(null)
    reload()
    return true
  }
  const revoke = async (id: string) => {
    const outcome = await props.api.run((c) => c.dashboard.revokeKey({ path: { id } }))
    setError(outcome.ok ? null : lostAnswer(outcome, "the list below is read again and shows whether the key was revoked."))
    setRevoking(null)
    reload()
  }

  return (
    <div class="grid">
      <Card title="Create a key">
        {created !== null
          ? <NewKey name={created.name} secret={created.secret} onDone={() => setCreated(null)} />
          : <KeyForm initial={empty} tools={tools} submitLabel="Create key" onSubmit={create} />}
      </Card>
      <Card title="Keys" wide>
        <Problem error={error} />
        {keys.length === 0 ? <p class="muted">No keys yet.</p> : (
          <ul class="keys">
            {keys.map((k) => (
              <li key={k.id} class={k.revoked_at === null ? "key" : "key revoked"} data-key-id={k.id}>
                <div class="key-head">
                  <strong>{k.name}</strong> <code>{k.prefix}…</code>
                  {k.revoked_at !== null && <span class="badge">revoked</span>}
                  {k.revoked_at === null && k.expires_at !== null && (
                    Date.parse(k.expires_at) <= Date.now()
                      ? <span class="badge">expired</span>
                      : <span class="badge soft">expires {k.expires_at.slice(0, 10)}</span>
                  )}
                </div>
                <dl class="key-facts">
                  <div><dt>Month spend</dt><dd>{k.month_spend}{k.monthly_spend_limit === null ? "" : ` / ${k.monthly_spend_limit}`}</dd></div>
                  <div><dt>Tools</dt><dd>{k.allowed_tools === null ? "all" : k.allowed_tools.join(", ")}</dd></div>
                  <div><dt>Rate</dt><dd>{k.rate_limit === null ? "default" : `${k.rate_limit.per_second}/s, burst ${k.rate_limit.burst}`}</dd></div>
                  <div><dt>Last used</dt><dd>{formatTime(k.last_used_at)}</dd></div>
                  <div><dt>Created</dt><dd>{formatTime(k.created_at)}</dd></div>
                </dl>
                {k.revoked_at === null && editing !== k.id && revoking !== k.id && (
                  <div class="actions">
                    <button type="button" onClick={() => {
                      setEditError(null)
                      setEditing(k.id)
                    }}>Edit limits</button>
                    <button type="button" class="danger" onClick={() => setRevoking(k.id)}>Revoke</button>
                  </div>
                )}
                {editing === k.id && (
                  <>
                    <KeyForm initial={fieldsOf(k)} tools={tools} submitLabel="Save" onSubmit={(f, opened) => update(k, f, opened)} onCancel={() => setEditing(null)} />
                    <Problem error={editError} />
                  </>
                )}
                {revoking === k.id && (
                  <Confirm label={`Revoke ${k.name}`} yes="Yes, revoke" opener="Revoke" onYes={() => void revoke(k.id)} onNo={() => setRevoking(null)}>
                    Revoke <strong>{k.name}</strong>? Every request with it fails from now on. This cannot be undone.
                  </Confirm>
                )}
              </li>
            ))}
          </ul>
        )}
      </Card>
    </div>
  )
}
