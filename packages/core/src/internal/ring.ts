/**
 * A bounded FIFO window that is immutable from the outside but appends in amortized
 * O(1): every ring is a window [start, end) over a shared array whose cells, once
 * written, never change. A ring may append in place only while it owns the tail of
 * the array (`buf.length === end`); an older ring that appends after a newer one did
 * copies its window first. Old values therefore stay valid forever, which is what a
 * pure `fold` needs, without copying the whole window on every entry.
 */

/** @internal */
export interface Ring<A> {
  readonly buf: Array<A>
  readonly start: number
  readonly end: number
}

/** @internal */
export const empty = <A>(): Ring<A> => ({ buf: [], start: 0, end: 0 })

/** @internal */
export const fromArray = <A>(items: ReadonlyArray<A>): Ring<A> => ({ buf: items.slice(), start: 0, end: items.length })

/** @internal */
export const size = <A>(ring: Ring<A>): number => ring.end - ring.start

/** @internal */
export const get = <A>(ring: Ring<A>, index: number): A | undefined =>
  index >= 0 && index < ring.end - ring.start ? ring.buf[ring.start + index] : undefined

/** @internal */
export const last = <A>(ring: Ring<A>): A | undefined => ring.end > ring.start ? ring.buf[ring.end - 1] : undefined

/** @internal */
export const toArray = <A>(ring: Ring<A>): Array<A> => ring.buf.slice(ring.start, ring.end)

/**
 * Appends `item`, keeping at most `cap` items; evicted items (oldest first) are passed
 * to `onEvict`.
 *
 * @internal
 */
export const push = <A>(ring: Ring<A>, item: A, cap: number, onEvict?: (evicted: A) => void): Ring<A> => {
  if (cap <= 0) {
    onEvict?.(item)
    return ring.end === ring.start ? ring : empty()
  }
  let buf = ring.buf
  let start = ring.start
  let end = ring.end
  if (buf.length !== end) {
    buf = buf.slice(start, end)
    end -= start
    start = 0
  }
  buf.push(item)
  end++
  while (end - start > cap) {
    onEvict?.(buf[start]!)
    start++
  }
  // Compact once the dead prefix is a quarter of the cap: amortized O(1) per push
  // (four copies), and the array never holds more than about 1.25 times the cap
  // (the items before `start` stay alive while the array does).
  if (start > 32 && start >= cap >> 2) {
    buf = buf.slice(start, end)
    end -= start
    start = 0
  }
  return { buf, start, end }
}
