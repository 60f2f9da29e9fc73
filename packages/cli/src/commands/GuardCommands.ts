/**
 * `session-journal claude-code guard` (the resident guard, `GuardServer` of
 * `@session-journal/claude-code`) and `session-journal claude-code forward` (the
 * command hook that forwards to it, `Forwarder`; the bin runs it without the
 * command tree, `ForwardProcess.ts`, this entry is for `--help` and for calls
 * with global flags before it): their flags, the journal and the token from the
 * flags and the environment, the start line printed.
 *
 * @since 0.1.0
 */
import * as Forward from "@session-journal/claude-code/Forwarder"
import type * as GuardServer from "@session-journal/claude-code/GuardServer"
import * as SecretFile from "@session-journal/claude-code/SecretFile"
import { messageOf } from "@session-journal/core/ErrorMessage"
import { Command, Flag } from "effect/cli"
import * as Clock from "effect/Clock"
import * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Exit, InvalidInput, NotAvailable } from "../Failure.ts"
import { Dir, nonNegative, onCommandLine, waitFlag, withoutJournal } from "../internal/commandKit.ts"
import { parseWaitMillis } from "../internal/hookArgs.ts"
import * as LiveExport from "../internal/liveExport.ts"
import * as OtlpFlags from "../internal/otlpFlags.ts"
import * as PublishFlags from "../internal/publishFlags.ts"
import * as Output from "../Output.ts"
import { load } from "../PolicyFile.ts"
import * as Storage from "../Storage.ts"
import * as HostCheck from "../viewer/HostCheck.ts"
import * as ForwardProcess from "./ForwardProcess.ts"
import type * as Publish from "./Publish.ts"

/**
 * The variable a policy file comes from when `--policy` is not given.
 *
 * @since 0.1.0
 */
export const POLICY_VAR = "SESSION_JOURNAL_POLICY"

/**
 * The port the guard listens on by default.
 *
 * @since 0.1.0
 */
export const DEFAULT_PORT = 18787

/**
 * The token variable (as `GuardServer.TOKEN_VAR`, without loading the server).
 *
 * @since 0.1.0
 */
export const GUARD_TOKEN_VAR = Forward.TOKEN_VAR

/**
 * The directory a guard writes the token it made into when no `--token-file` is
 * given: `session-journal` in the user's state directory (`$XDG_STATE_HOME`,
 * else `~/.local/state`), created 0700.
 *
 * @since 0.1.0
 */
export const tokenDir = (env: { readonly XDG_STATE_HOME?: string | undefined }): string =>
  path.join(
    env.XDG_STATE_HOME !== undefined && path.isAbsolute(env.XDG_STATE_HOME)
      ? env.XDG_STATE_HOME
      : path.join(os.homedir(), ".local", "state"),
    "session-journal"
  )

/**
 * Where the guard's token comes from and what to say about it: the environment,
 * a token file it read, or a file it created for a token it made.
 *
 * @since 0.1.0
 */
export const resolveToken = (options: {
  readonly given: string | undefined
  readonly file: string | undefined
  readonly stateHome: string | undefined
  readonly make: () => string
}): Effect.Effect<
  { readonly token: string; readonly note: string | null; readonly file: string | null },
  InvalidInput
> =>
  Effect.gen(function*() {
    if (options.given !== undefined && options.given !== "") {
      if (options.file !== undefined) {
        return yield* new InvalidInput({
          field: "--token-file",
          reason: `give $${GUARD_TOKEN_VAR} or --token-file FILE, not both`
        })
      }
      return { token: options.given, note: null, file: null }
    }
    if (options.file !== undefined && fs.existsSync(options.file)) {
      const read = SecretFile.read(options.file, "token file", Forward.MAX_TOKEN_FILE_BYTES)
      if (read._tag === "Refused") return yield* new InvalidInput({ field: "--token-file", reason: read.reason })
      return { token: read.text.split("\n")[0]!.trim(), note: null, file: path.resolve(options.file) }
    }
    const token = options.make()
    const file = options.file !== undefined
      ? path.resolve(options.file)
      : path.join(
        tokenDir({ XDG_STATE_HOME: options.stateHome }),
        `guard-token-${(yield* Clock.currentTimeMillis).toString(36)}-${process.pid}`
      )
    yield* Effect.try({
      try: () => SecretFile.create(file, token + "\n"),
      catch: (e) =>
        new InvalidInput({
          field: "--token-file",
          reason: `cannot write the token this guard made to ${file}: ${e instanceof Error ? e.message : String(e)}`
        })
    })
    return {
      token,
      file,
      note: `session-journal guard: no $${GUARD_TOKEN_VAR} in the environment, so this run made a token and ` +
        `wrote it to ${file} (mode 0600; the token is not printed).\n` +
        `Give it to the hooks: install them with --guard URL --token-file ${file} (a variable in Claude Code's ` +
        `environment is one every command of the agent can read); start the guard with --token-file ${file} ` +
        `to keep this token across restarts.\n`
    }
  })

