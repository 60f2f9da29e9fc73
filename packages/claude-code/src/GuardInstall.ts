/**
 * What `install --guard URL` writes into Claude Code's settings: the hooks of
 * the resident guard's installed form. Pure: it builds the settings fragment;
 * merging it into a settings file (keeping every other setting and hook, the
 * backup, uninstall) is the installer's.
 *
 * The installed form is a `command` hook per event running
 * `session-journal claude-code forward --url URL`, not an `http` hook. Claude
 * Code lets a call run when an `http` hook cannot be reached (PROTOCOL.md "HTTP
 * hooks"), so with `http` hooks a guard that is down stops guarding in silence;
 * the forwarder posts the event to the guard over loopback and, when the guard
 * gives no answer, denies a PreToolUse itself with the reason
 * (`the session-journal guard at URL is not reachable: …`). The hook's `timeout`
 * (`HOOK_TIMEOUT_SECONDS`) is longer than the forwarder's wait
 * (`FORWARD_TIMEOUT_MS`), so the forwarder's denial lands before Claude Code
 * would cancel the hook (which also lets the call run).
 *
 * ```json
 * {"hooks":{"PreToolUse":[{"matcher":"","hooks":[{"type":"command",
 *   "command":"'/usr/bin/node' '/…/session-journal.js' claude-code forward --url 'http://127.0.0.1:18787/hook'",
 *   "timeout":30}]}], "PostToolUse":[…], …}}
 * ```
 *
 * The token is never written into these hooks: the forwarder reads it from
 * `$SESSION_JOURNAL_GUARD_TOKEN` in Claude Code's environment (hooks inherit it),
 * from another variable, or from a file only the user can read (`TokenSource`).
 * `httpHooks` gives the plain `http` form for those who accept that it fails open.
 *
 * @since 0.4.0
 */

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
 * The variable the guard takes its token from, and the installed hooks send it from.
 *
 * @since 0.4.0
 */
export const TOKEN_VAR = "SESSION_JOURNAL_GUARD_TOKEN"

/**
 * The default token source: `$SESSION_JOURNAL_GUARD_TOKEN`.
 *
 * @since 0.4.0
 */
export const fromEnv = (name: string = TOKEN_VAR): TokenSource => ({ _tag: "Env", name })

/**
 * A token file (give it mode 0600).
 *
 * @since 0.4.0
 */
export const fromFile = (path: string): TokenSource => ({ _tag: "File", path })

/**
 * The events hooked, every one Claude Code 2.1.328 fires in `-p` runs (PROTOCOL.md (a)).
 *
 * @since 0.4.0
 */
export const EVENTS = [
  "SessionStart",
  "UserPromptSubmit",
  "PreToolUse",
  "PermissionRequest",
  "PostToolUse",
  "PostToolUseFailure",
  "PostToolBatch",
  "Stop",
  "SubagentStart",
  "SubagentStop",
  "PreCompact",
  "PostCompact",
  "SessionEnd"
] as const

/**
 * The hook's `timeout` in the settings, in seconds.
 *
 * @since 0.4.0
 */
export const HOOK_TIMEOUT_SECONDS = 30

/**
 * How long the forwarder waits for the guard, in milliseconds (well inside the
 * hook's timeout).
 *
 * @since 0.4.0
 */
export const FORWARD_TIMEOUT_MS = 10_000

/**
 * One hook of the settings.
 *
 * @since 0.4.0
 */
export type Hook =
  | { readonly type: "command"; readonly command: string; readonly timeout: number }
  | {
    readonly type: "http"
    readonly url: string
    readonly headers: Readonly<Record<string, string>>
    readonly allowedEnvVars: ReadonlyArray<string>
    readonly timeout: number
  }

/**
 * The settings fragment: for each event one matcher group matching everything.
 *
 * @since 0.4.0
 */
export interface Fragment {
  readonly hooks: {
    readonly [event: string]: ReadonlyArray<{ readonly matcher: string; readonly hooks: ReadonlyArray<Hook> }>
  }
}

/**
 * Why a guard URL cannot be installed, or null: it must be
 * `http://HOST:PORT/hook` with a loopback HOST (`127.0.0.1`, `localhost`,
 * `[::1]`), the names the guard answers.
 *
 * @since 0.4.0
 */
export const urlProblem = (url: string): string | null => {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return `${JSON.stringify(url)} is not a URL`
  }
  if (parsed.protocol !== "http:") return `${url}: the guard speaks http: on loopback`
  if (!["127.0.0.1", "localhost", "[::1]"].includes(parsed.hostname)) {
    return `${url}: the guard listens on loopback only (127.0.0.1)`
  }
  if (parsed.username !== "" || parsed.password !== "" || parsed.search !== "" || parsed.hash !== "") {
    return `${url}: no user, query or fragment`
  }
  if (parsed.pathname !== "/hook") return `${url}: the guard's hook path is /hook`
  return null
}

/**
 * One argument quoted for the POSIX shell Claude Code runs a command hook with.
 *
 * @since 0.4.0
 */
export const shellQuote = (arg: string): string =>
  /^[A-Za-z0-9_\/.:=@%+-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`

/**
 * The forwarder's command line: `command` (how to start `session-journal`, by
 * absolute paths, e.g. `[process.execPath, "/…/bin/session-journal.js"]`)
 * followed by `claude-code forward --url URL` and the token source.
 *
 * @since 0.4.0
 */
export const forwardCommand = (url: string, token: TokenSource, command: ReadonlyArray<string>): string =>
  [
    ...command,
    "claude-code",
    "forward",
    "--url",
    url,
    ...(token._tag === "File"
      ? ["--token-file", token.path]
      : token.name === TOKEN_VAR
      ? []
      : ["--token-env", token.name]),
    "--timeout-ms",
    String(FORWARD_TIMEOUT_MS)
  ].map(shellQuote).join(" ")

const fragment = (hook: Hook): Fragment => ({
  hooks: Object.fromEntries(EVENTS.map((event) => [event, [{ matcher: "", hooks: [hook] }]]))
})

/**
 * The guard's installed form (fails closed): a `command` hook running the
 * forwarder for every event of `EVENTS`.
 *
 * @since 0.4.0
 */
export const hooks = (url: string, token: TokenSource, command: ReadonlyArray<string>): Fragment =>
  fragment({ type: "command", command: forwardCommand(url, token, command), timeout: HOOK_TIMEOUT_SECONDS })

/**
 * The plain `http` form: Claude Code posts each event to the guard itself, with
 * `Authorization: Bearer $NAME` from its environment (`allowedEnvVars`). Faster
 * (no process per event), but it FAILS OPEN: when the guard is down, every call
 * runs. Only an environment variable can carry the token in this form.
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
 * Whether a hook of a settings file is one of the guard's (either form), for an
 * uninstall that removes only ours.
 *
 * @since 0.4.0
 */
export const isGuardHook = (hook: unknown): boolean => {
  if (typeof hook !== "object" || hook === null) return false
  const h = hook as Record<string, unknown>
  if (h["type"] === "command") {
    return typeof h["command"] === "string" && / claude-code forward --url /.test(h["command"])
  }
  if (h["type"] === "http") {
    const headers = h["headers"]
    const auth = typeof headers === "object" && headers !== null
      ? (headers as Record<string, unknown>)["Authorization"]
      : undefined
    return typeof h["url"] === "string" && urlProblem(h["url"]) === null && typeof auth === "string" &&
      auth.startsWith("Bearer $")
  }
  return false
}
