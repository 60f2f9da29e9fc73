/**
 * Shared fixtures of the scenarios: temp directories under `os.tmpdir()` (removed
 * afterwards), the tool parameters every scenario records, the exact entries and
 * segment lines they produce, and a runtime for a journal layer.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Entry, JournalState, Persistence, SessionJournal } from "../../packages/core/src/index.ts"
import { toolPreimage } from "../../packages/core/src/internal/preimage.ts"
import { toolParams } from "./params.ts"

/** A fresh temp directory; remove it with `removeDir`. */
export const tempDir = (label: string): string => fs.mkdtempSync(path.join(os.tmpdir(), `sj-bench-${label}-`))

/** Removes a directory tree (temp dirs of a run). */
export const removeDir = (dir: string): void => fs.rmSync(dir, { recursive: true, force: true })

/** Runs `f` with a temp directory that is removed afterwards, whatever happens. */
export const withTempDir = async <A>(label: string, f: (dir: string) => Promise<A>): Promise<A> => {
  const dir = tempDir(label)
  try {
    return await f(dir)
  } finally {
    removeDir(dir)
  }
}

/** The parameters of the i-th recorded tool call: realistic names, varying sizes. */
export const params: (i: number) => Entry.ValidToolParams = toolParams

/** `n` linked and hashed tool entries, as the journal builds them. */
export const makeEntries = (n: number, timestampSecs = 1764400000): Array<Entry.ToolEntry> => {
  let state = JournalState.empty("bench")
  const out: Array<Entry.ToolEntry> = []
  for (let i = 0; i < n; i++) {
    const e = JournalState.nextTool(state, timestampSecs, params(i))
    out.push(e)
    state = JournalState.fold(state, e)
  }
  return out
}

/** The hash preimages (docs/DESIGN.md §2 byte encodings) of tool entries. */
export const preimages = (entries: ReadonlyArray<Entry.ToolEntry>): Array<Uint8Array> => entries.map(toolPreimage)

/** The JSONL line of an entry in a filesystem segment (docs/DESIGN.md §6), newline included. */
export const segmentLine = (entry: Entry.Entry): string =>
  JSON.stringify({ k: "entry", v: 1, e: Entry.encode(entry) }) + "\n"

/** The service over the given persistence layer, as a runtime that must be disposed. */
export const journalRuntime = <E>(
  persistence: Layer.Layer<Persistence.Persistence, E>,
  options?: SessionJournal.Options
) => ManagedRuntime.make(SessionJournal.layer(options).pipe(Layer.provide(persistence)))

/** The service, taken from its runtime. */
export const serviceOf = <E>(
  rt: ManagedRuntime.ManagedRuntime<SessionJournal.SessionJournal, E>
): Promise<SessionJournal.SessionJournal["Service"]> => rt.runPromise(Effect.service(SessionJournal.SessionJournal))

/** Records `n` tool calls one after another (one caller) and returns the elapsed ms. */
export const recordSequential = (
  journal: SessionJournal.SessionJournal["Service"],
  id: string,
  n: number,
  offset = 0
) =>
  Effect.gen(function*() {
    const t0 = performance.now()
    for (let i = 0; i < n; i++) yield* journal.record(id, params(offset + i))
    return performance.now() - t0
  })

/** Records `n` tool calls from `callers` concurrent fibers on one session; returns the elapsed ms. */
export const recordConcurrent = (
  journal: SessionJournal.SessionJournal["Service"],
  id: string,
  n: number,
  callers: number,
  offset = 0
) =>
  Effect.gen(function*() {
    const per = Math.ceil(n / callers)
    const t0 = performance.now()
    yield* Effect.forEach(
      Array.from({ length: callers }, (_, c) => c),
      (c) =>
        Effect.gen(function*() {
          for (let i = 0; i < per; i++) yield* journal.record(id, params(offset + c * per + i))
        }),
      { concurrency: "unbounded", discard: true }
    )
    return { ops: per * callers, ms: performance.now() - t0 }
  })
