/**
 * Child process of `memory.open_sessions`: opens `sessions` sessions on the
 * filesystem adapter (default options, a time to live long enough that none is
 * released), appends `entries` chat messages of about 2 KB to each (in
 * `writeAll` batches of 64, the sessions side by side), and prints one JSON line:
 * the heap (and the rest of `readMemory`) after one message per session and after
 * all of them, with every session still open, and the size of each session's
 * checkpoint file. Run with `--expose-gc`, after `pnpm build` (it runs the packages
 * from their `dist/`).
 *
 *   node --expose-gc bench/child/openSessions.ts <root> <sessions> <entries>
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as fs from "node:fs"
import * as path from "node:path"
import { loadBuiltPackages, readMemory } from "../lib/child.ts"

const [root, sessionsText, entriesText] = process.argv.slice(2)
const sessions = Number(sessionsText)
const entries = Number(entriesText)
if (root === undefined || !Number.isInteger(sessions) || !Number.isInteger(entries) || entries < 1) {
  process.stderr.write("usage: openSessions.ts <root> <sessions> <entries>\n")
  process.exit(2)
}
const { core, node } = await loadBuiltPackages()

const rt = ManagedRuntime.make(
  core.SessionJournal.layer({ idleTimeToLive: "1 hour" }).pipe(Layer.provide(node.NodePersistence.layer({ root })))
)
const journal = await rt.runPromise(Effect.service(core.SessionJournal.SessionJournal))
const ids = Array.from({ length: sessions }, (_, s) => `open-${s}`)
// A chat message of about 2 KB, different in every entry (nothing shared between
// entries: each holds its own strings, as messages read from a client would).
const message = (s: number, i: number) => ({
  role: i % 2 === 0 ? "user" : "assistant",
  content: `${s}:${i} ` + String.fromCharCode(97 + (i % 26)).repeat(2000)
})
const BATCH = 64
const write = (from: number, to: number) =>
  rt.runPromise(Effect.forEach(
    ids,
    (id, s) =>
      Effect.gen(function*() {
        for (let i = from; i < to; i += BATCH) {
          const items = Array.from(
            { length: Math.min(BATCH, to - i) },
            (_, k) => ({ _tag: "Other" as const, kind: "message", payload: message(s, i + k) })
          )
          yield* journal.writeAll(id, items)
        }
      }),
    { concurrency: "unbounded", discard: true }
  ))

const t0 = performance.now()
await write(0, 1)
const before = readMemory()
await write(1, entries)
const ms = performance.now() - t0
// Every session is still open (no release within the hour): its state is in memory.
const states = await rt.runPromise(Effect.forEach(ids, (id) => journal.state(id)))
const after = readMemory()
const checkpoints = ids.map((id) => {
  try {
    return fs.statSync(path.join(root, id, "checkpoint.json")).size
  } catch {
    return 0
  }
})
const windowEntries = states.map((s) => core.JournalState.entries(s).length)
process.stdout.write(
  JSON.stringify({
    sessions,
    entries: states.reduce((n, s) => n + s.next_sequence, 0),
    retained: states.reduce((n, s) => n + core.JournalState.entryCount(s), 0),
    windowEntries: windowEntries.reduce((a, b) => a + b, 0),
    windowBytes: states[0]?.window_bytes ?? 0,
    before,
    after,
    checkpoints,
    ms
  }) + "\n"
)
await rt.dispose()
