/**
 * Lines of the stdio transport as bytes: a splitter that cuts chunks at newlines
 * without decoding them, holds at most the line bound of an unfinished line and
 * hands a longer line on in parts as it arrives (never held whole), and a scanner
 * that reads the top-level `id` and `method` of a JSON object fed to it in parts,
 * in constant memory.
 */
import * as crypto from "node:crypto"

/**
 * What the splitter hands on: a whole line within the bound (without its
 * newline), or the parts of a line past the bound (the held start first) and
 * then its end. `terminated` is false for a last line the stream ended without
 * a newline.
 */
export type Piece =
  | { readonly _tag: "Line"; readonly bytes: Uint8Array; readonly terminated: boolean }
  | { readonly _tag: "Part"; readonly bytes: Uint8Array }
  | { readonly _tag: "End"; readonly size: number; readonly terminated: boolean }

const concat = (parts: ReadonlyArray<Uint8Array>, total: number): Uint8Array =>
  parts.length === 1 ? parts[0]! : Buffer.concat(parts, total)

/**
 * Splits byte chunks into pieces. The parts of a long line are views of the
 * chunk pushed: a consumer acts on them before pushing the next chunk. `peak`
 * is the most bytes ever held between chunks, at most `maxLineBytes`.
 */
export const splitter = (maxLineBytes: number) => {
  let held: Array<Uint8Array> = []
  let heldBytes = 0
  let peak = 0
  // The size so far of a line past the bound; null while within it.
  let over: number | null = null

  const feed = (part: Uint8Array, copy: boolean, out: Array<Piece>) => {
    if (part.length === 0) return
    if (over !== null) {
      over += part.length
      out.push({ _tag: "Part", bytes: part })
    } else if (heldBytes + part.length > maxLineBytes) {
      if (heldBytes > 0) out.push({ _tag: "Part", bytes: concat(held, heldBytes) })
      over = heldBytes + part.length
      out.push({ _tag: "Part", bytes: part })
      held = []
      heldBytes = 0
    } else {
      // Copied when kept past this chunk: the stream may reuse the chunk's buffer.
      held.push(copy ? part.slice() : part)
      heldBytes += part.length
    }
  }

  const finish = (terminated: boolean, out: Array<Piece>) => {
    if (over !== null) {
      out.push({ _tag: "End", size: over, terminated })
      over = null
      return
    }
    // An empty line carries no message: nothing to hand on.
    if (heldBytes === 0) return
    out.push({ _tag: "Line", bytes: concat(held, heldBytes), terminated })
    held = []
    heldBytes = 0
  }

  return {
    push: (chunk: Uint8Array): Array<Piece> => {
      const out: Array<Piece> = []
      let start = 0
      for (let nl = chunk.indexOf(10); nl !== -1; nl = chunk.indexOf(10, start)) {
        feed(chunk.subarray(start, nl), false, out)
        finish(true, out)
        start = nl + 1
      }
      if (start < chunk.length) feed(chunk.subarray(start), true, out)
      peak = Math.max(peak, heldBytes)
      return out
    },
    /** The stream ended: its last line, when it had no newline. */
    end: (): Array<Piece> => {
      const out: Array<Piece> = []
      finish(false, out)
      return out
    },
    peak: () => peak
  }
}

/** Bytes of a top-level `id` or `method` value kept by the scanner; a longer one is not read. */
export const MAX_CAPTURE = 1024

const QUOTE = 0x22
const BACKSLASH = 0x5c

/**
 * What the scanner found at the top level of an object: the `id` (null when
 * absent, unreadable or not a string or number), the `method` (null when absent
 * or not a string), and whether `result` or `error` were keys.
 */
export interface Scanned {
  readonly id: string | number | null
  readonly method: string | null
  readonly response: boolean
}

/**
 * A scanner of one JSON text fed in parts: brackets counted outside strings,
 * the keys of the top-level object read, and the raw text of its `id` and
 * `method` values kept (at most `MAX_CAPTURE` bytes each). It also hashes and
 * counts what it is fed. Memory is constant whatever the size of the text.
 */
export const scanner = () => {
  const hash = crypto.createHash("sha256")
  let size = 0
  let depth = 0
  let inString = false
  let escaped = false
  let expectKey = false
  let key: Array<number> | null = null
  let lastKey = ""
  let capture: { readonly name: "id" | "method"; bytes: Array<number> } | null = null
  let idText: string | null = null
  let methodText: string | null = null
  let response = false
  const decoder = new TextDecoder()

  const endCapture = () => {
    if (capture === null) return
    const text = capture.bytes.length > MAX_CAPTURE ? null : decoder.decode(new Uint8Array(capture.bytes)).trim()
    if (capture.name === "id") idText = text
    else methodText = text
    capture = null
  }

  const byte = (b: number) => {
    if (capture !== null && !(depth === 1 && !inString && (b === 0x2c || b === 0x7d))) {
      if (capture.bytes.length <= MAX_CAPTURE) capture.bytes.push(b)
    }
    if (inString) {
      if (key !== null && !(b === QUOTE && !escaped)) {
        if (key.length <= 64) key.push(b)
      }
      if (escaped) escaped = false
      else if (b === BACKSLASH) escaped = true
      else if (b === QUOTE) {
        inString = false
        if (key !== null) {
          lastKey = key.length > 64 ? "" : decoder.decode(new Uint8Array(key))
          if (lastKey === "result" || lastKey === "error") response = true
          key = null
        }
      }
      return
    }
    switch (b) {
      case QUOTE:
        inString = true
        if (depth === 1 && expectKey) key = []
        return
      case 0x7b: // {
      case 0x5b: // [
        depth++
        if (depth === 1) expectKey = b === 0x7b
        return
      case 0x7d: // }
      case 0x5d: // ]
        if (depth === 1) endCapture()
        depth--
        return
      case 0x3a: // :
        if (depth === 1) {
          expectKey = false
          if (lastKey === "id" || lastKey === "method") capture = { name: lastKey, bytes: [] }
        }
        return
      case 0x2c: // ,
        if (depth === 1) {
          endCapture()
          expectKey = true
        }
        return
    }
  }

  const parse = (text: string | null): unknown => {
    if (text === null) return null
    try {
      return JSON.parse(text)
    } catch {
      return null
    }
  }

  return {
    feed: (bytes: Uint8Array) => {
      hash.update(bytes)
      size += bytes.length
      for (let i = 0; i < bytes.length; i++) byte(bytes[i]!)
    },
    /** What was found, the size fed and its SHA-256 (call once, at the end). */
    result: (): Scanned & { readonly size: number; readonly sha256: string } => {
      endCapture()
      const id = parse(idText)
      const method = parse(methodText)
      return {
        id: typeof id === "string" || (typeof id === "number" && Number.isFinite(id)) ? id : null,
        method: typeof method === "string" ? method : null,
        response,
        size,
        sha256: hash.digest("hex")
      }
    }
  }
}

/**
 * The SHA-256 of bytes, as lowercase hex.
 */
export const sha256Hex = (bytes: Uint8Array): string => crypto.createHash("sha256").update(bytes).digest("hex")
