/**
 * Entry point of the `session-journal` command. The command hook
 * (`claude-code hook`, run by Claude Code once per event) is recognized first and
 * runs without the command tree, whose modules it does not need, and so does the
 * resident guard's forwarder (`claude-code forward`, `commands/Forward.ts`); every other
 * invocation runs the command tree (`internal/runCli.ts`).
 *
 * @since 0.1.0
 */
import { hookArgs } from "./internal/hookArgs.ts"

const hook = hookArgs(process.argv.slice(2))
if (process.argv[2] === "claude-code" && process.argv[3] === "forward") {
  // The guard's command hook: its own small module (node:http only), once per event.
  const { main } = await import("./commands/Forward.ts")
  process.exit(await main(process.argv.slice(4)))
} else if (hook !== null) {
  const { main } = await import("./commands/HookCommand.ts")
  const code = await main(hook)
  // Nothing of the hook's may keep the process alive past its answer: a hook that
  // does not end is one Claude Code times out, and a timeout fails open.
  process.exit(code)
} else {
  await import("./internal/runCli.ts")
}
