/**
 * The hash chain over entries (docs/DESIGN.md §2): the fold that commits evicted entries to
 * the head, the exported head, and verification of a retained window.
 *
 * @since 0.1.0
 */
import * as Result from "effect/Result"
import { computeHash, type Entry, ZERO_HASH } from "./Entry.ts"
import { IntegrityViolation } from "./Errors.ts"
import { hashFold } from "./internal/preimage.ts"

/**
 * `fold(p, h) = SHA-256(lp(p) ‖ lp(h))` over the hex strings; `p` is `""` before the
 * first eviction. Each eviction sets `evicted_head = fold(evicted_head, evicted.entry_hash)`.
 *
 * @since 0.1.0
 */
export const foldHash = (p: string, h: string): string => hashFold(p, h)

/**
 * The exported head: the last retained hash (ZERO_HASH when empty) while nothing was
 * evicted, `fold(evicted_head, last retained hash or ZERO_HASH)` afterwards.
 *
 * @since 0.1.0
 */
export const exportedHead = (evictedHead: string | null, lastHash: string | undefined): string =>
  evictedHead === null ? lastHash ?? ZERO_HASH : foldHash(evictedHead, lastHash ?? ZERO_HASH)

/**
 * Verifies a retained window of entries. Entry 0 must link to ZERO_HASH unless a
 * prefix was evicted (`prefixEvicted`), in which case its own `prev_hash` is the
 * accepted boundary; every later entry links to its predecessor. For each entry the
 * link is checked before its recomputed hash. `indexOffset` shifts reported indexes
 * when a long window is checked in pieces.
 *
 * @since 0.1.0
 */
export const verify = (
  entries: Iterable<Entry>,
  options: {
    readonly prefixEvicted: boolean
    readonly previousHash?: string | undefined
    readonly indexOffset?: number
  }
): Result.Result<number, IntegrityViolation> => {
  let index = options.indexOffset ?? 0
  let expectedPrev: string | undefined = options.previousHash ?? (options.prefixEvicted ? undefined : ZERO_HASH)
  let count = 0
  for (const entry of entries) {
    if (expectedPrev !== undefined && entry.prev_hash !== expectedPrev) {
      return Result.fail(
        new IntegrityViolation({
          index,
          sequence: entry.sequence,
          what: "prev_hash",
          expected: expectedPrev,
          actual: entry.prev_hash
        })
      )
    }
    const recomputed = computeHash(entry)
    if (recomputed !== entry.entry_hash) {
      return Result.fail(
        new IntegrityViolation({
          index,
          sequence: entry.sequence,
          what: "entry_hash",
          expected: recomputed,
          actual: entry.entry_hash
        })
      )
    }
    expectedPrev = entry.entry_hash
    index++
    count++
  }
  return Result.succeed(count)
}
