/**
 * A session's RFC 6962 tree computed from its stored history (docs/DESIGN.md §14), and
 * what an outside verifier asks of it: the signed tree head (a C2SP checkpoint), an
 * inclusion proof of one entry, a consistency proof between two sizes, and the check of
 * the journal against a checkpoint held elsewhere.
 *
 * Every operation streams the history once through `Persistence.history`: `O(n)`
 * hashing, `O(log n)` memory (a compact range and the one proof node being built),
 * whatever the session's length. The stream is not trusted: entries must come at
 * sequences 0, 1, 2, … and each must recompute to its own `entry_hash`, or the
 * operation fails with `TreeUnavailable`. (Keeping the compact range in the journal's
 * checkpoint, so that signing after an append costs `O(log n)`, is a follow-up.)
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { computeHash, type Entry } from "../Entry.ts"
import type { CorruptJournal, InvalidSessionId, SessionNotFound, StorageError } from "../Errors.ts"
import type * as Follow from "../Follow.ts"
import * as Merkle from "../Merkle.ts"
import { Persistence } from "../Persistence.ts"
import * as SessionJournal from "../SessionJournal.ts"
import * as SignedNote from "./SignedNote.ts"
import * as TreeHead from "./TreeHead.ts"

/**
 * The session's tree cannot be computed from its stored history: `missing` (the history
 * does not start at sequence 0, or skips one: retention removed it, or it is damaged),
 * `entry_hash` (an entry does not recompute to its hash), `size` (a size asked for is
 * larger than the history), `rewritten` (a repair set entries aside while the tree was
 * followed: no checkpoint after it would be consistent with those before).
 *
 * @since 0.1.0
 */
export class TreeUnavailable extends Schema.TaggedError<TreeUnavailable>()("TreeUnavailable", {
  id: Schema.String,
  reason: Schema.Literals(["missing", "entry_hash", "size", "rewritten"]),
  detail: Schema.String
}) {
  override get message(): string {
    return `the tree of ${this.id} cannot be computed from its stored history: ${this.detail}`
  }
}

/**
 * Failures of reading a session's tree.
 *
 * @since 0.1.0
 */
export type ScanError = TreeUnavailable | StorageError | CorruptJournal | SessionNotFound

/**
 * What one pass over the history collects: the roots at `rootsAt` sizes, the roots of
 * `spans` (a proof's nodes) and the entry at `entryAt`.
 *
 * @since 0.1.0
 */
export interface ScanRequest {
  readonly rootsAt?: ReadonlyArray<number> | undefined
  readonly spans?: ReadonlyArray<Merkle.Span> | undefined
  readonly entryAt?: number | undefined
  /** Stop reading after this many entries (the largest size the request needs). */
  readonly upTo?: number | undefined
}

/**
 * What a pass found: the tree over the entries read, the roots asked for (`undefined`
 * for a size past the history), the spans' roots and the entry asked for.
 *
 * @since 0.1.0
 */
export interface Scanned {
  readonly tree: Merkle.CompactRange
  readonly roots: ReadonlyArray<Uint8Array | undefined>
  readonly spanRoots: ReadonlyArray<Uint8Array> | undefined
  readonly entry: Entry | undefined
}

interface Acc {
  readonly tree: Merkle.Builder
  readonly roots: Array<Uint8Array | undefined>
  entry: Entry | undefined
  failure: TreeUnavailable | undefined
}

/**
 * One pass over the stored history of `id`, checking every entry's sequence and hash.
 *
 * @since 0.1.0
 */