const policyFlag = Flag.String("policy").pipe(
  Flag.withFallbackConfig(Config.String(POLICY_VAR)),
  Flag.optional,
  Flag.withMetavar("FILE"),
  Flag.withDescription(`Policy file deciding PreToolUse (default $${POLICY_VAR}; none = record only)`)
)

/**
 * `claude-code guard [--policy FILE] [--port N] [--root DIR]`.
 *
 * @since 0.1.0
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
    Flag.withDescription(
      "Journal directory (default --dir, $SESSION_JOURNAL_DIR, else the user's state directory, ~/.local/state/session-journal)"
    )
  ),
  tokenFile: Flag.String("token-file").pipe(
    Flag.optional,
    Flag.withMetavar("FILE"),
    Flag.withDescription(
      `The token's file (mode 0600, first line), read when it exists; else a token is made and FILE created with it. ` +
        `Without it and without $${GUARD_TOKEN_VAR}, a token is made and written to a new file under ` +
        `$XDG_STATE_HOME/session-journal (never printed)`
    )
  ),
  handleTimeoutMs: nonNegative("handle-timeout-ms").pipe(
    Flag.optional,
    Flag.withDescription(
      `How long one event may take before it is refused (default ${Forward.DEFAULT_TIMEOUT_MS / 2}; ` +
        `under the forwarder's deadline)`
    )
  ),
  wait: waitFlag,
  idleClose: Flag.String("idle-close").pipe(
    Flag.mapTryCatch(parseWaitMillis, (e) => `invalid --idle-close: ${messageOf(e)}`),
    Flag.optional,
    Flag.withMetavar("DURATION"),
    Flag.withDescription("How long a session with nothing to write stays open in the guard (default 10m)")
  ),
  acceptBearer: Flag.Boolean("accept-bearer").pipe(
    Flag.withDefault(false),
    Flag.withDescription(
      "Also take Authorization: Bearer TOKEN as proof, for Claude Code's own http hooks (which fail open); " +
        "the forwarder never sends the token"
    )
  ),
  noSelfProtection: Flag.Boolean("no-self-protection").pipe(
    Flag.withDefault(false),
    Flag.withDescription("Let calls touch the journal, the policy file and the settings that hold the hooks")
  ),
  ...PublishFlags.flags,
  otlp: OtlpFlags.otlpFlag
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
        const publishing = yield* PublishFlags.optionsOf(a)
        const sending = yield* OtlpFlags.resolve({ field: "--otlp", endpoint: a.otlp })
        const given = Option.getOrUndefined(yield* Effect.orDie(Config.option(Config.String(GUARD_TOKEN_VAR))))
        const stateHome = Option.getOrUndefined(yield* Effect.orDie(Config.option(Config.String("XDG_STATE_HOME"))))
        // The HTTP server's modules load only for this command.
        const module = yield* Effect.promise((): Promise<typeof GuardServer> =>
          import("@session-journal/claude-code/GuardServer")
        )
        const handleTimeoutMs = Option.getOrUndefined(a.handleTimeoutMs)
        if (handleTimeoutMs === 0) {
          return yield* new InvalidInput({ field: "--handle-timeout-ms", reason: "must be a positive integer" })
        }
        const tokenFile = Option.getOrUndefined(a.tokenFile)
        const problem = given === undefined || given === "" ? null : module.tokenProblem(given)
        if (problem !== null) return yield* new InvalidInput({ field: GUARD_TOKEN_VAR, reason: problem })
        const { file: tokenPath, note, token } = yield* resolveToken({
          given,
          file: tokenFile,
          stateHome,
          make: module.makeToken
        })
        if (note !== null) yield* Output.write(note)
        const wait = Option.getOrUndefined(a.wait)
        // As the command hook: the journal outside every project unless one is named.
        const named = root ?? onCommandLine(dir) ??
          (yield* Effect.orDie(Config.option(Config.String("SESSION_JOURNAL_DIR"))))
            .pipe(Option.filter((d) => d !== ""), Option.getOrUndefined)
        const stateDir = Storage.userStateDir(process.env)
        if (named === undefined && stateDir !== undefined && Storage.isFilesystem(storage)) {
          yield* Effect.tryPromise({
            try: () => fs.promises.mkdir(stateDir, { recursive: true, mode: 0o700 }),
            catch: (e) =>
              new InvalidInput({
                field: "--root",
                reason: `the default journal directory ${stateDir} cannot be made (${messageOf(e)}); give --root DIR`
              })
          })
        }
        const base = {
          ...storage,
          dir: path.resolve(named ?? (Storage.isFilesystem(storage) ? stateDir ?? storage.dir : storage.dir))
        }
        const tokenProblem = module.tokenProblem(token)
        if (tokenProblem !== null) return yield* new InvalidInput({ field: GUARD_TOKEN_VAR, reason: tokenProblem })
        const options: Storage.Options = wait === undefined ? base : { ...base, lockWait: wait }
        const where = Storage.isFilesystem(options) ? options.dir : "PostgreSQL"
        const serve = LiveExport.withStorage(sending, Storage.layer(options), (storage) =>
          module.run({
            port: a.port,
            token,
            policy,
            handleTimeoutMs,
            storage,
            journalDir: Storage.isFilesystem(options) ? options.dir : null,
            hosts: (port) => {
              const hosts = HostCheck.policy(port)
              return { accepted: hosts.accepted, allows: (host) => HostCheck.allows(hosts, host) }
            },
            onListening: (port) =>
              Output.write(
                `session-journal guard: listening at http://127.0.0.1:${port}${module.PATH}, journal ${where}, ` +
                  (policy === null ? "no policy (record only)" : `policy ${file ?? "given"}`) + "\n"
              ),
            policyFile: file === undefined ? undefined : path.resolve(file),
            noSelfProtection: a.noSelfProtection,
            acceptBearer: a.acceptBearer,
            tokenFile: tokenPath ?? undefined,
            idleTimeToLive: Option.match(a.idleClose, { onNone: () => undefined, onSome: (ms) => Duration.millis(ms) })
          })).pipe(Effect.catchTag("ServeError", (e) =>
            Effect.fail(
              new NotAvailable({ feature: "guard", reason: `cannot listen on 127.0.0.1:${a.port} (${e.message})` })
            )))
        if (publishing === undefined) return yield* serve
        // Publishing runs beside the guard, on storage of its own over the same journal;
        // a fork or a witness's refusal ends both (exit 1), as a failed verification does.
        const m = yield* Effect.promise((): Promise<typeof Publish> => import("./Publish.ts"))
        return yield* m.publishAround(serve, publishing).pipe(Effect.provide(Storage.layer(options)))
      })
    ))).pipe(Command.withDescription(
      "Serve Claude Code's hooks from a resident process on 127.0.0.1: the only writer of its journal, " +
        `deciding PreToolUse by the policy; requests prove the token $${GUARD_TOKEN_VAR} (the forwarder's HMAC, ` +
        `or Authorization: Bearer); GET /policy says which policy it runs; SIGTERM drains and exits 0`
    ))

/**
 * `claude-code forward --url URL [--token-env NAME | --token-file FILE] [--timeout-ms N]`.
 *
 * @since 0.1.0
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
    Flag.withDescription(
      `Deadline of the whole exchange with the guard, in ms (default ${Forward.DEFAULT_TIMEOUT_MS}); denies when it passes`
    )
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
    const code = yield* Effect.promise(() => ForwardProcess.main(args))
    if (code !== 0) return yield* new Exit({ code })
  })).pipe(Command.withDescription(
    "The command hook of the guard's installed form: forwards one hook event (stdin) to the guard, proving the token " +
      "without sending it, and prints the guard's answer once its MAC verifies; denies the call itself otherwise"
  ))
