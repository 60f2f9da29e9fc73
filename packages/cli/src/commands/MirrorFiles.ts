/**
 * The executing side of `mirror DEST` (docs/DESIGN.md §7): backs up every session of a
 * journal directory, possibly while writers append to it, into DEST, so that what
 * DEST holds for a session is always a copy that verified.
 *
 * Per session:
 *
 * 1. A consistent cut of the source: `checkpoint.json` is read first, whole, on
 *    one handle (it is replaced atomically, so one read sees one version) and
 *    parsed; a read that does not parse is retried. Only then is the directory
 *    listed and every file's size taken, so the segments hold at least what the
 *    checkpoint covers. A segment appended to meanwhile is copied up to that size
 *    and may end on a partial line: a torn tail, which the adapter tolerates.
 * 2. The pure planner of `@session-journal/core/Mirror` compares the cut with the
 *    backup by content (SHA-256 of each backup file against the source's first
 *    bytes of that length): copy, extend, recopy or unchanged; backup-only files
 *    are kept.
 * 3. The new copy is assembled in a staging directory inside DEST (unchanged and
 *    kept files hard-linked from the backup, which is never written to), every
 *    file and directory fsynced, then verified with `NodePersistence.inspect`;
 *    it must also store the entry its own checkpoint ends at. A copy that does not
 *    verify is discarded and the cut taken again, a few times.
 * 4. `Mirror.judge` compares it with the backup: a source with fewer entries, or
 *    whose entry at the backup's last sequence is not the backup's, is refused and
 *    the backup left byte for byte as it was.
 * 5. Publishing renames the backup to `DEST/.mirror/prev-<id>` and the staged copy
 *    to `DEST/<id>`, fsyncing DEST and `.mirror` after each rename. A crash between
 *    the two renames leaves both copies under names the next run recognizes: it
 *    puts `prev-<id>` back when `DEST/<id>` is missing and removes it otherwise.
 *
 * One run at a time per DEST: the run holds the adapter's single-writer lock on
 * `DEST/.mirror` (a lock of a dead run, zombies included, is taken over), so
 * staging directories left behind are removed without guessing whose they are.
 *
 * Hardening: DEST and the journal directory are compared by their real paths (a
 * symlinked ancestor does not hide one inside the other); every existing component
 * of DEST's path is lstat-checked, so a symlink on the way is refused rather than
 * followed; files are read, created and synced through the adapter's hardened
 * primitives (`@session-journal/node` `Files`): O_NOFOLLOW opens checked against
 * the lstat, exclusive creation at 0600, directories 0700 whatever the umask.
 *
 * @since 0.1.0
 */
import { SessionLocked, StorageError, StorageReason } from "@session-journal/core"
import { Files, Lock, NodePersistence } from "@session-journal/node"
import * as Effect from "effect/Effect"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { InvalidInput, NotAvailable, VerificationFailed } from "../Failure.ts"
import {
  type Backup,
  CHECKPOINT,
  dataEnd,
  entryHashAt,
  hashPrefix,
  io,
  isInside,
  linkStaged,
  listSession,
  lstatOrNull,
  type Piece,
  prepareRoot,
  readBackup,
  readCheckpoint,
  realPathOf,
  recoverHouse,
  refused,
  removeTree,
  sha256,
  type Staged,
  writeStaged
} from "../internal/mirrorFs.ts"
import * as Mirror from "../Mirror.ts"
import * as Output from "../Output.ts"
import * as Storage from "../Storage.ts"

/**
 * What happened to one session, as printed with `--json`. `entries` and `head`
 * describe the backup after the run (null when there is none).
 *
 * @since 0.1.0
 */
export interface SessionResult {
  readonly id: string
  readonly outcome: Mirror.SessionOutcome
  readonly reason: string | null
  readonly entries: number | null
  readonly head: string | null
  readonly attempts: number
}

/**
 * The result of a mirror run, as printed with `--json`: file totals, then one
 * result per session of the source.
 *
 * @since 0.1.0
 */
export interface Result extends Mirror.Summary {
  readonly source: string
  readonly dest: string
  readonly refused: number
  readonly sessions: ReadonlyArray<SessionResult>
  readonly failures: ReadonlyArray<{ readonly path: string; readonly reason: string }>
}

/** The housekeeping directory inside DEST: the run's lock, staging, previous copies. */
export const HOUSE = ".mirror"

/** How many cuts of one session are taken before it is reported. */
const ATTEMPTS = 5

