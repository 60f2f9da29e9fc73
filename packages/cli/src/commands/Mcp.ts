/**
 * `session-journal mcp proxy [--policy FILE] [--name NAME] -- COMMAND [ARGS…]`
 * (or `--url URL`): the MCP gateway of `@session-journal/mcp` between the
 * command's stdin/stdout (the client) and an MCP server. Every `tools/call` is
 * decided by the policy and journaled with its result, in the journal of
 * `--dir` / `--postgres`; everything else passes through unchanged. A policy
 * file that cannot be read does not stop the gateway: every call is then denied
 * with the reason (fail closed), and the reason is also written to stderr.
 *
 * @since 0.1.0
 */
import { Entry, Guard, Policy } from "@session-journal/core"
import { Gateway } from "@session-journal/mcp"
import { Argument, Command, Flag } from "effect/cli"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { ChildProcessSpawner } from "effect/process/ChildProcessSpawner"
import * as Stream from "effect/Stream"
import * as fs from "node:fs"
import * as path from "node:path"
import { Exit, ExitCode, InvalidInput, NotAvailable } from "../Failure.ts"
import * as Input from "../Input.ts"
import { withJournal } from "../internal/commandKit.ts"
import * as LiveExport from "../internal/liveExport.ts"
import * as OtlpFlags from "../internal/otlpFlags.ts"
import * as PublishFlags from "../internal/publishFlags.ts"
import * as Output from "../Output.ts"
import * as PolicyFile from "../PolicyFile.ts"
import type * as Publish from "./Publish.ts"

/**
 * The exit code of `mcp proxy` when the server it ran ended before the client,
 * crashed or leaving requests unanswered: 70 (EX_SOFTWARE of sysexits.h: the
 * software it drives failed), as `claude-code run` when the CLI it drives dies.
 *
 * @since 0.1.0
 */
export const SERVER_ENDED_EXIT = ExitCode.serverEnded

const optionalString = (name: string, metavar: string, description: string) =>
  Flag.String(name).pipe(Flag.optional, Flag.withMetavar(metavar), Flag.withDescription(description))

const flags = {
  policy: optionalString(
    "policy",
    "FILE",
    "Decide every tools/call with this policy file (none: record only, every call allowed)"
  ),
  name: optionalString(
    "name",
    "NAME",
    "The server's name in tool names, mcp__NAME__tool (default: the command's or host's name)"
  ),
  url: optionalString("url", "URL", "Reach a Streamable HTTP server at URL instead of starting COMMAND"),
  header: Flag.String("header").pipe(
    Flag.atLeast(0),
    Flag.withMetavar("NAME:VALUE"),
    Flag.withDescription("With --url: a header sent with every request (repeatable), e.g. \"Authorization: Bearer …\"")
  ),
  session: optionalString(
    "session",
    "ID",
    "Journal session of the connection (default mcp-<hash of name, clientInfo and start>)"
  ),
  maxLineBytes: Flag.Int("max-line-bytes").pipe(
    Flag.withDefault(Gateway.DEFAULT_MAX_LINE_BYTES),
    Flag.withDescription("Longest message held; a longer client request is refused, a longer server line streamed")
  ),
  maxPending: Flag.Int("max-pending").pipe(
    Flag.withDefault(Gateway.DEFAULT_MAX_PENDING),
    Flag.withDescription("Most requests waiting for the server; more are refused with an error")
  ),
  ...PublishFlags.flags,
  otlp: OtlpFlags.otlpFlag,
  command: Argument.String("command").pipe(
    Argument.variadic(),
    Argument.withDescription("The server's command and its arguments, after --")
  )
}

/**
 * The name of a server by default: the command's base name (`npx pkg`: the
 * package's name without scope or version), or the URL's host.
 *
 * @since 0.1.0
 */
export const defaultName = (command: ReadonlyArray<string>, url: string | undefined): string => {
  if (url !== undefined) {
    try {
      return new URL(url).hostname
    } catch {
      return "server"
    }
  }
  const [first, ...rest] = command
  if (first === undefined) return "server"
  const base = path.basename(first)
  const pkg = base === "npx" || base === "node" || base === "uvx"
    ? rest.find((a) => !a.startsWith("-"))
    : undefined
  const name = pkg === undefined ? base : path.basename(pkg.replace(/@[^@/]*$/, "").replace(/\.[cm]?js$/, ""))
  return name.replace(/^server-/, "").replace(/^mcp-server-/, "")
}

/**
 * The policy of a file, compiled (`Policy.compile`: the gateway decides with it and
 * counts outcomes in its scoped byte limits), read again before a call whenever the
 * file changed (its inode, size, modification or change time), so an edit takes
 * effect on the next call without a restart. A file that cannot be read or
 * decoded gives a guard that denies every call with the reason (written to
 * stderr once per change); the first read happens at once, so a bad file is
 * reported when the gateway starts.
 *
 * @since 0.1.0
 */
