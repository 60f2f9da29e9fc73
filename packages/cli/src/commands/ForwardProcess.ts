/**
 * `session-journal claude-code forward --url URL` as a process: the forwarder
 * (`Forwarder` of `@session-journal/claude-code`) on the arguments and stdin,
 * its answer written to stdout and stderr, its exit code returned. Loaded
 * without the command tree (`main.ts`) and bundled into a file of its own
 * (`scripts/bundle.ts`): it and what it imports are all a hook event loads.
 *
 * @since 0.1.0
 */
import { outcomeOf } from "@session-journal/claude-code/Forwarder"
import * as ProcessStreams from "../internal/processStreams.ts"

/**
 * Runs the forwarder on the process: arguments after `claude-code forward`, the
 * event on stdin, the answer on stdout; resolves with the exit code.
 *
 * @since 0.1.0
 */
export const main = async (args: ReadonlyArray<string>): Promise<number> => {
  // The forwarder loads no Effect, so it has no Clock service: the process's entry
  // gives it the system clock, once, here.
  const outcome = await outcomeOf(args, Date.now)
  if (outcome.stderr !== "") ProcessStreams.writeStderr(outcome.stderr)
  await new Promise<void>((resolve) => ProcessStreams.writeStdout(outcome.stdout, () => resolve()))
  return outcome.code
}
