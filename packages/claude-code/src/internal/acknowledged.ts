/**
 * What the resident guard acknowledged per journal session: the number of entries
 * the session held after the last event it answered. A session that holds fewer
 * when it is next loaded (its directory deleted, its tail cut while the guard had
 * it closed) vanished or shrank, and the guard refuses to go on with it rather than
 * start it afresh. Bounded: the least recently used sessions are forgotten past
 * `capacity` (each costs its id and a number).
 */

/** The memory: `check` before an event is handled, `note` after it was stored. */
export class Acknowledged {
  private readonly counts = new Map<string, number>()
  readonly capacity: number

  constructor(capacity: number = 10_000) {
    this.capacity = capacity
  }

  /** The entries acknowledged for `session`, if remembered. */
  get(session: string): number | undefined {
    return this.counts.get(session)
  }

  /** Why `session`, now holding `held` entries, may not go on; null when it may. */
  check(session: string, held: number): string | null {
    const known = this.counts.get(session)
    return known === undefined || held >= known
      ? null
      : `the journal of session ${session} holds ${held} entries, fewer than the ${known} the guard acknowledged: ` +
        `it vanished or shrank, so the guard will not start it afresh (verify and repair it, or start a new ` +
        `Claude Code session)`
  }

  /** Remembers that `session` holds `held` entries (never fewer than already known). */
  note(session: string, held: number): void {
    const known = this.counts.get(session)
    this.counts.delete(session)
    this.counts.set(session, known === undefined ? held : Math.max(known, held))
    if (this.counts.size > this.capacity) this.counts.delete(this.counts.keys().next().value!)
  }
}
