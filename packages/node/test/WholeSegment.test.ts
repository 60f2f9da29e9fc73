/**
 * The verify read path (`internal/wholeSegment.ts`) against `Segment.scan` on a real
 * file holding the same bytes: the same visits (record, offset, end) in the same
 * order, the same result (size, valid end, how the scan ended, preallocated) and the
 * same failure, on valid segments and on segments mutated every way a disk or a
 * forger can (flipped, zeroed, cut, duplicated, non-ASCII, over-long, other-version
 * lines, zero tails, a file that shrank after its stat). Seeds are printed; rerun one
 * with `SEED=<n>`.
 */
import { Entry, JournalState } from "@session-journal/core"
import { concatBytes } from "@session-journal/core/test/fixtures"
import { chain } from "@session-journal/core/test/PersistenceContract"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import fc from "fast-check"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import * as Base from "../src/internal/fileOps/base.ts"
import * as Open from "../src/internal/fileOps/open.ts"
import * as Segment from "../src/internal/segment.ts"
import { Ahead, readWhole, scanBytes } from "../src/internal/wholeSegment.ts"
import { tempDir } from "./helpers.ts"

const root = tempDir("whole", true)
afterAll(() => fs.rmSync(root, { recursive: true, force: true }))

const context = (maxLineBytes = Base.MAX_LINE_BYTES): Base.Context => ({
  fs: Base.nodeFs,
  clock: Clock.Clock.defaultValue(),
  root,
  uid: typeof process.getuid === "function" ? process.getuid() : null,
  maxFileBytes: Base.MAX_FILE_BYTES,
  maxLineBytes
})

const encoder = new TextEncoder()
const BASE = 40

// Lines of a segment at BASE: its entries (tool, message and other kinds, some with
// non-ASCII text), and metadata records in between.
const { entries } = (() => {
  const first = chain(JournalState.empty("whole"), BASE + 12)
  let s = first.state
  const more: Array<Entry.Entry> = []
  for (const name of ["outil-é", "工具", "emoji-🙂"]) {
    const e = JournalState.nextTool(s, 1764400100, {
      tool_name: name,
      server_id: "srv-ü",
      agent_id: "a",
      bytes_read: 3,
      bytes_written: 4,
      delegation_depth: 1,
      allowed: true
    })
    more.push(e)
    s = JournalState.fold(s, e)
  }
  const tail = chain(s, 10)
  return { entries: [...first.entries.slice(BASE), ...more, ...tail.entries] }
})()

const entryLines = entries.map((e) => Segment.entryLine(e))
const metaLines = [
  Segment.metaLine({ updated_at: 5, title: "t" }),
  Segment.metaLine({ updated_at: 6, title: "titre é", labels: ["x"] })
]

type Mutation =
  | { readonly _tag: "set"; readonly at: number; readonly byte: number }
  | { readonly _tag: "cut"; readonly at: number }
  | { readonly _tag: "zeros"; readonly at: number; readonly length: number }
  | { readonly _tag: "insert"; readonly at: number; readonly text: string }
  | { readonly _tag: "dupLine"; readonly line: number }

const INSERTS = [
  "\n",
  "{\"k\":\"entry\",\"v\":2,\"e\":{}}\n",
  "{\"v\":1}\n",
  "[1]\n",
  "null\n",
  "{\"k\":\"open\",\"v\":1,\"base\":40}\n",
  "{\"k\":\"entry\",\"v\":1,\"e\":{\"sequence\":1}}\n",
  "{\"k\":\"meta\",\"v\":1,\"meta\":{\"updated_at\":-1}}\n",
  "{\"k\":\"nope\",\"v\":1}\n",
  "\ufeff",
  "\u00e9",
  " ",
  "\u0000\u0000",
  "x".repeat(300) + "\n"
]

const byteArb = fc.oneof(
  fc.constantFrom(0, 10, 0x20, 0x22, 0x30, 0x61, 0x7b, 0x7d, 0x80, 0xc3, 0xe9, 0xef, 0xff),
  fc.integer({ min: 0, max: 255 })
)

