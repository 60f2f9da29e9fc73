/**
 * Our hooks in Codex's `config.toml`, edited as text, and their trust.
 *
 * The hooks are one block of TOML at the end of the file, between two comment
 * lines (`BEGIN`, `END`): a `[[hooks.PreToolUse]]` and a `[[hooks.PostToolUse]]`
 * group with one command handler each (docs/codex-PROTOCOL.md (a)). Every byte
 * outside the block stays as it was; installing again replaces the block where
 * it is, so the edit is idempotent, and `remove` gives back the bytes from before
 * the install. A file that already sets these events in a form an appended
 * array of tables would clash with (`hooks = {…}`, `PreToolUse = [...]`) is
 * refused, not rewritten.
 *
 * Codex runs a non-managed hook only when the user config records its trust
 * (`[hooks.state."<key>"] trusted_hash = "sha256:…"`), and skips an untrusted or
 * modified one without a word. The hash is Codex's own: `listHooks` asks the
 * installed Codex for it (`codex app-server`, `hooks/list`), and `trustText`
 * writes it in a second block (`TRUST_BEGIN`, `TRUST_END`) of the user config;
 * an existing `trusted_hash` of one of our keys outside that block is changed in
 * place instead.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { spawn } from "node:child_process"

/**
 * The line that opens our hooks' block.
 *
 * @since 0.1.0
 */
export const BEGIN = "# >>> session-journal codex hooks (session-journal codex install; remove with --uninstall) >>>"

/**
 * The line that closes our hooks' block.
 *
 * @since 0.1.0
 */
export const END = "# <<< session-journal codex hooks <<<"

/**
 * The line that opens our trust block in the user config.
 *
 * @since 0.1.0
 */
export const TRUST_BEGIN = "# >>> session-journal codex trust (the hashes Codex gave for our hooks) >>>"

/**
 * The line that closes our trust block.
 *
 * @since 0.1.0
 */
export const TRUST_END = "# <<< session-journal codex trust <<<"

/**
 * The events our hooks are installed for.
 *
 * @since 0.1.0
 */
export const EVENTS = ["PreToolUse", "PostToolUse"] as const

/**
 * The `timeout` of an installed hook, in seconds: above the hook's own deadline
 * (50 s), so the hook answers (and denies when it must) before Codex gives up on
 * it (a timed-out hook lets the call run).
 *
 * @since 0.1.0
 */
export const HOOK_TIMEOUT_SECONDS = 60

/**
 * Why a config file cannot be edited.
 *
 * @since 0.1.0
 */
export class ConfigTextError extends Schema.TaggedError<ConfigTextError>()("ConfigTextError", {
  reason: Schema.String
}) {
  override get message(): string {
    return this.reason
  }
}

