/**
 * The file work of `mirror`: the destination's checks and housekeeping, the
 * files of one session (hashing, copying ranges, staging) and reading a backup.
 */
import { Checkpoint, StorageError, StorageReason, Utf8 } from "@session-journal/core"
import { Files, Lock, NodePersistence } from "@session-journal/node"
import * as Effect from "effect/Effect"
import * as Result_ from "effect/Result"
import { createHash } from "node:crypto"
import type { Stats } from "node:fs"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import * as Mirror from "../Mirror.ts"

/** The checkpoint file of a session directory (the node adapter's name). */
export const CHECKPOINT: string = Files.CHECKPOINT_FILE

export const CHUNK = 1 << 20

// Temporary files of the writer, its lock, and the per-file temporaries older
// versions of `mirror` left in backups: none of them is session data.
export const OLD_TEMP = /\.mirror-\d+(?:-[0-9a-z]+-[0-9a-f]+)?\.tmp$/
export const excluded = (name: string): boolean =>
  name === Lock.LOCK_FILE || name === Lock.CLAIM_FILE || name.includes(Files.TEMP_PREFIX) || OLD_TEMP.test(name)

// One raw filesystem call (node:fs/promises), its failure a StorageError naming
// the operation and the path.
export const io = <A>(operation: string, p: string, f: () => Promise<A>): Effect.Effect<A, StorageError> =>
  Effect.tryPromise({
    try: f,
    catch: (e) => StorageError.io(operation, e, p)
  })

export const lstatOrNull = (operation: string, p: string): Effect.Effect<Stats | null, StorageError> =>
  io(operation, p, () => fs.lstat(p)).pipe(
    Effect.catchIf((e) => Files.codeOf(e.cause) === "ENOENT", () => Effect.succeed(null))
  )

export const removeTree = (p: string): Effect.Effect<void, StorageError> =>
  io("mirror: remove", p, () => fs.rm(p, { recursive: true, force: true }))

export const refused = (p: string, reason: string): StorageError =>
  new StorageError({ operation: "confine", path: p, reason: new StorageReason.RefusedPath({ path: p, why: reason }) })

// ---------------------------------------------------------------------------
// The destination

export const isInside = (parent: string, child: string): boolean => {
  const rel = path.relative(parent, child)
  return rel === "" || (!rel.startsWith("..") && !path.isAbsolute(rel))
}

// The real path of `p` even when its tail does not exist yet: the deepest existing
// ancestor resolved through every symlink, then the missing components.
export const realPathOf = (operation: string, p: string): Effect.Effect<string, StorageError> =>
  // Fresh state on every run (the effect may be retried).
  Effect.suspend(() => realPathFrom(operation, p))

const realPathFrom = (operation: string, p: string): Effect.Effect<string, StorageError> => {
  const missing: Array<string> = []
  const from = (current: string): Effect.Effect<string, StorageError> =>
    io(operation, p, () => fs.realpath(current)).pipe(
      Effect.map((real) => path.join(real, ...[...missing].reverse())),
      Effect.catchIf((e) => Files.codeOf(e.cause) === "ENOENT" && path.dirname(current) !== current, () => {
        missing.push(path.basename(current))
        return from(path.dirname(current))
      })
    )
  return from(p)
}

// An ancestor of DEST is not ours to chmod, but it must not redirect us (symlink)
// nor let another user swap what lies below it: owned by us or root, and not
// writable by others unless sticky (like /tmp).
export const checkAncestor = (ctx: Files.Context, dir: string, st: Stats): StorageError | null => {
  if (st.isSymbolicLink()) return refused(dir, "a symbolic link")
  if (!st.isDirectory()) return refused(dir, "not a directory")
  if (ctx.uid === null) return null
  if (st.uid !== ctx.uid && st.uid !== 0) return refused(dir, `owned by uid ${st.uid}, neither ${ctx.uid} nor root`)
  if ((st.mode & 0o022) !== 0 && (st.mode & 0o1000) === 0) {
    return refused(dir, `group- or other-writable without the sticky bit (mode ${(st.mode & 0o7777).toString(8)})`)
  }
  return null
}

// Every existing component of DEST's absolute path is lstat-checked (a symlink
// anywhere is refused, never followed, unlike `mkdir -p`), every missing one is
// created 0700, and DEST itself must be a directory of ours (made 0700).
export const prepareRoot: (ctx: Files.Context, target: string) => Effect.Effect<void, StorageError> = Effect
  .fnUntraced(function*(ctx: Files.Context, target: string) {
    const parts = target.split(path.sep).filter((part) => part.length > 0)
    let current = path.parse(target).root
    for (let i = 0; i < parts.length; i++) {
      const parent = current
      current = path.join(current, parts[i]!)
      const st = yield* lstatOrNull("mirror: prepare destination", current)
      if (st === null) yield* Files.ensureDir(ctx, current, parent)
      else if (st.isSymbolicLink()) return yield* refused(current, "a symbolic link")
      else if (i === parts.length - 1) yield* Files.privateDir(ctx, current)
      else {
        const bad = checkAncestor(ctx, current, st)
        if (bad !== null) return yield* bad
      }
    }
  })