const mutationArb: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ _tag: fc.constant("set" as const), at: fc.nat(), byte: byteArb }),
  fc.record({ _tag: fc.constant("cut" as const), at: fc.nat() }),
  fc.record({ _tag: fc.constant("zeros" as const), at: fc.nat(), length: fc.integer({ min: 1, max: 600 }) }),
  fc.record({ _tag: fc.constant("insert" as const), at: fc.nat(), text: fc.constantFrom(...INSERTS) }),
  fc.record({ _tag: fc.constant("dupLine" as const), line: fc.nat() })
)

const segmentArb = fc.record({
  preallocated: fc.boolean(),
  // Which of the entry lines the segment holds (a prefix, so sequences stay in order).
  count: fc.integer({ min: 0, max: entryLines.length }),
  metaAt: fc.array(fc.nat(), { maxLength: 2 }),
  zeroTail: fc.constantFrom(0, 0, 1, 7, 4096),
  mutations: fc.array(mutationArb, { maxLength: 3 }),
  // The visitor stops at this record (never when larger than the records).
  haltAt: fc.oneof(fc.constant(Number.MAX_SAFE_INTEGER), fc.nat(40)),
  smallLines: fc.boolean()
})

type SegmentCase = typeof segmentArb extends fc.Arbitrary<infer T> ? T : never

const build = (s: SegmentCase): Uint8Array => {
  const lines = [Segment.openLine(BASE, s.preallocated), ...entryLines.slice(0, s.count)]
  for (const m of s.metaAt) lines.splice(1 + (m % (lines.length)), 0, metaLines[m % metaLines.length]!)
  let bytes: Uint8Array = encoder.encode(lines.join(""))
  if (s.zeroTail > 0) bytes = concatBytes(bytes, new Uint8Array(s.zeroTail))
  for (const m of s.mutations) bytes = mutate(bytes, m, lines)
  return bytes
}

const mutate = (bytes: Uint8Array, m: Mutation, lines: ReadonlyArray<string>): Uint8Array => {
  const at = bytes.length === 0 ? 0 : m._tag === "dupLine" ? 0 : m.at % (bytes.length + 1)
  switch (m._tag) {
    case "set": {
      if (at >= bytes.length) return bytes
      const out = bytes.slice()
      out[at] = m.byte
      return out
    }
    case "cut":
      return bytes.subarray(0, at)
    case "zeros":
      return concatBytes(bytes.subarray(0, at), new Uint8Array(m.length), bytes.subarray(at))
    case "insert":
      return concatBytes(bytes.subarray(0, at), encoder.encode(m.text), bytes.subarray(at))
    case "dupLine": {
      const line = lines[m.line % lines.length]!
      return concatBytes(bytes, encoder.encode(line))
    }
  }
}

interface Seen {
  readonly visits: Array<string>
  readonly exit: string
}

const describeRecord = (record: Segment.Visited): string =>
  record._tag === "Entry" ? JSON.stringify(Entry.encode(record.entry)) : JSON.stringify(record.meta)

const visitor = (haltAt: number, visits: Array<string>) => (record: Segment.Visited, offset: number, end: number) => {
  visits.push(`${record._tag} ${offset} ${end} ${describeRecord(record)}`)
  return visits.length - 1 !== haltAt
}

const exitText = <A, E>(exit: Exit.Exit<A, E>): string =>
  Exit.isSuccess(exit) ? JSON.stringify(exit.value) : JSON.stringify(Exit.isFailure(exit) ? String(exit.cause) : null)

