/**
 * What a follower checks, pure: every record a follow stream hands over must carry
 * the next sequence, link to the last entry shown and hash to its own
 * `entry_hash` (`Chain.verify`, the one check of links and hashes); and, when it
 * does not, how the history storage now verifies relates to what was shown.
 *
 * A follower starts from a state it loaded (`start`): the entry before the first
 * one it shows is its anchor when the state retains it, and the state's last
 * entry is confirmed when the stream passes it. Each record goes through `check`;
 * the first that fails is a `Break`, and the follower re-reads storage with a
 * verify of the whole history and hands the stored entries over the range it has
 * shown to `reconcile`:
 * - `Intact`: storage still holds every entry shown, with the same hashes; the
 *   follower reads on after the last one (only its reading was off).
 * - `Recovered`: the first entry that differs is a repair's `recovery` entry that
 *   links to the last entry still held and says it set aside everything shown
 *   from its sequence on; the follower reports it, with the range shown that is no
 *   longer part of the session, and goes on after it.
 * - `Diverged`: anything else (an edit, a cut, a cut followed by new writes, a
 *   fork): the history shown was replaced, and the follower stops.
 *
 * Whoever can write the storage can also write a `recovery` entry: a follower cannot
 * prove that a repair, and not someone else, set the entries aside. What it
 * guarantees is that an entry it hands over links to the one before it, and that
 * an entry it handed over and storage no longer holds is reported, never followed
 * by another chain as if it were one.
 *
 * @since 0.1.0
 */
import * as Result from "effect/Result"
import * as Chain from "./Chain.ts"
import * as Entry from "./Entry.ts"
import * as JournalState from "./JournalState.ts"

/**
 * The kind of the entry every repair appends (DESIGN §6): what it set aside or
 * truncated, the range lost and the head the session claimed before.
 *
 * @since 0.1.0
 */
export const RECOVERY_KIND = "recovery"

/**
 * Where a follower stands: the sequence the next record must carry, the
 * `entry_hash` it must link to (null when unknown: the first record's link is then
 * taken as it is), whether entries link at all (a session with `entry_cap` 0 links
 * every entry to `ZERO_HASH`), and a hash the entry at `confirm.sequence` must
 * have (the last entry of the state the follower started from).
 *
 * @since 0.1.0
 */
export interface Cursor {
  readonly next: number
  readonly lastHash: string | null
  readonly linked: boolean
  readonly confirm: { readonly sequence: number; readonly hash: string } | null
}

/**
 * A record that does not continue what was shown: `what` names the check that
 * failed (the sequence, the link, the entry's own hash, or the hash of the entry
 * the loaded state ends with), with the value expected and the one found.
 *
 * @since 0.1.0
 */
export interface Break {
  readonly sequence: number
  readonly what: "sequence" | "prev_hash" | "entry_hash" | "confirmed"
  readonly expected: string
  readonly actual: string
}

/**
 * One element of a verified follow: an entry that continues the chain shown, or a
 * repair's `recovery` entry that replaced the entries shown from `replaced.from`
 * to `replaced.to` (they are no longer part of the session); entries after the
 * recovery entry follow.
 *
 * @since 0.1.0
 */
export type Event =
  | { readonly _tag: "Entry"; readonly entry: Entry.Entry }
  | Recovered

/**
 * A repair's `recovery` entry, and the range of entries shown before that it set
 * aside.
 *
 * @since 0.1.0
 */
export interface Recovered {
  readonly _tag: "Recovered"
  readonly entry: Entry.Entry
  readonly replaced: { readonly from: number; readonly to: number }
}

/**
 * The cursor of a follower that shows entries from `from` on, starting from a
 * loaded (verified) state: a follow from beyond the state's end starts at its end
 * (the entries in between are checked, not shown; see `Cursor.next`).
 *
 * @since 0.1.0
 */
export const start = (state: JournalState.JournalState, from: number): Cursor => {
  const linked = state.entry_cap > 0
  const next = Math.min(Math.max(0, from), state.next_sequence)
  const anchor = next === 0 ? Entry.ZERO_HASH : JournalState.retainedHashAt(state, next - 1) ?? null
  const lastSequence = state.next_sequence - 1
  const last = JournalState.retainedHashAt(state, lastSequence)
  return {
    next,
    lastHash: linked ? anchor : Entry.ZERO_HASH,
    linked,
    confirm: last === undefined || lastSequence < next ? null : { sequence: lastSequence, hash: last }
  }
}

