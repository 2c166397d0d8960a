/**
 * Sign-in. With Firebase (`FIREBASE_PROJECT_ID` and its web app's key): Google, or an email and password, through
 * Firebase's web SDK; the session then follows the SDK's user (main.tsx). With the dev issuer
 * (`DEV_IDENTITY=true`, loopback only): a user id, for which the gateway mints a dev ID token
 * (`POST /dev/token`). Any gateway: an ID token pasted in (a Firebase ID token, or one from
 * `tool-gateway dev token`).
 */
import { useState } from "preact/hooks"
import { type FirebaseConfig, loadFirebase, makeApi, type SignInConfig } from "../api.js"
import type { FirebaseSignIn, SignInProblem } from "../firebase.js"
import { Card, Field, Problem } from "../ui.js"

export interface Session {
  readonly token: string
  /** Who is signed in, as the header names them: the user id, or a Firebase user's email. */
  readonly who: string
  /** Signed in through Firebase: its SDK refreshes the token, and signing out signs out of Firebase too. */
  readonly firebase: boolean
}

const FirebaseCard = (props: { readonly config: FirebaseConfig }) => {
  const [email, setEmail] = useState("")
  const [password, setPassword] = useState("")
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<SignInProblem | null>(null)
  // signed in: the SDK tells main.tsx, which opens the session; here only a problem is shown
  const run = (signIn: (firebase: FirebaseSignIn) => Promise<SignInProblem | null>) => {
    setBusy(true)
    setError(null)
    void loadFirebase(props.config)
      .then(signIn, (): SignInProblem => ({ code: "network", message: "The sign-in code could not be loaded." }))
      .then((problem) => {
        setBusy(false)
        setError(problem)
      })
  }
  return (
    <Card title="Sign in">
      <div class="actions">
        <button type="button" class="primary" disabled={busy} onClick={() => run((f) => f.withGoogle())}>Sign in with Google</button>
      </div>
      <p class="muted">Or with the email and password of your account:</p>
      <form
        class="form"
        onSubmit={(e) => {
          e.preventDefault()
          run((f) => f.withPassword(email.trim(), password))
        }}
      >
        <Field label="Email">
          <input name="email" type="email" required autoComplete="username" value={email} onInput={(e) => setEmail(e.currentTarget.value)} />
        </Field>
        <Field label="Password">
          <input name="password" type="password" required autoComplete="current-password" value={password} onInput={(e) => setPassword(e.currentTarget.value)} />
        </Field>
        <div class="actions"><button type="submit" disabled={busy}>Sign in with email</button></div>
      </form>
      <Problem error={error} />
    </Card>
  )
}

export const SignIn = (props: {
  readonly config: SignInConfig | null
  readonly onSignedIn: (session: Session) => void
  readonly notice: string | null
}) => {
  const config = props.config
  const [uid, setUid] = useState("")
  const [token, setToken] = useState("")
  const [error, setError] = useState<{ readonly code: string; readonly message: string } | null>(null)

  const devSignIn = (e: Event) => {
    e.preventDefault()
    const api = makeApi(undefined)
    void api.run((c) => c.dev.token({ payload: { uid: uid.trim() } })).then((outcome) => {
      void api.dispose()
      if (!outcome.ok) return setError(outcome)
      props.onSignedIn({ token: outcome.value.token, who: uid.trim(), firebase: false })
    })
  }

  return (
    <main class="signin">
      <h1><span class="logo" aria-hidden="true">T</span> Tool Gateway</h1>
      {props.notice !== null && <p class="problem" role="alert">{props.notice}</p>}
      {config !== null && config.firebase !== null && <FirebaseCard config={config.firebase} />}
      {config?.dev === true && (
        <Card title="Dev sign-in">
          <p class="muted">This gateway runs the local dev issuer: sign in as any user id that is a member of an org (<code>tool-gateway members add</code>).</p>
          <form class="form" onSubmit={devSignIn}>
            <Field label="User id">
              <input name="uid" required maxLength={128} autoComplete="username" value={uid} onInput={(e) => setUid(e.currentTarget.value)} />
            </Field>
            <div class="actions"><button type="submit" class="primary">Sign in</button></div>
          </form>
          <Problem error={error} />
        </Card>
      )}
      <Card title={config?.dev === true || (config?.firebase ?? null) !== null ? "Or use an ID token" : "Sign in with an ID token"}>
        <p class="muted">A Firebase ID token of your account, or a dev token from <code>tool-gateway dev token --json</code>.</p>
        <form
          class="form"
          onSubmit={(e) => {
            e.preventDefault()
            props.onSignedIn({ token: token.trim(), who: "", firebase: false })
          }}
        >
          <Field label="ID token">
            <input name="token" type="password" required autoComplete="off" value={token} onInput={(e) => setToken(e.currentTarget.value)} />
          </Field>
          <div class="actions"><button type="submit">Sign in</button></div>
        </form>
      </Card>
    </main>
  )
}