let fileNo = 0
// `Segment.scan` on a real file holding `bytes`; with `size` larger than the bytes,
// a file whose stat says `size` (it shrank after the stat).
const reference = async (
  ctx: Base.Context,
  bytes: Uint8Array,
  haltAt: number,
  size = bytes.length
): Promise<Seen> => {
  const file = path.join(root, `seg-${fileNo++}.jsonl`)
  fs.writeFileSync(file, bytes, { mode: 0o600 })
  const visits: Array<string> = []
  const exit = await Effect.runPromise(Effect.exit(
    Open.withHandle(Open.openRead(ctx, file), (fh) => {
      const handle: Base.FileHandle = size === bytes.length
        ? fh
        : {
          ...fh,
          fd: fh.fd,
          read: (b, o, l, p) => fh.read(b, o, l, p),
          stat: async () => ({ ...(await fh.stat()), size }),
          close: () => fh.close()
        }
      return Segment.scan(ctx, handle, "seg", "seg", BASE, 0, visitor(haltAt, visits))
    })
  ))
  fs.rmSync(file)
  return { visits, exit: exitText(exit) }
}

const fast = async (ctx: Base.Context, bytes: Uint8Array, haltAt: number, size = bytes.length): Promise<Seen> => {
  const visits: Array<string> = []
  const exit = await Effect.runPromise(Effect.exit(scanBytes(ctx, bytes, size, "seg", BASE, visitor(haltAt, visits))))
  return { visits, exit: exitText(exit) }
}

const seedOf = (name: string): number => {
  const fromEnv = Number(process.env["SEED"])
  const seed = Number.isSafeInteger(fromEnv) ? fromEnv : Math.floor(Math.random() * 2 ** 31)
  console.log(`${name}: seed ${seed}`)
  return seed
}

