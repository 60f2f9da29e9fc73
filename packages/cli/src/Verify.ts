/**
 * `verify` and `repair` of one session: the per-session report of the command's
 * contract (`{"id","ok","head","entries_checked","torn_tail","corruption",
 * "violation"}`) and the repair report.
 *
 * A torn tail (an incomplete last record after a crash) is benign and keeps `ok`
 * true; corruption (damage followed by more data) and a broken chain make it false.
 *
 * @since 0.1.0
 */
import { Persistence, SessionJournal, SessionNotFound } from "@session-journal/core"
import type { CorruptJournal, IntegrityViolation } from "@session-journal/core"
import { NodePersistence } from "@session-journal/node"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as path from "node:path"
import { NotAvailable } from "./Failure.ts"
import * as Storage from "./Storage.ts"

/**
 * The verification report of one session.
 *
 * @since 0.1.0
 */
export interface Report {
  readonly id: string
  readonly ok: boolean
  readonly head: string | null
  readonly entries_checked: number
  readonly torn_tail: null | { readonly segment: string; readonly offset: number; readonly bytes: number }
  readonly corruption: null | { readonly segment: string; readonly offset: number; readonly reason: string }
  readonly violation: null | {
    readonly index: number
    readonly sequence: number
    readonly what: string
    readonly expected: string
    readonly actual: string
  }
}

const violationJson = (e: IntegrityViolation): NonNullable<Report["violation"]> => ({
  index: e.index,
  sequence: e.sequence,
  what: e.what,
  expected: e.expected,
  actual: e.actual
})

const corruptionJson = (e: CorruptJournal): NonNullable<Report["corruption"]> => ({
  segment: e.segment,
  offset: e.offset,
  reason: e.reason
})

/**
 * Verifies one session. On the filesystem: `NodePersistence.inspect` checks the
 * checkpoint and replays every retained segment from the oldest entry (without
 * the lock, so it is safe next to a running writer). On other storage: a
 * read-only load (recovery report) and a replay of the whole stored history. When
 * something is wrong, the service's verify names the broken link or hash.
 *
 * @since 0.1.0
 */
export const session = (id: string, storage: Storage.Options) =>
  Effect.gen(function*() {
    if (Storage.isFilesystem(storage)) return yield* inspectFiles(id, storage)
    return yield* loadAndReplay(id)
  })

// The structured failure of the service's verify, to name the entry that broke.
const pinpoint = (id: string) =>
  Effect.gen(function*() {
    const journal = yield* SessionJournal.SessionJournal
    const verified = yield* Effect.result(journal.verify(id))
    if (Result.isSuccess(verified)) return { violation: null, corruption: null }
    const e = verified.failure
    if (e._tag === "IntegrityViolation") return { violation: violationJson(e), corruption: null }
    if (e._tag === "CorruptJournal") return { violation: null, corruption: corruptionJson(e) }
    return { violation: null, corruption: null }
  })

const inspectFiles = (id: string, storage: Storage.Options) =>
  Effect.gen(function*() {
    const inspected = yield* NodePersistence.inspect(Storage.nodeOptions(storage), id)
    // Files are named by their full path, whichever part of the report found them.
    const where = (file: string) => path.isAbsolute(file) ? file : path.resolve(storage.dir, id, file)
    const tornSegment = inspected.segments.find((s) => s.status === "torn")
    const tornTail = inspected.recovery.tornTail
    const torn: Report["torn_tail"] = tornTail !== null
      ? { ...tornTail, segment: where(tornTail.segment) }
      : tornSegment?.problem == null
      ? null
      : { segment: where(tornSegment.name), offset: tornSegment.problem.offset, bytes: tornSegment.bytes - tornSegment.problem.offset }
    const checked = inspected.segments.reduce((n, s) => n + s.entries, 0)
    if (inspected.ok) {
      return {
        id,
        ok: true,
        head: inspected.head,
        entries_checked: checked,
        torn_tail: torn,
        corruption: null,
        violation: null
      } satisfies Report
    }
    const found = yield* pinpoint(id)
    let corruption = found.corruption === null ? null : { ...found.corruption, segment: where(found.corruption.segment) }
    if (found.violation === null && corruption === null) {
      const damaged = inspected.segments.find((s) => s.status === "damaged")
      const stopped = inspected.recovery.stopped
      const cp = inspected.checkpoint
      corruption = damaged?.problem != null
        ? { segment: where(damaged.name), offset: damaged.problem.offset, reason: damaged.problem.detail }
        : stopped !== null
        ? { segment: where(stopped.segment), offset: stopped.offset, reason: `${stopped.reason}: ${stopped.detail}` }
        : cp.status === "broken" || cp.status === "mismatch"
        ? { segment: where("checkpoint.json"), offset: 0, reason: cp.detail ?? `checkpoint ${cp.status}` }
        : { segment: where("."), offset: 0, reason: "the session does not verify" }
    }
    return {
      id,
      ok: false,
      head: inspected.head,
      entries_checked: checked,
      torn_tail: torn,
      corruption,
      violation: found.violation
    } satisfies Report
  })

