/**
 * Every access to the transcripts' directory tree, and nothing else: the one
 * place that touches files, each file-system step its own Effect failing with a
 * `SourceError` that names the path it was about.
 *
 * No component under the source is trusted by its path. Each directory is held
 * open (O_DIRECTORY|O_NOFOLLOW) and everything in it is reached through that
 * handle: on Linux through `/proc/self/fd/<fd>/<name>`, which the kernel resolves
 * from the open directory itself (the semantics of `openat(2)`, which Node does
 * not offer), so a directory renamed away and replaced by a symbolic link after
 * it was opened is never gone through, and a link standing at a name is refused
 * by O_NOFOLLOW when that name is opened (ELOOP) or by `lstat`. Every transcript
 * is resolved this way from the source down on every read, so a project (or
 * session, or `subagents`) directory swapped for a link to elsewhere is refused
 * with the path of the swapped directory, whichever moment the swap happened.
 *
 * Where `/proc/self/fd` does not reach the open directory (not Linux, no procfs
 * mounted) names are opened by path, with O_NOFOLLOW on each component, and
 * after each open every directory held on the way is checked, by `lstat` of its
 * path, to still be the inode that was opened: a swap that is still in place is
 * refused, but one that is undone between the open and the check is not seen.
 *
 * The source directory itself is opened with O_NOFOLLOW (a source that is a link
 * is refused); the directories above it are the caller's choice and are not
 * checked.
 */
import { messageOf } from "@session-journal/core"
import { Files } from "@session-journal/node"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as fs from "node:fs"
import { constants, type Stats } from "node:fs"
import * as path from "node:path"
import { SourceError } from "../Errors.ts"

/** How deep under the source the walk looks (project / session / subagents / file, and one more). */
const MAX_DEPTH = 5

/** Most directory entries one walk visits. */
const MAX_VISITS = 200_000

/** One regular file found under a project directory. */
export interface Found {
  readonly project: string
  /** Path relative to the project directory, `/`-separated. */
  readonly relative: string
  readonly path: string
  /** Its stamp as the walk saw it. */
  readonly stamp: Stamp
}

/** A path under the source that was refused (a symbolic link, or unreadable). */
export interface Refused {
  readonly path: string
  readonly reason: string
}

/** The size and identity of a file, to notice a change without reading it. */
export interface Stamp {
  readonly size: number
  readonly mtimeMs: number
  readonly dev: number
  readonly ino: number
}

const reasonOf = (e: unknown): string => {
  const code = Files.codeOf(e)
  const message = messageOf(e)
  return code === undefined || message.includes(code) ? message : `${message} (${code})`
}

const fail = (p: string, e: unknown) => {
  const code = Files.codeOf(e)
  return new SourceError({ path: p, reason: reasonOf(e), ...(code === undefined ? {} : { code }) })
}

const refuse = (p: string, reason: string) => new SourceError({ path: p, reason: `refused: ${reason}` })

// The open of a name that must not be a link: ELOOP (O_NOFOLLOW met a link) and
// ENOTDIR (O_DIRECTORY met something else) are the refusals they are.
const openFailure = (p: string, e: unknown) => {
  const code = Files.codeOf(e)
  if (code === "ELOOP") return new SourceError({ path: p, reason: "refused: a symbolic link", code })
  if (code === "ENOTDIR") return new SourceError({ path: p, reason: "refused: not a directory", code })
  return fail(p, e)
}

const c = Files.context(path.sep)

/** One file-system call as an Effect, failing with a `SourceError` naming `p`. */
const step = <A>(p: string, f: () => Promise<A>): Effect.Effect<A, SourceError> =>
  Effect.tryPromise({ try: f, catch: (e) => fail(p, e) })

/** Whether a failure is that the path does not exist. */
export const isMissing = (e: SourceError): boolean => e.code === "ENOENT"

/** A directory held open, with the path it was reached by (for messages). */
interface Dir {
  readonly path: string
  readonly fh: Files.FileHandle
  readonly st: Stats
  readonly parent: Dir | null
}

// Whether `/proc/self/fd/<fd>` reaches an open directory here; probed once.
let procWorks: boolean | undefined

/**
 * Forces (false) or forgets (undefined: probe again) the use of `/proc/self/fd`,
 * so that tests can run the path-based fallback on Linux too.
 */
