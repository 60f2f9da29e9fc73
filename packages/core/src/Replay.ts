/**
 * The replay rules every adapter applies when it rebuilds a session from stored
 * entries after a checkpoint (DESIGN §6): an entry whose sequence equals the next
 * expected one is verified (link first, then hash) and folded; a lower sequence is a
 * stale duplicate and is skipped; a higher one is a gap and stops the replay.
 * Pure: a small state machine over `JournalState`.
 *
 * @since 0.1.0
 */
import * as Entry from "./Entry.ts"
import { IntegrityViolation } from "./Errors.ts"
import * as JournalState from "./JournalState.ts"

/**
 * The outcome of offering one entry to the replay.
 *
 * @since 0.1.0
 */
export type Step =
  | { readonly _tag: "Applied"; readonly state: JournalState.JournalState }
  | { readonly _tag: "Stale" }
  | { readonly _tag: "Gap"; readonly expected: number; readonly found: number }
  | { readonly _tag: "Violation"; readonly error: IntegrityViolation }

/**
 * Offers `entry` to a replay whose current state is `state`. `index` is the entry's
 * position in the stored history, for error reports.
 *
 * @since 0.1.0
 */
export const step = (state: JournalState.JournalState, entry: Entry.Entry, index: number): Step => {
  if (entry.sequence < state.next_sequence) return { _tag: "Stale" }
  if (entry.sequence > state.next_sequence) {
    return { _tag: "Gap", expected: state.next_sequence, found: entry.sequence }
  }
  const expectedPrev = JournalState.lastHash(state)
  if (entry.prev_hash !== expectedPrev) {
    return {
      _tag: "Violation",
      error: new IntegrityViolation({
        index,
        sequence: entry.sequence,
        what: "prev_hash",
        expected: expectedPrev,
        actual: entry.prev_hash
      })
    }
  }
  const recomputed = Entry.computeHash(entry)
  if (recomputed !== entry.entry_hash) {
    return {
      _tag: "Violation",
      error: new IntegrityViolation({
        index,
        sequence: entry.sequence,
        what: "entry_hash",
        expected: recomputed,
        actual: entry.entry_hash
      })
    }
  }
  return { _tag: "Applied", state: JournalState.fold(state, entry) }
}

/**
 * The result of replaying a sequence of stored entries.
 *
 * @since 0.1.0
 */
export interface Outcome {
  readonly state: JournalState.JournalState
  readonly replayed: number
  readonly skipped: number
  /** Why the replay stopped before the end, if it did. */
  readonly stopped: null | { readonly index: number; readonly step: Exclude<Step, { _tag: "Applied" } | { _tag: "Stale" }> }
}

/**
 * Replays entries in order onto `state`, stopping at the first gap or violation.
 *
 * @since 0.1.0
 */
export const replayAll = (state: JournalState.JournalState, entries: Iterable<Entry.Entry>, firstIndex = 0): Outcome => {
  let current = state
  let replayed = 0
  let skipped = 0
  let index = firstIndex
  for (const entry of entries) {
    const s = step(current, entry, index)
    switch (s._tag) {
      case "Applied":
        current = s.state
        replayed++
        break
      case "Stale":
        skipped++
        break
      default:
        return { state: current, replayed, skipped, stopped: { index, step: s } }
    }
    index++
  }
  return { state: current, replayed, skipped, stopped: null }
}
