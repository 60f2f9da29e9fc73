/**
 * A long session on the filesystem adapter, built once per run and shared by the
 * scenarios that read history (`fs.open.checkpointed`, `fs.replay`, `cli.verify`),
 * in a temp dir removed when the process exits. Its files are written directly with
 * the node package's own framing functions (or, if those are not available,
 * through the adapter with `writeAll` batches).
 */
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { Checkpoint, type Entry, JournalState, type SessionJournal } from "../../packages/core/src/index.ts"
import type { FsLayer } from "./adapters.ts"
import { journalRuntime, makeEntries, params, removeDir, serviceOf, tempDir } from "./env.ts"

/** A built history: where it is and how many entries it holds. */
export interface History {
  readonly root: string
  readonly id: string
  readonly entries: number
  /** Segment files of the session, in order. */
  readonly segments: ReadonlyArray<string>
  readonly bytes: number
  readonly buildMs: number
}

const built = new Map<number, Promise<History>>()
const dirs: Array<string> = []
process.on("exit", () => {
  for (const d of dirs) removeDir(d)
})

const BATCH = 5000

/** The shared history of `entries` entries (built on first use). */
export const history = (layer: FsLayer, entries: number, log: (line: string) => void): Promise<History> => {
  let h = built.get(entries)
  if (h === undefined) {
    h = build(layer, entries, log)
    built.set(entries, h)
  }
  return h
}

interface SegmentFormat {
  readonly name: (base: number) => string
  readonly openLine: (base: number) => string
  readonly entryLine: (entry: Entry.Entry) => string
  readonly stringify: (value: unknown) => string
}

/** The node package's own segment framing, when its internals are as expected. */
const segmentFormat = async (): Promise<SegmentFormat | null> => {
  try {
    const mod: Record<string, unknown> = await import("../../packages/node/src/internal/segment.ts")
    const ok = ["name", "openLine", "entryLine", "stringify"].every((k) => typeof mod[k] === "function")
    return ok ? mod as unknown as SegmentFormat : null
  } catch {
    return null
  }
}

// Segments roll where the adapter rolls them for this session shape: after a
// checkpoint, once the active segment holds max(256 KiB, checkpoint size / 4).
const ROLL_BYTES = 256 * 1024

/**
 * Writes the session's files directly: segments framed by the node package's own
 * functions, then a checkpoint of the final state, with the adapter's modes. Ten
 * times faster than going through the adapter; `fs.open.checkpointed` and
 * `fs.replay` check that the adapter opens it at the right sequence and that
 * `verify` passes over every entry, so a wrong file fails the run instead of
 * producing a figure.
 */
const writeDirect = (
  format: SegmentFormat,
  root: string,
  id: string,
  entries: number,
  checkpointSize: () => number
): void => {
  const dir = path.join(root, id)
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
  fs.chmodSync(root, 0o700)
  fs.chmodSync(dir, 0o700)
  let state = JournalState.empty(id)
  let fd = -1
  let size = 0
  let chunk: Array<string> = []
  let chunkBytes = 0
  const flush = () => {
    if (chunk.length === 0) return
    const text = chunk.join("")
    fs.writeSync(fd, text)
    chunk = []
    chunkBytes = 0
  }
  const roll = (base: number) => {
    if (fd !== -1) {
      flush()
      fs.closeSync(fd)
    }
    fd = fs.openSync(path.join(dir, format.name(base)), "wx", 0o600)
    const open = format.openLine(base)
    fs.writeSync(fd, open)
    size = Buffer.byteLength(open)
  }
  roll(0)
  const threshold = Math.max(ROLL_BYTES, checkpointSize() / 4)
  for (let i = 0; i < entries; i++) {
    const entry = JournalState.nextTool(state, 1764400000 + Math.floor(i / 1000), params(i))
    state = JournalState.fold(state, entry)
    const line = format.entryLine(entry)
    chunk.push(line)
    chunkBytes += line.length
    size += line.length
    if (chunkBytes > 1 << 20) flush()
    if (size >= threshold && i + 1 < entries) roll(i + 1)
  }
  flush()
  fs.closeSync(fd)
  const checkpoint = path.join(dir, "checkpoint.json")
  fs.writeFileSync(checkpoint, format.stringify(Checkpoint.encode(state)), { mode: 0o600, flag: "wx" })
}

const build = async (layer: FsLayer, entries: number, log: (line: string) => void): Promise<History> => {
  const root = tempDir("history")
  dirs.push(root)
  const id = "bench-history"
  const t0 = performance.now()
  const format = await segmentFormat()
  if (format !== null) {
    log(`  writing a ${entries.toLocaleString("en-US")}-entry session directly in the adapter's format`)
    // The checkpoint of a full ring: its size decides where the adapter rolls segments.
    const fullRing = JournalState.foldAll(JournalState.empty(id), makeEntries(JournalState.DEFAULT_ENTRY_CAP))
    const cpSize = Buffer.byteLength(format.stringify(Checkpoint.encode(fullRing)))
    writeDirect(format, root, id, entries, () => cpSize)
  } else {
    log(
      `  building a ${entries.toLocaleString("en-US")}-entry session through the adapter (writeAll batches of ${BATCH})`
    )
    const rt = journalRuntime(layer(root))
    try {
      const journal = await serviceOf(rt)
      await rt.runPromise(Effect.gen(function*() {
        for (let from = 0; from < entries; from += BATCH) {
          const items: Array<SessionJournal.WriteItem> = []
          for (let i = from; i < Math.min(entries, from + BATCH); i++) items.push({ _tag: "Tool", params: params(i) })
          yield* journal.writeAll(id, items)
        }
      }))
    } finally {
      await rt.dispose()
    }
  }
  const buildMs = performance.now() - t0
  const dir = path.join(root, id)
  const segments = fs.readdirSync(dir).filter((f) => /^\d{20}\.jsonl$/.test(f)).sort().map((f) => path.join(dir, f))
  const bytes = segments.reduce((n, f) => n + fs.statSync(f).size, 0)
  log(`  built in ${(buildMs / 1000).toFixed(1)} s: ${segments.length} segments, ${(bytes / 2 ** 20).toFixed(0)} MiB`)
  return { root, id, entries, segments, bytes, buildMs }
}
