/**
 * The dashboard: a Preact app over the Dashboard API. Routes are paths under /dashboard (the gateway serves
 * the page for each); the session's ID token is kept in this tab's sessionStorage only. A Firebase session
 * follows Firebase's user: each refreshed ID token replaces the session's, and Firebase's sign-out ends it.
 */
import "./styles.css"
import { Option, Schema } from "effect"
import { render } from "preact"
import { useEffect, useMemo, useRef, useState } from "preact/hooks"
import { type Api, loadFirebase, makeApi, type SignInConfig, signInConfig } from "./api.js"
import { Betas } from "./pages/Betas.js"
import { Connections } from "./pages/Connections.js"
import { Keys } from "./pages/Keys.js"
import { Overview } from "./pages/Overview.js"
import { type Session, SignIn } from "./pages/SignIn.js"
import { SpendCap } from "./pages/SpendCap.js"
import { Usage } from "./pages/Usage.js"

const PAGES = [
  { path: "", title: "Overview", view: Overview },
  { path: "keys", title: "Keys", view: Keys },
  { path: "usage", title: "Usage", view: Usage },
  { path: "connections", title: "Connections", view: Connections },
  { path: "betas", title: "Betas", view: Betas },
  { path: "spend-cap", title: "Spend cap", view: SpendCap }
] as const

const STORAGE = "tool-gateway.session"

const routeOf = (pathname: string) => pathname.replace(/^\/dashboard\/?/, "").replace(/\/$/, "")

const StoredSession = Schema.parseJson(Schema.Struct({
  token: Schema.String,
  who: Schema.optionalWith(Schema.String, { default: () => "" }),
  firebase: Schema.optionalWith(Schema.Boolean, { default: () => false })
}))

/** This tab's session (a damaged entry is no session). */
const loadSession = (): Session | null =>
  Option.getOrNull(Schema.decodeUnknownOption(StoredSession)(sessionStorage.getItem(STORAGE)))

const NoSuchPage = (_props: { readonly api: Api }) => (
  <p class="muted">There is no page at {location.pathname}. <a href="/dashboard">Go to the overview</a>.</p>
)

const Shell = (props: { readonly session: Session; readonly api: Api; readonly onSignOut: (notice: string | null) => void }) => {
  const [route, setRoute] = useState(routeOf(location.pathname))
  // each visit to another address opens its page afresh (a link to it, Back and Forward): the Usage link on a filtered
  // usage page shows all usage, as its address says, not the filters kept. A link to the address already shown does
  // nothing (it took away a new key's secret, shown once, and a form being filled)
  const [visit, setVisit] = useState(0)
  const go = (pathname: string) => {
    setRoute(routeOf(pathname))
    setVisit((n) => n + 1)
  }
  const [orgName, setOrgName] = useState<string | null>(null)
  useEffect(() => {
    const onPop = () => go(location.pathname)
    addEventListener("popstate", onPop)
    return () => removeEventListener("popstate", onPop)
  }, [])
  // the org's name; a token refused here, or by any page's call later, signs out with the gateway's reason (makeApi).
  // Not read yet (the gateway could not be reached): asked again at the next visit, unless a question is on its way
  // (its answer is taken whenever it comes, while the session lasts)
  const asking = useRef(false)
  const mounted = useRef(true)
  useEffect(() => () => {
    mounted.current = false
  }, [])
  useEffect(() => {
    if (orgName !== null || asking.current) return
    asking.current = true
    void props.api.run((c) => c.dashboard.getOrg()).then((outcome) => {
      asking.current = false
      if (mounted.current && outcome.ok) setOrgName(outcome.value.name)
    })
  }, [props.api, orgName === null ? visit : -1])
  // links inside the app change the route without loading the page again
  const onClick = (e: MouseEvent) => {
    const target = e.target
    const link = target instanceof Element ? target.closest("a") : null
    if (link === null || !link.pathname.startsWith("/dashboard") || link.origin !== location.origin || link.hasAttribute("download")) return
    // a new tab or window (Ctrl, Cmd, Shift, or not the main button) is the browser's to open
    if (e.ctrlKey || e.metaKey || e.shiftKey || e.altKey || e.button !== 0) return
    e.preventDefault()
    if (link.pathname === location.pathname && location.search === "") return
    history.pushState(null, "", link.pathname)
    go(link.pathname)
    scrollTo(0, 0)
  }
  // a path under /dashboard that is no page says so (and the navigation marks none)
  const found = PAGES.find((p) => p.path === route)
  const page = found ?? { path: route, title: "No such page", view: NoSuchPage }
  const View = page.view
  useEffect(() => {
    document.title = `${page.title} · Tool Gateway`
  }, [page.title])
  return (
    <div class="shell" onClick={onClick}>
      <header class="top">
        <a class="brand" href="/dashboard"><span class="logo" aria-hidden="true">T</span> Tool Gateway</a>
        <span class="who">{orgName ?? ""}{props.session.who === "" ? "" : ` · ${props.session.who}`}</span>
        <button type="button" class="link" onClick={() => props.onSignOut(null)}>Sign out</button>
      </header>
      <nav class="nav" aria-label="Dashboard">
        {PAGES.map((p) => (
          <a key={p.path} href={`/dashboard${p.path === "" ? "" : `/${p.path}`}`} aria-current={p === page ? "page" : undefined}>{p.title}</a>
        ))}
      </nav>
      <main class="content">
        <h1>{page.title}</h1>
        <View key={`${page.path}#${visit}`} api={props.api} />
      </main>
    </div>
  )
}

