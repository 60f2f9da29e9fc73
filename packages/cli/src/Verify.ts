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
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import { NotAvailable } from "./Failure.ts"
import type * as Storage from "./Storage.ts"

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
 * Verifies one session: loads it read-only (checkpoint, then every segment after
 * it, as recovery does) for the torn-tail and corruption report, then replays the
 * whole stored history against the loaded head.
 *
 * @since 0.1.0
 */
export const session = (id: string, _storage: Storage.Options) =>
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
 * What a repair did.
 *
 * @since 0.1.0
 */
export interface RepairReport {
  readonly id: string
  readonly repaired: boolean
  readonly set_aside: ReadonlyArray<{ readonly path: string; readonly bytes: number }>
  readonly next_sequence: number
  readonly head: string
}

/**
 * Sets damaged bytes of a session aside (never deleting them) so it becomes
 * writable again.
 *
 * @since 0.1.0
 */
export const repair = (
  _id: string,
  _storage: Storage.Options
): Effect.Effect<RepairReport, NotAvailable, Persistence.Persistence> =>
  Effect.fail(new NotAvailable({ feature: "repair", reason: "the filesystem adapter does not offer repair yet" }))

/**
 * Human output for a repair report.
 *
 * @since 0.1.0
 */
export const repairText = (r: RepairReport): Array<string> => [
  r.repaired ? `repaired ${r.id}: writable again at sequence ${r.next_sequence} (head ${r.head})` : `${r.id} needed no repair (head ${r.head})`,
  ...r.set_aside.map((s) => `  set aside ${s.bytes} bytes as ${s.path}`)
]
