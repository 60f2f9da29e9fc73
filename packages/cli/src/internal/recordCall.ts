/**
 * What `record` does once its arguments are read, whether the command tree read
 * them (`commands/WriteCommands.ts`) or the entry did (`commands/RecordProcess.ts`):
 * the call appended as a tool entry and printed, its output failure saying the
 * entry is durable. No `effect/cli` here.
 */
import { type Entry, SessionJournal } from "@session-journal/core"
import * as Effect from "effect/Effect"
import type { OutputFailed } from "../Failure.ts"
import * as Output from "../Output.ts"

/** A tool call as `record` takes it. */
export interface Call {
  readonly id: string
  readonly tool: string
  readonly server: string
  readonly agent: string
  readonly read: number
  readonly written: number
  readonly depth: number
  readonly denied: boolean
}

/**
 * Output of entries that are already durable: if stdout fails, the failure says
 * which entries are committed (exit 6), so a caller does not write them again.
 */
export const printDurable = (
  output: Effect.Effect<void, OutputFailed>,
  id: string,
  entries: number,
  last: Entry.Entry
): Effect.Effect<void, OutputFailed> =>
  Effect.mapError(output, (e) => e.afterDurable({ id, entries, sequence: last.sequence, hash: last.entry_hash }))

/** Appends `call` to its session and prints the entry (as JSON with `json`). */
export const record = (
  call: Call,
  json: boolean
): Effect.Effect<void, SessionJournal.WriteError | OutputFailed, SessionJournal.SessionJournal> =>
  Effect.gen(function*() {
    const journal = yield* SessionJournal.SessionJournal
    const entry = yield* journal.record(call.id, {
      tool_name: call.tool,
      server_id: call.server,
      agent_id: call.agent,
      bytes_read: call.read,
      bytes_written: call.written,
      delegation_depth: call.depth,
      allowed: !call.denied
    })
    yield* printDurable(Output.write(Output.entryLine(json)(entry) + "\n"), call.id, 1, entry)
  })
