/**
 * The line splitter, property-tested: for any bytes cut into any chunks, the
 * pieces are the non-empty lines of the whole, each line above the bound
 * replaced by its size, SHA-256 and first bytes; and it never holds more than
 * the bound of an unfinished line (plus the head of an oversized one).
 */
import { describe, it } from "@effect/vitest"
import fc from "fast-check"
import * as crypto from "node:crypto"
import * as Lines from "../src/internal/lines.ts"

/** What the pieces of `whole` must be, split at once. */
const expected = (whole: Uint8Array, max: number) => {
  const out: Array<{ readonly bytes: number; readonly sha256?: string; readonly line?: string }> = []
  let start = 0
  for (let i = 0; i <= whole.length; i++) {
    if (i < whole.length && whole[i] !== 10) continue
    const line = whole.subarray(start, i)
    start = i + 1
    if (line.length === 0) continue
    out.push(
      line.length > max
        ? { bytes: line.length, sha256: crypto.createHash("sha256").update(line).digest("hex") }
        : { bytes: line.length, line: Buffer.from(line).toString("hex") }
    )
  }
  return out
}

const described = (piece: Lines.Piece) =>
  Lines.isOversized(piece)
    ? { bytes: piece.bytes, sha256: piece.sha256 }
    : { bytes: piece.length, line: Buffer.from(piece).toString("hex") }

// Bytes with many newlines and long runs without any.
const bytes = fc.array(
  fc.oneof(
    fc.constant(10),
    fc.integer({ min: 0, max: 255 }),
    fc.constant(120)
  ),
  { maxLength: 400 }
).map((a) => Uint8Array.from(a))

describe("Lines.splitter", () => {
  it("property: the pieces of any chunking are the lines of the whole; held bytes stay within the bound", () => {
    fc.assert(
      fc.property(
        bytes,
        fc.array(fc.nat({ max: 400 }), { maxLength: 12 }),
        fc.integer({ min: 1, max: 64 }),
        (whole, cuts, max) => {
          const at = [...new Set(cuts.map((c) => c % (whole.length + 1)))].sort((a, b) => a - b)
          const splitter = Lines.splitter(max)
          const pieces: Array<Lines.Piece> = []
          let from = 0
          for (const cut of [...at, whole.length]) {
            // A fresh copy per chunk, as a stream may hand out and then reuse buffers.
            const chunk = whole.slice(from, cut)
            pieces.push(...splitter.push(chunk).map((p) => (Lines.isOversized(p) ? p : p.slice())))
            chunk.fill(0)
            from = cut
            if (splitter.stats().held > max + Lines.HEAD_BYTES) return false
          }
          pieces.push(...splitter.end())
          const got = JSON.stringify(pieces.map(described))
          const want = JSON.stringify(expected(whole, max))
          if (got !== want) throw new Error(`${got}\n!==\n${want}`)
          return splitter.stats().peak <= max + Lines.HEAD_BYTES && splitter.stats().held === 0
        }
      ),
      { numRuns: 500 }
    )
  })

  it("property: an oversized line keeps its first bytes, up to the head size", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 10_000 }), fc.integer({ min: 1, max: 64 }), (length, max) => {
        const line = Uint8Array.from({ length }, (_, i) => 97 + (i % 26))
        const splitter = Lines.splitter(max)
        const pieces = [
          ...splitter.push(line.subarray(0, Math.floor(length / 2))),
          ...splitter.push(line.subarray(Math.floor(length / 2))),
          ...splitter.push(Uint8Array.of(10))
        ]
        if (length <= max) return pieces.length === 1 && !Lines.isOversized(pieces[0]!)
        const p = pieces[0]!
        return pieces.length === 1 && Lines.isOversized(p) && p.bytes === length &&
          Buffer.from(p.head).equals(Buffer.from(line.subarray(0, Math.min(length, Lines.HEAD_BYTES))))
      })
    )
  })
})
