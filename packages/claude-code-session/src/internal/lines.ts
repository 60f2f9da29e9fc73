/**
 * Lines of the stream-json protocol as bytes: a splitter that cuts stdout chunks
 * at newlines without decoding them (so bytes that are not UTF-8 are kept
 * exactly), the journal item of a line, and a bounded tail of stderr.
 */
import { Transcript } from "@session-journal/claude-code"
import type { SessionJournal } from "@session-journal/core"

/** The journal entry kind of a line of the session. */
export const LINE_KIND = "claude-code.session.line"

/** The journal entry kind of a line kept by size and SHA-256 only. */
export const OVERSIZED_KIND = "claude-code.session.oversized-line"

export const encoder = new TextEncoder()
const decoder = Transcript.strictDecoder()
const lenient = new TextDecoder()

/** Splits byte chunks into lines (without their `\n`; a `\r` before it is kept, it is the line's). */
export const splitter = () => {
  let held: Array<Uint8Array> = []
  let heldBytes = 0
  const take = (last: Uint8Array): Uint8Array => {
    if (held.length === 0) return last
    const out = new Uint8Array(heldBytes + last.length)
    let at = 0
    for (const h of held) {
      out.set(h, at)
      at += h.length
    }
    out.set(last, at)
    held = []
    heldBytes = 0
    return out
  }
  return {
    push: (chunk: Uint8Array): Array<Uint8Array> => {
      const lines: Array<Uint8Array> = []
      let start = 0
      for (let nl = chunk.indexOf(10); nl !== -1; nl = chunk.indexOf(10, start)) {
        const line = take(chunk.subarray(start, nl))
        if (line.length > 0) lines.push(line)
        start = nl + 1
      }
      if (start < chunk.length) {
        // Copied: the stream may reuse the chunk's buffer.
        held.push(chunk.slice(start))
        heldBytes += chunk.length - start
      }
      return lines
    },
    /** What is left after the last newline, as a last line. */
    end: (): Array<Uint8Array> => {
      const rest = take(new Uint8Array(0))
      return rest.length > 0 ? [rest] : []
    }
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