/**
 * An entry a follower's caller already holds (read or shown before): its
 * sequence and its `entry_hash`.
 *
 * @since 0.1.0
 */
export interface Anchor {
  readonly sequence: number
  readonly hash: string
}

/**
 * Where a loaded state already contradicts an anchor: it holds another hash at
 * the anchor's sequence (`found`), or ends before it (`found` null).
 *
 * @since 0.1.0
 */
export interface Contradiction {
  readonly sequence: number
  readonly expected: string
  readonly found: string | null
}

/**
 * The cursor of a follower that continues `anchor`, starting from a loaded
 * (verified) state: it shows entries from the one after the anchor on, and the
 * first must link to the anchor's hash, whatever the state says is before it.
 * Fails when the state already contradicts the anchor (an entry older than the
 * state retains is checked when the first record links to it, or does not; in a
 * session whose entries do not link, `entry_cap` 0, the follower compares the
 * stored entry itself).
 *
 * @since 0.1.0
 */
export const startAfter = (state: JournalState.JournalState, anchor: Anchor): Result.Result<Cursor, Contradiction> => {
  const contradiction = (found: string | null) =>
    Result.fail({ sequence: anchor.sequence, expected: anchor.hash, found })
  // Not a sequence storage can hold (negative, fractional, not a number): held nowhere.
  if (!Number.isSafeInteger(anchor.sequence) || anchor.sequence < 0 || anchor.sequence >= state.next_sequence) {
    return contradiction(null)
  }
  const retained = JournalState.retainedHashAt(state, anchor.sequence)
  if (retained !== undefined && retained !== anchor.hash) return contradiction(retained)
  const cursor = start(state, anchor.sequence + 1)
  return Result.succeed(cursor.linked ? { ...cursor, lastHash: anchor.hash } : cursor)
}

/**
 * Checks one record against the cursor: its sequence, its link, its own hash (with
 * `Chain.verify`), and the confirmed hash when it is that entry. Returns the cursor
 * after it.
 *
 * @since 0.1.0
 */
export const check = (cursor: Cursor, entry: Entry.Entry): Result.Result<Cursor, Break> => {
  if (entry.sequence !== cursor.next) {
    return Result.fail({
      sequence: cursor.next,
      what: "sequence",
      expected: String(cursor.next),
      actual: String(entry.sequence)
    })
  }
  const linkTo = cursor.linked ? cursor.lastHash ?? undefined : Entry.ZERO_HASH
  const verified = Chain.verify([entry], { prefixEvicted: linkTo === undefined, previousHash: linkTo })
  if (Result.isFailure(verified)) {
    const v = verified.failure
    return Result.fail({ sequence: entry.sequence, what: v.what, expected: v.expected, actual: v.actual })
  }
  const confirm = cursor.confirm
  if (confirm !== null && confirm.sequence === entry.sequence && confirm.hash !== entry.entry_hash) {
    return Result.fail({
      sequence: entry.sequence,
      what: "confirmed",
      expected: confirm.hash,
      actual: entry.entry_hash
    })
  }
  return Result.succeed({
    next: entry.sequence + 1,
    lastHash: cursor.linked ? entry.entry_hash : Entry.ZERO_HASH,
    linked: cursor.linked,
    confirm: confirm !== null && confirm.sequence <= entry.sequence ? null : confirm
  })
}

/**
 * The hashes of the latest entries a follower has shown (and of its anchor), at
 * most `capacity` of them: what `reconcile` compares storage with. Memory is
 * bounded by the capacity, not by how long the follower runs. Mutable: one per
 * follower.
 *
 * @since 0.1.0
 */
export class Shown {
  private readonly hashes: Array<string>
  private readonly capacity: number
  /** The lowest sequence held (`end` when none). */
  first = 0
  /** One past the highest sequence held. */
  end = 0
  constructor(capacity = 1024) {
    this.capacity = Math.max(1, capacity)
    this.hashes = new Array<string>(this.capacity)
  }