export const scan = (id: string, request: ScanRequest = {}): Effect.Effect<Scanned, ScanError, Persistence> =>
  Effect.gen(function*() {
    const persistence = yield* Persistence
    const rootsAt = request.rootsAt ?? []
    const collector = Merkle.collector(request.spans ?? [])
    const history = persistence.history(id)
    const bounded = request.upTo === undefined ? history : Stream.take(history, request.upTo)
    const acc = yield* Stream.runFold(
      bounded,
      (): Acc => ({
        tree: Merkle.builder(),
        roots: rootsAt.map((n) => n === 0 ? Merkle.emptyRoot() : undefined),
        entry: undefined,
        failure: undefined
      }),
      (acc, entry) => {
        if (acc.failure !== undefined) return acc
        const index = acc.tree.size()
        if (entry.sequence !== index) {
          acc.failure = new TreeUnavailable({
            id,
            reason: "missing",
            detail: index === 0
              ? `the history starts at sequence ${entry.sequence}, not 0 (earlier entries were removed)`
              : `sequence ${entry.sequence} follows ${index - 1}`
          })
          return acc
        }
        if (computeHash(entry) !== entry.entry_hash) {
          acc.failure = new TreeUnavailable({
            id,
            reason: "entry_hash",
            detail: `entry ${index} does not recompute to its entry_hash`
          })
          return acc
        }
        const leaf = Merkle.entryLeafHash(entry.entry_hash)
        acc.tree.appendLeafHash(leaf)
        collector.pushLeafHash(leaf)
        if (request.entryAt === index) acc.entry = entry
        for (let i = 0; i < rootsAt.length; i++) {
          if (rootsAt[i] === index + 1) acc.roots[i] = Merkle.root(acc.tree.range())
        }
        return acc
      }
    )
    if (acc.failure !== undefined) return yield* acc.failure
    return { tree: acc.tree.range(), roots: acc.roots, spanRoots: collector.roots(), entry: acc.entry }
  })

const tooLarge = (id: string, what: string, size: number, have: number) =>
  new TreeUnavailable({ id, reason: "size", detail: `${what} ${size} is larger than the ${have} entries stored` })

/**
 * The session's current tree.
 *
 * @since 0.1.0
 */
export const tree = (id: string): Effect.Effect<Merkle.CompactRange, ScanError, Persistence> =>
  Effect.map(scan(id), (s) => s.tree)

/**
 * The signed checkpoint of the session's current tree (or of its first `size` entries):
 * a C2SP signed note whose text is the tree head with origin `<journal>/<id>`
 * (`journal` defaults to the signer's name).
 *
 * @since 0.1.0
 */
export const signedCheckpoint = (
  id: string,
  signer: SignedNote.Signer,
  options?: { readonly journal?: string | undefined; readonly size?: number | undefined }
): Effect.Effect<
  { readonly head: TreeHead.TreeHead; readonly note: string },
  ScanError | SignedNote.NoteRejected,
  Persistence
> =>
  Effect.gen(function*() {
    const size = options?.size
    const t = size === undefined ? yield* tree(id) : (yield* scan(id, { upTo: size })).tree
    if (size !== undefined && t.size < size) return yield* tooLarge(id, "tree size", size, t.size)
    const head = TreeHead.make(TreeHead.origin(options?.journal ?? signer.verifier.name, id), t)
    const note = yield* Effect.fromResult(SignedNote.sign(TreeHead.text(head), [signer]))
    return { head, note }
  })

/**
 * An inclusion proof of one entry, as a third party checks it: the entry, its leaf
 * index (its sequence), the tree size and root it is proven against, and the proof's
 * node hashes in RFC 6962 order.
 *
 * @since 0.1.0
 */
export interface InclusionProof {
  readonly entry: Entry
  readonly leafIndex: number
  readonly treeSize: number
  readonly root: Uint8Array
  readonly proof: ReadonlyArray<Uint8Array>
}

/**
 * The inclusion proof of the entry at `sequence` in the tree of `size` entries (the
 * current tree when not given).
 *
 * @since 0.1.0
 */
