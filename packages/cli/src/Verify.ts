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
import { Entry, JournalState, Persistence, Recovery, SessionNotFound } from "@session-journal/core"
import type { CorruptJournal, IntegrityViolation } from "@session-journal/core"
import { NodePersistence } from "@session-journal/node"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as path from "node:path"
import { NotAvailable } from "./Failure.ts"
import * as Storage from "./Storage.ts"

/**
 * The verification report of one session. `corruption` and `violation` name the
 * segment (file or table), the byte offset (a sequence for row stores) and the
 * sequence where the valid prefix ends; a `violation` is a link or hash that does
 * not verify, a `corruption` anything else (damaged bytes, forged or missing
 * records, a checkpoint the history contradicts).
 *
 * @since 0.1.0
 */
export interface Report {
  readonly id: string
  readonly ok: boolean
  readonly head: string | null
  readonly entries_checked: number
  readonly torn_tail: null | { readonly segment: string; readonly offset: number; readonly bytes: number }
  readonly corruption: null | {
    readonly kind: Recovery.StopReason
    readonly segment: string
    readonly offset: number
    readonly sequence: number | null
    readonly reason: string
    readonly missing: null | { readonly from: number; readonly to: number }
  }
  readonly violation: null | {
    readonly index: number
    readonly sequence: number
    readonly what: string
    readonly expected: string
    readonly actual: string
    readonly segment: string | null
    readonly offset: number | null
  }
}

/**
 * The failure fields of a report, from where a recovery found the valid prefix to end.
 *
 * @since 0.1.0
 */
export const problemOf = (stopped: Recovery.Stopped | null): Pick<Report, "corruption" | "violation"> => {
  if (stopped === null) return { corruption: null, violation: null }
  if (stopped.violation !== undefined && stopped.sequence !== null) {
    return {
      corruption: null,
      violation: {
        index: stopped.sequence,
        sequence: stopped.sequence,
        what: stopped.violation.what,
        expected: stopped.violation.expected,
        actual: stopped.violation.actual,
        segment: stopped.segment,
        offset: stopped.offset
      }
    }
  }
  return {
    corruption: {
      kind: stopped.reason,
      segment: stopped.segment,
      offset: stopped.offset,
      sequence: stopped.sequence,
      reason: `${stopped.reason}: ${stopped.detail}`,
      missing: stopped.missing ?? null
    },
    violation: null
  }
}

const violationJson = (e: IntegrityViolation): NonNullable<Report["violation"]> => ({
  index: e.index,
  sequence: e.sequence,
  what: e.what,
  expected: e.expected,
  actual: e.actual,
  segment: null,
  offset: null
})

const corruptionJson = (e: CorruptJournal): NonNullable<Report["corruption"]> => ({
  kind: "corruption",
  segment: e.segment,
  offset: e.offset,
  sequence: null,
  reason: e.reason.message,
  missing: null
})

/**
 * Verifies one session: the whole stored history replayed from its start by
 * core's `Recovery` (verify mode), every link and hash checked and every field of
 * the checkpoint compared with the replay. On the filesystem through
 * `NodePersistence.inspect` (without the lock, so it is safe next to a running
 * writer); on other storage through the port's `verify`.
 *
 * @since 0.1.0
 */
export const session = (id: string, storage: Storage.Options) =>
  Effect.gen(function*() {
    if (Storage.isFilesystem(storage)) return yield* inspectFiles(id, storage)
    return yield* verifyStored(id)
  })

const inspectFiles = (id: string, storage: Storage.Options) =>
  Effect.gen(function*() {
    const inspected = yield* NodePersistence.inspect(Storage.nodeOptions(storage), id)
    // Files are named by their full path, whichever part of the report found them.
    const where = (file: string) => path.isAbsolute(file) ? file : path.resolve(storage.dir, id, file)
    const tornTail = inspected.recovery.tornTail
    const problem = problemOf(inspected.recovery.stopped)
    const cp = inspected.checkpoint
    const corruption = problem.corruption !== null
      ? { ...problem.corruption, segment: where(problem.corruption.segment) }
      : problem.violation === null && cp.status === "broken"
      ? {
        kind: "checkpoint" as const,
        segment: where("checkpoint.json"),
        offset: 0,
        sequence: null,
        reason: `checkpoint: ${cp.detail}`,
        missing: null
      }
      : null
    const violation = problem.violation === null
      ? null
      : { ...problem.violation, segment: problem.violation.segment === null ? null : where(problem.violation.segment) }
    const report: Report = {
      id,
      ok: inspected.ok,
      head: inspected.head,
      entries_checked: inspected.recovery.replayed,
      torn_tail: tornTail === null ? null : { ...tornTail, segment: where(tornTail.segment) },
      corruption,
      violation
    }
    return report
  })

const verifyStored = (id: string) =>
  Effect.gen(function*() {
    const persistence = yield* Persistence.Persistence
    const verified = yield* Effect.result(
      Effect.scoped(Effect.flatMap(persistence.open(id, { mode: "read" }), (h) => h.verify))
    )
    if (Result.isFailure(verified)) {
      const e = verified.failure
      if (e._tag === "IntegrityViolation" || e._tag === "CorruptJournal") {
        return {
          id,
          ok: false,
          head: null,
          entries_checked: 0,
          torn_tail: null,
          corruption: e._tag === "CorruptJournal" ? corruptionJson(e) : null,
          violation: e._tag === "IntegrityViolation" ? violationJson(e) : null
        } satisfies Report
      }
      return yield* e
    }
    if (!verified.success.exists) return yield* new SessionNotFound({ id })
    const recovery = verified.success.recovery
    const problem = problemOf(recovery.stopped)
    const report: Report = {
      id,
      ok: recovery.stopped === null,
      head: JournalState.head(verified.success.state),
      entries_checked: recovery.replayed,
      torn_tail: recovery.tornTail,
      ...problem
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
    const torn = r.torn_tail === null
      ? ""
      : `, torn tail of ${r.torn_tail.bytes} bytes in ${r.torn_tail.segment} (benign)`
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
  /** Whether the checkpoint was rebuilt from the records (the old one is among `set_aside`). */
  readonly checkpoint_rebuilt: boolean
  /** Sequences the session held or claimed and no longer holds. */
  readonly lost: null | { readonly from: number; readonly to: number }
  /** The exported head the session claimed before the repair. */
  readonly previous_head: string
  /** The `recovery` entry the repair appended to the chain, as stored. */
  readonly entry: typeof Entry.Entry.Encoded | null
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
      return yield* new NotAvailable({
        feature: "repair",
        reason: "it works on segment files; PostgreSQL never stores a torn or partial batch"
      })
    }
    const r = yield* NodePersistence.repair(Storage.nodeOptions(storage), id)
    const report: RepairReport = {
      id,
      repaired: r.setAside.length > 0 || r.truncated.length > 0 || r.checkpointRebuilt,
      set_aside: r.setAside,
      truncated: r.truncated,
      checkpoint_rebuilt: r.checkpointRebuilt,
      lost: r.lost,
      previous_head: r.previousHead,
      entry: r.entry === null ? null : Entry.encode(r.entry),
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
  ...r.set_aside.map((p) => `  damaged bytes kept in ${p}`),
  ...(r.checkpoint_rebuilt ? ["  checkpoint rebuilt from the stored records"] : []),
  ...(r.lost === null
    ? []
    : [
      `  entries ${r.lost.from}..${r.lost.to} are lost (previous head ${r.previous_head}); kept bytes above hold what survived of them`
    ]),
  ...(r.entry === null ? [] : [`  recorded as entry ${r.entry.sequence} (kind recovery)`])
]
