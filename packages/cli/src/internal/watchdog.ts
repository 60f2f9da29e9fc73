/**
 * An exit that cannot hang. Node joins its worker threads when the process exits,
 * so a file operation stuck in the kernel (a hung mount, a device) keeps
 * `process.exit` from ever returning to the system, and a hook that does not end
 * is one Claude Code cancels, which lets the call run. `arm` starts a detached
 * shell holding the read end of a pipe from this process: when the process is
 * gone the pipe closes and the shell ends; when it is still there after
 * `seconds`, the shell ends it with SIGKILL. Needs `/bin/sh` and `timeout`
 * (coreutils); without them nothing is armed and the exit is tried all the same.
 */
import type * as ChildProcess from "node:child_process"
import { createRequire } from "node:module"

/** Ends this process by SIGKILL unless it has exited within `seconds`. */
export const arm = (seconds: number): void => {
  try {
    // Loaded only when armed (past a deadline), not by every hook that imports this.
    const { spawn } = createRequire(import.meta.url)("node:child_process") as typeof ChildProcess
    const child = spawn(
      "/bin/sh",
      ["-c", `timeout ${seconds} cat >/dev/null; [ $? -ne 124 ] || kill -9 ${process.pid}`],
      { detached: true, stdio: ["pipe", "ignore", "ignore"] }
    )
    child.on("error", () => undefined)
    child.unref()
  } catch {
    // Nothing armed.
  }
}
