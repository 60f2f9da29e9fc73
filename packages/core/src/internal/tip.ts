/**
 * The compare of a compare-and-append, shared by `Persistence` (which exports it)
 * and the in-memory adapter, so that neither loads the other to use it.
 */
import type { Tip } from "../Persistence.ts"

/**
 * Whether a stored tip (its entry count and newest `entry_hash`) is the one a
 * compare-and-append was built on.
 */
export const tipMatches = (after: Tip, storedCount: number, storedHash: string): boolean =>
  after.sequence === storedCount && (after.hash === null || after.hash === storedHash)
