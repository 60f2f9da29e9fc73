/**
 * `session-journal claude-code forward --url URL`: the command hook that hands
 * each Claude Code hook event to the resident guard over loopback HTTP and
 * fails closed when it cannot.
 *
 * Claude Code lets a call run when an `http` hook cannot be reached (PROTOCOL.md
 * "HTTP hooks"), so a guard that is down, or killed mid-session, would stop
 * guarding without anyone noticing. This forwarder is installed as a `command`
 * hook instead: it reads the event from stdin (at most `MAX_EVENT_BYTES`),
 * POSTs it to the guard with `Authorization: Bearer TOKEN` and writes the
 * guard's answer to stdout. When there is no answer — the guard is not
 * listening, does not answer within the timeout, refuses the request (a wrong
 * token) or answers with an error — it answers itself, per event:
 *
 * - PreToolUse: `permissionDecision: "deny"` with the reason
 *   (`the session-journal guard at URL is not reachable: connect ECONNREFUSED …`):
 *   the call does not run;
 * - PermissionRequest: `decision.behavior: "deny"` with the reason;
 *   UserPromptSubmit: exit 2 with the reason on stderr (the prompt is blocked);
 * - any other event (it already happened, nothing can be denied): exit 1 with the
 *   reason on stderr, which Claude Code keeps in the transcript as a hook error;
 * - an event it cannot read: exit 2 with the reason.
 *
 * It does not decide by itself (by taking the journal's lock and running the
 * policy): the guard is the journal's only writer, and a guard that is down is
 * a fault to repair, not a mode to run in. Denying says so at the first call,
 * with the address to check.
 *
 * The token comes from `$SESSION_JOURNAL_GUARD_TOKEN` (hooks inherit Claude
 * Code's environment), another variable (`--token-env NAME`), or a file only the
 * user can read (`--token-file FILE`, first line; refused when others may read
 * it). This module loads nothing but `node:http` and `node:fs` and is started
 * without the command tree (`main.ts` loads it directly for
 * `claude-code forward`), so a hook costs about one Node start.
 *
 * @since 0.4.0
 */
import { messageOf } from "@session-journal/core/ErrorMessage"
import type * as Fs from "node:fs"
import type * as Http from "node:http"
import { createRequire } from "node:module"
import * as ProcessStreams from "../internal/processStreams.ts"

// Loaded with `createRequire`, not `import`: an ES module import of a builtin reads
// every export of it, and `node:http`'s lazy `WebSocket` and friends then load
// undici, which costs more than the rest of the forwarder (about 50–150 ms).
const load = createRequire(import.meta.url)
const fs = load("node:fs") as typeof Fs
const http = load("node:http") as typeof Http

/**
 * Largest event read from stdin: 4 MiB, the guard's bound (`Hook.MAX_INPUT_BYTES`,
 * not imported: this module loads nothing but Node's own).
 *
 * @since 0.4.0
 */
export const MAX_EVENT_BYTES = 4 * 1024 * 1024

/**
 * How long the forwarder waits for the guard's answer by default (10 s); it must
 * be shorter than the hook's `timeout` in the settings, or Claude Code cancels the
 * hook first, which lets the call run.
 *
 * @since 0.4.0
 */
export const DEFAULT_TIMEOUT_MS = 10_000

/**
 * The variable the token is read from by default.
 *
 * @since 0.4.0
 */
export const TOKEN_VAR = "SESSION_JOURNAL_GUARD_TOKEN"

/**
 * What the forwarder is told on its command line.
 *
 * @since 0.4.0
 */
export interface Options {
  /** The guard's hook URL, `http://127.0.0.1:PORT/hook`. */
  readonly url: string
  /** The variable holding the token (default `TOKEN_VAR`); ignored with `tokenFile`. */
  readonly tokenEnv?: string | undefined
  /** A file whose first line is the token. */
  readonly tokenFile?: string | undefined
  /** How long to wait for the guard (default `DEFAULT_TIMEOUT_MS`). */
  readonly timeoutMs?: number | undefined
}