// Takes one cut of the source session and assembles and verifies its copy in
// `stageRoot/<id>`.
const stageOnce = (
  ctx: Files.Context,
  source: string,
  stageRoot: string,
  id: string,
  backupDir: string,
  backup: Backup
) =>
  Effect.gen(function*() {
    const srcDir = path.join(source, id)
    const cp = yield* readCheckpoint(ctx, srcDir, id)
    if ("broken" in cp) return { _tag: "Retry", reason: cp.broken } satisfies Staged
    // Listed only now: the segments then hold at least what the checkpoint covers.
    const listed = yield* listSession("mirror: list source", srcDir)
    const files: Array<Mirror.SourceFile> = []
    for (const f of listed) {
      if (f.name === CHECKPOINT) continue
      const mirrored = backup.files.get(f.name)
      const file = path.join(srcDir, f.name)
      // A segment is copied up to its data: its zero tail is not data.
      const size = f.type === "file" ? yield* dataEnd(ctx, f.name, file, f.size) : f.size
      const length = Mirror.prefixLength({ path: f.name, type: f.type, size }, mirrored)
      const hash = length === null ? null : yield* hashPrefix(ctx, file, length)
      files.push({
        path: f.name,
        type: f.type,
        size,
        prefix: length === null || hash === null ? undefined : { length, hash }
      })
    }
    if (cp.bytes !== null) {
      const mirrored = backup.files.get(CHECKPOINT)
      const size = cp.bytes.length
      const length = Mirror.prefixLength({ path: CHECKPOINT, type: "file", size }, mirrored)
      files.push({
        path: CHECKPOINT,
        type: "file",
        size,
        prefix: length === null ? undefined : { length, hash: sha256(cp.bytes.subarray(0, length)) }
      })
    }
    const plan = Mirror.plan(files, backup.files)
    const dir = path.join(stageRoot, id)
    yield* Effect.gen(function*() {
      yield* Files.ensureDir(ctx, dir, stageRoot)
      for (const action of plan.actions) {
        const to = path.join(dir, action.path)
        const from = path.join(srcDir, action.path)
        const old = path.join(backupDir, action.path)
        const whole = (size: number): Array<Piece> =>
          action.path === CHECKPOINT
            ? [{ _tag: "Bytes", bytes: cp.bytes! }]
            : [{ _tag: "Range", file: from, start: 0, end: size }]
        switch (action._tag) {
          case "Copy":
          case "Recopy":
            yield* writeStaged(ctx, to, whole(action.size))
            break
          case "Extend":
            yield* writeStaged(ctx, to, [
              { _tag: "Range", file: old, start: 0, end: action.from },
              action.path === CHECKPOINT
                ? { _tag: "Bytes", bytes: cp.bytes!.subarray(action.from) }
                : { _tag: "Range", file: from, start: action.from, end: action.size }
            ])
            break
          case "Unchanged":
            yield* linkStaged(ctx, old, to)
            break
          case "Skip":
            break
        }
      }
      for (const name of plan.kept) yield* linkStaged(ctx, path.join(backupDir, name), path.join(dir, name))
      yield* Files.syncDir(ctx, dir)
      yield* Files.syncDir(ctx, stageRoot)
    })
    const report = yield* NodePersistence.inspect({ root: stageRoot }, id).pipe(
      Effect.catchTag("SessionNotFound", () => Effect.succeed(null))
    )
    // A session directory without a checkpoint or a segment (a writer that died
    // before its first append) holds nothing to back up.
    if (report === null) return { _tag: "Empty" } satisfies Staged
    // Only ok, nextSequence and head of the report are relied on; `verify` on the
    // source tells what is wrong in detail.
    if (!report.ok) {
      return {
        _tag: "Retry",
        reason: `the copy of ${report.nextSequence} entries does not verify (run verify on the source)`
      } satisfies Staged
    }
    // The copy must store the entry its checkpoint ends at, whatever the
    // verifier accepts: a checkpoint ahead of its segments is a torn cut.
    if (report.nextSequence > 0) {
      const last = yield* entryHashAt("mirror: read copy", ctx, dir, report.nextSequence - 1)
      if (last === null) {
        return {
          _tag: "Retry",
          reason: `the copy claims ${report.nextSequence} entries but stores no entry ${report.nextSequence - 1}`
        } satisfies Staged
      }
    }
    return {
      _tag: "Staged",
      plan,
      verified: { ok: report.ok, nextSequence: report.nextSequence, head: report.head }
    } satisfies Staged
  })