describe("wholeSegment.scanBytes", () => {
  it("visits and ends exactly as Segment.scan on the same bytes (mutated segments)", async () => {
    const seed = seedOf("scanBytes vs Segment.scan")
    await fc.assert(
      fc.asyncProperty(segmentArb, async (s) => {
        const ctx = context(s.smallLines ? 200 : Base.MAX_LINE_BYTES)
        const bytes = build(s)
        const want = await reference(ctx, bytes, s.haltAt)
        const got = await fast(ctx, bytes, s.haltAt)
        expect(got).toEqual(want)
      }),
      { seed, numRuns: 400 }
    )
  }, 120_000)

  it(
    "agrees with Segment.scan on segments larger than its read chunk (lines across chunks, the line bound)",
    async () => {
      const seed = seedOf("scanBytes vs Segment.scan, large segments")
      // 256 KiB is Segment.scan's chunk: a line across two chunks meets the line bound.
      const body = encoder.encode(Array.from({ length: 900 }, (_, i) => entryLines[i % entryLines.length]!).join(""))
      await fc.assert(
        fc.asyncProperty(segmentArb, fc.integer({ min: 100, max: 600 }), async (s, maxLine) => {
          const ctx = context(s.smallLines ? maxLine : Base.MAX_LINE_BYTES)
          const tail = s.smallLines ? new Uint8Array(0) : build({ ...s, preallocated: false })
          const bytes = concatBytes(
            encoder.encode(Segment.openLine(BASE, s.preallocated)),
            body,
            tail.subarray(Math.min(tail.length, 40))
          )
          const want = await reference(ctx, bytes, s.haltAt === Number.MAX_SAFE_INTEGER ? s.haltAt : s.haltAt * 20)
          expect(await fast(ctx, bytes, s.haltAt === Number.MAX_SAFE_INTEGER ? s.haltAt : s.haltAt * 20)).toEqual(want)
        }),
        { seed, numRuns: 40 }
      )
    },
    120_000
  )

  it("fails like Segment.scan on a line across its read chunks above the line bound", async () => {
    const body = encoder.encode(Array.from({ length: 900 }, (_, i) => entryLines[i % entryLines.length]!).join(""))
    const bytes = concatBytes(encoder.encode(Segment.openLine(BASE, false)), body)
    // The part of the line across the first chunk boundary that lies before it.
    const chunk = 256 * 1024
    const partial = chunk - (bytes.subarray(0, chunk).lastIndexOf(10) + 1)
    expect(partial).toBeGreaterThan(1)
    const ctx = context(partial - 1)
    const want = await reference(ctx, bytes, Number.MAX_SAFE_INTEGER)
    expect(want.exit).toContain(`line longer than the bound of ${partial - 1} bytes`)
    expect(await fast(ctx, bytes, Number.MAX_SAFE_INTEGER)).toEqual(want)
  })

  it("agrees with Segment.scan on a file that shrank after its stat", async () => {
    const seed = seedOf("scanBytes shrunk file")
    await fc.assert(
      fc.asyncProperty(segmentArb, fc.integer({ min: 1, max: 500 }), async (s, missing) => {
        const ctx = context()
        const bytes = build(s)
        const size = bytes.length + missing
        expect(await fast(ctx, bytes, s.haltAt, size)).toEqual(await reference(ctx, bytes, s.haltAt, size))
      }),
      { seed, numRuns: 60 }
    )
  }, 120_000)

  it("takes the fast path on clean segments (same visits as Segment.scan)", async () => {
    for (const preallocated of [false, true]) {
      const bytes = encoder.encode([Segment.openLine(BASE, preallocated), ...entryLines, metaLines[0]!].join(""))
      const padded = preallocated ? concatBytes(bytes, new Uint8Array(5000)) : bytes
      const want = await reference(context(), padded, Number.MAX_SAFE_INTEGER)
      expect(want.visits.length).toBe(entryLines.length + 1)
      expect(await fast(context(), padded, Number.MAX_SAFE_INTEGER)).toEqual(want)
    }
  })

  it("parses an ASCII line from its Latin-1 text as Segment.parseLine does from its bytes", () => {
    const seed = seedOf("parseText vs parseLine")
    const asciiLines = entryLines.filter((l) => /^[\x00-\x7f]*$/.test(l)).map((l) => l.slice(0, -1))
    fc.assert(
      fc.property(
        fc.constantFrom(...asciiLines),
        fc.array(fc.record({ at: fc.nat(), c: fc.integer({ min: 0, max: 127 }) }), { maxLength: 3 }),
        (line, edits) => {
          let text = line
          for (const { at, c } of edits) {
            const i = at % (text.length + 1)
            text = text.slice(0, i) + String.fromCharCode(c) + text.slice(i + 1)
          }
          const bytes = encoder.encode(text)
          const fromText = Segment.parseText(Buffer.from(bytes).toString("latin1"))
          const fromBytes = Segment.parseLine(bytes)
          expect(fromText._tag).toBe(fromBytes._tag)
          if (fromText._tag === "Entry" && fromBytes._tag === "Entry") {
            expect(Entry.encode(fromText.entry)).toEqual(Entry.encode(fromBytes.entry))
          } else {
            expect(fromText).toEqual(fromBytes)
          }
        }
      ),
      { seed, numRuns: 2000 }
    )
  }, 120_000)
})

describe("wholeSegment.Ahead", () => {
  it("hands out the segments in order and stops the reads still running", async () => {
    const ctx = context()
    const files = Array.from({ length: 9 }, (_, i) => {
      const file = path.join(root, `ahead-${i}.jsonl`)
      fs.writeFileSync(file, `file ${i}\n`, { mode: 0o600 })
      return file
    })
    const got = await Effect.runPromise(Effect.gen(function*() {
      const ahead = new Ahead(ctx, files, 2)
      const out: Array<string> = []
      for (let i = 2; i < 6; i++) {
        const w = yield* ahead.take()
        out.push(new TextDecoder().decode(w.bytes!))
      }
      yield* ahead.stop()
      return out
    }))
    expect(got).toEqual(["file 2\n", "file 3\n", "file 4\n", "file 5\n"])
  })

  it("reports a missing file when its turn comes, as an open would", async () => {
    const ctx = context()
    const exit = await Effect.runPromise(Effect.exit(readWhole(ctx, path.join(root, "absent.jsonl"))))
    expect(Exit.isFailure(exit)).toBe(true)
  })
})
