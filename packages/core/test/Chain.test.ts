/**
 * The hash chain: the byte layout checked against an independent encoder, field
 * boundaries that must hash apart, the exported head, and verification (every single
 * field change of a retained entry is found at its index; every change to anything
 * ever recorded, evicted or not, changes the head).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Result from "effect/Result"
import * as fc from "fast-check"
import { Chain, Entry, IntegrityViolation, JournalState } from "../src/index.ts"
import * as A from "./arbitraries.ts"
import { referenceFold, referenceHash } from "./reference.ts"

const tool = (
  over: Partial<Entry.ValidToolParams>,
  link: Entry.Link = { sequence: 0, prev_hash: Entry.ZERO_HASH, timestamp_secs: 1 }
) =>
  Entry.makeTool(link, {
    tool_name: "t",
    server_id: "s",
    agent_id: "a",
    bytes_read: 0,
    bytes_written: 0,
    delegation_depth: 0,
    allowed: true,
    ...over
  })

describe("Chain: the hash encoding", () => {
  it("property: every entry hash equals an independent encoding of docs/DESIGN.md §2", () => {
    fc.assert(
      fc.property(A.caps, A.ops(25), (c, list) => {
        for (const e of A.run(c, list).entries) {
          assert.strictEqual(e.entry_hash, referenceHash(e))
          assert.strictEqual(Entry.computeHash(e), e.entry_hash)
          assert.match(e.entry_hash, /^[0-9a-f]{64}$/)
        }
      }),
      { numRuns: A.runs(60) }
    )
  })

  it("property: fold(p, h) is SHA-256(lp(p) ‖ lp(h)) and the head follows it", () => {
    fc.assert(
      fc.property(fc.constantFrom(1, 2, 3), A.ops(20), (cap, list) => {
        const { entries, states } = A.run({ entry_cap: cap, tool_counts_cap: 4 }, list)
        let evicted: string | null = null
        entries.forEach((_, i) => {
          if (i >= cap) evicted = referenceFold(evicted ?? "", entries[i - cap]!.entry_hash)
          const s = states[i + 1]!
          assert.strictEqual(s.evicted_head, evicted)
          const last = JournalState.lastHash(s)
          assert.strictEqual(JournalState.head(s), evicted === null ? last : referenceFold(evicted, last))
        })
      }),
      { numRuns: A.runs(60) }
    )
  })

  it("ZERO_HASH is 64 ASCII zeros", () => {
    assert.strictEqual(Entry.ZERO_HASH, "0".repeat(64))
  })

  it("exportedHead: the last hash (or ZERO_HASH) before an eviction, fold(evicted_head, last or ZERO_HASH) after", () => {
    const h = "ab".repeat(32)
    const p = "cd".repeat(32)
    assert.strictEqual(Chain.exportedHead(null, undefined), Entry.ZERO_HASH)
    assert.strictEqual(Chain.exportedHead(null, h), h)
    assert.strictEqual(Chain.exportedHead(p, h), referenceFold(p, h))
    assert.strictEqual(Chain.exportedHead(p, undefined), referenceFold(p, Entry.ZERO_HASH))
    assert.strictEqual(Chain.foldHash("", h), referenceFold("", h))
    assert.notStrictEqual(Chain.foldHash("", h), Chain.foldHash(h, ""))
  })

  it("(\"ab\",\"c\") and (\"a\",\"bc\") hash apart, at every boundary between strings", () => {
    assert.notStrictEqual(
      tool({ tool_name: "ab", server_id: "c" }).entry_hash,
      tool({ tool_name: "a", server_id: "bc" }).entry_hash
    )
    assert.notStrictEqual(
      tool({ server_id: "ab", agent_id: "c" }).entry_hash,
      tool({ server_id: "a", agent_id: "bc" }).entry_hash
    )
    assert.notStrictEqual(
      tool({ tool_name: "ab", server_id: "c", agent_id: "d" }).entry_hash,
      tool({ tool_name: "a", server_id: "b", agent_id: "cd" }).entry_hash
    )
    assert.notStrictEqual(Chain.foldHash("ab", "c"), Chain.foldHash("a", "bc"))
  })

  it("every field of a tool entry is in its hash", () => {
    const base = tool({})
    const variants = [
      tool({ tool_name: "u" }),
      tool({ server_id: "z" }),
      tool({ agent_id: "b" }),
      tool({ bytes_read: 1 }),
      tool({ bytes_written: 1 }),
      tool({ delegation_depth: 1 }),
      tool({ allowed: false }),
      tool({}, { sequence: 1, prev_hash: Entry.ZERO_HASH, timestamp_secs: 1 }),
      tool({}, { sequence: 0, prev_hash: "1".repeat(64), timestamp_secs: 1 }),
      tool({}, { sequence: 0, prev_hash: Entry.ZERO_HASH, timestamp_secs: 2 })
    ]
    const hashes = new Set([base.entry_hash, ...variants.map((v) => v.entry_hash)])
    assert.strictEqual(hashes.size, variants.length + 1)
  })

  it("bytes and depth are encoded exactly up to their maxima (u64 for bytes, u32 for depth)", () => {
    const top = tool({ bytes_read: Entry.MAX_U53, bytes_written: Entry.MAX_U53 - 1, delegation_depth: Entry.MAX_U32 })
    assert.strictEqual(top.entry_hash, referenceHash(top))
    assert.notStrictEqual(
      top.entry_hash,
      tool({ bytes_read: Entry.MAX_U53 - 1, bytes_written: Entry.MAX_U53 - 1, delegation_depth: Entry.MAX_U32 })
        .entry_hash
    )
  })

  it("non-tool entries hash their kind and the canonical payload; the marker keeps kinds apart", () => {
    const link = { sequence: 0, prev_hash: Entry.ZERO_HASH, timestamp_secs: 1 }
    const a = Entry.makeOther(link, "message", { b: 1, a: [1, 2] })
    const b = Entry.makeOther(link, "message", JSON.parse(`{"a":[1,2],"b":1}`))
    assert.strictEqual(a.entry_hash, b.entry_hash)
    assert.strictEqual(a.entry_hash, referenceHash(a))
    assert.notStrictEqual(Entry.makeOther(link, "note", { b: 1, a: [1, 2] }).entry_hash, a.entry_hash)
    assert.notStrictEqual(Entry.makeOther(link, "message", { b: 2, a: [1, 2] }).entry_hash, a.entry_hash)
    // "ab" + "c" vs "a" + "bc" across the kind/payload boundary.
    assert.notStrictEqual(Entry.makeOther(link, "ab", "c").entry_hash, Entry.makeOther(link, "a", "bc").entry_hash)
    // A tool entry whose strings spell out a message's bytes still hashes apart.
    assert.notStrictEqual(
      tool({ tool_name: "message", server_id: "null", agent_id: "x" }).entry_hash,
      Entry.makeOther(link, "message", null).entry_hash
    )
  })
})

type Field = string

const replacement = fc.record({
  u53: fc.oneof(fc.nat(1000), fc.maxSafeNat()),
  u32: fc.nat(Entry.MAX_U32),
  hex: fc.stringMatching(/^[0-9a-f]{64}$/),
  str: A.identity,
  kind: A.otherKind,
  json: A.json
})

const toolFields: ReadonlyArray<Field> = [
  "sequence",
  "prev_hash",
  "entry_hash",
  "timestamp_secs",
  "tool_name",
  "server_id",
  "agent_id",
  "bytes_read",
  "bytes_written",
  "delegation_depth",
  "allowed"
]
const otherFields: ReadonlyArray<Field> = ["sequence", "prev_hash", "entry_hash", "timestamp_secs", "kind", "payload"]

/** The entry with one field changed, or undefined when the pick would not change it. */
const mutate = (
  e: Entry.Entry,
  field: Field,
  r: typeof replacement extends fc.Arbitrary<infer T> ? T : never
): Entry.Entry | undefined => {
  const value: unknown = (() => {
    switch (field) {
      case "sequence":
      case "timestamp_secs":
      case "bytes_read":
      case "bytes_written":
        return r.u53
      case "delegation_depth":
        return r.u32
      case "prev_hash":
      case "entry_hash":
        return r.hex
      case "tool_name":
      case "server_id":
      case "agent_id":
        return r.str
      case "kind":
        return r.kind
      case "payload":
        return r.json
      case "allowed":
        return !(e as Entry.ToolEntry).allowed
    }
    return undefined
  })()
  const before = (e as unknown as Record<string, unknown>)[field]
  const same = field === "payload"
    ? Entry.canonicalPayload(value as never) === Entry.canonicalPayload(before as never)
    : value === before
  return same ? undefined : ({ ...e, [field]: value } as Entry.Entry)
}