const mirrorSession = (ctx: Files.Context, source: string, target: string, house: string, id: string) =>
  Effect.gen(function*() {
    const backupDir = path.join(target, id)
    const backup = yield* readBackup(ctx, target, id)
    const current = (): Pick<SessionResult, "entries" | "head"> =>
      backup.verified === null
        ? { entries: null, head: null }
        : { entries: backup.verified.nextSequence, head: backup.verified.head }
    let reason = ""
    // The last attempt failed on the filesystem rather than on the content: a failure, not a refusal.
    let storageFailed = false
    for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
      const stageRoot = path.join(house, `stage-${process.pid}-${randomBytes(6).toString("hex")}`)
      const discard = removeTree(stageRoot).pipe(Effect.ignore)
      const staged: Staged = yield* Files.ensureDir(ctx, stageRoot, house).pipe(
        Effect.andThen(stageOnce(ctx, source, stageRoot, id, backupDir, backup)),
        Effect.catchTag(
          "StorageError",
          (e) => Effect.succeed({ _tag: "Retry", reason: e.message, storage: true } satisfies Staged)
        )
      )
      if (staged._tag === "Empty") {
        yield* discard
        return done({
          id,
          outcome: "unchanged",
          reason: "the source session holds nothing yet",
          ...current(),
          attempts: attempt
        })
      }
      if (staged._tag === "Retry") {
        reason = staged.reason
        storageFailed = staged.storage === true
        yield* discard
        yield* Effect.sleep(`${10 * attempt} millis`)
        continue
      }
      const verdict = Mirror.judge({
        backup: backup.verified,
        staged: staged.verified,
        backupLast: backup.last,
        stagedAtBackupLast: backup.verified !== null && backup.verified.nextSequence > 0
          ? yield* entryHashAt("mirror: read copy", ctx, path.join(stageRoot, id), backup.verified!.nextSequence - 1)
          : null
      })
      if (verdict._tag === "Refuse") {
        yield* discard
        return done({ id, outcome: "refused", reason: verdict.reason, ...current(), attempts: attempt })
      }
      const outcome = Mirror.published(staged.plan, backup.exists ? backup.verified : null, staged.verified)
      if (outcome !== "unchanged") yield* publish(ctx, target, house, stageRoot, id, backup.exists)
      yield* discard
      const result: SessionResult = {
        id,
        outcome,
        reason: null,
        entries: staged.verified.nextSequence,
        head: staged.verified.head,
        attempts: attempt
      }
      return { result, plan: staged.plan }
    }
    return storageFailed
      ? done({ id, outcome: "failed", reason, ...current(), attempts: ATTEMPTS })
      : done({
        id,
        outcome: "refused",
        reason: `no consistent copy in ${ATTEMPTS} attempts: ${reason}`,
        ...current(),
        attempts: ATTEMPTS
      })
  }).pipe(
    Effect.catchTag(
      "StorageError",
      (e) => Effect.succeed(done({ id, outcome: "failed", reason: e.message, entries: null, head: null, attempts: 0 }))
    )
  )

// A session result without a published plan (refused or failed).
const done = (result: SessionResult): { readonly result: SessionResult; readonly plan: Mirror.Plan | null } => ({
  result,
  plan: null
})

// Replaces `target/<id>` by the verified `stageRoot/<id>`. The backup is first
// renamed into `.mirror` (prev-<id>), so at every moment the old copy or the new
// one is under a name that `recoverHouse` restores from.
const publish = Effect.fnUntraced(function*(
  ctx: Files.Context,
  target: string,
  house: string,
  stageRoot: string,
  id: string,
  replacing: boolean
) {
  const live = path.join(target, id)
  const prev = path.join(house, `prev-${id}`)
  if (replacing) {
    yield* Files.call("rename", live, () => fs.rename(live, prev))
    yield* Files.syncDir(ctx, target)
    yield* Files.syncDir(ctx, house)
  }
  yield* Files.call("rename", live, () => fs.rename(path.join(stageRoot, id), live)).pipe(
    // Put the backup back now rather than leave it to the next run.
    Effect.onError(() =>
      replacing
        ? Files.call("rename", prev, () => fs.rename(prev, live)).pipe(
          Effect.andThen(Files.syncDir(ctx, target)),
          Effect.ignore
        )
        : Effect.void
    )
  )
  yield* Files.syncDir(ctx, target)
  if (replacing) {
    yield* removeTree(prev)
    yield* Files.syncDir(ctx, house)
  }
})

// ---------------------------------------------------------------------------
// The run

/**
 * Mirrors every session of the journal directory of `storage` into `dest`.
 * Fails only when the run cannot start (bad DEST, another run holds DEST, the
 * source cannot be listed); what happened to each session is in the result.
 *
 * @since 0.1.0
 */
