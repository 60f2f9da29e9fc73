/**
 * One run of an asynchronous read shared by the callers that ask for the same key
 * together: what the resident guard reads before a decision (the paths a call may
 * not touch, the transcript's totals) is the same for the hooks of parallel calls
 * of one session: read once for all of them, it costs one read, and they reach
 * the journal's writer together (whose group commit stores them with one append).
 *
 * A caller never gets the result of a run that started before it asked: the
 * callers that ask while a run is under way share the next run, which starts when
 * that one has settled. So what a caller is given was read after it asked, as if
 * it had read it alone. Only keys with a run under way are held.
 */

interface Waiter<A> {
  readonly read: () => Promise<A>
  readonly resolve: (a: A) => void
  readonly reject: (e: unknown) => void
}

/**
 * Reads shared per key among the callers that ask while a read of that key is
 * under way (each sees a read that started after it asked). The callers of a key
 * must ask for the same thing: a run reads with its first caller's `read`.
 */
export const coalescing = <A>(): (key: string, read: () => Promise<A>) => Promise<A> => {
  // Per key with a read under way: the callers of the next read.
  const slots = new Map<string, Array<Waiter<A>>>()
  const begin = (key: string, batch: ReadonlyArray<Waiter<A>>): void => {
    slots.set(key, [])
    new Promise<A>((resolve) => resolve(batch[0]!.read())).then(
      (a) => {
        for (const w of batch) w.resolve(a)
      },
      (e: unknown) => {
        for (const w of batch) w.reject(e)
      }
    ).finally(() => {
      const next = slots.get(key)!
      if (next.length === 0) slots.delete(key)
      else begin(key, next)
    })
  }
  return (key, read) =>
    new Promise<A>((resolve, reject) => {
      const waiting = slots.get(key)
      if (waiting === undefined) begin(key, [{ read, resolve, reject }])
      else waiting.push({ read, resolve, reject })
    })
}
