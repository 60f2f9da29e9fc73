/**
 * What a session page's live events may send of its shared live header. The
 * header (`Snapshot`) is drawn by a follower of its own, shared by every page of
 * the session, and the rows come from each page's own follower: each checks
 * what it reads, yet the two read storage at different moments, and storage may
 * be replaced between (a cut and new writes, an edit, a fork). So a header is
 * sent only once the page's events have sent the entry it ends with, with the
 * same `entry_hash` (or the page showed that entry): a header is then of the same
 * history as the rows beside it, never of another. A header ahead of the rows
 * waits for them (the newest one only); a header of another history, or too far
 * behind to be checked, is not sent.
 *
 * @since 0.1.0
 */
import { type Entry, Follow } from "@session-journal/core"

/**
 * A live header: the session's `#overview` content as of entry `last`, whose
 * `entry_hash` is `lastHash`, counting `entries`; `stopped` says why it follows
 * the session no further. With no `last`, it counts nothing: a session with no
 * entries, or a header that says only why it could not be drawn.
 *
 * @since 0.1.0
 */
export interface Snapshot {
  readonly entries: number
  readonly last: number | null
  readonly lastHash: string | null
  readonly html: string
  readonly stopped: string | null
}

/**
 * What reaches a page's live events, in the order it is to be sent: an entry its
 * follower delivered (with the event's text), the failure that ends the stream,
 * or a header.
 *
 * @since 0.1.0
 */
export type Item =
  | { readonly _tag: "Entry"; readonly entry: Entry.Entry; readonly text: string }
  | { readonly _tag: "Failure"; readonly text: string }
  | { readonly _tag: "Overview"; readonly snapshot: Snapshot }

/**
 * How many of the latest entries sent a gate remembers the hashes of: a header
 * further behind the rows than this is not sent (a newer one comes as entries
 * do).
 *
 * @since 0.1.0
 */
export const SENT_HASHES = 4096

/**
 * What a gate does with a header: send it now, hold it until the rows reach its
 * last entry, or drop it (of another history, or too far behind to be checked).
 *
 * @since 0.1.0
 */
export type Verdict = "send" | "hold" | "drop"

/**
 * The gate of one page's live events: given what arrives, in order, the text to
 * send now (empty for nothing). `shown` is the page's last entry, when the page
 * says which it is; `render` writes a header's event. `judge` says what the gate
 * would do with a header as things stand (a header that stopped and is dropped is
 * of another history: the page's events then take a new one). Memory is bounded
 * by `SENT_HASHES` and one held header.
 *
 * @since 0.1.0
 */
export const gate = (
  shown: Follow.Anchor | null,
  render: (snapshot: Snapshot) => string
): ((item: Item) => string) & { readonly judge: (snapshot: Snapshot) => Verdict } => {
  const sent = new Follow.Shown(SENT_HASHES)
  if (shown !== null) sent.push(shown.sequence, shown.hash)
  let any = shown !== null
  let held: Snapshot | null = null
  const judge = (s: Snapshot): Verdict => {
    // Nothing counted: only a reason, or the header of an empty session before any row.
    if (s.last === null || s.lastHash === null) return s.stopped !== null || !any ? "send" : "drop"
    const hash = sent.hashAt(s.last)
    if (hash !== undefined) return hash === s.lastHash ? "send" : "drop"
    return s.last >= sent.end ? "hold" : "drop"
  }
  const step = (item: Item): string => {
    switch (item._tag) {
      case "Entry": {
        sent.push(item.entry.sequence, item.entry.entry_hash)
        any = true
        if (held === null) return item.text
        const verdict = judge(held)
        if (verdict === "hold") return item.text
        const snapshot = held
        held = null
        return verdict === "send" ? item.text + render(snapshot) : item.text
      }
      case "Failure": {
        held = null
        return item.text
      }
      case "Overview": {
        const verdict = judge(item.snapshot)
        held = verdict === "hold" ? item.snapshot : null
        return verdict === "send" ? render(item.snapshot) : ""
      }
    }
  }
  return Object.assign(step, { judge })
}