export const useProcfs = (use: false | undefined): void => {
  procWorks = use
}

const probe = (dir: Dir): boolean => {
  if (procWorks === undefined) {
    try {
      const st = fs.statSync(`/proc/self/fd/${dir.fh.fd}`)
      procWorks = st.isDirectory() && st.dev === dir.st.dev && st.ino === dir.st.ino
    } catch {
      procWorks = false
    }
  }
  return procWorks
}

/** What the kernel is given to reach `name` in `dir` (see the module header). */
const at = (dir: Dir, name: string): string =>
  probe(dir) ? `/proc/self/fd/${dir.fh.fd}/${name}` : path.join(dir.path, name)

/** Without procfs: every directory held on the way must still be the one opened. */
const confirm = (dir: Dir): Effect.Effect<void, SourceError> =>
  procWorks === true
    ? Effect.void
    : Effect.gen(function*() {
      for (let d: Dir | null = dir; d !== null; d = d.parent) {
        const p = d.path
        const st = yield* step(p, () => c.fs.lstat(p))
        if (st.isSymbolicLink() || st.dev !== d.st.dev || st.ino !== d.st.ino) {
          return yield* refuse(p, "replaced while it was being read")
        }
      }
    })

const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW
const FILE_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK

const closing = (fh: Files.FileHandle) => Files.close(fh)

/** Opens a directory (scoped): `target` is what the kernel resolves, `p` the path it stands for. */
const openDir = (target: string, p: string, parent: Dir | null): Effect.Effect<Dir, SourceError, Scope.Scope> =>
  Effect.gen(function*() {
    const fh = yield* Effect.acquireRelease(
      Effect.tryPromise({ try: () => c.fs.open(target, DIR_FLAGS), catch: (e) => openFailure(p, e) }),
      closing
    ).pipe(
      // O_DIRECTORY|O_NOFOLLOW on a link fails with ENOTDIR on Linux: say which it was.
      Effect.catchIf(
        (e) => e.code === "ENOTDIR",
        (e) =>
          Effect.flatMap(
            Effect.orElseSucceed(step(p, () => c.fs.lstat(target)), () => null),
            (st) => Effect.fail(st?.isSymbolicLink() === true ? refuse(p, "a symbolic link") : e)
          )
      )
    )
    const st = yield* step(p, () => fh.stat())
    const dir: Dir = { path: p, fh, st, parent }
    if (parent !== null) yield* confirm(parent)
    return dir
  })

/** The source directory, opened without following a link (scoped). */
const openRoot = (root: string): Effect.Effect<Dir, SourceError, Scope.Scope> => openDir(root, root, null)

/** Directory `name` of `dir`, opened through it without following a link (scoped). */
const openIn = (dir: Dir, name: string): Effect.Effect<Dir, SourceError, Scope.Scope> =>
  openDir(at(dir, name), path.join(dir.path, name), dir)

const lstatIn = (dir: Dir, name: string): Effect.Effect<Stats, SourceError> => {
  const p = path.join(dir.path, name)
  return Effect.tap(step(p, () => c.fs.lstat(at(dir, name))), () => confirm(dir))
}

const namesOf = (dir: Dir): Effect.Effect<Array<string>, SourceError> =>
  Effect.map(
    step(dir.path, () => c.fs.readdir(probe(dir) ? `/proc/self/fd/${dir.fh.fd}` : dir.path)),
    (names) => names.sort()
  )

/**
 * Checks the source directory itself: it must exist, be a directory and not be
 * a symbolic link.
 */
export const checkRoot = (root: string): Effect.Effect<string, SourceError> => {
  const abs = path.resolve(root)
  return Effect.scoped(Effect.as(openRoot(abs), abs))
}

/** A transcript's place: the source and the names from it down to the file. */
export interface Location {
  readonly root: string
  /** The project directory's name, then each component of the path in it. */
  readonly parts: ReadonlyArray<string>
}

/** The path a location names. */
export const pathOf = (loc: Location): string => path.join(loc.root, ...loc.parts)

/** The location of `file` when it lies under `root` (by its path, nothing resolved). */
export const locate = (root: string, file: string): Location | null => {
  const rel = path.relative(root, file)
  if (rel === "" || path.isAbsolute(rel)) return null
  const parts = rel.split(path.sep)
  return parts.every((p) => p !== "" && p !== "." && p !== "..") ? { root, parts } : null
}

