/**
 * The event-stream reader of the Streamable HTTP side: the same events whatever
 * the chunking, events over the bound dropped by size without being held, the
 * last event id carried, LF and CRLF line ends.
 */
import { describe, expect, it } from "vitest"
import { type SseEvent, sseReader } from "../src/internal/upstream.ts"

const encoder = new TextEncoder()

const readAll = (text: string, max: number, cut: (i: number) => boolean): Array<SseEvent> => {
  const bytes = encoder.encode(text)
  const reader = sseReader(max)
  const out: Array<SseEvent> = []
  let start = 0
  for (let i = 1; i <= bytes.length; i++) {
    if (i === bytes.length || cut(i)) {
      out.push(...reader.feed(bytes.slice(start, i)))
      start = i
    }
  }
  return out
}

describe("sseReader", () => {
  const stream = [
    ": a comment\n\n",
    "id: 1\nevent: message\ndata: {\"a\":1}\n\n",
    "data: first\ndata: second\n\n",
    `id: 2\r\ndata: ${"y".repeat(300)}\r\n\r\n`,
    "retry: 10\ndata: é\n\n",
    "data: {\"b\":2}\n\n"
  ].join("")
  const expected: Array<SseEvent> = [
    { _tag: "Data", data: "{\"a\":1}", id: "1" },
    { _tag: "Data", data: "first\nsecond", id: "1" },
    { _tag: "TooLarge", bytes: 308 },
    { _tag: "Data", data: "é", id: "2" },
    { _tag: "Data", data: "{\"b\":2}", id: "2" }
  ]

  it("reads the same events whatever the chunking, dropping the one over the bound", () => {
    for (const cut of [() => false, () => true, (i: number) => i % 7 === 0, (i: number) => i % 64 === 3]) {
      expect(readAll(stream, 256, cut)).toEqual(expected)
    }
  })

  it("holds at most the bound of an event, however long its line", () => {
    const reader = sseReader(1024)
    const huge = encoder.encode(`data: ${"z".repeat(1_000_000)}`)
    for (let i = 0; i < huge.length; i += 4096) expect(reader.feed(huge.slice(i, i + 4096))).toEqual([])
    expect(reader.feed(encoder.encode("\n\ndata: next\n\n"))).toEqual([
      { _tag: "TooLarge", bytes: huge.length + 1 },
      { _tag: "Data", data: "next", id: null }
    ])
  })
})