// Finishes what a run that died left in `.mirror`: a previous copy whose
// replacement never arrived is put back, one that was replaced is removed, and
// staging directories are removed. Only called while holding the lock.
export const recoverHouse: (ctx: Files.Context, target: string, house: string) => Effect.Effect<void, StorageError> =
  Effect.fnUntraced(function*(ctx: Files.Context, target: string, house: string) {
    for (const name of yield* Files.listDir(ctx, house)) {
      const p = path.join(house, name)
      if (name.startsWith("prev-")) {
        const live = path.join(target, name.slice("prev-".length))
        if ((yield* lstatOrNull("mirror: recover", live)) === null) {
          yield* Files.call("rename", p, () => fs.rename(p, live))
          yield* Files.syncDir(ctx, target)
          yield* Files.syncDir(ctx, house)
        } else yield* removeTree(p)
      } else if (name.startsWith("stage-")) yield* removeTree(p)
    }
  })

// ---------------------------------------------------------------------------
// Files of one session

export interface Listed {
  readonly name: string
  readonly type: "file" | "symlink" | "other"
  readonly size: number
}

export const listSession = Effect.fnUntraced(function*(operation: string, dir: string) {
  const out: Array<Listed> = []
  for (const name of (yield* io(operation, dir, () => fs.readdir(dir))).sort()) {
    if (excluded(name)) continue
    const st = yield* lstatOrNull(operation, path.join(dir, name))
    if (st === null) continue
    out.push({
      name,
      type: st.isFile() ? "file" : st.isSymbolicLink() ? "symlink" : "other",
      size: st.isFile() ? st.size : 0
    })
  }
  return out
})

// Where the data of a segment file of `size` bytes ends: before its trailing zero
// bytes, which are never data (the unused space of a preallocated segment, or a
// zero-filled torn tail). Other files end at their size. Read backwards in chunks;
// a file that shrinks meanwhile (a writer trimming it) is read from its new end.
export const dataEnd = (
  ctx: Files.Context,
  name: string,
  file: string,
  size: number
): Effect.Effect<number, StorageError> =>
  !Files.isSegmentName(name) || size === 0
    ? Effect.succeed(size)
    : Files.withHandle(Files.openRead(ctx, file), (fh) =>
      Effect.gen(function*() {
        let end = size
        while (end > 0) {
          const from = Math.max(0, end - CHUNK)
          const chunk = yield* Files.readAt(fh, file, from, end - from)
          let i = chunk.length
          while (i > 0 && chunk[i - 1] === 0) i--
          if (i > 0) return from + i
          end = from
        }
        return 0
      }))

// SHA-256 of the first `length` bytes of a file; null when it holds fewer.
export const hashPrefix = (
  ctx: Files.Context,
  file: string,
  length: number
): Effect.Effect<string | null, StorageError> =>
  Files.withHandle(Files.openRead(ctx, file), (fh) =>
    Effect.gen(function*() {
      const hash = createHash("sha256")
      for (let pos = 0; pos < length;) {
        const chunk = yield* Files.readAt(fh, file, pos, Math.min(CHUNK, length - pos))
        if (chunk.length === 0) return null
        hash.update(chunk)
        pos += chunk.length
      }
      return hash.digest("hex")
    }))

export const sha256 = (bytes: Uint8Array): string => createHash("sha256").update(bytes).digest("hex")

// Appends `[start, end)` of `from` to `out` at `at`; the source must still hold them.
export const copyRange = (
  ctx: Files.Context,
  from: string,
  start: number,
  end: number,
  out: Files.FileHandle,
  outPath: string,
  at: number
): Effect.Effect<void, StorageError> =>
  Files.withHandle(Files.openRead(ctx, from), (fh) =>
    Effect.gen(function*() {
      for (let pos = start; pos < end;) {
        const chunk = yield* Files.readAt(fh, from, pos, Math.min(CHUNK, end - pos))
        if (chunk.length === 0) {
          return yield* new StorageError({
            operation: "read",
            path: from,
            reason: new StorageReason.Truncated({ bytes: pos, expected: end })
          })
        }
        yield* Files.writeAll(out, outPath, chunk, at + pos - start)
        pos += chunk.length
      }
    }))

export type Piece =
  | { readonly _tag: "Bytes"; readonly bytes: Uint8Array }
  | { readonly _tag: "Range"; readonly file: string; readonly start: number; readonly end: number }