/**
 * What the forwarder does: the text for stdout, the text for stderr, the exit code.
 *
 * @since 0.4.0
 */
export interface Outcome {
  readonly stdout: string
  readonly stderr: string
  readonly code: number
}

/**
 * The forwarder's own answer when the guard gave none, for the event named
 * `event` (null when the input could not be read as an event).
 *
 * @since 0.4.0
 */
export const fallback = (event: string | null, reason: string): Outcome => {
  switch (event) {
    case "PreToolUse":
      return {
        stdout: JSON.stringify({
          hookSpecificOutput: {
            hookEventName: "PreToolUse",
            permissionDecision: "deny",
            permissionDecisionReason: reason
          }
        }) + "\n",
        stderr: "",
        code: 0
      }
    case "PermissionRequest":
      return {
        stdout: JSON.stringify({
          hookSpecificOutput: { hookEventName: "PermissionRequest", decision: { behavior: "deny", message: reason } }
        }) + "\n",
        stderr: "",
        code: 0
      }
    case "UserPromptSubmit":
    case null:
      return { stdout: "", stderr: reason + "\n", code: 2 }
    default:
      return { stdout: "", stderr: reason + "\n", code: 1 }
  }
}

/**
 * Parses the arguments after `claude-code forward`: `--url URL` (required),
 * `--token-env NAME`, `--token-file FILE`, `--timeout-ms N`; a message on a
 * mistake.
 *
 * @since 0.4.0
 */
export const parseArgs = (args: ReadonlyArray<string>): Options | string => {
  const values: Record<string, string> = {}
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!
    const eq = arg.indexOf("=")
    const [name, inline] = arg.startsWith("--") && eq > 0 ? [arg.slice(0, eq), arg.slice(eq + 1)] : [arg, undefined]
    if (!["--url", "--token-env", "--token-file", "--timeout-ms"].includes(name)) {
      return `unknown argument ${JSON.stringify(arg)}`
    }
    const value = inline ?? args[++i]
    if (value === undefined) return `${name} needs a value`
    values[name] = value
  }
  const url = values["--url"]
  if (url === undefined) return "--url URL is required (the guard's hook URL, http://127.0.0.1:PORT/hook)"
  const timeout = values["--timeout-ms"]
  const timeoutMs = timeout === undefined ? undefined : Number(timeout)
  if (timeoutMs !== undefined && !(Number.isSafeInteger(timeoutMs) && timeoutMs > 0)) {
    return "--timeout-ms must be a positive integer"
  }
  return { url, tokenEnv: values["--token-env"], tokenFile: values["--token-file"], timeoutMs }
}

const readStdin = (max: number): Promise<Buffer | null> =>
  new Promise((resolve, reject) => {
    const parts: Array<Buffer> = []
    let size = 0
    const stdin = process.stdin
    stdin.on("data", (chunk: Buffer) => {
      size += chunk.length
      if (size > max) {
        stdin.pause()
        stdin.removeAllListeners("data")
        resolve(null)
        return
      }
      parts.push(chunk)
    })
    stdin.on("end", () => resolve(Buffer.concat(parts)))
    stdin.on("error", reject)
  })

const eventName = (body: Buffer): string | null => {
  try {
    const event: unknown = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(body))
    const name = typeof event === "object" && event !== null
      ? (event as Record<string, unknown>)["hook_event_name"]
      : undefined
    return typeof name === "string" ? name : null
  } catch {
    return null
  }
}

