/**
 * Sign-in with Firebase Authentication's web SDK (the modular `firebase/app` and `firebase/auth`). This module
 * is its own chunk, imported only when the gateway's config names a Firebase project (`loadFirebase` in
 * api.ts). Firebase keeps its user in this tab's sessionStorage, as the dashboard keeps its session; the ID
 * token is refreshed five minutes before it expires, and every new token reaches `onUser`.
 */
import { FirebaseError, initializeApp } from "firebase/app"
import {
  browserPopupRedirectResolver,
  browserSessionPersistence,
  connectAuthEmulator,
  GoogleAuthProvider,
  initializeAuth,
  onIdTokenChanged,
  signInWithEmailAndPassword,
  signInWithPopup,
  signOut,
  type User
} from "firebase/auth"
import type { FirebaseConfig } from "./api.js"

/** A token is refreshed this long before it expires (as Firebase's own SDKs do), and retried after a failure. */
const REFRESH_AHEAD_MS = 5 * 60_000
const RETRY_MS = 30_000

/** The signed-in Firebase user: a current ID token, and how the header names them. */
export interface FirebaseUser {
  readonly token: string
  readonly who: string
}

/** Why a sign-in did not happen, for the page to show. */
export interface SignInProblem {
  readonly code: string
  readonly message: string
}

export interface FirebaseSignIn {
  /** Google's own sign-in, in a pop-up window; null when signed in. */
  readonly withGoogle: () => Promise<SignInProblem | null>
  /** An email and password account of the Firebase project; null when signed in. */
  readonly withPassword: (email: string, password: string) => Promise<SignInProblem | null>
  readonly signOut: () => Promise<void>
  /** `listener` hears the user's ID token at sign-in and at every refresh (which this asks for), and null at sign-out. */
  readonly onUser: (listener: (user: FirebaseUser | null) => void) => () => void
}

const MESSAGES: Record<string, string> = {
  "auth/invalid-credential": "The email or password is wrong.",
  "auth/invalid-login-credentials": "The email or password is wrong.",
  "auth/wrong-password": "The email or password is wrong.",
  "auth/user-not-found": "The email or password is wrong.",
  "auth/invalid-email": "That is not an email address.",
  "auth/user-disabled": "This account is disabled.",
  "auth/too-many-requests": "Too many attempts: try again later.",
  "auth/popup-closed-by-user": "The Google sign-in window was closed before signing in.",
  "auth/cancelled-popup-request": "The Google sign-in window was closed before signing in.",
  "auth/popup-blocked": "The browser blocked the Google sign-in window: allow pop-ups for this page.",
  "auth/network-request-failed": "Firebase Authentication could not be reached.",
  "auth/operation-not-allowed": "This sign-in method is not enabled for the Firebase project."
}

const problemOf = (error: unknown): SignInProblem =>
  error instanceof FirebaseError
    ? { code: error.code, message: MESSAGES[error.code] ?? error.message }
    : { code: "firebase", message: error instanceof Error ? error.message : "Firebase sign-in failed." }

const attempt = (signIn: () => Promise<unknown>): Promise<SignInProblem | null> =>
  signIn().then(() => null, problemOf)

export const startFirebase = (config: FirebaseConfig): FirebaseSignIn => {
  const app = initializeApp({ apiKey: config.api_key, authDomain: config.auth_domain, projectId: config.project_id })
  const auth = initializeAuth(app, { persistence: browserSessionPersistence, popupRedirectResolver: browserPopupRedirectResolver })
  if (config.emulator_url !== null) connectAuthEmulator(auth, config.emulator_url, { disableWarnings: true })
  return {
    withGoogle: () => attempt(() => signInWithPopup(auth, new GoogleAuthProvider())),
    withPassword: (email, password) => attempt(() => signInWithEmailAndPassword(auth, email, password)),
    signOut: () => signOut(auth),
    onUser: (listener) => {
      let timer: ReturnType<typeof setTimeout> | undefined
      // Firebase refreshes a token only when asked for a fresh one; the new token reaches onIdTokenChanged
      const refresh = (user: User) => {
        user.getIdToken(true).catch(() => {
          timer = setTimeout(() => refresh(user), RETRY_MS)
        })
      }
      const unsubscribe = onIdTokenChanged(auth, (user) => {
        clearTimeout(timer)
        if (user === null) return listener(null)
        // the token Firebase just issued or refreshed (an expired one is refreshed first; a failure to read it is
        // a signed-out user); a user who signed out meanwhile is not signed in again
        user.getIdTokenResult().then(
          (result) => {
            if (auth.currentUser !== user) return
            listener({ token: result.token, who: user.email ?? user.uid })
            timer = setTimeout(() => refresh(user), Math.max(0, Date.parse(result.expirationTime) - REFRESH_AHEAD_MS - Date.now()))
          },
          () => listener(null)
        )
      })
      return () => {
        clearTimeout(timer)
        unsubscribe()
      }
    }
  }
}
