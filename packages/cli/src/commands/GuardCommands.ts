/**
 * `session-journal claude-code guard` (the resident guard, `GuardServer`) and
 * `session-journal claude-code forward` (the command hook that forwards to it,
 * `Forward`; the bin runs it without the command tree, this entry is for
 * `--help` and for calls with global flags before it).
 *
 * @since 0.4.0
 */
import { Command, Flag } from "effect/cli"
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as path from "node:path"
import { Exit, InvalidInput } from "../Failure.ts"
import { Dir, nonNegative, onCommandLine, withoutJournal } from "../internal/commandKit.ts"
import * as Output from "../Output.ts"
import { load } from "../PolicyFile.ts"
import * as Forward from "./Forward.ts"
import type * as GuardServer from "./GuardServer.ts"

/**
 * The variable a policy file comes from when `--policy` is not given.
 *
 * @since 0.4.0
 */
export const POLICY_VAR = "SESSION_JOURNAL_POLICY"

/**
 * The port the guard listens on by default.
 *
 * @since 0.4.0
 */
export const DEFAULT_PORT = 18787

/**
 * The token variable (as `GuardServer.TOKEN_VAR`, without loading the server).
 *
 * @since 0.4.0
 */
export const GUARD_TOKEN_VAR = Forward.TOKEN_VAR

const policyFlag = Flag.String("policy").pipe(
  Flag.withFallbackConfig(Config.String(POLICY_VAR)),
  Flag.optional,
  Flag.withMetavar("FILE"),
  Flag.withDescription(`Policy file deciding PreToolUse (default $${POLICY_VAR}; none = record only)`)
)

/**
 * `claude-code guard [--policy FILE] [--port N] [--root DIR]`.
 *
 * @since 0.4.0
 */
export const guard = Command.make("guard", {
  policy: policyFlag,
  port: nonNegative("port").pipe(
    Flag.withDefault(DEFAULT_PORT),
    Flag.withDescription(`Port on 127.0.0.1 (default ${DEFAULT_PORT}; 0 picks a free one)`)
  ),
  root: Flag.String("root").pipe(
    Flag.optional,
    Flag.withMetavar("DIR"),
    Flag.withDescription("Journal directory (default --dir, $SESSION_JOURNAL_DIR, else ./.session-journal)")
  )
}, (a) =>
  Effect.flatMap(Dir, (dir) =>
    withoutJournal(({ storage }) =>
      Effect.gen(function*() {
        const root = Option.getOrUndefined(a.root)
        // As the command hook: one way to name the journal.
        if (root !== undefined && onCommandLine(dir) !== undefined) {
          return yield* new InvalidInput({ field: "--root", reason: "give --root DIR or --dir DIR, not both" })
        }
        const file = Option.getOrUndefined(a.policy)
        const policy = file === undefined ? null : yield* load(file)
        const given = Option.getOrUndefined(yield* Effect.orDie(Config.option(Config.String(GUARD_TOKEN_VAR))))
        // The HTTP server's modules load only for this command.
        const module = yield* Effect.promise((): Promise<typeof GuardServer> => import("./GuardServer.ts"))
        const token = given !== undefined && given !== "" ? given : module.makeToken()
        if (given === undefined || given === "") {
          yield* Output.write(
            `session-journal guard: no $${GUARD_TOKEN_VAR} in the environment, so this run made one:\n` +
              `${GUARD_TOKEN_VAR}=${token}\n` +
              `Set it in the environment Claude Code runs in (the installed hooks send it from there), ` +
              `or start the guard with it set to keep one token across restarts.\n`
          )
        }
        yield* module.run({
          port: a.port,
          token,
          policy,
          policyName: file,
          storage: root === undefined ? storage : { ...storage, dir: path.resolve(root) }
        })
      })
    ))).pipe(Command.withDescription(
      "Serve Claude Code's hooks from a resident process on 127.0.0.1: the only writer of its journal, " +
        `deciding PreToolUse by the policy; requests need Authorization: Bearer $${GUARD_TOKEN_VAR}; SIGTERM drains and exits 0`
    ))

/**
 * `claude-code forward --url URL [--token-env NAME | --token-file FILE] [--timeout-ms N]`.
 *
 * @since 0.4.0
 */
export const forward = Command.make("forward", {
  url: Flag.String("url").pipe(
    Flag.withMetavar("URL"),
    Flag.withDescription("The guard's hook URL, http://127.0.0.1:PORT/hook")
  ),
  tokenEnv: Flag.String("token-env").pipe(
    Flag.optional,
    Flag.withMetavar("NAME"),
    Flag.withDescription(`Variable holding the token (default ${GUARD_TOKEN_VAR})`)
  ),
  tokenFile: Flag.String("token-file").pipe(
    Flag.optional,
    Flag.withMetavar("FILE"),
    Flag.withDescription("File whose first line is the token")
  ),
  timeoutMs: nonNegative("timeout-ms").pipe(
    Flag.optional,
    Flag.withDescription(`How long to wait for the guard (default ${Forward.DEFAULT_TIMEOUT_MS})`)
  )
}, (a) =>
  Effect.gen(function*() {
    const args = [
      "--url",
      a.url,
      ...Option.match(a.tokenEnv, { onNone: () => [], onSome: (v) => ["--token-env", v] }),
      ...Option.match(a.tokenFile, { onNone: () => [], onSome: (v) => ["--token-file", v] }),
      ...Option.match(a.timeoutMs, { onNone: () => [], onSome: (v) => ["--timeout-ms", String(v)] })
    ]
    const code = yield* Effect.promise(() => Forward.main(args))
    if (code !== 0) return yield* new Exit({ code })
  })).pipe(Command.withDescription(
    "The command hook of the guard's installed form: forwards one hook event (stdin) to the guard and prints its answer; " +
      "denies the call itself when the guard cannot be reached"
  ))