const readToken = (options: Options): string | { readonly problem: string } => {
  if (options.tokenFile !== undefined) {
    try {
      const mode = fs.statSync(options.tokenFile).mode
      if (process.platform !== "win32" && (mode & 0o077) !== 0) {
        return {
          problem: `the token file ${options.tokenFile} may be read by others (mode ${
            (mode & 0o777).toString(8)
          }); chmod 600 it`
        }
      }
      const token = fs.readFileSync(options.tokenFile, "utf8").split("\n")[0]!.trim()
      return token === "" ? { problem: `the token file ${options.tokenFile} is empty` } : token
    } catch (e) {
      return { problem: `the token file cannot be read: ${messageOf(e)}` }
    }
  }
  const name = options.tokenEnv ?? TOKEN_VAR
  const token = process.env[name]
  return token === undefined || token === "" ? { problem: `$${name} is not set in Claude Code's environment` } : token
}

const post = (url: URL, token: string, body: Buffer, timeoutMs: number) =>
  new Promise<{ readonly status: number; readonly text: string }>((resolve, reject) => {
    const request = http.request(url, {
      method: "POST",
      headers: { "content-type": "application/json", "content-length": body.length, authorization: `Bearer ${token}` },
      timeout: timeoutMs
    }, (response) => {
      const parts: Array<Buffer> = []
      response.on("data", (chunk: Buffer) => parts.push(chunk))
      response.on(
        "end",
        () => resolve({ status: response.statusCode ?? 0, text: Buffer.concat(parts).toString("utf8") })
      )
      response.on("error", reject)
    })
    request.on("timeout", () => request.destroy(new Error(`no answer within ${timeoutMs} ms`)))
    request.on("error", reject)
    request.end(body)
  })

const errorOf = (text: string): string => {
  try {
    const parsed: unknown = JSON.parse(text)
    const error = typeof parsed === "object" && parsed !== null
      ? (parsed as Record<string, unknown>)["error"]
      : undefined
    if (typeof error === "string") return error
  } catch {
    // not JSON
  }
  return text.slice(0, 200)
}

/**
 * Forwards the event `body` to the guard and decides what to print and exit with.
 *
 * @since 0.4.0
 */
export const forward = async (options: Options, body: Buffer | null): Promise<Outcome> => {
  const where = `the session-journal guard at ${options.url}`
  if (body === null) {
    return fallback(null, `the hook event is larger than ${MAX_EVENT_BYTES} bytes; not forwarded to ${where}`)
  }
  const name = eventName(body)
  if (name === null) {
    return fallback(null, `the hook input is not a JSON hook event in UTF-8; not forwarded to ${where}`)
  }
  let url: URL
  try {
    url = new URL(options.url)
    if (url.protocol !== "http:") throw new Error("not an http: URL")
  } catch (e) {
    return fallback(
      name,
      `${where} cannot be reached: the URL is not valid (${messageOf(e)})`
    )
  }
  const token = readToken(options)
  if (typeof token !== "string") return fallback(name, `${where} cannot be asked: no token (${token.problem})`)
  try {
    const answer = await post(url, token, body, options.timeoutMs ?? DEFAULT_TIMEOUT_MS)
    if (answer.status === 200) return { stdout: answer.text, stderr: "", code: 0 }
    return fallback(name, `${where} refused the event: ${answer.status} ${errorOf(answer.text)}`)
  } catch (e) {
    return fallback(name, `${where} is not reachable: ${messageOf(e)}`)
  }
}

/**
 * Runs the forwarder on the process: arguments after `claude-code forward`, the
 * event on stdin, the answer on stdout; resolves with the exit code.
 *
 * @since 0.4.0
 */
export const main = async (args: ReadonlyArray<string>): Promise<number> => {
  const parsed = parseArgs(args)
  const outcome = typeof parsed === "string"
    ? fallback(null, `session-journal claude-code forward: ${parsed}`)
    : await forward(parsed, await readStdin(MAX_EVENT_BYTES))
  if (outcome.stderr !== "") ProcessStreams.writeStderr(outcome.stderr)
  await new Promise<void>((resolve) => ProcessStreams.writeStdout(outcome.stdout, () => resolve()))
  return outcome.code
}