export const run = (storage: Storage.Options, dest: string) =>
  Effect.gen(function*() {
    if (!Storage.isFilesystem(storage)) {
      return yield* new NotAvailable({
        feature: "mirror",
        reason: "it copies a journal directory, not a PostgreSQL database"
      })
    }
    if (dest.length === 0) return yield* new InvalidInput({ field: "DEST", reason: "must not be empty" })
    const given = path.resolve(storage.dir)
    const sourceSt = yield* io("mirror: list source", given, () => fs.lstat(given))
    if (sourceSt.isSymbolicLink()) return yield* refused(given, "a symbolic link")
    if (!sourceSt.isDirectory()) return yield* refused(given, "not a directory")
    // Compared by real paths: a symlinked ancestor of either must not hide one inside the other.
    const source = yield* io("mirror: resolve source", given, () => fs.realpath(given))
    const target = path.resolve(dest)
    const realTarget = yield* realPathOf("mirror: resolve destination", target)
    for (const [a, b] of [[source, target], [source, realTarget], [given, target]] as const) {
      if (isInside(a, b) || isInside(b, a)) {
        return yield* new InvalidInput({
          field: "DEST",
          reason: `must not contain or be inside the journal directory ${source}`
        })
      }
    }
    const ctx = Files.context(target)
    yield* prepareRoot(ctx, target)
    const house = path.join(target, HOUSE)
    yield* Files.ensureDir(ctx, house, target)
    yield* Effect.acquireRelease(
      Lock.acquire(ctx, house, "mirror").pipe(
        Effect.catchTag("SessionLocked", (e) =>
          Effect.fail(new SessionLocked({ id: `mirror ${target}`, holder: e.holder })))
      ),
      (h) =>
        Effect.ignore(h.release)
    )
    yield* recoverHouse(ctx, target, house)
    const ids: Array<string> = []
    for (const name of (yield* Files.listDir(ctx, source)).sort()) {
      if (!NodePersistence.isSafeSessionId(name)) continue
      const st = yield* lstatOrNull("mirror: list source", path.join(source, name))
      if (st !== null && st.isDirectory()) ids.push(name)
    }
    const backupOnly = (yield* Files.listDir(ctx, target)).filter((n) =>
      NodePersistence.isSafeSessionId(n) && !ids.includes(n)
    )
      .length
    const sessions: Array<SessionResult> = []
    const outcomes: Array<Mirror.Outcome> = []
    let kept = backupOnly
    yield* Output.withProgress("mirror", ids.length, (bar) =>
      Effect.forEach(ids, (id) =>
        Effect.gen(function*() {
          const { plan, result } = yield* mirrorSession(ctx, source, target, house, id)
          sessions.push(result)
          if (plan !== null) {
            outcomes.push(...plan.actions.map(Mirror.outcomeOf))
            kept += plan.kept.length
          } else if (result.outcome === "failed") {
            outcomes.push({ _tag: "Failed", path: id, reason: result.reason ?? "failed" })
          }
          bar.advance(1)
        }), { discard: true }))
    const summary = Mirror.summarize(outcomes, kept)
    const result: Result = {
      source,
      dest: target,
      ...summary,
      refused: sessions.filter((s) => s.outcome === "refused").length,
      sessions,
      failures: sessions.flatMap((s) => (s.outcome === "failed" ? [{ path: s.id, reason: s.reason ?? "failed" }] : []))
    }
    return result
  }).pipe(Effect.scoped)

/**
 * Ends the command with the exit code a run calls for: 1 (verification failed)
 * when a session was refused, 3 (storage error) when one could not be mirrored.
 *
 * @since 0.1.0
 */
export const check = (r: Result): Effect.Effect<void, VerificationFailed | StorageError> => {
  if (r.refused > 0) return Effect.fail(new VerificationFailed({ failed: r.refused, total: r.sessions.length }))
  const failed = r.sessions.filter((s) => s.outcome === "failed").length
  if (failed > 0) {
    return Effect.fail(
      new StorageError({
        operation: "mirror",
        path: r.dest,
        reason: new StorageReason.Incomplete({
          failed,
          message: `${failed} session${failed === 1 ? "" : "s"} could not be mirrored`
        })
      })
    )
  }
  return Effect.void
}

/**
 * Human output for a mirror run: the totals, then every session that was not
 * unchanged.
 *
 * @since 0.1.0
 */
export const text = (r: Result): Array<string> => [
  `mirror ${r.source} -> ${r.dest}: copied ${r.copied}, extended ${r.extended}, refreshed ${r.refreshed}, skipped ${r.skipped}, failed ${r.failed} (${r.bytes} bytes; ${r.kept} mirror-only files kept)`,
  ...r.sessions.filter((s) => s.outcome !== "unchanged").map((s) =>
    `  ${s.outcome} ${s.id}` + (s.entries === null ? "" : ` (${s.entries} entries)`) +
    (s.reason === null ? "" : `: ${s.reason}`)
  )
]
