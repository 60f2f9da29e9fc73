/**
 * The command tree on Node: runs it and turns the outcome into the process exit
 * code of the contract (loaded by `main.ts` for every command but the hook).
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as NodeServices from "@effect/platform-node/NodeServices"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import { main } from "../index.ts"

// A closed pipe (`session-journal export x | head`) is a normal end, not a crash.
process.stdout.on("error", (e: NodeJS.ErrnoException) => {
  if (e.code === "EPIPE") process.exit(0)
  throw e
})

// An interrupted command ends with 130, unless it set `process.exitCode` to 0 once
// it had stopped cleanly: the resident guard's normal end is SIGTERM.
NodeRuntime.runMain(main.pipe(Effect.provide(NodeServices.layer)), {
  disableErrorReporting: true,
  teardown: (exit, onExit) => {
    const code = Exit.isSuccess(exit) ? Number(exit.value) : 130
    onExit(code === 130 && process.exitCode === 0 ? 0 : code)
  }
})