const loadAndReplay = (id: string) =>
  Effect.gen(function*() {
    const persistence = yield* Persistence.Persistence
    const journal = yield* SessionJournal.SessionJournal
    const loaded = yield* Effect.result(
      Effect.scoped(Effect.flatMap(persistence.open(id, { mode: "read" }), (h) => h.load))
    )
    let torn: Report["torn_tail"] = null
    let corruption: Report["corruption"] = null
    let violation: Report["violation"] = null
    if (Result.isFailure(loaded)) {
      const e = loaded.failure
      if (e._tag === "IntegrityViolation") violation = violationJson(e)
      else if (e._tag === "CorruptJournal") corruption = corruptionJson(e)
      else return yield* e
    } else {
      if (!loaded.success.exists) return yield* new SessionNotFound({ id })
      const recovery = loaded.success.recovery
      torn = recovery.tornTail
      if (recovery.stopped !== null) {
        corruption = {
          segment: recovery.stopped.segment,
          offset: recovery.stopped.offset,
          reason: `${recovery.stopped.reason}: ${recovery.stopped.detail}`
        }
      }
    }
    const verified = yield* Effect.result(journal.verify(id))
    let head: string | null = null
    let checked = 0
    if (Result.isSuccess(verified)) {
      head = verified.success.head
      checked = verified.success.entriesChecked
    } else {
      const e = verified.failure
      if (e._tag === "IntegrityViolation") violation ??= violationJson(e)
      else if (e._tag === "CorruptJournal") corruption ??= corruptionJson(e)
      else if (violation === null && corruption === null) return yield* e
    }
    const report: Report = {
      id,
      ok: violation === null && corruption === null,
      head,
      entries_checked: checked,
      torn_tail: torn,
      corruption,
      violation
    }
    return report
  })

/**
 * One line of human output for a report.
 *
 * @since 0.1.0
 */
export const text = (r: Report): string => {
  if (r.ok) {
    const torn = r.torn_tail === null ? "" : `, torn tail of ${r.torn_tail.bytes} bytes in ${r.torn_tail.segment} (benign)`
    return `ok    ${r.id}: ${r.entries_checked} entries, head ${r.head}${torn}`
  }
  if (r.violation !== null) {
    const v = r.violation
    return `FAIL  ${r.id}: integrity violation at sequence ${v.sequence} (${v.what} expected ${v.expected}, found ${v.actual})`
  }
  const c = r.corruption!
  return `FAIL  ${r.id}: corruption in ${c.segment} at offset ${c.offset}: ${c.reason}`
}

/**
 * What a repair did, as printed with `--json`.
 *
 * @since 0.1.0
 */
export interface RepairReport {
  readonly id: string
  /** Whether anything was set aside or cut back. */
  readonly repaired: boolean
  /** Files created or renamed in the session directory to keep the damaged bytes. */
  readonly set_aside: ReadonlyArray<string>
  /** Segments cut back to their valid prefix, with the new length. */
  readonly truncated: ReadonlyArray<{ readonly segment: string; readonly length: number }>
  /** Sequence the next entry will get. */
  readonly next_sequence: number
  /** Whether the session can be written now. */
  readonly writable: boolean
  readonly before: Persistence.RecoveryReport
  readonly after: Persistence.RecoveryReport
}

/**
 * Sets damaged bytes of a session aside (never deleting them) so it becomes
 * writable again. Filesystem only; it takes the session's lock.
 *
 * @since 0.1.0
 */
export const repair = (id: string, storage: Storage.Options) =>
  Effect.gen(function*() {
    if (!Storage.isFilesystem(storage)) {
      return yield* new NotAvailable({ feature: "repair", reason: "it works on segment files; PostgreSQL never stores a torn or partial batch" })
    }
    const r = yield* NodePersistence.repair(Storage.nodeOptions(storage), id)
    const report: RepairReport = {
      id,
      repaired: r.setAside.length > 0 || r.truncated.length > 0,
      set_aside: r.setAside,
      truncated: r.truncated,
      next_sequence: r.nextSequence,
      writable: r.after.stopped === null,
      before: r.before,
      after: r.after
    }
    return report
  })

/**
 * Human output for a repair report.
 *
 * @since 0.1.0
 */
export const repairText = (r: RepairReport): Array<string> => [
  r.repaired
    ? `repaired ${r.id}: ${r.writable ? "writable again" : "STILL NOT WRITABLE"}, next sequence ${r.next_sequence}`
    : `${r.id} needed no repair (next sequence ${r.next_sequence})`,
  ...r.truncated.map((t) => `  cut ${t.segment} back to its valid prefix of ${t.length} bytes`),
  ...r.set_aside.map((p) => `  damaged bytes kept in ${p}`)
]