const App = () => {
  const [session, setSession] = useState<Session | null>(loadSession)
  // a stored Firebase session waits for Firebase's user (and a fresh token) before any page uses it
  const [resuming, setResuming] = useState(() => session?.firebase === true)
  const [config, setConfig] = useState<SignInConfig | null>(null)
  const [notice, setNotice] = useState<string | null>(null)
  const signOut = (reason: string | null) => {
    if (session?.firebase === true && config !== null && config.firebase !== null) {
      void loadFirebase(config.firebase).then((firebase) => firebase.signOut())
    }
    setNotice(reason)
    setSession(null)
  }
  // the session's client: a call the gateway refuses for the session signs the tab out, with its reason
  const api = useMemo(() => (session === null ? null : makeApi(session.token, (reason) => signOutRef.current(reason))), [session])
  const signOutRef = useRef(signOut)
  signOutRef.current = signOut
  useEffect(() => () => void api?.dispose(), [api])
  useEffect(() => {
    if (session === null) sessionStorage.removeItem(STORAGE)
    else sessionStorage.setItem(STORAGE, JSON.stringify(session))
  }, [session])
  useEffect(() => {
    void signInConfig().then(setConfig)
  }, [])
  // Firebase's user is the session: signed in, each refreshed token, signed out
  useEffect(() => {
    if (config === null) return
    const endFirebaseSession = () => {
      setResuming(false)
      setSession((current) => (current?.firebase === true ? null : current))
    }
    if (config.firebase === null) return endFirebaseSession()
    let live = true
    let unsubscribe = () => {}
    loadFirebase(config.firebase).then((firebase) => {
      if (!live) return
      unsubscribe = firebase.onUser((user) => {
        if (user === null) return endFirebaseSession()
        setResuming(false)
        setNotice(null)
        setSession({ token: user.token, who: user.who, firebase: true })
      })
    }, endFirebaseSession)
    return () => {
      live = false
      unsubscribe()
    }
  }, [config])

  if (resuming) {
    return <main class="signin"><p class="muted">Signing in…</p></main>
  }
  if (session === null || api === null) {
    return <SignIn config={config} notice={notice} onSignedIn={(s) => {
      setNotice(null)
      setSession(s)
    }} />
  }
  return <Shell session={session} api={api} onSignOut={signOut} />
}

const root = document.getElementById("app")
if (root !== null) render(<App />, root)
