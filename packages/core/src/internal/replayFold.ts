/**
 * The fold of a long replay, kept in mutable form. `JournalState.fold` returns a new
 * immutable state per entry (a ring copy when an old state appends, a new counters
 * object, a `HashMap` update, bigint arithmetic); a replay from sequence 0 never
 * looks at the intermediate states, only at the links, the hashes, the eviction fold
 * and, where a checkpoint claims it, the state at one sequence. This accumulator
 * keeps exactly the data of `JournalState.fold` — the retained hashes and the tool
 * names in circular buffers, the counters as exact numbers that switch to bigints
 * only past 2^53, the tool counts in a `Map` — and builds the `JournalState` on
 * demand. Its result is the fold's, field for field (tested against it), except
 * that it keeps no window of recent entries: a replay's state is read for its head,
 * counters and hashes, and an empty window is a valid one.
 */
import * as HashMap from "effect/HashMap"
import * as Chain from "../Chain.ts"
import * as Entry from "../Entry.ts"
import type { GuardState } from "../Guard.ts"
import * as JournalState from "../JournalState.ts"
import * as Merkle from "../Merkle.ts"
import type { SessionMeta } from "../SessionMeta.ts"
import * as Sha256 from "../Sha256.ts"
import * as Ring from "./ring.ts"
import { GUARD_STATE_KIND, guardStateProblem, OUTCOME_KIND, outcomeBytes } from "./validate.ts"
import * as Window from "./window.ts"

// A non-negative sum of integers up to 2^53 − 1, exact at any size and saturating at
// 2^64 − 1 (like the fold's `sat` on every step: the increments are non-negative,
// so saturating each step or the total gives the same value).
class Sum {
  private small = 0
  private big = 0n
  add(n: number): void {
    if (this.small > Number.MAX_SAFE_INTEGER - n) {
      this.big += BigInt(this.small)
      this.small = 0
    }
    this.small += n
  }
  value(): bigint {
    const total = this.big + BigInt(this.small)
    return total > JournalState.U64_MAX ? JournalState.U64_MAX : total
  }
}

const sat = (n: number): bigint => {
  const b = BigInt(n)
  return b > JournalState.U64_MAX ? JournalState.U64_MAX : b
}

// A window of the last `cap` items: `buf` grows to `cap`, then the oldest item (at
// `start`) is overwritten.
class Circular<A> {
  private buf: Array<A> = []
  private start = 0
  private readonly cap: number
  constructor(cap: number) {
    this.cap = cap
  }
  get size(): number {
    return this.buf.length
  }
  /** Appends `item`; returns the evicted item, or `undefined` when none was. */
  push(item: A): A | undefined {
    if (this.buf.length < this.cap) {
      this.buf.push(item)
      return undefined
    }
    const evicted = this.buf[this.start]!
    this.buf[this.start] = item
    this.start = this.start + 1 === this.cap ? 0 : this.start + 1
    return evicted
  }
  /** The `index`-th item, oldest first. */
  get(index: number): A | undefined {
    if (index < 0 || index >= this.buf.length) return undefined
    const at = this.start + index
    return this.buf[at < this.buf.length ? at : at - this.buf.length]
  }
  last(): A | undefined {
    return this.buf.length === 0 ? undefined : this.get(this.buf.length - 1)
  }
  toArray(): Array<A> {
    return this.start === 0 ? this.buf.slice() : [...this.buf.slice(this.start), ...this.buf.slice(0, this.start)]
  }
}

// `Chain.foldHash(p, h)` for the folds of a long replay. After the first, both
// strings are hashes: 64 ASCII characters, so the preimage lp(p) ‖ lp(h) is always
// u64(64) ‖ p ‖ u64(64) ‖ h, 144 bytes of which only the characters change. They are
// written into one buffer whose length prefixes stay in place; any other pair
// (the first fold's "", a character outside ASCII) takes `Chain.foldHash`.
const FOLD = new Uint8Array(144)
FOLD[0] = 64
FOLD[72] = 64
const foldHex = (p: string, h: string): string => {
  if (p.length !== 64 || h.length !== 64) return Chain.foldHash(p, h)
  let high = 0
  for (let i = 0; i < 64; i++) {
    const a = p.charCodeAt(i)
    const b = h.charCodeAt(i)
    high |= a | b
    FOLD[8 + i] = a
    FOLD[80 + i] = b
  }
  return high < 0x80 ? Sha256.hex(FOLD) : Chain.foldHash(p, h)
}

/**
 * `Chain.foldHash`, as a replay computes it (exported for its test).
 *
 * @internal
 */
export const replayFoldHash = foldHex

/**
 * `JournalState.fold` from the empty state, mutable; `state()` gives the state.
 *
 * @internal
 */
export class ReplayFold {
  readonly sessionId: string
  readonly entryCap: number
  readonly toolCountsCap: number
  nextSequence = 0
  evictedHead: string | null = null
  meta: SessionMeta | null = null
  private readonly hashes: Circular<string>
  private readonly windowBytes: number
  private readonly tools: Circular<string>
  private readonly bytesRead = new Sum()
  private readonly bytesWritten = new Sum()
  private invocations = 0
  private maxDepth = 0
  private readonly toolCounts = new Map<string, number>()
  private streakTool: string | null = null
  private streakLen = 0
  private messages = 0
  private guardState: GuardState | null = null
  private built: JournalState.JournalState | null = null
  // The tree, grown in place; null when the state does not keep it.
  private tree: Merkle.Builder | null