export const policyGuard = (
  file: string,
  note: (line: string) => Effect.Effect<void>
): Effect.Effect<Effect.Effect<Guard.Guard | Policy.Compiled>> =>
  Effect.gen(function*() {
    let cached: { readonly key: string; readonly guard: Guard.Guard | Policy.Compiled } | null = null
    let noted: string | null = null
    const current = Effect.gen(function*() {
      // On the calling thread: a stat of a file just read is answered from the
      // kernel's cache in microseconds, where a hop through libuv's thread pool
      // costs a thread's wake-up on every call.
      const key = yield* Effect.try({
        try: () => {
          const st = fs.statSync(file, { bigint: true, throwIfNoEntry: false })
          return st === undefined ? null : `${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`
        },
        catch: () => null
      }).pipe(Effect.orElseSucceed(() => null))
      if (key !== null && cached !== null && cached.key === key) return cached.guard
      const loaded = yield* Effect.result(PolicyFile.load(file))
      let guard: Guard.Guard | Policy.Compiled
      if (loaded._tag === "Success") {
        guard = Policy.compile(loaded.success)
        noted = null
      } else {
        const reason = `the policy cannot be read, so no call is allowed: ${loaded.failure.message}`
        if (noted !== reason) yield* note(reason)
        noted = reason
        guard = () => Guard.deny(reason, "policy")
      }
      cached = key === null ? null : { key, guard }
      return guard
    })
    yield* current
    return current
  })

const proxy = Command.make("proxy", flags, (a) =>
  Effect.gen(function*() {
    const spawner = yield* ChildProcessSpawner
    // The server crashed or left requests unanswered (said on stderr): the command fails.
    let crashed = false
    yield* withJournal(() =>
      Effect.gen(function*() {
        const url = Option.getOrUndefined(a.url)
        if (url === undefined && a.command.length === 0) {
          return yield* new InvalidInput({ field: "command", reason: "give the server's command after --, or --url" })
        }
        if (url !== undefined && a.command.length > 0) {
          return yield* new InvalidInput({ field: "command", reason: "give either --url or a command, not both" })
        }
        if (a.maxLineBytes < 1024 || a.maxPending < 1) {
          return yield* new InvalidInput({
            field: "--max-line-bytes",
            reason: "--max-line-bytes is at least 1024 and --max-pending at least 1"
          })
        }
        const headers: Record<string, string> = {}
        for (const h of a.header) {
          const colon = h.indexOf(":")
          if (colon <= 0) return yield* new InvalidInput({ field: "--header", reason: `${h} is not NAME: VALUE` })
          headers[h.slice(0, colon).trim()] = h.slice(colon + 1).trim()
        }
        const session = Option.getOrUndefined(a.session)
        if (session !== undefined) yield* Effect.fromResult(Entry.validateSessionId(session))
        const file = Option.getOrUndefined(a.policy)
        const streams = yield* Output.streams
        const note = (line: string) => Effect.sync(() => streams.stderr(`session-journal mcp: ${line}\n`))
        const guard = file === undefined ? null : yield* policyGuard(file, note)
        const policyName = file === undefined ? null : path.basename(file)
        const stdin = yield* Input.Stdin
        const publishing = yield* PublishFlags.optionsOf(a)
        const gateway = Gateway.run({
          name: Option.getOrElse(a.name, () => defaultName(a.command, url)),
          server: url !== undefined
            ? { _tag: "Http", url, headers }
            : { _tag: "Command", command: a.command[0]!, args: a.command.slice(1) },
          guard,
          policyName,
          session,
          maxLineBytes: a.maxLineBytes,
          maxPending: a.maxPending,
          log: (line) => Effect.sync(() => streams.stderr(line + "\n"))
        }, {
          input: Stream.fromAsyncIterable(stdin(), (e) => e).pipe(
            Stream.map((chunk) => typeof chunk === "string" ? new TextEncoder().encode(chunk) : chunk)
          ),
          write: (bytes) =>
            Effect.callback<void, unknown>((resume) => {
              streams.stdout(bytes, (error) => resume(error === undefined ? Effect.void : Effect.fail(error)))
            })
        }).pipe(
          Effect.provideService(ChildProcessSpawner, spawner),
          Effect.catchTag(
            "ServerEnded",
            (e) =>
              Effect.andThen(Output.errorLine(`session-journal mcp: ${e.message}`), Effect.sync(() => (crashed = true)))
          ),
          Effect.mapError((e) => new NotAvailable({ feature: "the MCP server", reason: e.message }))
        )
        if (publishing === undefined) return yield* gateway
        const m = yield* Effect.promise((): Promise<typeof Publish> => import("./Publish.ts"))
        yield* m.publishAround(gateway, publishing)
      }).pipe(LiveExport.journaled(a.otlp))
    )
    if (crashed) return yield* new Exit({ code: SERVER_ENDED_EXIT })
  })).pipe(
    Command.withDescription(
      "Stand between an MCP client (stdin/stdout) and an MCP server: every tools/call decided by --policy and " +
        "journaled with its result, every other message passed through unchanged"
    )
  )

/**
 * The `mcp` command: `proxy`.
 *
 * @since 0.1.0
 */
export const mcp = Command.make("mcp").pipe(
  Command.withDescription("The MCP gateway: any MCP client's tool calls decided and journaled"),
  Command.withSubcommands([proxy])
)
