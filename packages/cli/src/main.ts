/**
 * Entry point of the `session-journal` command. The command hook
 * (`claude-code hook`, run by Claude Code once per event) is recognized first and
 * runs without the command tree, whose modules it does not need; every other
 * invocation runs the command tree (`internal/runCli.ts`).
 *
 * @since 0.1.0
 */
import { hookArgs } from "./internal/hookArgs.ts"

const hook = hookArgs(process.argv.slice(2))
if (hook !== null) {
  const { main } = await import("./HookCommand.ts")
  const code = await main(hook)
  // Nothing of the hook's may keep the process alive past its answer: a hook that
  // does not end is one Claude Code times out, and a timeout fails open.
  process.exit(code)
} else {
  await import("./internal/runCli.ts")
}