// A new file in the staging directory from pieces, fsynced before it is closed.
export const writeStaged = (
  ctx: Files.Context,
  file: string,
  pieces: ReadonlyArray<Piece>
): Effect.Effect<void, StorageError> =>
  Files.withHandle(Files.createExclusive(ctx, file), (out) =>
    Effect.gen(function*() {
      let at = 0
      for (const piece of pieces) {
        if (piece._tag === "Bytes") {
          yield* Files.writeAll(out, file, piece.bytes, at)
          at += piece.bytes.length
        } else {
          yield* copyRange(ctx, piece.file, piece.start, piece.end, out, file, at)
          at += piece.end - piece.start
        }
      }
      yield* Files.call("fsync", file, () => out.sync())
    }))

// A backup file that goes into the new copy unchanged: hard-linked (nothing ever
// writes to it, so both copies may share it), after checking it is a regular file
// of ours.
export const linkStaged = (ctx: Files.Context, from: string, to: string): Effect.Effect<void, StorageError> =>
  Effect.andThen(
    Files.withHandle(Files.openRead(ctx, from), () => Effect.void),
    Files.call("link", to, () => fs.link(from, to))
  )

// The entry hash a session directory stores at `sequence`; a line over the bound
// is a storage failure of the mirror, whose reason is the `CorruptJournal`.
export const entryHashAt = (operation: string, ctx: Files.Context, dir: string, sequence: number) =>
  Effect.catchTag(
    Files.entryHashAt(ctx, dir, sequence),
    "CorruptJournal",
    (e) =>
      Effect.fail(
        new StorageError({
          operation,
          path: dir,
          reason: e,
          cause: e
        })
      )
  )

// ---------------------------------------------------------------------------
// One session

export interface Backup {
  readonly exists: boolean
  readonly files: ReadonlyMap<string, Mirror.MirroredFile>
  readonly verified: Mirror.Verified | null
  readonly last: string | null
}

export const readBackup = (ctx: Files.Context, target: string, id: string) =>
  Effect.gen(function*() {
    const dir = path.join(target, id)
    const st = yield* lstatOrNull("mirror: lstat backup", dir)
    if (st === null) return { exists: false, files: new Map(), verified: null, last: null } satisfies Backup
    yield* Files.checkDir(ctx, dir)
    const listed = yield* listSession("mirror: list backup", dir)
    const files = new Map<string, Mirror.MirroredFile>()
    for (const f of listed) {
      if (f.type !== "file") continue
      const file = path.join(dir, f.name)
      const hash = yield* hashPrefix(ctx, file, f.size)
      if (hash !== null) files.set(f.name, { size: f.size, hash })
    }
    const report = yield* NodePersistence.inspect({ root: target }, id).pipe(
      Effect.map((r): Mirror.Verified | null => ({ ok: r.ok, nextSequence: r.nextSequence, head: r.head })),
      Effect.catchTag("SessionNotFound", () => Effect.succeed(null))
    )
    const last = report !== null && report.ok && report.nextSequence > 0
      ? yield* entryHashAt("mirror: read backup", ctx, dir, report.nextSequence - 1)
      : null
    return { exists: true, files, verified: report, last } satisfies Backup
  })

// The checkpoint of the cut: one read of the whole file, parsed and decoded.
export const readCheckpoint = (
  ctx: Files.Context,
  dir: string,
  id: string
): Effect.Effect<{ readonly bytes: Uint8Array | null } | { readonly broken: string }, StorageError> => {
  const file = path.join(dir, CHECKPOINT)
  return Files.withHandle(Files.openRead(ctx, file), (fh) => Files.readBounded(ctx, fh, file)).pipe(
    Effect.map((bytes) => decodeCheckpoint(bytes, id)),
    Effect.catchIf((e) => Files.codeOf(e.cause) === "ENOENT", () => Effect.succeed({ bytes: null }))
  )
}

// The checkpoint's bytes when they decode as a checkpoint of session `id`.
const decodeCheckpoint = (
  bytes: Uint8Array,
  id: string
): { readonly bytes: Uint8Array } | { readonly broken: string } => {
  let json: unknown
  try {
    json = JSON.parse(Utf8.decodeStrict(bytes))
  } catch {
    return { broken: `${CHECKPOINT} is not valid JSON (${bytes.length} bytes read)` }
  }
  const decoded = Checkpoint.decode(json)
  if (Result_.isFailure(decoded)) return { broken: `${CHECKPOINT}: ${decoded.failure}` }
  if (decoded.success.session_id !== id) {
    return { broken: `${CHECKPOINT} belongs to session ${decoded.success.session_id}` }
  }
  return { bytes }
}

export type Staged =
  | { readonly _tag: "Staged"; readonly plan: Mirror.Plan; readonly verified: Mirror.Verified }
  | { readonly _tag: "Empty" }
  | { readonly _tag: "Retry"; readonly reason: string; readonly storage?: boolean }
