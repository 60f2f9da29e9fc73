/**
 * `session-journal claude-code hook` as the command line runs it: the flags
 * (`internal/hookArgs.ts`) and the environment made into the hook's options (the
 * policy file, `--policy FILE` else `$SESSION_JOURNAL_POLICY`; the journal,
 * `--root`/`--dir`/`--postgres`, else the variables, else the per-user state
 * directory), then the command hook of `@session-journal/claude-code`
 * (`HookRunner`, which decides through `Hook.handle`), its answer written and its
 * exit code returned; after the answer of `SessionEnd`, the session's spans when
 * the OpenTelemetry variables name a collector (`otel/HookExport`).
 *
 * This module is loaded without the command tree (`main.ts` recognizes the
 * invocation first): a hook runs once per tool call, and its start is most of
 * its cost.
 *
 * @since 0.1.0
 */
import * as HookRunner from "@session-journal/claude-code/HookRunner"
import { Checkpoint } from "@session-journal/core"
import { messageOf } from "@session-journal/core/ErrorMessage"
import * as Duration from "effect/Duration"
import * as fs from "node:fs"
import type { HookArgs } from "../internal/hookArgs.ts"
import * as ProcessStreams from "../internal/processStreams.ts"
import * as Watchdog from "../internal/watchdog.ts"
import { load } from "../PolicyFile.ts"
import * as Storage from "../Storage.ts"

/**
 * The environment variable naming the policy file when `--policy` is not given.
 *
 * @since 0.1.0
 */
export const POLICY_VAR = "SESSION_JOURNAL_POLICY"

/**
 * How long a hook waits for its session's lock by default (30 s): far longer than
 * a burst of parallel hooks holds it, shorter than the hook timeout `install`
 * sets (60 s).
 *
 * @since 0.1.0
 */
export const DEFAULT_WAIT_MILLIS = 30_000

/**
 * The storage of a hook's flags and environment (`--root`, `--dir`,
 * `--postgres`, else the variables, else the per-user state directory, made on
 * first use readable by its user only), waiting up to `--wait` for a session's
 * lock; or why there is none, the reason to refuse with.
 *
 * @since 0.1.0
 */
export const storageOf = async (
  args: HookArgs,
  env: Readonly<Record<string, string | undefined>>
): Promise<Storage.Options | string> => {
  // Parallel hooks of one session queue for its lock (the filesystem adapter's
  // `lockWait`: a directory watch and a jittered backoff) rather than fail.
  const waitMillis = args.waitMillis ?? DEFAULT_WAIT_MILLIS
  const environment = Storage.environmentOf(env)
  const dir = args.root ?? environment.dir ?? Storage.userStateDir(env)
  if (dir === undefined && args.postgres === undefined && environment.postgres === undefined) {
    return "no journal directory: give --root DIR, or set SESSION_JOURNAL_DIR or HOME"
  }
  if (
    dir !== undefined && args.root === undefined && environment.dir === undefined &&
    args.postgres === undefined && environment.postgres === undefined
  ) {
    // The per-user default is made on first use, readable by its user only.
    try {
      await fs.promises.mkdir(dir, { recursive: true, mode: 0o700 })
    } catch (e) {
      return `the default journal directory ${dir} cannot be made (${messageOf(e)}); give --root DIR`
    }
  }
  const storage: Storage.Options = {
    ...Storage.resolve({ dir, postgres: args.postgres }, environment),
    lockWait: Duration.millis(waitMillis),
    // Checkpoints every few events (HookRunner.CHECKPOINT_MIN_BYTES) do not each start a segment.
    segmentMinBytes: Checkpoint.MIN_BYTES,
    // One event hashes a few entries: not worth loading node:crypto for, unless the
    // load rebuilds a long session's tree (thousands of digests).
    nodeSha256: "bulk"
  }
  return storage
}

/**
 * The journal of a hook's flags and environment (`storageOf`), or why there is
 * none.
 *
 * @since 0.1.0
 */
export const journalOf = async (
  args: HookArgs,
  env: Readonly<Record<string, string | undefined>>
): Promise<HookRunner.Journal | string> => {
  const storage = await storageOf(args, env)
  if (typeof storage === "string") return storage
  return { layer: Storage.layer(storage), dir: Storage.isFilesystem(storage) ? storage.dir : null }
}

/**
 * Runs one hook with the command line's flags and `io` (`HookRunner.run`): never
 * throws; every failure is a refusal (or, with `--fail-open`, exit 1).
 *
 * @since 0.1.0
 */
export const run = async (args: HookArgs, io: HookRunner.Io): Promise<HookRunner.Outcome> => {
  const outcome = await HookRunner.run({
    failOpen: args.failOpen,
    maxInputBytes: args.maxInputBytes,
    deadlineMillis: args.deadlineMillis,
    noSelfProtection: args.noSelfProtection,
    policyFile: args.policy ?? (io.env[POLICY_VAR] === "" ? undefined : io.env[POLICY_VAR]),
    loadPolicy: load,
    journal: () => journalOf(args, io.env),
    stateDir: Storage.userStateDir(io.env)
  }, io)
  // The answer is written: the session's spans, when a collector is named, at its end (`otel/HookExport`).
  if (outcome.event === "SessionEnd" && outcome.answer !== null && outcome.late !== true && wantsSpans(io.env)) {
    const storage = await storageOf(args, io.env)
    if (typeof storage !== "string") {
      const { send } = await import("../otel/HookExport.ts")
      const line = await send(outcome.answer.session, storage, io.env)
      if (line !== null) await io.stderr(line + "\n").catch(() => undefined)
    }
  }
  return outcome
}

// Whether the environment names a collector (as `HookExport.wanted`, without loading it).
const wantsSpans = (env: Readonly<Record<string, string | undefined>>): boolean =>
  (env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] ?? "") !== "" || (env["OTEL_EXPORTER_OTLP_ENDPOINT"] ?? "") !== ""

/**
 * How a hook process ended: its exit code, and the name of the event it answered
 * as far as its input was read (null: not read).
 *
 * @since 0.1.0
 */
export interface Ended {
  readonly code: number
  readonly event: string | null
}

/**
 * Runs the hook on the process's stdin, stdout and stderr; resolves with the exit
 * code and the event.
 *
 * @since 0.1.0
 */
export const main = (args: HookArgs): Promise<Ended> => mainOf(run)(args)

/**
 * A hook process's `main`: `run` on the process's stdin, stdout and stderr,
 * resolving with the exit code and the event (Claude Code's and Codex's).
 *
 * @since 0.1.0
 */
export const mainOf = (
  run: (
    args: HookArgs,
    io: HookRunner.Io
  ) => Promise<
    { readonly exitCode: 0 | 1 | 2; readonly late?: boolean | undefined; readonly event?: string | null | undefined }
  >
) =>
async (args: HookArgs): Promise<Ended> => {
  const outcome = await run(args, {
    stdin: process.stdin,
    stdout: ProcessStreams.writeStdoutAwait,
    stderr: ProcessStreams.writeStderrAwait,
    env: process.env
  })
  // Past the deadline something is stuck, possibly a file operation in the kernel
  // (a hung mount), which would keep Node from exiting at all. The answer is
  // written and the process exits with its code; a watchdog that sees the exit
  // through a pipe (its end closes) does nothing, and one that does not see it
  // within a second ends the process by SIGKILL, which the installed hook command
  // turns into exit 2 with the reason already on stderr.
  if (outcome.late === true && !args.failOpen) Watchdog.arm(1)
  return { code: outcome.exitCode, event: outcome.event ?? null }
}