  constructor(empty: JournalState.JournalState) {
    this.tree = empty.tree === null ? null : Merkle.builder(empty.tree)
    this.sessionId = empty.session_id
    this.entryCap = empty.entry_cap
    this.toolCountsCap = empty.tool_counts_cap
    this.hashes = new Circular(empty.entry_cap)
    this.windowBytes = empty.window_bytes
    this.tools = new Circular(empty.entry_cap)
  }

  /** `JournalState.lastHash` of the state. */
  lastHash(): string {
    return this.hashes.last() ?? Entry.ZERO_HASH
  }

  /** The hash of the retained entry at `sequence`, if it is retained. */
  retainedAt(sequence: number): string | undefined {
    return this.hashes.get(sequence - (this.nextSequence - this.hashes.size))
  }

  /** `JournalState.fold` of `entry` (taken as given, linked and hashed by the caller). */
  fold(entry: Entry.Entry): void {
    this.built = null
    const evicted = this.entryCap <= 0 ? entry.entry_hash : this.hashes.push(entry.entry_hash)
    if (evicted !== undefined) this.evictedHead = foldHex(this.evictedHead ?? "", evicted)
    this.nextSequence = entry.sequence + 1
    if (this.tree !== null) {
      // As the fold: an entry whose hash is no hash leaves the tree unknown.
      try {
        this.tree.appendEntryHash(entry.entry_hash)
      } catch {
        this.tree = null
      }
    }
    if (!Entry.isTool(entry)) {
      this.messages++
      if (entry.kind === OUTCOME_KIND) {
        const flow = outcomeBytes(entry.payload)
        this.bytesRead.add(flow.read)
        this.bytesWritten.add(flow.written)
      } else if (entry.kind === GUARD_STATE_KIND && guardStateProblem(entry.payload) === undefined) {
        this.guardState = entry.payload as GuardState
      }
      return
    }
    const name = entry.tool_name
    const known = this.toolCounts.get(name)
    if (known !== undefined) this.toolCounts.set(name, known + 1)
    else if (this.toolCounts.size < this.toolCountsCap) this.toolCounts.set(name, 1)
    if (this.entryCap > 0) this.tools.push(name)
    this.bytesRead.add(entry.bytes_read)
    this.bytesWritten.add(entry.bytes_written)
    this.invocations++
    if (entry.delegation_depth > this.maxDepth) this.maxDepth = entry.delegation_depth
    this.streakLen = this.streakTool === name ? this.streakLen + 1 : 1
    this.streakTool = name
  }

  /** `JournalState.applyMeta`. */
  applyMeta(meta: SessionMeta): void {
    if (this.meta === null || meta.updated_at >= this.meta.updated_at) {
      this.meta = meta
      this.built = null
    }
  }

  /** The state the fold has reached (built once per change). */
  state(): JournalState.JournalState {
    if (this.built !== null) return this.built
    const counts: Array<readonly [string, bigint]> = []
    for (const [name, n] of this.toolCounts) counts.push([name, sat(n)])
    this.built = {
      session_id: this.sessionId,
      entry_cap: this.entryCap,
      tool_counts_cap: this.toolCountsCap,
      next_sequence: this.nextSequence,
      hashes: Ring.fromArray(this.hashes.toArray()),
      window: Window.empty(),
      window_bytes: this.windowBytes,
      tool_sequence: Ring.fromArray(this.tools.toArray()),
      evicted_head: this.evictedHead,
      tree: this.tree === null ? null : this.tree.range(),
      data_flow: {
        total_bytes_read: this.bytesRead.value(),
        total_bytes_written: this.bytesWritten.value(),
        total_invocations: sat(this.invocations),
        max_delegation_depth: this.maxDepth
      },
      tool_counts: HashMap.fromIterable(counts),
      current_streak_tool: this.streakTool,
      current_streak_len: sat(this.streakLen),
      message_count: sat(this.messages),
      meta: this.meta,
      guard_state: this.guardState
    }
    return this.built
  }
}

/**
 * The state a recovery replays onto: an immutable `JournalState` folded entry by
 * entry (a load from a checkpoint, whose state the session keeps), or a `ReplayFold`
 * (a replay from the empty state, where only the final state matters).
 *
 * @internal
 */
export class Replayed {
  private immutable: JournalState.JournalState
  private mutable: ReplayFold | null

  constructor(state: JournalState.JournalState, options: { readonly mutable: boolean }) {
    this.immutable = state
    this.mutable = options.mutable ? new ReplayFold(state) : null
  }

  /** Replaces the state (a mutable replay starts over from `state`, which must then be empty). */
  set(state: JournalState.JournalState, options: { readonly mutable: boolean }): void {
    this.immutable = state
    this.mutable = options.mutable ? new ReplayFold(state) : null
  }

  get nextSequence(): number {
    return this.mutable === null ? this.immutable.next_sequence : this.mutable.nextSequence
  }

  get entryCap(): number {
    return this.mutable === null ? this.immutable.entry_cap : this.mutable.entryCap
  }

  lastHash(): string {
    return this.mutable === null ? JournalState.lastHash(this.immutable) : this.mutable.lastHash()
  }

  /** The hash of the retained entry at `sequence`, if it is retained. */
  retainedAt(sequence: number): string | undefined {
    return this.mutable === null
      ? JournalState.retainedHashAt(this.immutable, sequence)
      : this.mutable.retainedAt(sequence)
  }

  fold(entry: Entry.Entry): void {
    if (this.mutable === null) this.immutable = JournalState.fold(this.immutable, entry)
    else this.mutable.fold(entry)
  }

  applyMeta(meta: SessionMeta): void {
    if (this.mutable === null) this.immutable = JournalState.applyMeta(this.immutable, meta)
    else this.mutable.applyMeta(meta)
  }

  state(): JournalState.JournalState {
    return this.mutable === null ? this.immutable : this.mutable.state()
  }
}
