/**
 * Lines of the stream-json protocol as bytes: a splitter that cuts stdout chunks
 * at newlines without decoding them (so bytes that are not UTF-8 are kept
 * exactly) and holds at most the line bound of an unfinished line, the journal
 * item of a line, and a bounded tail of stderr.
 */
import type { SessionJournal } from "@session-journal/core"
import * as crypto from "node:crypto"
import * as Transcript from "../Transcript.ts"

/** The journal entry kind of a line of the session. */
export const LINE_KIND = "claude-code.session.line"

/** The journal entry kind of a line kept by size and SHA-256 only. */
export const OVERSIZED_KIND = "claude-code.session.oversized-line"

export const encoder = new TextEncoder()
const decoder = Transcript.strictDecoder()
const lenient = new TextDecoder()

/**
 * A line above the bound, kept as its size and SHA-256 (hashed while it
 * streamed, never held whole) and its first `HEAD_BYTES` bytes, enough to read a
 * control request's id from.
 */
export interface OversizedLine {
  readonly _tag: "Oversized"
  readonly bytes: number
  readonly sha256: string
  readonly head: Uint8Array
}

/** A piece of the stream: a line's bytes (without its newline), or an oversized line. */
export type Piece = Uint8Array | OversizedLine

/** Bytes kept of the start of an oversized line. */
export const HEAD_BYTES = 4096

/** Whether a piece is an oversized line. */
export const isOversized = (piece: Piece): piece is OversizedLine => !(piece instanceof Uint8Array)

/**
 * Splits byte chunks into lines (without their `\n`; a `\r` before it is kept,
 * it is the line's). At most `maxLineBytes` of an unfinished line are held: past
 * that, the line is hashed as it streams and only its head is kept, so a line
 * without a newline costs bounded memory whatever its length. `stats` counts the
 * bytes kept between chunks (the unfinished line's, or an oversized line's
 * head): `held` now, `peak` the most ever, at most `maxLineBytes` + `HEAD_BYTES`.
 */
export const splitter = (maxLineBytes: number) => {
  let held: Array<Uint8Array> = []
  let heldBytes = 0
  let peak = 0
  // Set while the current line is past the bound.
  let over: { hash: crypto.Hash; bytes: number; head: Array<Uint8Array>; headBytes: number } | null = null

  const concat = (parts: ReadonlyArray<Uint8Array>, total: number): Uint8Array => {
    const out = new Uint8Array(total)
    let at = 0
    for (const p of parts) {
      out.set(p, at)
      at += p.length
    }
    return out
  }

  /** Hashes `part` into the oversized line, keeping it in the head while that is short. */
  const hashIn = (line: NonNullable<typeof over>, part: Uint8Array) => {
    line.hash.update(part)
    line.bytes += part.length
    if (line.headBytes < HEAD_BYTES) {
      // Copied: the stream may reuse the chunk's buffer.
      const take = part.slice(0, HEAD_BYTES - line.headBytes)
      line.head.push(take)
      line.headBytes += take.length
    }
  }

  /** Moves the held bytes and `part` into the hash of an oversized line. */
  const overflow = (part: Uint8Array) => {
    const line = { hash: crypto.createHash("sha256"), bytes: 0, head: [], headBytes: 0 }
    for (const p of held) hashIn(line, p)
    hashIn(line, part)
    over = line
    held = []
    heldBytes = 0
  }

  /** Adds bytes of the current line (no newline among them). */
  const feed = (part: Uint8Array, copy: boolean) => {
    if (part.length === 0) return
    if (over !== null) {
      hashIn(over, part)
    } else if (heldBytes + part.length > maxLineBytes) {
      overflow(part)
    } else {
      // Copied when kept past this chunk: the stream may reuse the chunk's buffer.
      held.push(copy ? part.slice() : part)
      heldBytes += part.length
    }
  }

  /** The current line, finished; null for an empty one. */
  const finish = (): Piece | null => {
    if (over !== null) {
      const line: OversizedLine = {
        _tag: "Oversized",
        bytes: over.bytes,
        sha256: over.hash.digest("hex"),
        head: concat(over.head, over.headBytes)
      }
      over = null
      return line
    }
    if (heldBytes === 0) return null
    const line = held.length === 1 ? held[0]! : concat(held, heldBytes)
    held = []
    heldBytes = 0
    return line
  }

  /** Bytes kept between chunks: the unfinished line's, or an oversized line's head. */
  const retained = () => heldBytes + (over?.headBytes ?? 0)

  return {
    push: (chunk: Uint8Array): Array<Piece> => {
      const pieces: Array<Piece> = []
      let start = 0
      for (let nl = chunk.indexOf(10); nl !== -1; nl = chunk.indexOf(10, start)) {
        feed(chunk.subarray(start, nl), false)
        const line = finish()
        if (line !== null) pieces.push(line)
        start = nl + 1
      }
      if (start < chunk.length) {
        // Lines finished above may be views of held bytes: copy only the unfinished tail.
        feed(chunk.subarray(start), true)
      }
      peak = Math.max(peak, retained())
      return pieces
    },
    /** What is left after the last newline, as a last line. */
    end: (): Array<Piece> => {
      const rest = finish()
      return rest === null ? [] : [rest]
    },
    /** Bytes held for the unfinished line now, and the most ever held. */
    stats: (): { readonly held: number; readonly peak: number } => ({ held: retained(), peak })
  }
}

