/**
 * The writer's reused output buffers and checkpoints written in pieces: a `Utf8Sink` holds
 * exactly the UTF-8 bytes of its pieces (lone surrogates included), a reused buffer
 * never shows a previous sink's bytes, and a checkpoint stored from the state
 * (`checkpointState`, written piece by piece) is byte for byte the checkpoint of
 * its document (`checkpoint(Checkpoint.encode(state))`).
 */
import { Checkpoint, Persistence } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as fc from "fast-check"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import * as Segment from "../src/internal/segment.ts"
import { chain, JournalState, requestOf, run, tempDir } from "./helpers.ts"

const SEED = Number(process.env.SEED ?? Math.floor(Math.random() * 2 ** 31))
const encoder = new TextEncoder()
// The bytes of a view, as a plain array (a sink's view is a `Buffer`).
const bytesOf = (view: Uint8Array): Uint8Array => Uint8Array.from(view)

// Pieces of any UTF-16 code units, now and then long enough to make a small sink grow.
const pieces = fc.array(
  fc.oneof(
    { weight: 8, arbitrary: fc.string({ unit: "binary", maxLength: 40 }) },
    { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 40 }).map((s) => s.repeat(100)) }
  ),
  { maxLength: 12 }
)

describe(`Utf8Sink (seed ${SEED})`, () => {
  it(
    "property: holds exactly the UTF-8 bytes of its pieces, and a reused buffer shows none of a previous sink's",
    () => {
      fc.assert(
        fc.property(pieces, pieces, pieces, (a, b, c) => {
          const first = Segment.sink(1)
          for (const p of a) first.add(p)
          // A sink taken while another is in use has its own buffer.
          const second = Segment.sink(1)
          for (const p of b) second.add(p)
          expect(bytesOf(first.view())).toEqual(encoder.encode(a.join("")))
          expect(bytesOf(second.view())).toEqual(encoder.encode(b.join("")))
          first.release()
          second.release()
          const third = Segment.sink()
          for (const p of c) third.add(p)
          expect(third.length).toBe(encoder.encode(c.join("")).length)
          expect(bytesOf(third.view())).toEqual(encoder.encode(c.join("")))
          third.release()
        }),
        { seed: SEED, numRuns: 100 }
      )
    },
    60_000
  )

  it("writes an entry's line as entryLine", () => {
    const c = chain(JournalState.empty("s"), 10)
    const sink = Segment.sink()
    for (const e of c.entries) sink.addEntryLine(e)
    expect(bytesOf(sink.view())).toEqual(encoder.encode(c.entries.map(Segment.entryLine).join("")))
    sink.release()
  })
})

describe("checkpointState", () => {
  it("stores the same bytes as the checkpoint of the state's document", async () => {
    const root = tempDir("kept-text")
    try {
      await run(
        { root },
        Effect.scoped(Effect.gen(function*() {
          const p = yield* Persistence.Persistence
          const h = yield* p.open("s", { mode: "write", caps: { entry_cap: 16 } })
          let state = (yield* h.load).state
          const file = path.join(root, "s", "checkpoint.json")
          for (const count of [1, 5, 40]) {
            const c = chain(state, count)
            yield* h.append(requestOf(state, c.entries))
            state = c.state
            const size = yield* h.checkpointState!(state)
            const fromState = fs.readFileSync(file)
            expect(fromState.length).toBe(size)
            const documentSize = yield* h.checkpoint(Checkpoint.encode(state))
            expect(documentSize).toBe(size)
            expect(fs.readFileSync(file)).toEqual(fromState)
            expect(fromState.toString("utf8")).toBe(JSON.stringify(Checkpoint.encode(state)))
          }
        }))
      )
    } finally {
      fs.rmSync(root, { recursive: true, force: true })
    }
  })
})
