/**
 * Entry point of the `session-journal` command. The resident guard's forwarder
 * (`claude-code forward`, `commands/ForwardProcess.ts`, run by Claude Code once per event)
 * is recognized first and loads nothing but its own file (the build bundles it
 * into one, `scripts/bundle.ts`); the command hook (`claude-code hook`, once per
 * event too) runs without the command tree, whose modules it does not need;
 * every other invocation runs the command tree (`internal/runCli.ts`).
 *
 * @since 0.1.0
 */
import { hookArgs } from "./internal/hookArgs.ts"

if (process.argv[2] === "claude-code" && process.argv[3] === "forward") {
  // The guard's command hook: its own small module (Node's modules only), once per event.
  const { main } = await import("./commands/ForwardProcess.ts")
  process.exit(await main(process.argv.slice(4)))
} else if (process.argv.includes("codex") && hookArgs(process.argv.slice(2), "codex") !== null) {
  // Codex's command hook, once per tool call too: its own module, without the command tree.
  const { main } = await import("./commands/CodexHook.ts")
  process.exit(await main(hookArgs(process.argv.slice(2), "codex")!))
} else {
  const hook = hookArgs(process.argv.slice(2))
  if (hook !== null) {
    const { main } = await import("./commands/HookProcess.ts")
    const code = await main(hook)
    // Nothing of the hook's may keep the process alive past its answer: a hook that
    // does not end is one Claude Code times out, and a timeout fails open.
    process.exit(code)
  } else {
    await import("./internal/runCli.ts")
  }
}