export const inclusion = (
  id: string,
  sequence: number,
  size?: number
): Effect.Effect<InclusionProof, ScanError, Persistence> =>
  Effect.gen(function*() {
    const treeSize = size ?? (yield* tree(id)).size
    const spans = Merkle.inclusionSpans(sequence, treeSize)
    if (spans === undefined) {
      return yield* new TreeUnavailable({
        id,
        reason: "size",
        detail: `entry ${sequence} is not in a tree of ${treeSize}`
      })
    }
    const s = yield* scan(id, { rootsAt: [treeSize], spans, entryAt: sequence, upTo: treeSize })
    if (s.tree.size < treeSize) return yield* tooLarge(id, "tree size", treeSize, s.tree.size)
    return { entry: s.entry!, leafIndex: sequence, treeSize, root: s.roots[0]!, proof: s.spanRoots! }
  })

/**
 * A consistency proof between two sizes of the session's tree, with both roots.
 *
 * @since 0.1.0
 */
export interface ConsistencyProof {
  readonly oldSize: number
  readonly newSize: number
  readonly oldRoot: Uint8Array
  readonly newRoot: Uint8Array
  readonly proof: ReadonlyArray<Uint8Array>
}

/**
 * The consistency proof from the tree of `oldSize` entries to the tree of `newSize`
 * (the current tree when not given).
 *
 * @since 0.1.0
 */
export const consistency = (
  id: string,
  oldSize: number,
  newSize?: number
): Effect.Effect<ConsistencyProof, ScanError, Persistence> =>
  Effect.gen(function*() {
    const target = newSize ?? (yield* tree(id)).size
    const spans = Merkle.consistencySpans(oldSize, target)
    if (spans === undefined) {
      return yield* new TreeUnavailable({
        id,
        reason: "size",
        detail: `a tree of ${target} cannot extend one of ${oldSize}`
      })
    }
    const s = yield* scan(id, { rootsAt: [oldSize, target], spans, upTo: target })
    if (s.tree.size < target) return yield* tooLarge(id, "tree size", target, s.tree.size)
    return { oldSize, newSize: target, oldRoot: s.roots[0]!, newRoot: s.roots[1]!, proof: s.spanRoots! }
  })

/**
 * How the stored journal relates to a tree head held elsewhere: `consistent` (the
 * tree at the head's size has its root, and the consistency proof to the current size
 * verifies), `cut` (the journal holds fewer entries than the head), `replaced` (the
 * tree at the head's size has another root: entries were edited, replaced or
 * reordered), `other_log` (the head's origin is not this session's).
 *
 * @since 0.1.0
 */
export type HeadCheck =
  | {
    readonly _tag: "consistent"
    readonly size: number
    readonly currentSize: number
    readonly root: Uint8Array
    readonly currentRoot: Uint8Array
    readonly proof: ReadonlyArray<Uint8Array>
  }
  | { readonly _tag: "cut"; readonly size: number; readonly currentSize: number }
  | {
    readonly _tag: "replaced"
    readonly size: number
    readonly currentSize: number
    readonly root: Uint8Array
    readonly storedRoot: Uint8Array
  }
  | { readonly _tag: "other_log"; readonly origin: string; readonly expected: string }

/**
 * Checks the stored journal of `id` against a tree head, in two passes (the current
 * size, then the root at the head's size, the current root and the consistency proof
 * between them, which is verified as a third party would).
 *
 * @since 0.1.0
 */
export const checkHead = (
  id: string,
  head: TreeHead.TreeHead,
  expectedOrigin: string
): Effect.Effect<HeadCheck, ScanError, Persistence> =>
  Effect.gen(function*() {
    if (head.origin !== expectedOrigin) {
      return { _tag: "other_log", origin: head.origin, expected: expectedOrigin } as const
    }
    const current = (yield* tree(id)).size
    if (current < head.size) {
      return { _tag: "cut", size: head.size, currentSize: current } as const
    }
    const p = yield* consistency(id, head.size, current)
    if (!Merkle.equals(p.oldRoot, head.root)) {
      return {
        _tag: "replaced",
        size: head.size,
        currentSize: current,
        root: head.root,
        storedRoot: p.oldRoot
      } as const
    }
    const verified = Merkle.verifyConsistency(p.oldSize, p.newSize, p.proof, head.root, p.newRoot)
    if (Result.isFailure(verified)) return yield* Effect.die(verified.failure)
    return {
      _tag: "consistent",
      size: head.size,
      currentSize: current,
      root: head.root,
      currentRoot: p.newRoot,
      proof: p.proof
    } as const
  })

