/**
 * What `install --guard URL` writes into Claude Code's settings, as a settings
 * fragment: the hooks of the resident guard's installed form. Pure; built on
 * `Install`'s parts (its events, its hook timeout, its quoting, its forwarder
 * command), so the fragment and `install --guard` write the same hooks and
 * `Install.isOurs` recognizes them for `--uninstall`.
 *
 * The installed form is a `command` hook per event running
 * `session-journal claude-code forward --url URL` (`Forward`) through the
 * fail-closed `sh` wrapper of `install` (one command per event, so the wrapper
 * knows its event and a forwarder that cannot start refuses), not an `http`
 * hook. Claude Code lets a call run when an `http` hook cannot be reached
 * (docs/claude-code/PROTOCOL.md "HTTP hooks"), so with `http` hooks a guard that is down stops
 * guarding in silence; the forwarder posts the event to the guard over loopback
 * and, when the guard gives no answer it can prove is the guard's, denies a
 * PreToolUse itself with the reason (`the session-journal guard at URL is not
 * reachable: …`). The hook's `timeout` (`Install.HOOK_TIMEOUT_SECONDS`, 60 s) is
 * far beyond the forwarder's one deadline for the whole exchange
 * (`--timeout-ms 10000`, `Forward.DEFAULT_TIMEOUT_MS`), so its denial lands
 * before Claude Code would cancel the hook, which would also let the call run.
 *
 * ```json
 * {"hooks":{"PreToolUse":[{"matcher":"","hooks":[{"type":"command",
 *   "command":"/bin/sh -c '…' session-journal-hook PreToolUse … /usr/bin/node /…/session-journal.js claude-code forward --url http://127.0.0.1:18787/hook --timeout-ms 10000",
 *   "timeout":60}]}], "PostToolUse":[…], …}}
 * ```
 *
 * The token is never written into these hooks: the forwarder reads it from
 * `$SESSION_JOURNAL_GUARD_TOKEN` in Claude Code's environment (hooks inherit it),
 * from another variable, or from a file only the user can read (`TokenSource`).
 * `httpHooks` gives the plain `http` form, for those who accept that it fails open.
 *
 * The hooks carry no policy: the guard decides with the one it was started
 * with. So `install --guard URL --policy FILE` asks the guard which policy it
 * runs (`checkPolicy`: `GET /policy`, proved with the token and its answer's MAC
 * verified, as the forwarder's requests) and is refused unless the guard runs
 * exactly FILE's policy; without `--policy` it says which policy the guard runs.
 *
 * @since 0.1.0
 */
import { Policy } from "@session-journal/core"
import { messageOf } from "@session-journal/core/ErrorMessage"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as crypto from "node:crypto"
import { DEFAULT_TIMEOUT_MS, exchange, MAX_TOKEN_FILE_BYTES, TOKEN_VAR, withDeadline } from "./Forwarder.ts"
import { EVENTS, forwardCommand, HOOK_TIMEOUT_SECONDS, shellQuote } from "./Installer.ts"
import * as GuardAuth from "./internal/guardAuth.ts"
import * as SecretFile from "./internal/secretFile.ts"

/**
 * Where the forwarder finds the guard's token: an environment variable of Claude
 * Code's (default `SESSION_JOURNAL_GUARD_TOKEN`), or a file whose first line it is.
 *
 * @since 0.1.0
 */
export type TokenSource =
  | { readonly _tag: "Env"; readonly name: string }
  | { readonly _tag: "File"; readonly path: string }

/**
 * A token in an environment variable (default `$SESSION_JOURNAL_GUARD_TOKEN`).
 *
 * @since 0.1.0
 */
export const fromEnv = (name: string = TOKEN_VAR): TokenSource => ({ _tag: "Env", name })

/**
 * A token in a file (give it mode 0600), read at every hook.
 *
 * @since 0.1.0
 */
export const fromFile = (path: string): TokenSource => ({ _tag: "File", path })

/**
 * One hook of the settings, in either form.
 *
 * @since 0.1.0
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
 * @since 0.1.0
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
 * @since 0.1.0
 */
