import { assert, describe, it } from "@effect/vitest"
import * as Result from "effect/Result"
import { readFileSync } from "node:fs"
import { Checkpoint, Entry, JournalState } from "../src/index.ts"

interface VectorCase {
  readonly name: string
  readonly entry_cap: number
  readonly tool_counts_cap: number
  readonly session_id: string
  readonly ops: ReadonlyArray<
    {
      readonly op: string
      readonly ts: number
      readonly params?: Entry.ToolParams
      readonly kind?: string
      readonly payload?: unknown
    }
  >
  readonly entries: ReadonlyArray<unknown>
  readonly head_after_each: ReadonlyArray<string>
  readonly final_snapshot: unknown
  readonly evicted_head: string | null
}

const vectors: { readonly cases: ReadonlyArray<VectorCase> } = JSON.parse(
  readFileSync(new URL("./fixtures/chain-vectors.json", import.meta.url), "utf8")
)

const run = (c: VectorCase) => {
  let state = JournalState.empty(c.session_id, { entry_cap: c.entry_cap, tool_counts_cap: c.tool_counts_cap })
  const produced: Array<Entry.Entry> = []
  const heads: Array<string> = []
  for (const op of c.ops) {
    const entry = op.op === "record"
      ? JournalState.nextTool(state, op.ts, Result.getOrThrow(Entry.validateToolParams(op.params!)))
      : JournalState.nextOther(
        state,
        op.ts,
        op.kind ?? "message",
        Result.getOrThrow(Entry.validatePayload(op.kind ?? "message", op.payload))
      )
    produced.push(entry)
    state = JournalState.fold(state, entry)
    heads.push(JournalState.head(state))
  }
  return { state, produced, heads }
}

describe("known-answer vectors", () => {
  it("the fixture is the shared vector file", () => {
    assert.isAbove(vectors.cases.length, 0)
  })
  for (const c of vectors.cases) {
    describe(c.name, () => {
      it("reproduces every entry exactly", () => {
        const { produced } = run(c)
        assert.deepStrictEqual(produced.map((e) => Entry.encode(e)), c.entries)
      })
      it("reproduces the head after each op", () => {
        assert.deepStrictEqual(run(c).heads, c.head_after_each)
      })
      it("reproduces the final snapshot and evicted head", () => {
        const { state } = run(c)
        assert.deepStrictEqual(JournalState.snapshotToJson(JournalState.snapshot(state)), c.final_snapshot)
        assert.strictEqual(state.evicted_head, c.evicted_head)
        assert.isTrue(Result.isSuccess(JournalState.verify(state)))
      })
      it("decodes the vector entries and re-encodes them unchanged", () => {
        for (const json of c.entries) {
          const decoded = Entry.decode(json)
          assert.isTrue(Result.isSuccess(decoded))
          if (Result.isSuccess(decoded)) {
            assert.deepStrictEqual(Entry.encode(decoded.success), json)
            assert.strictEqual(Entry.computeHash(decoded.success), decoded.success.entry_hash)
          }
        }
      })
      it("survives a checkpoint round trip", () => {
        const { state } = run(c)
        const json = JSON.parse(JSON.stringify(Checkpoint.encode(state)))
        const back = Result.getOrThrow(Checkpoint.decode(json))
        assert.deepStrictEqual(Checkpoint.encode(back), Checkpoint.encode(state))
        assert.strictEqual(JournalState.head(back), JournalState.head(state))
      })
    })
  }
})
