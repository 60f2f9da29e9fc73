/**
 * Variants of a durable line write, for finding this machine's ceilings (see
 * `bench/durable.ts`): how the line is made durable (a write then fdatasync, or one
 * write on a descriptor opened with O_DSYNC), where the bytes go (appended, growing
 * the file, or over blocks written beforehand, as a preallocated file offers), and
 * which thread waits (the main thread with the synchronous calls, or libuv's pool).
 */
import * as fs from "node:fs"
import * as fsp from "node:fs/promises"
import type { Sample } from "./harness.ts"

/** One durable-write variant. */
export interface Variant {
  /** `fdatasync`: write, then fdatasync; `dsync`: one write on an O_DSYNC descriptor. */
  readonly sync: "fdatasync" | "dsync"
  /**
   * `append`: the file grows with every write; `overwrite`: blocks written beforehand are overwritten;
   * `sparse`: the file is extended beforehand with `ftruncate` (a hole, no blocks written) and the writes fill it.
   */
  readonly place: "append" | "overwrite" | "sparse"
  /** `main`: synchronous calls; `pool`: `fs/promises` calls through libuv's thread pool. */
  readonly thread: "main" | "pool"
  /** Lines per durable write (1, or a batch as group commit gathers). */
  readonly perSync: number
}

/** A short name of a variant, e.g. `dsync/overwrite/pool/1`. */
export const label = (v: Variant): string => `${v.sync}/${v.place}/${v.thread}/${v.perSync}`

const batchesOf = (lines: ReadonlyArray<Uint8Array>, per: number): Array<Uint8Array> => {
  const out: Array<Uint8Array> = []
  for (let i = 0; i < lines.length; i += per) out.push(per === 1 ? lines[i]! : Buffer.concat(lines.slice(i, i + per)))
  return out
}

/**
 * Writes `lines` durably into `file` (created) as `v` says; for `overwrite` the file
 * is first filled with written zero blocks covering all lines, made durable, and
 * not timed.
 */
export const runVariant = async (file: string, lines: ReadonlyArray<Uint8Array>, v: Variant): Promise<Sample> => {
  const batches = batchesOf(lines, v.perSync)
  const total = batches.reduce((n, b) => n + b.length, 0)
  if (v.place === "overwrite") {
    const zeros = Buffer.alloc(Math.ceil(total / 4096) * 4096 + 4096)
    fs.writeFileSync(file, zeros, { mode: 0o600 })
    const fd = fs.openSync(file, "r+")
    fs.fsyncSync(fd)
    fs.closeSync(fd)
  }
  if (v.place === "sparse") {
    const fd = fs.openSync(file, "w", 0o600)
    fs.ftruncateSync(fd, Math.ceil(total / 4096) * 4096 + 4096)
    fs.fsyncSync(fd)
    fs.closeSync(fd)
  }
  const flags = fs.constants.O_WRONLY | fs.constants.O_CREAT | (v.sync === "dsync" ? fs.constants.O_DSYNC : 0)
  if (v.thread === "main") {
    const fd = fs.openSync(file, flags, 0o600)
    try {
      let at = 0
      const t0 = performance.now()
      for (const b of batches) {
        fs.writeSync(fd, b, 0, b.length, at)
        if (v.sync === "fdatasync") fs.fdatasyncSync(fd)
        at += b.length
      }
      return { ops: lines.length, ms: performance.now() - t0 }
    } finally {
      fs.closeSync(fd)
    }
  }
  const fh = await fsp.open(file, flags, 0o600)
  try {
    let at = 0
    const t0 = performance.now()
    for (const b of batches) {
      await fh.write(b, 0, b.length, at)
      if (v.sync === "fdatasync") await fh.datasync()
      at += b.length
    }
    return { ops: lines.length, ms: performance.now() - t0 }
  } finally {
    await fh.close()
  }
}

/**
 * `files` concurrent writers through the pool, one file each, every line made
 * durable as `v` says (`v.thread` is ignored: concurrent writers need the pool).
 */
export const runParallelVariant = async (
  files: ReadonlyArray<string>,
  lines: ReadonlyArray<Uint8Array>,
  perFile: number,
  v: Variant
): Promise<Sample> => {
  const flags = fs.constants.O_WRONLY | fs.constants.O_CREAT | (v.sync === "dsync" ? fs.constants.O_DSYNC : 0)
  const size = lines.reduce((n, l) => Math.max(n, l.length), 0) * perFile
  if (v.place === "overwrite") {
    for (const f of files) {
      fs.writeFileSync(f, Buffer.alloc(Math.ceil(size / 4096) * 4096 + 4096), { mode: 0o600 })
      const fd = fs.openSync(f, "r+")
      fs.fsyncSync(fd)
      fs.closeSync(fd)
    }
  }
  const handles = await Promise.all(files.map((f) => fsp.open(f, flags, 0o600)))
  try {
    const t0 = performance.now()
    await Promise.all(handles.map(async (h, k) => {
      let at = 0
      for (let i = 0; i < perFile; i++) {
        const line = lines[(k * perFile + i) % lines.length]!
        await h.write(line, 0, line.length, at)
        if (v.sync === "fdatasync") await h.datasync()
        at += line.length
      }
    }))
    return { ops: files.length * perFile, ms: performance.now() - t0 }
  } finally {
    await Promise.all(handles.map((h) => h.close()))
  }
}