/** The directory holding a location's file, reached from the source through open handles (scoped). */
const parentOf = (loc: Location): Effect.Effect<Dir, SourceError, Scope.Scope> =>
  Effect.gen(function*() {
    if (loc.parts.length === 0 || loc.parts.some((p) => p === "" || p === "." || p === ".." || p.includes("/"))) {
      return yield* refuse(pathOf(loc), "not a path under the source")
    }
    let dir = yield* openRoot(loc.root)
    for (const name of loc.parts.slice(0, -1)) dir = yield* openIn(dir, name)
    return dir
  })

/** What a walk found: transcripts' candidates, refusals, and the directories it went through. */
export interface Scanned {
  readonly files: Array<Found>
  readonly refused: Array<Refused>
  /** Each directory walked, as its path. */
  readonly dirs: Array<string>
}

/**
 * Walks the source: every regular file under the project directories that
 * `wanted` accepts (by name), and every symbolic link met, refused. `under`
 * limits the walk to one entry of the tree (its names from the source, the
 * project's first): a file, or a directory and what is under it; the whole
 * source by default. `beforeList` runs for each directory before it is listed
 * (so a watch it starts there misses nothing the listing does not show).
 */
export const scan = (
  root: string,
  wanted: (project: string) => boolean,
  under: ReadonlyArray<string> = [],
  beforeList: (dir: string) => Effect.Effect<void> = () => Effect.void
): Effect.Effect<Scanned, SourceError> =>
  Effect.scoped(Effect.gen(function*() {
    const files: Array<Found> = []
    const refused: Array<Refused> = []
    const dirs: Array<string> = []
    let visits = 0
    // One entry of `dir`; `project` null at the source itself.
    const entry = (
      dir: Dir,
      name: string,
      project: string | null,
      relative: string,
      depth: number
    ): Effect.Effect<void, SourceError> =>
      Effect.gen(function*() {
        if (++visits > MAX_VISITS) {
          return yield* fail(root, new Error(`more than ${MAX_VISITS} entries under the source`))
        }
        const p = path.join(dir.path, name)
        const stat = yield* Effect.result(lstatIn(dir, name))
        if (stat._tag === "Failure") {
          if (!isMissing(stat.failure)) refused.push({ path: p, reason: stat.failure.reason })
          return
        }
        const st = stat.success
        if (st.isSymbolicLink()) {
          if (project === null ? wanted(name) : true) refused.push({ path: p, reason: "refused: a symbolic link" })
          return
        }
        const rel = project === null ? "" : relative === "" ? name : `${relative}/${name}`
        if (st.isDirectory() && (project === null ? wanted(name) : depth < MAX_DEPTH)) {
          yield* descend(dir, name, project ?? name, rel, project === null ? 1 : depth + 1)
        } else if (st.isFile() && project !== null) {
          files.push({ project, relative: rel, path: p, stamp: stampOf(st) })
        }
      })
    const walk = (
      dir: Dir,
      project: string | null,
      relative: string,
      depth: number
    ): Effect.Effect<void, SourceError> =>
      Effect.gen(function*() {
        yield* beforeList(dir.path)
        const listed = yield* Effect.result(namesOf(dir))
        if (listed._tag === "Failure") {
          if (!isMissing(listed.failure)) refused.push({ path: dir.path, reason: listed.failure.reason })
          return
        }
        dirs.push(dir.path)
        for (const name of listed.success) yield* entry(dir, name, project, relative, depth)
      })
    // A directory that cannot be opened (a link swapped in since its lstat, say) is refused, the walk goes on.
    const descend = (dir: Dir, name: string, project: string, relative: string, depth: number) =>
      Effect.scoped(Effect.flatMap(openIn(dir, name), (sub) => walk(sub, project, relative, depth))).pipe(
        Effect.catch((e: SourceError) =>
          e.path === root
            ? Effect.fail(e)
            : isMissing(e)
            ? Effect.void
            : Effect.sync(() => void refused.push({ path: e.path, reason: e.reason }))
        )
      )
    const top = yield* openRoot(root)
    if (under.length === 0) {
      yield* walk(top, null, "", 0)
      return { files, refused, dirs }
    }
    if (!wanted(under[0]!)) return { files, refused, dirs }
    // The directories down to the entry; one gone (or refused) ends this walk with what it says.
    const reached = yield* Effect.result(Effect.gen(function*() {
      let dir = top
      for (const name of under.slice(0, -1)) dir = yield* openIn(dir, name)
      return dir
    }))
    if (reached._tag === "Failure") {
      if (!isMissing(reached.failure)) refused.push({ path: reached.failure.path, reason: reached.failure.reason })
      return { files, refused, dirs }
    }
    const name = under[under.length - 1]!
    if (under.length === 1) yield* entry(reached.success, name, null, "", 0)
    else yield* entry(reached.success, name, under[0]!, under.slice(1, -1).join("/"), under.length - 1)
    return { files, refused, dirs }
  }))