describe("Chain.verify", () => {
  it("property: changing any single field of any retained entry is detected at that entry's index", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 6 }),
        fc.array(A.op, { minLength: 1, maxLength: 20 }),
        fc.nat(),
        fc.nat(),
        replacement,
        (cap, list, pickEntry, pickField, r) => {
          const state = A.run({ entry_cap: cap, tool_counts_cap: 4 }, list).states.at(-1)!
          const window = JournalState.entries(state)
          const i = pickEntry % window.length
          const e = window[i]!
          const fields = Entry.isTool(e) ? toolFields : otherFields
          const field = fields[pickField % fields.length]!
          const changed = mutate(e, field, r)
          fc.pre(changed !== undefined)
          const tampered = window.map((x, j) => j === i ? changed! : x)
          const prefixEvicted = state.evicted_head !== null
          const result = Chain.verify(tampered, { prefixEvicted })
          assert.isTrue(Result.isFailure(result), `${field} at ${i}`)
          const v = Result.isFailure(result) ? result.failure : undefined
          assert.instanceOf(v, IntegrityViolation)
          assert.strictEqual(v!.index, i)
          assert.strictEqual(v!.sequence, changed!.sequence)
          if (field === "prev_hash" && !(i === 0 && prefixEvicted)) {
            assert.strictEqual(v!.what, "prev_hash")
            assert.strictEqual(v!.expected, i === 0 ? Entry.ZERO_HASH : window[i - 1]!.entry_hash)
            assert.strictEqual(v!.actual, changed!.prev_hash)
          } else {
            assert.strictEqual(v!.what, "entry_hash")
            assert.strictEqual(v!.expected, Entry.computeHash(changed!))
            assert.strictEqual(v!.actual, changed!.entry_hash)
          }
          // The untouched window still verifies.
          assert.deepStrictEqual(Chain.verify(window, { prefixEvicted }), Result.succeed(window.length))
        }
      ),
      { numRuns: A.runs(300) }
    )
  })

  it("property: changing anything ever recorded, evicted or not, changes the head", () => {
    fc.assert(
      fc.property(
        A.caps,
        fc.array(A.op, { minLength: 1, maxLength: 25 }),
        fc.nat(),
        A.op,
        (c, list, pick, other) => {
          const j = pick % list.length
          const changed = [...list.slice(0, j), other, ...list.slice(j + 1)]
          const a = A.run(c, list)
          const b = A.run(c, changed)
          fc.pre(JSON.stringify(Entry.encode(a.entries[j]!)) !== JSON.stringify(Entry.encode(b.entries[j]!)))
          for (let k = j + 1; k <= list.length; k++) {
            assert.notStrictEqual(JournalState.head(b.states[k]!), JournalState.head(a.states[k]!), `after op ${k}`)
          }
          for (let k = 0; k <= j; k++) {
            assert.strictEqual(JournalState.head(b.states[k]!), JournalState.head(a.states[k]!))
          }
        }
      ),
      { numRuns: A.runs(200) }
    )
  })

  it("property: a one-second change of an evicted entry's timestamp changes the head", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 5, max: 15 }), fc.nat(), (cap, n, pick) => {
        const list = Array.from({ length: n }, (_, i) => A.record(i % 2 === 0 ? "a" : "b", {}, 1000 + i))
        const j = pick % (n - cap)
        const o = list[j] as Extract<A.Op, { op: "record" }>
        const changed = list.map((x, k) => k === j ? { ...o, ts: o.ts + 1 } : x)
        const a = A.run({ entry_cap: cap }, list).states.at(-1)!
        const b = A.run({ entry_cap: cap }, changed).states.at(-1)!
        // The changed entry is gone from the window, yet the head still commits to it.
        assert.isFalse(JournalState.entries(a).some((e) => e.sequence === j))
        assert.notStrictEqual(JournalState.head(a), JournalState.head(b))
      })
    )
  })

  it("an empty window verifies; entry 0 links to ZERO_HASH unless a prefix was evicted", () => {
    assert.deepStrictEqual(Chain.verify([], { prefixEvicted: false }), Result.succeed(0))
    const s = A.run({ entry_cap: 2 }, [A.record("a"), A.record("b"), A.record("c")]).states.at(-1)!
    const window = JournalState.entries(s)
    assert.notStrictEqual(window[0]!.prev_hash, Entry.ZERO_HASH)
    assert.deepStrictEqual(Chain.verify(window, { prefixEvicted: true }), Result.succeed(2))
    const r = Chain.verify(window, { prefixEvicted: false })
    assert.isTrue(Result.isFailure(r))
    if (Result.isFailure(r)) {
      assert.strictEqual(r.failure.index, 0)
      assert.strictEqual(r.failure.sequence, 1)
      assert.strictEqual(r.failure.what, "prev_hash")
      assert.strictEqual(r.failure.expected, Entry.ZERO_HASH)
    }
  })

  it("previousHash and indexOffset let a long window be checked in pieces", () => {
    const all = A.run({}, [A.record("a"), A.record("b"), A.message("m"), A.record("c")]).entries
    assert.deepStrictEqual(Chain.verify(all.slice(0, 2), { prefixEvicted: false }), Result.succeed(2))
    assert.deepStrictEqual(
      Chain.verify(all.slice(2), { prefixEvicted: false, previousHash: all[1]!.entry_hash, indexOffset: 2 }),
      Result.succeed(2)
    )
    const bad = Chain.verify(all.slice(2), { prefixEvicted: false, previousHash: all[0]!.entry_hash, indexOffset: 2 })
    assert.isTrue(Result.isFailure(bad) && bad.failure.index === 2 && bad.failure.sequence === 2)
  })

  it("the link is checked before the hash", () => {
    const all = A.run({}, [A.record("a"), A.record("b")]).entries
    const broken = { ...all[1]!, prev_hash: "f".repeat(64), entry_hash: "e".repeat(64) }
    const r = Chain.verify([all[0]!, broken], { prefixEvicted: false })
    assert.isTrue(Result.isFailure(r))
    if (Result.isFailure(r)) {
      assert.strictEqual(r.failure.what, "prev_hash")
      assert.strictEqual(r.failure.index, 1)
      assert.strictEqual(r.failure.expected, all[0]!.entry_hash)
      assert.strictEqual(r.failure.actual, "f".repeat(64))
      assert.match(r.failure.message, /index 1 \(sequence 1\)/)
    }
  })

  it("swapping two entries or dropping one from the middle is detected", () => {
    const all = A.run({}, [A.record("a"), A.record("b"), A.record("c"), A.record("d")]).entries
    const swapped = [all[0]!, all[2]!, all[1]!, all[3]!]
    const dropped = [all[0]!, all[2]!, all[3]!]
    for (const w of [swapped, dropped]) {
      const r = Chain.verify(w, { prefixEvicted: false })
      assert.isTrue(Result.isFailure(r) && r.failure.index === 1 && r.failure.what === "prev_hash")
    }
  })
})