export const command = (
  url: string,
  token: TokenSource,
  self: ReadonlyArray<string>,
  event?: string | undefined
): string => {
  const extra = token._tag === "File"
    ? ["--token-file", token.path]
    : token.name === TOKEN_VAR
    ? []
    : ["--token-env", token.name]
  return [forwardCommand(self, url, event === undefined ? undefined : { event }), ...extra.map(shellQuote)].join(" ")
}

const fragment = (hook: Hook): Fragment => ({
  hooks: Object.fromEntries(EVENTS.map((event) => [event, [{ matcher: "", hooks: [hook] }]]))
})

/**
 * The guard's installed form, which fails closed: the forwarder as a `command`
 * hook for every event. `self` is how to start `session-journal`
 * (`Install.selfCommand()` for the running one).
 *
 * @since 0.1.0
 */
export const hooks = (url: string, token: TokenSource, self: ReadonlyArray<string>): Fragment => ({
  hooks: Object.fromEntries(EVENTS.map((event) => [event, [{
    matcher: "",
    hooks: [{ type: "command", command: command(url, token, self, event), timeout: HOOK_TIMEOUT_SECONDS }]
  }]]))
})

/**
 * The plain `http` form: Claude Code posts each event to the guard itself, with
 * `Authorization: Bearer $NAME` from its environment (`allowedEnvVars`). No process
 * per event, but it FAILS OPEN: when the guard is down, every call runs. Only an
 * environment variable can carry the token in this form, and Claude Code runs no
 * `http` hook for SessionStart (observed with 2.1.328), so the session's start and
 * metadata are not journaled.
 *
 * @since 0.1.0
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
 * The forwarder's deadline for the whole exchange with the guard (ms),
 * re-exported beside the hook's timeout (s) it must stay well under.
 *
 * @since 0.1.0
 */
export const FORWARD_TIMEOUT_MS = DEFAULT_TIMEOUT_MS

/**
 * Which policy a guard runs, as `GET /policy` reports it (`GuardServer.PolicyReport`):
 * the canonical text, its SHA-256 and its name; all null when it records only.
 *
 * @since 0.1.0
 */
export interface GuardPolicy {
  readonly policy: string | null
  readonly sha256: string | null
  readonly name: string | null
}

const isGuardPolicy = (v: unknown): v is GuardPolicy => {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return false
  const o = v as Record<string, unknown>
  const keys = Object.keys(o).sort()
  if (keys.join(",") !== "name,policy,sha256") return false
  if (o["policy"] === null) return o["sha256"] === null && o["name"] === null
  return typeof o["policy"] === "string" && typeof o["name"] === "string" && typeof o["sha256"] === "string" &&
    crypto.createHash("sha256").update(o["policy"], "utf8").digest("hex") === o["sha256"]
}

/**
 * The `GuardPolicy` of a policy (null: record only): what a guard started with it
 * reports.
 *
 * @since 0.1.0
 */
export const guardPolicyOf = (policy: Policy.Policy | null): GuardPolicy => {
  if (policy === null) return { policy: null, sha256: null, name: null }
  const text = JSON.stringify(Policy.encode(policy))
  return {
    policy: text,
    sha256: crypto.createHash("sha256").update(text, "utf8").digest("hex"),
    name: Policy.format(policy)
  }
}

/**
 * Asks the guard at `url` (its hook URL) which policy it runs: `GET /policy`
 * proved with `token`, within `timeoutMs`; the answer is taken only when its MAC
 * verifies and it is a well-formed report. Fails with the reason as a string.
 *
 * @since 0.1.0
 */