/** A TOML basic string: JSON's escapes are TOML's for every character JSON escapes. */
const tomlString = (s: string): string =>
  JSON.stringify(s).replace(/[\u007f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)

/**
 * The block of our hooks: one group per event (`EVENTS`), its handler running
 * `commandFor(event)`, with `timeout` `HOOK_TIMEOUT_SECONDS`.
 *
 * @since 0.1.0
 */
export const hooksBlock = (commandFor: (event: (typeof EVENTS)[number]) => string): string =>
  [
    BEGIN,
    ...EVENTS.flatMap((event) => [
      `[[hooks.${event}]]`,
      `[[hooks.${event}.hooks]]`,
      `type = "command"`,
      `command = ${tomlString(commandFor(event))}`,
      `timeout = ${HOOK_TIMEOUT_SECONDS}`
    ]),
    END
  ].join("\n") + "\n"

/**
 * The trust block: one `[hooks.state."<key>"]` table per hook, with the hash
 * Codex gave for it.
 *
 * @since 0.1.0
 */
export const trustBlock = (trusts: ReadonlyArray<{ readonly key: string; readonly hash: string }>): string =>
  [
    TRUST_BEGIN,
    ...trusts.flatMap((t) => [`[hooks.state.${tomlString(t.key)}]`, `trusted_hash = ${tomlString(t.hash)}`]),
    TRUST_END
  ].join("\n") + "\n"

interface Found {
  /** Where the block starts (the newline we added before it included) and where it ends (after its last newline). */
  readonly start: number
  readonly end: number
}

// A block appended to a file without a final newline has this comment line after
// its opening line: the newline before the block is ours too.
const JOIN_MARK = "# (the newline before this block was added by session-journal)"

// A block we wrote: from its opening line to the end of its closing line.
const findBlock = (text: string, begin: string, end: string): Found | null => {
  const after = text.indexOf(`\n${begin}\n`)
  const from = text.startsWith(`${begin}\n`) ? 0 : after < 0 ? -1 : after + 1
  if (from < 0) return null
  const close = text.indexOf(`\n${end}`, from)
  if (close < 0) {
    throw new ConfigTextError({ reason: `the line ${JSON.stringify(end)} that closes our block is missing` })
  }
  let stop = close + 1 + end.length
  if (text[stop] === "\n") stop++
  else if (stop !== text.length) {
    throw new ConfigTextError({ reason: `the line ${JSON.stringify(end)} is followed by more text on its line` })
  }
  const joined = from > 0 && text.startsWith(`${begin}\n${JOIN_MARK}\n`, from)
  return { start: joined ? from - 1 : from, end: stop }
}

const withoutBlock = (text: string, begin: string, end: string): string => {
  const found = findBlock(text, begin, end)
  return found === null ? text : text.slice(0, found.start) + text.slice(found.end)
}

// Appends `block` at the end, marking the newline it adds when the text lacks one.
const appended = (text: string, block: string): string => {
  if (text === "" || text.endsWith("\n")) return text + block
  const [first, ...rest] = block.split("\n")
  return `${text}\n${[first, JOIN_MARK, ...rest].join("\n")}`
}

// Replaces the block in place when there is one, else appends it.
const placed = (text: string, begin: string, end: string, block: string): string => {
  const found = findBlock(text, begin, end)
  return found === null
    ? appended(text, block)
    : appended(text.slice(0, found.start), block) + text.slice(found.end)
}

// Settings of the events that an appended `[[hooks.<event>]]` would clash with.
const clashes = (text: string): string | null => {
  const lines = text.split("\n")
  let table = ""
  for (const raw of lines) {
    const line = raw.trim()
    const header = /^(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$/.exec(line)
    if (header !== null) {
      table = header[2]!.replace(/[\s"]+/g, "")
      // `[hooks.PreToolUse]` (one table, not an array of them) and `[[hooks]]` cannot take our tables either.
      const array = header[1] === "[["
      if ((!array && EVENTS.some((e) => table === `hooks.${e}`)) || (array && table === "hooks")) return line
      continue
    }
    const key = /^([A-Za-z0-9_."-]+)\s*=/.exec(line)?.[1]?.replace(/"/g, "")
    if (key === undefined) continue
    const full = table === "" ? key : `${table}.${key}`
    if (full === "hooks" || EVENTS.some((e) => full === `hooks.${e}`)) return full
  }
  return null
}

/**
 * `text` with our hooks' block in it (`hooksBlock`): replaced where it is, or
 * appended. Throws `ConfigTextError` when the file sets `hooks` or one of our
 * events in a form an array of tables cannot extend (an inline table or array,
 * `[hooks.PreToolUse]` as one table, `[[hooks]]`).
 *
 * @since 0.1.0
 */
export const installText = (text: string, block: string): string => {
  const outside = withoutBlock(text, BEGIN, END)
  const clash = clashes(outside)
  if (clash !== null) {
    throw new ConfigTextError({
      reason: `it sets ${clash} in a form an array of tables cannot extend (our hooks are appended as ` +
        `[[hooks.PreToolUse]] and [[hooks.PostToolUse]] tables): write those hooks as [[…]] tables first`
    })
  }
  return placed(text, BEGIN, END, block)
}

/**
 * `text` without our hooks' block and without our trust block: the bytes from
 * before they were added.
 *
 * @since 0.1.0
 */
export const removeText = (text: string): string => {
  // The later block first: removing the earlier one could take the newline before the later one with it.
  const hooks = findBlock(text, BEGIN, END)
  const trust = findBlock(text, TRUST_BEGIN, TRUST_END)
  return hooks !== null && trust !== null && trust.start < hooks.start
    ? withoutBlock(withoutBlock(text, BEGIN, END), TRUST_BEGIN, TRUST_END)
    : withoutBlock(withoutBlock(text, TRUST_BEGIN, TRUST_END), BEGIN, END)
}

/**
 * `text` (the user config) trusting `trusts`: a key that already has a
 * `[hooks.state."<key>"]` table outside our trust block gets its `trusted_hash`
 * changed in place (a table written twice is a TOML error); the others go into
 * our trust block, replaced where it is or appended.
 *
 * @since 0.1.0
 */
export const trustText = (
  text: string,
  trusts: ReadonlyArray<{ readonly key: string; readonly hash: string }>
): string => {
  let outside = withoutBlock(text, TRUST_BEGIN, TRUST_END)
  let next = text
  const ours: Array<{ readonly key: string; readonly hash: string }> = []
  for (const t of trusts) {
    const header = `[hooks.state.${tomlString(t.key)}]`
    const at = outside.split("\n").findIndex((l) => l.trim() === header)
    if (at < 0) {
      ours.push(t)
      continue
    }
    const lines = next.split("\n")
    const inNext = lines.findIndex((l) => l.trim() === header)
    let i = inNext + 1
    for (; i < lines.length && !lines[i]!.trim().startsWith("["); i++) {
      if (/^\s*trusted_hash\s*=/.test(lines[i]!)) {
        lines[i] = `trusted_hash = ${tomlString(t.hash)}`
        break
      }
    }
    if (i >= lines.length || lines[i]!.trim().startsWith("[")) {
      lines.splice(inNext + 1, 0, `trusted_hash = ${tomlString(t.hash)}`)
    }
    next = lines.join("\n")
    outside = withoutBlock(next, TRUST_BEGIN, TRUST_END)
  }
  return ours.length === 0
    ? withoutBlock(next, TRUST_BEGIN, TRUST_END)
    : placed(next, TRUST_BEGIN, TRUST_END, trustBlock(ours))
}

// ---------------------------------------------------------------------------
// What Codex says of its hooks

/**
 * One hook as `codex app-server`'s `hooks/list` reports it.
 *
 * @since 0.1.0
 */
export const ListedHook = Schema.Struct({
  key: Schema.String,
  eventName: Schema.String,
  command: Schema.NullOr(Schema.String),
  sourcePath: Schema.String,
  enabled: Schema.Boolean,
  isManaged: Schema.Boolean,
  currentHash: Schema.String,
  trustStatus: Schema.String
})

/**
 * One hook as Codex reports it.
 *
 * @since 0.1.0
 */
export type ListedHook = typeof ListedHook.Type

const Listing = Schema.Struct({
  data: Schema.Array(Schema.Struct({
    cwd: Schema.String,
    hooks: Schema.Array(ListedHook),
    warnings: Schema.Array(Schema.Json),
    errors: Schema.Array(Schema.Json)
  }))
})

/**
 * Why Codex could not be asked about its hooks.
 *
 * @since 0.1.0
 */
export class CodexError extends Schema.TaggedError<CodexError>()("CodexError", {
  reason: Schema.String
}) {
  override get message(): string {
    return this.reason
  }
}

/**
 * What `hooks/list` answered for one working directory: its hooks, and the
 * warnings and errors Codex had loading them (an invalid matcher, say).
 *
 * @since 0.1.0
 */
export interface Listed {
  readonly hooks: ReadonlyArray<ListedHook>
  readonly problems: ReadonlyArray<string>
}

// Bytes of app-server output read at most.
const MAX_OUTPUT_BYTES = 8 * 1024 * 1024

/**
 * Asks the Codex binary `codex` which hooks it would run in `cwd` and whether it
 * trusts them: `codex app-server` over stdio, `initialize`, `initialized`,
 * `hooks/list {cwds: [cwd]}`, then the process is ended. `env` is its
 * environment (`CODEX_HOME` says whose configuration). Fails with `CodexError`
 * when Codex cannot be started, answers with an error, or not within
 * `timeoutMillis` (default 30 s).
 *
 * @since 0.1.0
 */
export const listHooks = (
  codex: string,
  cwd: string,
  env: Readonly<Record<string, string | undefined>>,
  timeoutMillis = 30_000
): Effect.Effect<Listed, CodexError> =>
  Effect.callback<unknown, CodexError>((resume) => {
    const child = spawn(codex, ["app-server"], { cwd, env: env as NodeJS.ProcessEnv, stdio: ["pipe", "pipe", "pipe"] })
    let buffered = ""
    let size = 0
    let stderr = ""
    let settled = false
    const finish = (r: Effect.Effect<unknown, CodexError>) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      child.stdin.destroy()
      child.kill("SIGTERM")
      resume(r)
    }
    const timer = setTimeout(
      () =>
        finish(
          Effect.fail(new CodexError({ reason: `${codex} app-server gave no hook list within ${timeoutMillis} ms` }))
        ),
      timeoutMillis
    )
    child.on("error", (e) => finish(Effect.fail(new CodexError({ reason: `cannot start ${codex}: ${e.message}` }))))
    child.on("exit", (code, signal) =>
      finish(Effect.fail(
        new CodexError({
          reason: `${codex} app-server ended (${signal ?? `exit ${code}`}) before listing its hooks` +
            (stderr.trim() === "" ? "" : `: ${stderr.trim().split("\n").slice(-1)[0]}`)
        })
      )))
    child.stderr.on("data", (d: Buffer) => {
      stderr = (stderr + d.toString("utf8")).slice(-4096)
    })
    child.stdout.on("data", (d: Buffer) => {
      size += d.length
      if (size > MAX_OUTPUT_BYTES) {
        return finish(
          Effect.fail(new CodexError({ reason: `${codex} app-server wrote more than ${MAX_OUTPUT_BYTES} bytes` }))
        )
      }
      buffered += d.toString("utf8")
      for (let nl = buffered.indexOf("\n"); nl >= 0; nl = buffered.indexOf("\n")) {
        const line = buffered.slice(0, nl)
        buffered = buffered.slice(nl + 1)
        let message: unknown
        try {
          message = JSON.parse(line)
        } catch {
          continue
        }
        if (typeof message !== "object" || message === null) continue
        const m = message as { readonly id?: unknown; readonly result?: unknown; readonly error?: unknown }
        if (m.id === 1 && m.error !== undefined) {
          return finish(Effect.fail(new CodexError({ reason: `initialize failed: ${JSON.stringify(m.error)}` })))
        }
        if (m.id === 1) {
          child.stdin.write(
            JSON.stringify({ jsonrpc: "2.0", method: "initialized" }) + "\n" +
              JSON.stringify({ jsonrpc: "2.0", id: 2, method: "hooks/list", params: { cwds: [cwd] } }) + "\n"
          )
        } else if (m.id === 2) {
          return finish(
            m.error !== undefined
              ? Effect.fail(new CodexError({ reason: `hooks/list failed: ${JSON.stringify(m.error)}` }))
              : Effect.succeed(m.result)
          )
        }
      }
    })
    child.stdin.on("error", () => {})
    child.stdin.write(
      JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { clientInfo: { name: "session-journal", version: "0.8.0" } }
      }) + "\n"
    )
    return Effect.sync(() => {
      settled = true
      clearTimeout(timer)
      child.kill("SIGKILL")
    })
  }).pipe(
    Effect.flatMap((result) =>
      Schema.decodeUnknownEffect(Listing)(result).pipe(
        Effect.mapError((e) => new CodexError({ reason: `hooks/list answered in an unknown form: ${e.message}` }))
      )
    ),
    Effect.map((listing): Listed => {
      const here = listing.data.find((d) => d.cwd === cwd) ?? listing.data[0]
      return here === undefined ? { hooks: [], problems: [] } : {
        hooks: here.hooks,
        problems: [...here.warnings, ...here.errors].map((p) => typeof p === "string" ? p : JSON.stringify(p))
      }
    })
  )

/**
 * Our hooks among those Codex listed: the ones whose command is one of
 * `commands`.
 *
 * @since 0.1.0
 */
export const ours = (listed: Listed, commands: ReadonlyArray<string>): ReadonlyArray<ListedHook> =>
  listed.hooks.filter((h) => h.command !== null && commands.includes(h.command))

/**
 * Whether Codex will run a hook: enabled, and trusted (or managed).
 *
 * @since 0.1.0
 */
export const willRun = (hook: ListedHook): boolean =>
  hook.enabled && (hook.trustStatus === "trusted" || hook.trustStatus === "managed")