/** The text of a line, for decoding (bytes that are not UTF-8 become U+FFFD here; the journal keeps them). */
export const text = (line: Uint8Array): string => lenient.decode(line)

/** The journal item of one line: its text, its bytes in base64, or its size and hash above `maxLineBytes`. */
export const item = (
  index: number,
  from: "cli" | "driver",
  line: Uint8Array,
  maxLineBytes: number
): SessionJournal.WriteItem => {
  const value = line.length > maxLineBytes ? Transcript.oversized(line) : Transcript.decodeLine(line, decoder)
  if (Transcript.isOversized(value)) {
    return {
      _tag: "Other",
      kind: OVERSIZED_KIND,
      payload: { index, from, bytes: value.oversized.bytes, sha256: value.oversized.sha256 }
    }
  }
  return {
    _tag: "Other",
    kind: LINE_KIND,
    payload: "text" in value ? { index, from, line: value.text } : { index, from, line_base64: value.base64 }
  }
}

/** The journal item of a line above the bound: its size and SHA-256. */
export const oversizedItem = (
  index: number,
  from: "cli" | "driver",
  line: OversizedLine
): SessionJournal.WriteItem => ({
  _tag: "Other",
  kind: OVERSIZED_KIND,
  payload: { index, from, bytes: line.bytes, sha256: line.sha256 }
})

// The start of a control request as the CLI writes it: `type`, `request_id`, then
// `request` opening with its `subtype` (and a hook callback's `callback_id`).
const controlStart =
  /^\{"type":"control_request","request_id":"([A-Za-z0-9_.:-]{1,200})","request":\{"subtype":"([a-z_]{1,64})"(?:,"callback_id":"([A-Za-z0-9_.:-]{1,200})")?/

/**
 * What the head of an oversized line says about a control request of the CLI's:
 * `null` when the line is no control request, `unreadable` when it is one whose
 * id cannot be read from its head.
 */
export const controlOf = (head: Uint8Array):
  | { readonly requestId: string; readonly subtype: string; readonly callbackId: string | null }
  | "unreadable"
  | null =>
{
  const text = lenient.decode(head)
  const m = controlStart.exec(text)
  if (m !== null) return { requestId: m[1]!, subtype: m[2]!, callbackId: m[3] ?? null }
  return /^\s*\{\s*"type"\s*:\s*"control_request"/.test(text) ? "unreadable" : null
}

/** The last `limit` bytes written to it. */
export const tail = (limit: number) => {
  let chunks: Array<Uint8Array> = []
  let bytes = 0
  return {
    push: (chunk: Uint8Array) => {
      chunks.push(chunk.slice())
      bytes += chunk.length
      while (chunks.length > 1 && bytes - chunks[0]!.length >= limit) bytes -= chunks.shift()!.length
    },
    text: (): string => {
      const all = new Uint8Array(bytes)
      let at = 0
      for (const c of chunks) {
        all.set(c, at)
        at += c.length
      }
      chunks = [all]
      return lenient.decode(all.subarray(Math.max(0, all.length - limit)))
    }
  }
}
