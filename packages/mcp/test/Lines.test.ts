/**
 * The pure parts of the gateway, property-tested (fast-check prints the seed of
 * a failure): the line splitter under any chunking and bound, the streaming
 * scanner of a message's top-level id against `JSON.parse`, and `JsonRpc.classify`.
 */
import * as fc from "fast-check"
import * as crypto from "node:crypto"
import { describe, expect, it } from "vitest"
import * as Lines from "../src/internal/lines.ts"
import * as JsonRpc from "../src/JsonRpc.ts"

const encoder = new TextEncoder()

// Cuts bytes at the given fractions into chunks (any chunking).
const chunked = (bytes: Uint8Array, cuts: ReadonlyArray<number>): Array<Uint8Array> => {
  const at = [...new Set(cuts.map((c) => Math.floor(c * bytes.length)))].sort((a, b) => a - b)
  const out: Array<Uint8Array> = []
  let start = 0
  for (const cut of at) {
    if (cut > start) out.push(bytes.slice(start, cut))
    start = Math.max(start, cut)
  }
  if (start < bytes.length) out.push(bytes.slice(start))
  return out
}

const lineBytes = fc.uint8Array({ maxLength: 300 }).map((b) => b.map((x) => x === 10 ? 32 : x))

describe("Lines.splitter", () => {
  it("hands on every non-empty line whole or in parts, whatever the chunking, holding at most the bound", () => {
    fc.assert(
      fc.property(
        fc.array(lineBytes, { maxLength: 12 }),
        fc.boolean(),
        fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 20 }),
        fc.integer({ min: 1, max: 200 }),
        (lines, finalNewline, cuts, bound) => {
          const parts: Array<number> = []
          for (const [i, l] of lines.entries()) {
            parts.push(...l)
            if (i < lines.length - 1 || finalNewline) parts.push(10)
          }
          const split = Lines.splitter(bound)
          const pieces: Array<Lines.Piece> = []
          for (const chunk of chunked(new Uint8Array(parts), cuts)) {
            // Parts are views of the chunk: copied before the next push.
            pieces.push(...split.push(chunk).map((p) => p._tag === "Part" ? { ...p, bytes: p.bytes.slice() } : p))
          }
          pieces.push(...split.end())
          const got: Array<{ bytes: Array<number>; whole: boolean; terminated: boolean }> = []
          let long: Array<number> | null = null
          for (const p of pieces) {
            if (p._tag === "Line") got.push({ bytes: [...p.bytes], whole: true, terminated: p.terminated })
            else if (p._tag === "Part") (long ??= []).push(...p.bytes)
            else {
              expect(long?.length).toBe(p.size)
              got.push({ bytes: long!, whole: false, terminated: p.terminated })
              long = null
            }
          }
          const expected = lines.flatMap((l, i) =>
            l.length === 0 ? [] : [{
              bytes: [...l],
              whole: l.length <= bound,
              terminated: i < lines.length - 1 || finalNewline
            }]
          )
          expect(got).toEqual(expected)
          expect(split.peak()).toBeLessThanOrEqual(bound)
        }
      ),
      { numRuns: 500 }
    )
  })
})

const id = fc.oneof(fc.string({ maxLength: 20 }), fc.integer(), fc.constant(0))
const message = fc.record({
  id: fc.option(id, { nil: undefined }),
  method: fc.option(fc.string({ maxLength: 20 }), { nil: undefined }),
  result: fc.option(fc.jsonValue({ maxDepth: 4 }), { nil: undefined }),
  params: fc.option(fc.jsonValue({ maxDepth: 4 }), { nil: undefined }),
  jsonrpc: fc.constant("2.0")
})

describe("Lines.scanner", () => {
  it("reads the top-level id and method of any message fed in any parts, as JSON.parse does", () => {
    fc.assert(
      fc.property(
        message,
        fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 12 }),
        fc.integer({ min: 0, max: 4 }),
        (m, cuts, rotate) => {
          // Keys in a rotated order: the id may come last, as the SDK writes responses.
          const entries = Object.entries(m).filter(([, v]) => v !== undefined)
          const ordered = [
            ...entries.slice(rotate % Math.max(1, entries.length)),
            ...entries.slice(0, rotate % Math.max(1, entries.length))
          ]
          const text = JSON.stringify(Object.fromEntries(ordered))
          const bytes = encoder.encode(text)
          const scan = Lines.scanner()
          for (const chunk of chunked(bytes, cuts)) scan.feed(chunk)
          const found = scan.result()
          const parsed = JSON.parse(text) as { id?: unknown; method?: unknown }
          const idText = parsed.id === undefined ? "" : JSON.stringify(parsed.id)
          const expectedId = parsed.id === undefined || encoder.encode(idText).length > Lines.MAX_CAPTURE
            ? null
            : parsed.id
          expect(found.id).toEqual(expectedId)
          expect(found.method).toEqual(
            typeof parsed.method === "string" &&
              encoder.encode(JSON.stringify(parsed.method)).length <= Lines.MAX_CAPTURE
              ? parsed.method
              : null
          )
          expect(found.response).toBe(m.result !== undefined)
          expect(found.size).toBe(bytes.length)
          expect(found.sha256).toBe(crypto.createHash("sha256").update(bytes).digest("hex"))
        }
      ),
      { numRuns: 500 }
    )
  })
})

describe("JsonRpc.classify", () => {
  it("classifies any message as its shape says, and keys 1 and \"1\" apart", () => {
    fc.assert(
      fc.property(message, (m) => {
        const { message: c } = JsonRpc.classify(encoder.encode(JSON.stringify(m)))
        if (m.method !== undefined) {
          expect(c._tag).toBe(m.id === undefined ? "Notification" : "Request")
        } else if (m.result !== undefined) {
          expect(c._tag).toBe("Response")
        } else {
          expect(c._tag).toBe("Invalid")
        }
      }),
      { numRuns: 500 }
    )
    expect(JsonRpc.key(1)).not.toBe(JsonRpc.key("1"))
  })

  it("refuses bytes that are not UTF-8, text that is not JSON, and reads arrays as batches", () => {
    expect(JsonRpc.classify(new Uint8Array([0x7b, 0xff, 0x7d])).message).toMatchObject({
      _tag: "Invalid",
      code: -32700
    })
    expect(JsonRpc.classify(encoder.encode("{")).message).toMatchObject({ _tag: "Invalid", code: -32700 })
    expect(JsonRpc.classify(encoder.encode("[{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"},5]")).message)
      .toEqual({ _tag: "Batch", ids: [3] })
    expect(JsonRpc.classify(encoder.encode("{\"jsonrpc\":\"1.0\",\"id\":3,\"method\":\"ping\"}")).message)
      .toMatchObject({ _tag: "Invalid", id: 3, code: -32600 })
  })
})
