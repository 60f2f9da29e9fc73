/**
 * Atomic replacement of a file, and the side files that keep damaged bytes aside.
 */
import { StorageError, StorageReason } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Random from "effect/Random"
import * as path from "node:path"
import { call, codeOf, type Context } from "./base.ts"
import { allZero, boundedSize, readAt, ZERO_CHUNK } from "./lines.ts"
import { closeQuietly, createExclusive, openRead, syncDir, withHandle, writeAll } from "./open.ts"

let tempCounter = 0

/** Prefix of every temporary file name; such files are never session data. */
export const TEMP_PREFIX = ".tmp-"

/**
 * A unique temporary name in `dir` for a file that will become `name`: this
 * process's id, a counter, and a random part against a reused pid. It need not
 * be unguessable (the file is created exclusively, without following links, in a
 * directory only its user may write), so the fiber's `Random` serves (no CSPRNG),
 * and a process that writes one checkpoint (a hook) does not load `node:crypto`
 * for it.
 */
export const tempName = (dir: string, name: string): Effect.Effect<string> =>
  Effect.map(Random.next, (r) =>
    path.join(
      dir,
      `${TEMP_PREFIX}${name}-${process.pid}-${Math.floor(r * 0x1_0000_0000).toString(16).padStart(8, "0")}-${
        (tempCounter++).toString(36)
      }`
    ))

// Removes a temp file, quietly: already gone, or the filesystem is failing, and
// the next writer clears it.
const removeTemp = (ctx: Context, tmp: string): Effect.Effect<void> =>
  Effect.promise(async () => {
    try {
      await ctx.fs.unlink(tmp)
    } catch {
      // See above.
    }
  })

/**
 * Atomic replace: writes `bytes` to a fresh temp file (O_CREAT|O_EXCL|O_NOFOLLOW,
 * 0600), fsyncs it, renames it over `dir/name`, then fsyncs `dir`. After a crash
 * at any point, `dir/name` is either the old file or the complete new one, never a
 * mixture; once this succeeds, the new one survives a crash. On failure or
 * interruption before the rename the temp file is removed (best effort; a writer
 * also clears stale temp files when it takes the lock).
 */
export const atomicReplace = (
  ctx: Context,
  dir: string,
  name: string,
  bytes: Uint8Array
): Effect.Effect<void, StorageError> =>
  // A fresh temp name on every run (the effect may be retried).
  Effect.flatMap(tempName(dir, name), (tmp) => atomicReplaceAs(ctx, dir, name, bytes, tmp))

const atomicReplaceAs = (
  ctx: Context,
  dir: string,
  name: string,
  bytes: Uint8Array,
  tmp: string
): Effect.Effect<void, StorageError> => {
  const target = path.join(dir, name)
  const written = withHandle(
    createExclusive(ctx, tmp),
    (fh) => Effect.andThen(writeAll(fh, tmp, bytes, 0), call("fsync", tmp, () => fh.sync()))
  ).pipe(
    Effect.andThen(call("rename", target, () => ctx.fs.rename(tmp, target))),
    Effect.onExit((exit) => Exit.isSuccess(exit) ? Effect.void : removeTemp(ctx, tmp))
  )
  return Effect.andThen(written, syncDir(ctx, dir))
}

/** Suffix of the side files that keep damaged bytes: `<name>.damaged-<offset>[.<n>]`. */
export const DAMAGED_INFIX = ".damaged-"

/**
 * The first of `base`, `base.1`, `base.2`, ... that `taken` does not hold: a name
 * for a new side file that replaces nothing.
 */
export const freeName = (taken: ReadonlySet<string>, base: string): string => {
  let name = base
  for (let n = 1; taken.has(name); n++) name = `${base}.${n}`
  return name
}

/**
 * The name of the side file that keeps the bytes of `name` from `offset` on,
 * `<name>.damaged-<offset>`, before `freeName` makes it free.
 */
export const damagedName = (name: string, offset: number): string => `${name}${DAMAGED_INFIX}${offset}`