  /** Records the hash of the entry at `sequence`, the one after the last recorded (or the first). */
  push(sequence: number, hash: string): void {
    if (this.end === this.first || sequence !== this.end) {
      this.first = sequence
      this.end = sequence
    }
    this.hashes[sequence % this.capacity] = hash
    this.end = sequence + 1
    if (this.end - this.first > this.capacity) this.first = this.end - this.capacity
  }

  /** Forgets every sequence from `sequence` on. */
  truncate(sequence: number): void {
    this.end = Math.max(this.first, Math.min(this.end, sequence))
  }

  /** The hash recorded for `sequence`, if it is still held. */
  hashAt(sequence: number): string | undefined {
    return sequence >= this.first && sequence < this.end ? this.hashes[sequence % this.capacity] : undefined
  }
}

/**
 * How storage, verified from its start, relates to what a follower has shown (see
 * the module header).
 *
 * @since 0.1.0
 */
export type Reconciled =
  | { readonly _tag: "Intact" }
  | Recovered
  | {
    readonly _tag: "Diverged"
    /** The first sequence (as far as the follower remembers) where storage differs from what was shown. */
    readonly sequence: number
    /** The hash shown there. */
    readonly expected: string
    /** The hash storage holds there, or null when storage ends before it. */
    readonly found: string | null
    /** The last sequence shown. */
    readonly shownTo: number
  }

// The range a recovery entry's payload says was lost, when it says one.
const lostRange = (entry: Entry.Entry): { readonly from: number; readonly to: number } | null => {
  if (entry.kind !== RECOVERY_KIND || Entry.isTool(entry)) return null
  const payload = entry.payload
  if (typeof payload !== "object" || payload === null || Array.isArray(payload)) return null
  const lost = (payload as { readonly [k: string]: unknown })["lost"]
  if (typeof lost !== "object" || lost === null) return null
  const { from, to } = lost as { readonly from?: unknown; readonly to?: unknown }
  return typeof from === "number" && typeof to === "number" ? { from, to } : null
}

/**
 * Compares what a follower has shown at `sequence` with the entry storage,
 * verified from its start, holds there (`undefined` when it holds none): null
 * when they agree, otherwise how the history shown was replaced. `linked` as in
 * the cursor.
 *
 * @since 0.1.0
 */
export const compareAt = (
  shown: Shown,
  linked: boolean,
  sequence: number,
  stored: Entry.Entry | undefined
): Exclude<Reconciled, { readonly _tag: "Intact" }> | null => {
  const expected = shown.hashAt(sequence)
  if (expected === undefined || (stored !== undefined && stored.entry_hash === expected)) return null
  const lost = stored === undefined ? null : lostRange(stored)
  // The repair's entry links to the last entry still held, which the follower
  // must have shown too (otherwise it cannot tell what the entry continues), and
  // it says it set aside everything shown from its own sequence on.
  const before = sequence === 0 ? Entry.ZERO_HASH : shown.hashAt(sequence - 1)
  const links = stored !== undefined && before !== undefined && stored.prev_hash === (linked ? before : Entry.ZERO_HASH)
  if (stored !== undefined && lost !== null && links && lost.from === sequence && lost.to >= shown.end - 1) {
    return { _tag: "Recovered", entry: stored, replaced: { from: sequence, to: shown.end - 1 } }
  }
  return { _tag: "Diverged", sequence, expected, found: stored?.entry_hash ?? null, shownTo: shown.end - 1 }
}

/**
 * Compares everything a follower has shown with storage, verified from its
 * start: `stored` are the stored entries from `shown.first` on (as far as storage
 * holds them), in sequence order. The first entry that differs decides
 * (`compareAt`); nothing that differs is `Intact`.
 *
 * @since 0.1.0
 */
export const reconcile = (shown: Shown, stored: ReadonlyArray<Entry.Entry>, linked: boolean): Reconciled => {
  for (let s = shown.first; s < shown.end; s++) {
    const here = stored[s - shown.first]
    const r = compareAt(shown, linked, s, here !== undefined && here.sequence === s ? here : undefined)
    if (r !== null) return r
  }
  return { _tag: "Intact" }
}