/**
 * Watches one directory (not what is under it): `onEvent` gets the name of the
 * entry that changed, or null when the platform does not say, and `onError` is
 * called when the watch stops working. A hint only: whatever it reports is read
 * again through the checked walk. The watch is closed with the scope.
 */
export const watch = (
  dir: string,
  onEvent: (name: string | null) => void,
  onError: () => void
): Effect.Effect<void, SourceError, Scope.Scope> =>
  Effect.asVoid(Effect.acquireRelease(
    Effect.try({
      try: () => {
        const w = fs.watch(
          dir,
          { persistent: false },
          (_event, name) => onEvent(typeof name === "string" ? name : null)
        )
        w.on("error", () => {
          w.close()
          onError()
        })
        return w
      },
      catch: (e) => fail(dir, e)
    }),
    (w) => Effect.sync(() => w.close())
  ))

const stampOf = (st: Stats): Stamp => ({ size: st.size, mtimeMs: st.mtimeMs, dev: st.dev, ino: st.ino })

/** The stamp of a file, or null when it (or a directory on its way) does not exist. A symbolic link is refused. */
export const stamp = (loc: Location): Effect.Effect<Stamp | null, SourceError> =>
  Effect.scoped(Effect.gen(function*() {
    const dir = yield* parentOf(loc)
    const st = yield* lstatIn(dir, loc.parts[loc.parts.length - 1]!)
    if (st.isSymbolicLink()) return yield* refuse(pathOf(loc), "a symbolic link")
    return stampOf(st)
  })).pipe(Effect.catchIf(isMissing, () => Effect.succeed(null)))

/** A transcript opened for reading: its path, handle and identity (fstat). */
export interface OpenFile {
  readonly path: string
  readonly fh: Files.FileHandle
  readonly stat: Stats
}

/**
 * Opens a transcript (scoped) through its directories' handles: O_NOFOLLOW (a
 * link is refused) and O_NONBLOCK (a FIFO planted meanwhile cannot hang the
 * read), and the opened file must be a regular file.
 *
 * Unlike the journal's own files, owner and mode are not checked: these files are
 * Claude Code's, often 0664 under a umask of 002, and custody means recording
 * what is there.
 */
export const open = (loc: Location): Effect.Effect<OpenFile, SourceError, Scope.Scope> =>
  Effect.gen(function*() {
    const dir = yield* parentOf(loc)
    const p = pathOf(loc)
    const fh = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () => c.fs.open(at(dir, loc.parts[loc.parts.length - 1]!), FILE_FLAGS),
        catch: (e) => openFailure(p, e)
      }),
      closing
    )
    yield* confirm(dir)
    const stat = yield* step(p, () => fh.stat())
    if (!stat.isFile()) return yield* refuse(p, "not a regular file")
    return { path: p, fh, stat }
  })

/** `length` bytes of an opened transcript from `position` (fewer at its end). */
export const readAt = (file: OpenFile, position: number, length: number): Effect.Effect<Uint8Array, SourceError> =>
  Effect.mapError(Files.readAt(file.fh, file.path, position, length), (e) => fail(file.path, e))

/** The whole of an opened transcript, refused by its size above `maxBytes` before a byte is read. */
export const readAll = (file: OpenFile, maxBytes: number): Effect.Effect<Uint8Array, SourceError> =>
  Effect.mapError(Files.readBounded(c, file.fh, file.path, maxBytes), (e) => fail(file.path, e))
