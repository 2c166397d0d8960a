/**
 * The org's provider accounts: per account provider, the credential fields it needs (read from its
 * credential schema in src/domain/connections.ts), its status, connect (or replace) and remove.
 */
import { SchemaAST } from "effect"
import { useState } from "preact/hooks"
import { type AccountProvider, accountProviders, credentialSchemas } from "../../../src/domain/connections.js"
import type { Api } from "../api.js"
import { Card, Confirm, Field, formatTime, Loading, lostAnswer, Problem, useLoad } from "../ui.js"

interface CredentialField {
  readonly name: string
  readonly optional: boolean
  readonly description: string | undefined
  readonly secret: boolean
}

const describe = (ast: SchemaAST.AST) => SchemaAST.getDescriptionAnnotation(ast).pipe((o) => (o._tag === "Some" ? o.value : undefined))

/** The fields of a provider's credentials, from its schema. */
const fieldsOf = (provider: AccountProvider): ReadonlyArray<CredentialField> =>
  SchemaAST.getPropertySignatures(credentialSchemas[provider].ast).map((p) => {
    const name = String(p.name)
    return {
      name,
      optional: p.isOptional,
      description: describe(p.type),
      secret: /token|key|password|secret/.test(name)
    }
  })

const summaryOf = (provider: AccountProvider) => describe(credentialSchemas[provider].ast)?.replace(/^\w+: /, "") ?? ""

const ConnectForm = (props: {
  readonly provider: AccountProvider
  readonly api: Api
  readonly onDone: () => void
  /** The answer did not come: the account may be connected, and the list above is read again to show it. */
  readonly onLost: () => void
}) => {
  const fields = fieldsOf(props.provider)
  const [values, setValues] = useState<Record<string, string>>({})
  const [label, setLabel] = useState("")
  const [error, setError] = useState<{ readonly code: string; readonly message: string } | null>(null)
  const [busy, setBusy] = useState(false)
  return (
    <form
      class="form"
      onSubmit={(e) => {
        e.preventDefault()
        setBusy(true)
        const credentials = Object.fromEntries(Object.entries(values).filter(([, v]) => v.trim() !== ""))
        void props.api.run((c) =>
          c.dashboard.connect({ payload: { provider: props.provider, credentials, ...(label.trim() === "" ? {} : { label: label.trim() }) } })
        ).then((outcome) => {
          setBusy(false)
          if (!outcome.ok) {
            setError(lostAnswer(outcome, "the list is read again and shows whether the account was connected."))
            if (outcome.code === "network") props.onLost()
            return
          }
          setValues({})
          props.onDone()
        })
      }}
    >
      {fields.map((f) => (
        <Field key={f.name} label={f.name + (f.optional ? " (optional)" : "")} {...(f.description === undefined ? {} : { hint: f.description })}>
          <input
            name={f.name}
            type={f.secret ? "password" : "text"}
            autoComplete="off"
            required={!f.optional}
            value={values[f.name] ?? ""}
            onInput={(e) => setValues({ ...values, [f.name]: e.currentTarget.value })}
          />
        </Field>
      ))}
      <Field label="Label (optional)">
        <input name="label" maxLength={100} value={label} onInput={(e) => setLabel(e.currentTarget.value)} />
      </Field>
      <Problem error={error} />
      <div class="actions">
        <button type="submit" class="primary" disabled={busy}>Connect</button>
      </div>
    </form>
  )
}

export const Connections = (props: { readonly api: Api }) => {
  const { state, reload } = useLoad(() => props.api.run((c) => c.dashboard.listConnections()))
  const [open, setOpen] = useState<AccountProvider | null>(null)
  const [error, setError] = useState<{ readonly code: string; readonly message: string } | null>(null)
  const [removing, setRemoving] = useState<AccountProvider | null>(null)
  if (state === null) return <Loading />
  if (!state.ok) return <Problem error={state} onRetry={reload} />
  const byProvider = new Map(state.value.data.map((c) => [c.provider, c]))
  const remove = (provider: AccountProvider) =>
    void props.api.run((c) => c.dashboard.disconnect({ path: { provider } })).then((outcome) => {
      setError(outcome.ok ? null : lostAnswer(outcome, "the list below is read again and shows whether the connection was removed."))
      setRemoving(null)
      reload()
    })
  return (
    <div class="grid">
      <Card title="Provider accounts" wide>
        <p class="muted">Account tools act on your own account at the provider. Credentials are stored encrypted and never shown again.</p>
        <Problem error={error} />
        <ul class="providers">
          {accountProviders.map((p) => {
            const connection = byProvider.get(p)
            return (
              <li key={p} class="provider" data-provider={p}>
                <div class="provider-head">
                  <strong>{p}</strong> <span class="muted">{summaryOf(p)}</span>
                  {connection === undefined
                    ? <span class="badge soft">not connected</span>
                    : <span class={connection.status === "active" ? "badge ok" : "badge"}>{connection.status}</span>}
                </div>
                {connection !== undefined && (
                  <p class="muted">
                    {connection.label !== null && <>{connection.label} · </>}connected {formatTime(connection.updated_at)}
                  </p>
                )}
                <div class="actions">
                  <button type="button" onClick={() => setOpen(open === p ? null : p)}>
                    {open === p ? "Cancel" : connection === undefined ? "Connect" : "Replace"}
                  </button>
                  {connection !== undefined && removing !== p && <button type="button" class="danger" onClick={() => setRemoving(p)}>Remove</button>}
                </div>
                {connection !== undefined && removing === p && (
                  <Confirm label={`Remove the ${p} connection`} yes="Yes, remove" opener="Remove" onYes={() => remove(p)} onNo={() => setRemoving(null)}>
                    Remove the <strong>{p}</strong> connection? Its credentials are deleted, and its tools answer
                    credential_required until it is connected again.
                  </Confirm>
                )}
                {open === p && <ConnectForm provider={p} api={props.api} onLost={reload} onDone={() => {
                  setOpen(null)
                  reload()
                }} />}
              </li>
            )
          })}
        </ul>
      </Card>
    </div>
  )
}
