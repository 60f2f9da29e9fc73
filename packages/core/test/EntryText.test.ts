/**
 * Entry and checkpoint texts: `Entry.jsonText` (the fast path) is always the encoding
 * `toJsonText(encode(entry))` of its entry, however often it is asked and whatever
 * the entry holds (-0, lone surrogates, any payload); `Checkpoint.toJsonText` and the
 * pieces of `Checkpoint.writeJsonText` are always exactly the text of
 * `Checkpoint.encode(state)`.
 */
import { assert, describe, it } from "@effect/vitest"
import type * as Schema from "effect/Schema"
import * as fc from "fast-check"
import { Checkpoint, Entry, JournalState } from "../src/index.ts"
import * as A from "./arbitraries.ts"

const SEED = Number(process.env.SEED ?? Math.floor(Math.random() * 2 ** 31))

const fresh = (entry: Entry.Entry): string => Entry.toJsonText(Entry.encode(entry))

// Payloads beyond `A.json`: -0 anywhere, and strings of any UTF-16 code units (lone
// surrogates included).
const oddPayload: fc.Arbitrary<Schema.Json> = fc.letrec<{ value: Schema.Json }>((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.constantFrom<Schema.Json>(-0, 0, 1.5, -2, true, null),
    fc.string({ unit: "binary", maxLength: 6 }),
    fc.array(tie("value"), { maxLength: 3 }),
    fc.dictionary(fc.string({ unit: "binary", maxLength: 3 }), tie("value"), { maxKeys: 3 })
  )
})).value

const oddOp: fc.Arbitrary<A.Op> = fc.oneof(
  A.op,
  fc.record({ op: fc.constant("append" as const), ts: fc.nat(), kind: A.otherKind, payload: oddPayload }),
  // Numbers of a tool entry written as -0 (the hash reads them as 0).
  A.toolParams.map((params): A.Op => ({
    op: "record",
    ts: 0,
    params: { ...params, bytes_read: -0, delegation_depth: -0 }
  }))
)

describe(`entry and checkpoint texts (seed ${SEED})`, () => {
  it("property: Entry.jsonText is the fresh encoding of its entry, on every call", () => {
    fc.assert(
      fc.property(fc.array(oddOp, { maxLength: 20 }), (list) => {
        const { entries } = A.run({ entry_cap: 8, tool_counts_cap: 4 }, list)
        for (const entry of entries) {
          const first = Entry.jsonText(entry)
          assert.strictEqual(first, fresh(entry))
          assert.strictEqual(Entry.jsonText(entry), first)
          assert.deepStrictEqual(JSON.parse(first), JSON.parse(fresh(entry)))
        }
      }),
      { seed: SEED, numRuns: A.runs(200) }
    )
  })

  it("property: the checkpoint's text, whole or in pieces, is the text of Checkpoint.encode", () => {
    fc.assert(
      fc.property(A.caps, fc.array(oddOp, { maxLength: 30 }), fc.boolean(), (caps, list, textFirst) => {
        const { states, entries } = A.run(caps, list)
        // Texts asked for before the checkpoint (as the appends ask) or not at all.
        if (textFirst) { for (const entry of entries) Entry.jsonText(entry) }
        let state = states.at(-1)!
        if (list.length % 2 === 1) {
          state = JournalState.applyMeta(state, {
            title: "t\ud800",
            labels: ["a"],
            created_at: 1,
            updated_at: 2,
            data: { x: -0 }
          })
        }
        const expected = Entry.toJsonText(Checkpoint.encode(state))
        assert.strictEqual(Checkpoint.toJsonText(state), expected)
        const pieces: Array<string> = []
        Checkpoint.writeJsonText(state, (piece) => pieces.push(piece))
        assert.strictEqual(pieces.join(""), expected)
        // Asking again gives the same document.
        assert.strictEqual(Checkpoint.toJsonText(state), expected)
      }),
      { seed: SEED, numRuns: A.runs(200) }
    )
  })

  it("the text of an entry keeps -0 and lone surrogates as toJsonText writes them", () => {
    const state = JournalState.empty("s")
    const other = JournalState.nextOther(state, 1, "message", { a: -0, b: "\udc00x", c: [-0] })
    assert.strictEqual(Entry.jsonText(other), fresh(other))
    assert.isTrue(Entry.jsonText(other).includes("\"a\":-0"))
    const tool = JournalState.nextTool(state, 1, { ...A.call("t"), bytes_written: -0 })
    assert.strictEqual(Entry.jsonText(tool), fresh(tool))
    assert.isTrue(Entry.jsonText(tool).includes("\"bytes_written\":-0"))
  })
})