/**
 * The signed checkpoints of a session as it grows: the tree is kept incrementally
 * (`O(log n)` hashing per entry, `O(log n)` memory) over `SessionJournal.follow` from
 * sequence 0, whose entries are each checked (sequence, link, hash) before they come,
 * and a checkpoint is signed after every batch the follower delivers — the stored
 * history first, then each append by any writer. For a schedule, throttle the stream
 * (`Stream.debounce`, `Stream.throttle`) or keep the latest. A repair that sets
 * delivered entries aside ends the stream with `TreeUnavailable` (`rewritten`): a
 * checkpoint after it could not be consistent with those signed before.
 *
 * With `start: "state"` the stream resumes from the tree the session's state keeps
 * (`JournalState.tree`, docs/DESIGN.md §14) and follows from its next sequence: no
 * pass over the stored history, so a host that restarts signs its next head in
 * `O(log n)`. That tree is the checkpoint's claim, checked as DESIGN §10 says (against
 * the retained hashes when they reach back to sequence 0, by every verification
 * otherwise), as the chain's head is; a state without a tree (a service with
 * `keepTree: false`, or a checkpoint of an earlier version) starts from sequence 0.
 *
 * @since 0.1.0
 */
export const signedHeads = (
  id: string,
  signer: SignedNote.Signer,
  options?: { readonly journal?: string | undefined; readonly start?: "history" | "state" | undefined }
): Stream.Stream<
  { readonly head: TreeHead.TreeHead; readonly note: string },
  TreeUnavailable | InvalidSessionId | SessionJournal.FollowError,
  SessionJournal.SessionJournal
> => {
  const originLine = TreeHead.origin(options?.journal ?? signer.verifier.name, id)
  type Out = { readonly head: TreeHead.TreeHead; readonly note: string } | TreeUnavailable
  type Acc = { tree: Merkle.Builder | undefined; broken: boolean }
  return Stream.unwrap(Effect.gen(function*() {
    const journal = yield* SessionJournal.SessionJournal
    const from = options?.start === "state" ? (yield* journal.state(id)).tree ?? Merkle.empty : Merkle.empty
    return journal.follow(id, from.size).pipe(
      Stream.mapAccumArray(
        // The tree is kept in place, one builder per run of the stream, started from
        // `from` at the first batch.
        (): Acc => ({ tree: undefined, broken: false }),
        (acc, batch: ReadonlyArray<Follow.Event>): readonly [Acc, ReadonlyArray<Out>] => {
          if (acc.broken || batch.length === 0) return [acc, []]
          const tree = acc.tree ?? Merkle.builder(from)
          for (const event of batch) {
            if (event._tag === "Recovered") {
              const e = new TreeUnavailable({
                id,
                reason: "rewritten",
                detail: `a repair set entries ${event.replaced.from}..${event.replaced.to} aside after they were signed`
              })
              return [{ tree, broken: true }, [e]]
            }
            tree.appendEntryHash(event.entry.entry_hash)
          }
          const head = TreeHead.make(originLine, tree.range())
          const note = SignedNote.sign(TreeHead.text(head), [signer])
          // The text is ours and valid: a failure here is a bug.
          if (Result.isFailure(note)) throw note.failure
          return [{ tree, broken: false }, [{ head, note: note.success }]]
        }
      ),
      Stream.mapEffect((out) => out instanceof TreeUnavailable ? Effect.fail(out) : Effect.succeed(out))
    )
  }))
}
