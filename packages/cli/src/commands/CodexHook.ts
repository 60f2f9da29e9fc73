/**
 * `session-journal codex hook` as the command line runs it: the flags
 * (`internal/hookArgs.ts`) and the environment made into the hook's options (the
 * policy file, `--policy FILE` else `$SESSION_JOURNAL_POLICY`; the journal as
 * the Claude Code hook finds it, `HookProcess.journalOf`), then Codex's command
 * hook of `@session-journal/codex` (`HookRunner`, which decides through
 * `Hook.handle`), its answer written and its exit code returned.
 *
 * Loaded without the command tree (`main.ts` recognizes the invocation first).
 *
 * @since 0.1.0
 */
import * as HookRunner from "@session-journal/codex/HookRunner"
import type { HookArgs } from "../internal/hookArgs.ts"
import { load } from "../PolicyFile.ts"
import * as Storage from "../Storage.ts"
import { journalOf, mainOf, POLICY_VAR } from "./HookProcess.ts"

/**
 * Runs one hook with the command line's flags and `io` (`HookRunner.run`): never
 * throws; every failure is a refusal (or, with `--fail-open`, exit 1).
 *
 * @since 0.1.0
 */
export const run = (
  args: HookArgs,
  io: Parameters<typeof HookRunner.run>[1]
): Promise<HookRunner.Outcome> =>
  HookRunner.run({
    failOpen: args.failOpen,
    maxInputBytes: args.maxInputBytes,
    deadlineMillis: args.deadlineMillis,
    policyFile: args.policy ?? (io.env[POLICY_VAR] === "" ? undefined : io.env[POLICY_VAR]),
    loadPolicy: load,
    journal: () => journalOf(args, io.env),
    stateDir: Storage.userStateDir(io.env)
  }, io)

/**
 * Runs the hook on the process's stdin, stdout and stderr; resolves with the exit
 * code.
 *
 * @since 0.1.0
 */
export const main = mainOf(run)
