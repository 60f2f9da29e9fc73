/**
 * Loading a session directory: the checkpoint, then a replay of the segments with
 * core's `Recovery` (docs/DESIGN.md §9), and what the writer needs to know about where the
 * next bytes go.
 */
import {
  type CorruptJournal,
  Entry,
  JournalState,
  type Persistence,
  Recovery,
  type StorageError,
  Utf8
} from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as path from "node:path"
import type * as Base from "./fileOps/base.ts"
import * as Lines from "./fileOps/lines.ts"
import * as Open from "./fileOps/open.ts"
import * as Replace from "./fileOps/replace.ts"
import * as Segment from "./segment.ts"
import { Ahead, scanBytes } from "./wholeSegment.ts"

/** Name of the checkpoint file inside a session directory. */
export const CHECKPOINT_FILE = "checkpoint.json"

/**
 * How far back from a segment's end a load looks for the line of its checkpoint's
 * last entry (1 MiB) before it reads the segment from its start.
 */
export const RESUME_WINDOW = 1024 * 1024

/** Files of a session directory, as found by one `readdir`. */
export interface Listing {
  readonly names: ReadonlyArray<string>
  readonly segments: ReadonlyArray<{ readonly name: string; readonly base: number }>
  readonly hasCheckpoint: boolean
}

/** Lists a session directory (which must be confined already). */
export const listing = (ctx: Base.Context, dir: string): Effect.Effect<Listing, StorageError> =>
  Effect.map(Replace.listDir(ctx, dir), (names) => ({
    names,
    segments: Segment.segmentsOf(names),
    hasCheckpoint: names.includes(CHECKPOINT_FILE)
  }))

/** What the writer knows about the last segment after a load. */
export interface LastSegment {
  readonly name: string
  readonly base: number
  /** File size when scanned (or after the writer's own appends). */
  size: number
  /** End of the last valid record; bytes past it are a torn tail. */
  validEnd: number
  /** One past the highest sequence stored in it (its base when it holds none). */
  contentNext: number
  /** Whether the segment is preallocated (its open record says so). */
  preallocated: boolean
  /**
   * Whether the bytes from `validEnd` to `size` are unused space (the zero tail of
   * a preallocated segment), where the next write goes, rather than a torn tail.
   */
  free: boolean
}

/** The writer's view of the stored session, rebuilt by every load. */
export interface View {
  next: number
  /** What the next entry links to (`JournalState.lastHash`: ZERO_HASH with `entry_cap` 0). */
  lastHash: string
  /** `entry_hash` of the newest stored entry (ZERO_HASH when none): the tip a compare-and-append names. */
  tipHash: string
  readonly entryCap: number
  stopped: Persistence.RecoveryReport["stopped"]
  checkpointNext: number
  checkpointSize: number
  last: LastSegment | null
  /** A checkpoint covers everything stored: the next append starts a new segment (docs/DESIGN.md §6). */
  rollPending: boolean
}

/** Integrity of one segment file, as a scan found it. */
export interface SegmentReport {
  readonly name: string
  readonly base: number
  readonly bytes: number
  /** Entries read from it (valid records). */
  readonly entries: number
  readonly firstSequence: number | null
  readonly lastSequence: number | null
  /** ok; torn (a torn tail); damaged (the valid prefix ends here); unread (after that, or before a load-mode start). */
  readonly status: "ok" | "torn" | "damaged" | "unread"
  readonly problem: null | { readonly offset: number; readonly sequence: number | null; readonly detail: string }
}

/** The outcome of a load. */
export interface LoadResult {
  readonly loaded: Persistence.Loaded
  readonly view: View
  readonly listing: Listing
  /** Why the checkpoint file was not used although it exists, if so. */
  readonly brokenCheckpoint: string | null
  /** The checkpoint as decoded, when it decoded and verified by itself. */
  readonly checkpoint: JournalState.JournalState | null
  /** What the scan found in each segment. */
  readonly segments: ReadonlyArray<SegmentReport>
  /** One past the highest sequence of the valid stored records. */
  readonly storedNext: number
}

/** Reads a whole file of the session directory, checked and bounded. */
export const readWhole = (ctx: Base.Context, file: string): Effect.Effect<Uint8Array, StorageError> =>
  Open.withHandle(Open.openRead(ctx, file), (fh) => Lines.readBounded(ctx, fh, file))

/** Reads the checkpoint file as Recovery's input, with its size. */
export const readCheckpoint = (
  ctx: Base.Context,
  dir: string
): Effect.Effect<{ readonly input: Recovery.CheckpointInput; readonly size: number }, StorageError> => {
  const file = path.join(dir, CHECKPOINT_FILE)
  return Effect.map(readWhole(ctx, file), (raw) => {
    try {
      return {
        input: { _tag: "Document", document: JSON.parse(Utf8.decodeStrict(raw)), location: file },
        size: raw.length
      }
    } catch {
      return { input: { _tag: "Unreadable", reason: "checkpoint is not valid JSON", location: file }, size: raw.length }
    }
  })
}