/**
 * Links the complete, fsynced temp file `tmp` to the first free name among
 * `dir/base`, `dir/base.1`, `dir/base.2`, ... and returns that name. `link` never
 * replaces an existing name, so a name taken meanwhile is skipped, and the names
 * never run out (the next free one is found from a listing of `dir`). The caller
 * removes `tmp` and fsyncs `dir`.
 */
export const linkToFreeName = Effect.fnUntraced(function*(ctx: Context, dir: string, tmp: string, base: string) {
  for (let listing = 0; listing < 64; listing++) {
    const taken = new Set(yield* listDir(ctx, dir))
    for (let tries = 0; tries < 64; tries++) {
      const name = freeName(taken, base)
      const to = path.join(dir, name)
      const linked = yield* call("link", to, () => ctx.fs.link(tmp, to)).pipe(
        Effect.as(true),
        Effect.catchIf((e) => codeOf(e.cause) === "EEXIST", () => Effect.succeed(false))
      )
      if (linked) return name
      taken.add(name)
    }
  }
  return yield* new StorageError({
    operation: "link",
    path: path.join(dir, base),
    reason: new StorageReason.NoFreeName()
  })
})

/**
 * Copies the bytes of `dir/name` from `from` to its end into a new side file
 * `dir/name.damaged-<from>` (or `.damaged-<from>.<n>` when that name is taken), so
 * damaged bytes survive before the caller truncates or abandons them. Succeeds
 * with the new name.
 *
 * Crash and failure guarantees: the copy is written to a temp file (0600, in
 * bounded chunks, runs of zero bytes left as holes so a huge sparse zero-filled
 * tail costs neither memory nor disk), fsynced, and only then linked to its final
 * name and the directory fsynced. So a side file with the final name is always
 * complete; a copy that fails (a full disk) leaves no side file, and its temp file
 * is removed (or, after a crash, cleared by the next writer with the temp files).
 */
export const copyAside = (
  ctx: Context,
  dir: string,
  name: string,
  from: number
): Effect.Effect<string, StorageError> => {
  const src = path.join(dir, name)
  return withHandle(openRead(ctx, src), (fh) =>
    Effect.gen(function*() {
      const size = yield* boundedSize(ctx, fh, src)
      const tmp = yield* tempName(dir, name)
      const target = yield* withHandle(createExclusive(ctx, tmp), (out) =>
        Effect.gen(function*() {
          let pos = from
          while (pos < size) {
            const chunk = yield* readAt(fh, src, pos, Math.min(ZERO_CHUNK, size - pos))
            if (chunk.length === 0) break
            if (!allZero(chunk)) yield* writeAll(out, tmp, chunk, pos - from)
            pos += chunk.length
          }
          // Sets the length; trailing zero chunks that were skipped become a hole.
          yield* call("ftruncate", tmp, () => out.truncate(pos - from))
          yield* call("fsync", tmp, () => out.sync())
        })).pipe(
          Effect.andThen(linkToFreeName(ctx, dir, tmp, damagedName(name, from))),
          Effect.ensuring(removeTemp(ctx, tmp))
        )
      yield* syncDir(ctx, dir)
      return target
    }))
}

/** Closes a handle, ignoring errors (the descriptor is released regardless). */
export const close = closeQuietly

/** Removes a file; a missing file is not an error. */
export const unlinkIfExists = (ctx: Context, file: string): Effect.Effect<void, StorageError> =>
  call("unlink", file, () => ctx.fs.unlink(file)).pipe(
    Effect.catchIf((e) => codeOf(e.cause) === "ENOENT", () => Effect.void)
  )

/** Lists a directory; a missing directory lists as empty. */
export const listDir = (ctx: Context, dir: string): Effect.Effect<Array<string>, StorageError> =>
  call("readdir", dir, () => ctx.fs.readdir(dir)).pipe(
    Effect.catchIf((e) => codeOf(e.cause) === "ENOENT", () => Effect.succeed<Array<string>>([]))
  )
