/**
 * What `install --guard URL` writes into Claude Code's settings, as a settings
 * fragment: the hooks of the resident guard's installed form. Pure; built on
 * `Install`'s parts (its events, its hook timeout, its quoting, its forwarder
 * command), so the fragment and `install --guard` write the same hooks and
 * `Install.isOurs` recognizes them for `--uninstall`.
 *
 * The installed form is a `command` hook per event running
 * `session-journal claude-code forward --url URL` (`Forward`), not an `http`
 * hook. Claude Code lets a call run when an `http` hook cannot be reached
 * (PROTOCOL.md "HTTP hooks"), so with `http` hooks a guard that is down stops
 * guarding in silence; the forwarder posts the event to the guard over loopback
 * and, when the guard gives no answer, denies a PreToolUse itself with the reason
 * (`the session-journal guard at URL is not reachable: …`). The hook's `timeout`
 * (`Install.HOOK_TIMEOUT_SECONDS`) is longer than the forwarder's wait
 * (`Forward.DEFAULT_TIMEOUT_MS`), so its denial lands before Claude Code would
 * cancel the hook, which would also let the call run.
 *
 * ```json
 * {"hooks":{"PreToolUse":[{"matcher":"","hooks":[{"type":"command",
 *   "command":"/usr/bin/node /…/session-journal.js claude-code forward --url http://127.0.0.1:18787/hook --timeout-ms 10000",
 *   "timeout":60}]}], "PostToolUse":[…], …}}
 * ```
 *
 * The token is never written into these hooks: the forwarder reads it from
 * `$SESSION_JOURNAL_GUARD_TOKEN` in Claude Code's environment (hooks inherit it),
 * from another variable, or from a file only the user can read (`TokenSource`).
 * `httpHooks` gives the plain `http` form, for those who accept that it fails open.
 *
 * @since 0.4.0
 */
import { DEFAULT_TIMEOUT_MS, TOKEN_VAR } from "./Forward.ts"
import { EVENTS, forwardCommand, HOOK_TIMEOUT_SECONDS, shellQuote } from "./Install.ts"

/**
 * Where the forwarder finds the guard's token: an environment variable of Claude
 * Code's (default `SESSION_JOURNAL_GUARD_TOKEN`), or a file whose first line it is.
 *
 * @since 0.4.0
 */
export type TokenSource =
  | { readonly _tag: "Env"; readonly name: string }
  | { readonly _tag: "File"; readonly path: string }

/**
 * A token in an environment variable (default `$SESSION_JOURNAL_GUARD_TOKEN`).
 *
 * @since 0.4.0
 */
export const fromEnv = (name: string = TOKEN_VAR): TokenSource => ({ _tag: "Env", name })

/**
 * A token in a file (give it mode 0600), read at every hook.
 *
 * @since 0.4.0
 */
export const fromFile = (path: string): TokenSource => ({ _tag: "File", path })

/**
 * One hook of the settings, in either form.
 *
 * @since 0.4.0
 */
export type Hook =
  | { readonly type: "command"; readonly command: string; readonly timeout: number }
  | {
    readonly type: "http"
    readonly url: string
    readonly headers: { readonly [name: string]: string }
    readonly allowedEnvVars: ReadonlyArray<string>
    readonly timeout: number
  }

/**
 * A settings fragment: for each of `Install.EVENTS` one matcher group that
 * matches everything.
 *
 * @since 0.4.0
 */
export interface Fragment {
  readonly hooks: {
    readonly [event: string]: ReadonlyArray<{ readonly matcher: string; readonly hooks: ReadonlyArray<Hook> }>
  }
}

/**
 * The forwarder's command line for a guard at `url`: `Install.forwardCommand`
 * (`command` is how to start `session-journal`, by absolute paths) and the token
 * source when it is not the default variable.
 *
 * @since 0.4.0
 */
export const command = (url: string, token: TokenSource, self: ReadonlyArray<string>): string => {
  const extra = token._tag === "File"
    ? ["--token-file", token.path]
    : token.name === TOKEN_VAR
    ? []
    : ["--token-env", token.name]
  return [forwardCommand(self, url), ...extra.map(shellQuote)].join(" ")
}

const fragment = (hook: Hook): Fragment => ({
  hooks: Object.fromEntries(EVENTS.map((event) => [event, [{ matcher: "", hooks: [hook] }]]))
})

/**
 * The guard's installed form, which fails closed: the forwarder as a `command`
 * hook for every event. `self` is how to start `session-journal`
 * (`Install.selfCommand()` for the running one).
 *
 * @since 0.4.0
 */
export const hooks = (url: string, token: TokenSource, self: ReadonlyArray<string>): Fragment =>
  fragment({ type: "command", command: command(url, token, self), timeout: HOOK_TIMEOUT_SECONDS })

/**
 * The plain `http` form: Claude Code posts each event to the guard itself, with
 * `Authorization: Bearer $NAME` from its environment (`allowedEnvVars`). No process
 * per event, but it FAILS OPEN: when the guard is down, every call runs. Only an
 * environment variable can carry the token in this form, and Claude Code runs no
 * `http` hook for SessionStart (observed with 2.1.328), so the session's start and
 * metadata are not journaled.
 *
 * @since 0.4.0
 */
export const httpHooks = (url: string, tokenVar: string = TOKEN_VAR): Fragment =>
  fragment({
    type: "http",
    url,
    headers: { Authorization: `Bearer $${tokenVar}` },
    allowedEnvVars: [tokenVar],
    timeout: HOOK_TIMEOUT_SECONDS
  })

/**
 * How long the forwarder waits for the guard (ms), re-exported beside the hook's
 * timeout (s) it must stay under.
 *
 * @since 0.4.0
 */
export const FORWARD_TIMEOUT_MS = DEFAULT_TIMEOUT_MS