/** How to load: `load` from the checkpoint, or `verify` the whole history (Recovery's modes). */
export interface LoadOptions {
  readonly caps: JournalState.Caps | undefined
  readonly mode: Recovery.Options["mode"]
  /** Whether a retention option removes checkpointed segments (history may start after 0). */
  readonly retention: boolean
  /**
   * Recover from the records alone (the checkpoint lends only its caps, when it
   * decodes): what `repair` trusts, since records carry their own proof.
   */
  readonly ignoreCheckpoint?: boolean | undefined
  /** With `ignoreCheckpoint`: whether the checkpoint lends its caps (default true). */
  readonly checkpointCaps?: boolean | undefined
}

/**
 * Loads a session with `Recovery`: the checkpoint, then the segments from the one
 * holding the checkpoint's last entry (load mode) or from the first (verify mode),
 * each record handed to the recovery with its file and byte offset. The adapter
 * only reads; every rule is the recovery's.
 */
export const load: (
  ctx: Base.Context,
  dir: string,
  id: string,
  options: LoadOptions
) => Effect.Effect<LoadResult, StorageError | CorruptJournal> = Effect.fnUntraced(function*(
  ctx: Base.Context,
  dir: string,
  id: string,
  options: LoadOptions
) {
  const exists = yield* Open.confineSessionDir(ctx, dir)
  const list: Listing = exists ? yield* listing(ctx, dir) : { names: [], segments: [], hasCheckpoint: false }
  let checkpointInput: Recovery.CheckpointInput = null
  let checkpointSize = 0
  if (list.hasCheckpoint) {
    const cp = yield* readCheckpoint(ctx, dir)
    checkpointInput = cp.input
    checkpointSize = cp.size
  }
  let caps = options.caps
  if (options.ignoreCheckpoint === true || options.checkpointCaps === false) {
    const decoded = Recovery.decodeCheckpoint(id, checkpointInput)
    if (options.checkpointCaps !== false && decoded._tag === "Success" && decoded.success !== null) {
      caps = { entry_cap: decoded.success.entry_cap, tool_counts_cap: decoded.success.tool_counts_cap }
    }
    checkpointInput = null
  }
  const recovery = Recovery.make({
    id,
    mode: options.mode,
    checkpoint: checkpointInput,
    caps,
    retention: options.retention,
    location: dir
  })
  const cp = recovery.checkpoint
  const segments = list.segments
  let start = 0
  if (options.mode === "load" && cp !== null) {
    const wanted = Math.max(0, cp.next_sequence - 1)
    for (let i = 0; i < segments.length; i++) if (segments[i]!.base <= wanted) start = i
  }
  const reports: Array<SegmentReport> = []
  // The newest accepted entry, and where the checkpoint's last entry ends: the
  // bytes after it are what was stored since the checkpoint (the policy's count).
  let tipNext = 0
  let tipHash: string = Entry.ZERO_HASH
  const cpLast = cp === null ? -1 : cp.next_sequence - 1
  // A load starts at the line of the checkpoint's last entry when it is found near
  // the end of its segment (`Segment.lineOf`): what a load reads is then what was
  // stored since the checkpoint, however long the segment. Not without the entry's
  // hash (a session that retains none) nor in verify mode, which reads everything.
  const resumeHash = options.mode === "load" && cp !== null && cpLast >= 0 &&
      JournalState.lastHash(cp) !== Entry.ZERO_HASH
    ? JournalState.lastHash(cp)
    : null
  let sinceCheckpointBytes = 0
  // A replay of the whole history reads the segments whole, a few ahead of the scan
  // (`wholeSegment.ts`); a load reads a segment or two from the checkpoint on.
  const ahead = options.mode === "verify" ? new Ahead(ctx, segments.map((s) => path.join(dir, s.name)), start) : null
  const scanAll = Effect.gen(function*() {
    let last: LastSegment | null = null
    for (let i = 0; i < segments.length; i++) {
      const seg = segments[i]!
      const file = path.join(dir, seg.name)
      if (i < start || recovery.stopped()) {
        if (ahead !== null) yield* ahead.stop()
        reports.push({
          name: seg.name,
          base: seg.base,
          bytes: 0,
          entries: 0,
          firstSequence: null,
          lastSequence: null,
          status: "unread",
          problem: null
        })
        continue
      }
      let contentNext = seg.base
      let entries = 0
      let firstSequence: number | null = null
      let lastSequence: number | null = null
      let cpEnd = -1
      const visit = (record: Segment.Visited, offset: number, end: number): boolean => {
        if (record._tag === "Meta") return recovery.offer({ _tag: "Meta", meta: record.meta })
        const entry = record.entry
        if (!recovery.offer({ _tag: "Entry", entry, segment: file, offset })) return false
        if (entry.sequence + 1 >= tipNext) {
          tipNext = entry.sequence + 1
          tipHash = entry.entry_hash
        }
        if (entry.sequence === cpLast) cpEnd = end
        contentNext = Math.max(contentNext, entry.sequence + 1)
        entries++
        firstSequence ??= entry.sequence
        lastSequence = entry.sequence
        return true
      }
      const whole = ahead === null ? null : yield* ahead.take()
      const scan = whole !== null && whole.bytes !== null
        ? yield* Effect.suspend(() => {
          recovery.offer({ _tag: "Segment", segment: file, base: seg.base })
          return scanBytes(ctx, whole.bytes!, whole.size, file, seg.base, visit)
        })
        : yield* Open.withHandle(Open.openRead(ctx, file), (fh) =>
          Effect.flatMap(
            i === start && resumeHash !== null
              ? Effect.flatMap(
                Lines.boundedSize(ctx, fh, file),
                (size) => Segment.lineOf(fh, file, size, cpLast, resumeHash, RESUME_WINDOW)
              )
              : Effect.succeed(null),
            (at) => {
              // From the checkpoint's last entry, the records from there are a
              // segment of their own to the recovery; otherwise the whole segment.
              recovery.offer({ _tag: "Segment", segment: file, base: at === null ? seg.base : cpLast })
              return Segment.scan(ctx, fh, file, file, seg.base, at ?? 0, visit)
            }
          ))
      const end = scan.end
      if (end._tag === "UnknownVersion") {
        recovery.offer({ _tag: "UnknownVersion", segment: file, offset: end.offset, version: end.v })
      } else if (end._tag === "Damaged") {
        recovery.offer({
          _tag: "Damaged",
          segment: file,
          offset: end.offset,
          reason: end.reason,
          terminated: end.terminated,
          zeros: end.zeros,
          atEnd: !end.more && i === segments.length - 1,
          bytes: scan.size - end.offset
        })
      }
      let status: SegmentReport["status"] = "ok"
      let problem: SegmentReport["problem"] = null
      if (recovery.stopped()) {
        const stopped = recovery.done().report.stopped
        if (stopped !== null && stopped.segment === file) {
          status = "damaged"
          problem = {
            offset: stopped.offset,
            sequence: stopped.sequence,
            detail: `${stopped.reason}: ${stopped.detail}`
          }
        }
      } else if (end._tag === "Damaged") {
        status = "torn"
        problem = { offset: end.offset, sequence: contentNext, detail: `torn tail: ${end.reason}` }
      }
      if (cpEnd >= 0) sinceCheckpointBytes = scan.validEnd - cpEnd
      else sinceCheckpointBytes += scan.validEnd
      reports.push({
        name: seg.name,
        base: seg.base,
        bytes: scan.size,
        entries,
        firstSequence,
        lastSequence,
        status,
        problem
      })
      if (i === segments.length - 1) {
        last = {
          name: seg.name,
          base: seg.base,
          size: scan.size,
          validEnd: scan.validEnd,
          contentNext,
          preallocated: scan.preallocated,
          free: scan.preallocated && end._tag === "Clean"
        }
      }
    }
    return last
  })
  const last = yield* ahead === null ? scanAll : Effect.ensuring(scanAll, Effect.suspend(() => ahead.stop()))
  const outcome = recovery.done()
  const state = outcome.state
  const stopped = outcome.report.stopped
  const tornTail = outcome.report.tornTail
  const checkpointNext = cp === null ? -1 : cp.next_sequence
  const view: View = {
    next: state.next_sequence,
    lastHash: JournalState.lastHash(state),
    tipHash: tipNext === state.next_sequence ? tipHash : JournalState.lastHash(state),
    entryCap: state.entry_cap,
    stopped,
    checkpointNext,
    checkpointSize: cp === null ? 0 : checkpointSize,
    last,
    // A checkpoint that covers every stored entry of a segment holding some: the
    // segment is complete, the next append starts the next one.
    rollPending: last !== null && checkpointNext === state.next_sequence && last.contentNext === state.next_sequence &&
      last.contentNext > last.base && tornTail === null
  }
  return {
    loaded: {
      state,
      exists: segments.length > 0 || list.hasCheckpoint,
      recovery: outcome.report,
      sinceCheckpointBytes,
      checkpointBytes: view.checkpointSize
    },
    view,
    listing: list,
    brokenCheckpoint: outcome.brokenCheckpoint,
    checkpoint: cp,
    segments: reports,
    storedNext: outcome.storedNext
  }
})
