/**
 * The physical-limit baselines: plain files written with the same bytes a segment
 * receives, made durable with fdatasync after every line, without any framework in
 * between; and better-sqlite3 in WAL mode with `synchronous = FULL`.
 */
import * as fs from "node:fs"
import * as fsp from "node:fs/promises"
import * as path from "node:path"
import type { SqliteCtor } from "./adapters.ts"
import type { Sample } from "./harness.ts"

/**
 * Appends every line to `file` with one write and one fdatasync each (synchronous
 * calls: the fastest a single caller can make a line durable).
 */
export const rawSequential = (file: string, lines: ReadonlyArray<Uint8Array>): Sample => {
  const fd = fs.openSync(file, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_APPEND, 0o600)
  try {
    const t0 = performance.now()
    for (const line of lines) {
      fs.writeSync(fd, line)
      fs.fdatasyncSync(fd)
    }
    return { ops: lines.length, ms: performance.now() - t0 }
  } finally {
    fs.closeSync(fd)
  }
}

/**
 * `files` concurrent writers, one per file, each appending its lines with one write
 * and one fdatasync per line (async calls, so they overlap in libuv's pool as the
 * journal's appends do).
 */
export const rawParallel = async (
  dir: string,
  files: number,
  lines: ReadonlyArray<Uint8Array>,
  perFile: number
): Promise<Sample> => {
  const handles = await Promise.all(
    Array.from({ length: files }, (_, i) => fsp.open(path.join(dir, `raw-${i}.jsonl`), "a", 0o600))
  )
  try {
    const t0 = performance.now()
    await Promise.all(handles.map(async (h, f) => {
      for (let i = 0; i < perFile; i++) {
        await h.write(lines[(f * perFile + i) % lines.length]!)
        await h.datasync()
      }
    }))
    return { ops: files * perFile, ms: performance.now() - t0 }
  } finally {
    await Promise.all(handles.map((h) => h.close()))
  }
}

/** A better-sqlite3 database in WAL mode with `synchronous = FULL` and an entries table. */
export const openSqlite = (Database: SqliteCtor, file: string) => {
  const db = new Database(file)
  db.pragma("journal_mode = WAL")
  db.pragma("synchronous = FULL")
  db.exec("CREATE TABLE IF NOT EXISTS entries (sequence INTEGER PRIMARY KEY, line TEXT NOT NULL)")
  const insert = db.prepare("INSERT INTO entries (sequence, line) VALUES (?, ?)")
  let next = 0
  return {
    /** Inserts every line, one autocommit transaction (so one WAL sync) per insert. */
    run: (lines: ReadonlyArray<string>): Sample => {
      const t0 = performance.now()
      for (const line of lines) insert.run(next++, line)
      return { ops: lines.length, ms: performance.now() - t0 }
    },
    close: () => db.close()
  }
}

/**
 * The group-commit baseline: appends the lines `perSync` at a time (one write of
 * the batch's bytes, then one fdatasync), synchronously, as a writer that gathers
 * `perSync` concurrent callers into one durable write would at best.
 */
export const rawBatched = (file: string, lines: ReadonlyArray<Uint8Array>, perSync: number): Sample => {
  const batches: Array<Uint8Array> = []
  for (let i = 0; i < lines.length; i += perSync) batches.push(Buffer.concat(lines.slice(i, i + perSync)))
  const fd = fs.openSync(file, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_APPEND, 0o600)
  try {
    const t0 = performance.now()
    for (const batch of batches) {
      fs.writeSync(fd, batch)
      fs.fdatasyncSync(fd)
    }
    return { ops: lines.length, ms: performance.now() - t0 }
  } finally {
    fs.closeSync(fd)
  }
}