export const askPolicy = (
  url: string,
  token: string,
  timeoutMs: number = DEFAULT_TIMEOUT_MS
): Effect.Effect<GuardPolicy, string> =>
  Effect.flatMap(
    Effect.flatMap(Clock.currentTimeMillis, (time) =>
      Effect.promise(() =>
        withDeadline<GuardPolicy | string>(
          timeoutMs,
          async (signal) => {
            let target: URL
            try {
              target = new URL("/policy", url)
            } catch (e) {
              return `its URL is not valid (${messageOf(e)})`
            }
            try {
              const { answer, nonce } = await exchange(target, token, {
                method: "GET",
                body: new Uint8Array(0),
                signal,
                time
              })
              if (!GuardAuth.verifyAnswer(token, nonce, answer.proof, answer.status, answer.body)) {
                return `it answered ${answer.status} without proof that it holds the token ` +
                  `(a wrong $${TOKEN_VAR}, an older guard, or another program on its port)`
              }
              if (answer.status !== 200) return `it answered ${answer.status}`
              let parsed: unknown
              try {
                parsed = JSON.parse(answer.body.toString("utf8"))
              } catch {
                parsed = undefined
              }
              return isGuardPolicy(parsed) ? parsed : "its answer is not a policy report"
            } catch (e) {
              return signal.aborted
                ? `it did not answer within ${timeoutMs} ms`
                : `it is not reachable: ${messageOf(e)}`
            }
          },
          () => `it did not answer within ${timeoutMs} ms`
        )
      )),
    (r) => typeof r === "string" ? Effect.fail(r) : Effect.succeed(r)
  )

const describePolicy = (p: GuardPolicy): string =>
  p.policy === null ? "no policy (it records only, every call allowed)" : `the policy ${p.name} (sha256 ${p.sha256})`

/**
 * The token in the first line of a token file, refused (with the reason) when
 * the file may be read by others, cannot be read or is empty.
 *
 * @since 0.1.0
 */
export const readTokenFile = (file: string): Effect.Effect<string, string> => {
  const read = SecretFile.read(file, "token file", MAX_TOKEN_FILE_BYTES)
  if (read._tag === "Refused") return Effect.fail(read.reason)
  const token = read.text.split("\n")[0]!.trim()
  return token === "" ? Effect.fail(`the token file ${file} is empty`) : Effect.succeed(token)
}

/**
 * The check of `install --guard URL [--policy FILE]` (`token`: the guard's token
 * as the installing user's environment holds it, `$SESSION_JOURNAL_GUARD_TOKEN`).
 * With `given` (the policy of `--policy FILE`, read by the caller), the guard
 * must run exactly that policy (the same canonical text): otherwise, or when it
 * cannot be asked, it fails with the reason (for `--policy`) saying what the
 * guard runs and what to do, and nothing is installed. Without it, the sentence
 * says which policy the guard runs (or that it could not be asked, which does
 * not stop the install).
 *
 * @since 0.1.0
 */
export const checkPolicy = (
  url: string,
  given: { readonly file: string; readonly policy: Policy.Policy } | undefined,
  token: string | undefined,
  timeoutMs: number = DEFAULT_TIMEOUT_MS
): Effect.Effect<string, string> =>
  Effect.gen(function*() {
    const policyFile = given?.file
    const wanted = given === undefined ? undefined : guardPolicyOf(given.policy)
    const asked = token === undefined || token === ""
      ? yield* Effect.fail(`$${TOKEN_VAR} is not set here`).pipe(Effect.result)
      : yield* askPolicy(url, token, timeoutMs).pipe(Effect.result)
    if (asked._tag === "Failure") {
      if (wanted === undefined) {
        return `the guard at ${url} could not be asked which policy it runs: ${asked.failure}\n`
      }
      return yield* Effect.fail(
        `the guard at ${url} could not be asked which policy it runs (${asked.failure}); ` +
          `the hooks carry no policy, the guard decides with its own, so nothing was installed`
      )
    }
    const runs = asked.success
    if (wanted === undefined) return `the guard at ${url} runs ${describePolicy(runs)}\n`
    if (runs.sha256 !== wanted.sha256 || runs.policy !== wanted.policy) {
      return yield* Effect.fail(
        `the guard at ${url} runs ${describePolicy(runs)}, not ${policyFile}'s ${
          describePolicy(wanted).replace(/^the policy /, "")
        }; the hooks carry no policy, so nothing was installed: restart the guard with --policy ${policyFile}, ` +
          `or install without --policy`
      )
    }
    return `the guard at ${url} runs ${policyFile}'s policy ${runs.name} (sha256 ${runs.sha256})\n`
  })
