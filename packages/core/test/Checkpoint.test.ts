/**
 * The checkpoint codec: state -> JSON text -> state is exact, counters above 2^53 - 1
 * travel as decimal strings, and damaged or inconsistent documents are refused with
 * a reason.
 */
import { assert, describe, it } from "@effect/vitest"
import { bytesToHex } from "@noble/hashes/utils.js"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as fc from "fast-check"
import { Checkpoint, JournalState, Merkle, Sha256 } from "../src/index.ts"
import * as A from "./arbitraries.ts"
import * as Legacy from "./legacy.ts"

const sortedCounts = (s: JournalState.JournalState) =>
  Array.from(s.tool_counts, ([k, v]): [string, bigint] => [k, v]).sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0)

/** Every field of a state as comparable data (rings and maps flattened). */
const flat = (s: JournalState.JournalState) => ({
  session_id: s.session_id,
  entry_cap: s.entry_cap,
  tool_counts_cap: s.tool_counts_cap,
  next_sequence: s.next_sequence,
  hashes: JournalState.retainedHashes(s),
  tool_sequence: JournalState.snapshot(s).tool_sequence,
  evicted_head: s.evicted_head,
  data_flow: s.data_flow,
  tool_counts: sortedCounts(s),
  current_streak_tool: s.current_streak_tool,
  current_streak_len: s.current_streak_len,
  message_count: s.message_count,
  meta: s.meta,
  head: JournalState.head(s)
})

const throughText = (s: JournalState.JournalState): Result.Result<JournalState.JournalState, string> =>
  Checkpoint.decode(JSON.parse(JSON.stringify(Checkpoint.encode(s))))

const meta = fc.option(
  fc.record(
    {
      title: fc.string(),
      labels: fc.array(fc.string(), { maxLength: 3 }),
      created_at: fc.maxSafeNat(),
      updated_at: fc.maxSafeNat(),
      data: A.json
    },
    { requiredKeys: ["updated_at"] }
  ),
  { nil: null }
)

const fold = (s: JournalState.JournalState, o: A.Op) => JournalState.fold(s, A.entryFor(s, o))

describe("Checkpoint: round trip", () => {
  it("property: state -> JSON text -> state is exact, and both continue identically", () => {
    fc.assert(
      fc.property(A.caps, A.ops(30), meta, A.ops(5), (c, list, m, more) => {
        let state = A.run(c, list).states.at(-1)!
        if (m !== null) state = JournalState.applyMeta(state, m)
        const back = Result.getOrThrow(throughText(state))
        assert.deepStrictEqual(flat(back), flat(state))
        assert.deepStrictEqual(Checkpoint.encode(back), Checkpoint.encode(state))
        assert.isTrue(Result.isSuccess(JournalState.verify(back)) && Result.isSuccess(JournalState.verify(state)))
        assert.deepStrictEqual(flat(more.reduce(fold, back)), flat(more.reduce(fold, state)))
      }),
      { numRuns: A.runs(80) }
    )
  })

  it("property: counters anywhere in 0..2^64-1 survive exactly; above 2^53-1 they are decimal strings", () => {
    fc.assert(
      fc.property(fc.array(fc.bigInt({ min: 0n, max: JournalState.U64_MAX }), { minLength: 5, maxLength: 5 }), (ns) => {
        const base = A.run({ entry_cap: 2 }, [A.record("t")]).states.at(-1)!
        const state: JournalState.JournalState = {
          ...base,
          data_flow: {
            ...base.data_flow,
            total_bytes_read: ns[0]!,
            total_bytes_written: ns[1]!,
            total_invocations: ns[2]!
          },
          current_streak_len: ns[3]! === 0n ? 1n : ns[3]!,
          message_count: ns[4]!
        }
        const doc = JSON.parse(JSON.stringify(Checkpoint.encode(state)))
        const expectJson = (n: bigint) => n > 9007199254740991n ? n.toString() : Number(n)
        assert.strictEqual(doc.data_flow.total_bytes_read, expectJson(ns[0]!))
        assert.strictEqual(doc.data_flow.total_bytes_written, expectJson(ns[1]!))
        assert.strictEqual(doc.data_flow.total_invocations, expectJson(ns[2]!))
        assert.strictEqual(doc.message_count, expectJson(ns[4]!))
        assert.deepStrictEqual(flat(Result.getOrThrow(Checkpoint.decode(doc))), flat(state))
      })
    )
  })

  it("2^53 - 1 stays a number, 2^53 and 2^64 - 1 become strings", () => {
    const base = A.run({}, [A.record("t")]).states.at(-1)!
    const state = {
      ...base,
      data_flow: {
        ...base.data_flow,
        total_bytes_read: 9007199254740991n,
        total_bytes_written: 9007199254740992n,
        total_invocations: JournalState.U64_MAX
      }
    }
    const text = JSON.stringify(Checkpoint.encode(state))
    assert.include(text, `"total_bytes_read":9007199254740991`)
    assert.include(text, `"total_bytes_written":"9007199254740992"`)
    assert.include(text, `"total_invocations":"18446744073709551615"`)
    assert.strictEqual(Result.getOrThrow(throughText(state)).data_flow.total_invocations, JournalState.U64_MAX)
  })

  it("an empty state and an entry_cap 0 state round-trip", () => {
    for (
      const s of [
        JournalState.empty("s"),
        JournalState.empty("s", { entry_cap: 0, tool_counts_cap: 0 }),
        A.run({ entry_cap: 0, tool_counts_cap: 0 }, [A.record("a"), A.message(1)]).states.at(-1)!
      ]
    ) {
      assert.deepStrictEqual(flat(Result.getOrThrow(throughText(s))), flat(s))
    }
  })
})

describe("Checkpoint: damaged documents are refused with a reason", () => {
  const damagedRun = A.run({ entry_cap: 3, tool_counts_cap: 2 }, [
    A.record("a"),
    A.record("b"),
    A.message({ x: 1 }),
    A.record("a"),
    A.record("c")
  ])
  const state = JournalState.applyMeta(damagedRun.states.at(-1)!, { updated_at: 5, title: "t" })
  // A version 1 document, as earlier releases wrote it: the cases below check that
  // what they stored is still checked as strictly.
  const doc = JSON.parse(JSON.stringify(Legacy.v1Of(state, damagedRun.entries)))

  it("the undamaged document decodes", () => {
    assert.isTrue(Result.isSuccess(Checkpoint.decode(doc)))
    assert.isNotNull(doc.evicted_head)
  })

  const cases: ReadonlyArray<readonly [string, (d: any) => unknown, RegExp]> = [
    ["not an object", () => "checkpoint", /malformed/],
    ["null", () => null, /malformed/],
    ["unknown version", (d) => ({ ...d, v: 3 }), /malformed/],
    ["version 2 with entries", (d) => ({ ...d, v: 2 }), /malformed/],
    ["missing field", ({ message_count: _, ...d }) => d, /malformed/],
    ["unknown top-level key", (d) => ({ ...d, extra: true }), /malformed/],
    ["unknown key in meta", (d) => ({ ...d, meta: { ...d.meta, owner: "x" } }), /malformed/],
    ["bad evicted_head", (d) => ({ ...d, evicted_head: "XYZ" }), /malformed/],
    [
      "an entry that is not an entry",
      (d) => ({ ...d, entries: [...d.entries.slice(0, -1), { ...d.entries.at(-1), payload: 1 }] }),
      /malformed/
    ],
    [
      "an entry with an upper-case hash, named by index",
      (d) => ({
        ...d,
        entries: d.entries.map((e: any, i: number) => i === 1 ? { ...e, entry_hash: e.entry_hash.toUpperCase() } : e)
      }),
      /entries\[1\]/
    ],
    [
      "an entry with an unknown key, named by index",
      (d) => ({ ...d, entries: d.entries.map((e: any, i: number) => i === 0 ? { ...e, extra: 1 } : e) }),
      /entries\[0\]/
    ],
    ["entries that are not an array", (d) => ({ ...d, entries: {} }), /malformed/],
    ["negative cap", (d) => ({ ...d, entry_cap: -1 }), /malformed/],
    ["counter above 2^64 - 1", (d) => ({ ...d, message_count: "18446744073709551616" }), /2\^64/],
    [
      "counter as an unsafe number",
      (d) => ({ ...d, data_flow: { ...d.data_flow, total_bytes_read: 2 ** 60 } }),
      /malformed/
    ],
    ["counter as a negative string", (d) => ({ ...d, current_streak_len: "-1" }), /malformed/],
    [
      "counter in exponent form",
      (d) => ({ ...d, data_flow: { ...d.data_flow, total_invocations: "1e3" } }),
      /malformed/
    ],
    ["counter as an empty string", (d) => ({ ...d, message_count: "" }), /malformed/],
    ["fractional counter", (d) => ({ ...d, message_count: 1.5 }), /malformed/],
    [
      "delegation depth above 2^32 - 1",
      (d) => ({ ...d, data_flow: { ...d.data_flow, max_delegation_depth: 2 ** 32 } }),
      /malformed/
    ],
    [
      "more entries than entry_cap",
      (d) => ({ ...d, entry_cap: 2, tool_sequence: d.tool_sequence.slice(-2) }),
      /entry_cap/
    ],
    [
      "tool_sequence longer than entry_cap",
      (d) => ({ ...d, tool_sequence: [...d.tool_sequence, "z"] }),
      /tool_sequence/
    ],
    ["more tool_counts than the cap", (d) => ({ ...d, tool_counts: [...d.tool_counts, ["z", 1]] }), /tool_counts/],
    [
      "a tool counted twice",
      (d) => ({ ...d, tool_counts_cap: 3, tool_counts: [...d.tool_counts, [d.tool_counts[0][0], 1]] }),
      /twice/
    ],
    [
      "next_sequence that does not follow the last entry",
      (d) => ({ ...d, next_sequence: d.next_sequence + 1 }),
      /next_sequence/
    ],
    [
      "entries that are not consecutive",
      (d) => ({ ...d, entries: [d.entries[0], d.entries[2]], next_sequence: d.entries[2].sequence + 1 }),
      /consecutive/
    ],
    ["entries missing while evicted_head is null", (d) => ({ ...d, evicted_head: null }), /evicted_head/],
    ["a streak without a tool", (d) => ({ ...d, current_streak_tool: null }), /streak/],
    ["a tool without a streak", (d) => ({ ...d, current_streak_len: 0 }), /streak/]
  ]

  for (const [name, damage, reason] of cases) {
    it(name, () => {
      const r = Checkpoint.decode(damage(structuredClone(doc)))
      assert.isTrue(Result.isFailure(r))
      if (Result.isFailure(r)) {
        assert.isString(r.failure)
        assert.match(r.failure, reason)
      }
    })
  }

  it("a tampered entry of a version 1 document is found: its window does not verify", () => {
    const d = structuredClone(doc)
    d.entries[1] = { ...d.entries[1], bytes_read: d.entries[1].bytes_read + 1 }
    const r = Checkpoint.decode(d)
    assert.isTrue(Result.isFailure(r))
    if (Result.isFailure(r)) assert.match(r.failure, /does not verify.*entry_hash/)
  })
})

describe("Checkpoint: version 2 documents hold the retained hashes, and are checked", () => {
  const run = A.run({ entry_cap: 3, tool_counts_cap: 2 }, [
    A.record("a"),
    A.record("b"),
    A.message({ x: 1 }),
    A.record("a"),
    A.record("c")
  ])
  const state = JournalState.applyMeta(run.states.at(-1)!, { updated_at: 5, title: "t" })
  const doc = JSON.parse(JSON.stringify(Checkpoint.encode(state)))

  it("the document is version 4 with the retained hashes in place of the entries, the tree's compact range and the guard state", () => {
    assert.strictEqual(doc.v, 4)
    assert.deepStrictEqual(Object.keys(doc), [
      "v",
      "session_id",
      "entry_cap",
      "tool_counts_cap",
      "next_sequence",
      "evicted_head",
      "tree",
      "hashes",
      "tool_sequence",
      "data_flow",
      "tool_counts",
      "current_streak_tool",
      "current_streak_len",
      "message_count",
      "meta",
      "guard_state"
    ])
    assert.deepStrictEqual(doc.hashes, run.entries.slice(-3).map((e) => e.entry_hash))
    const tree = Merkle.fromLeaves(run.entries.map((e) => Merkle.entryLeaf(e.entry_hash)))
    assert.deepStrictEqual(doc.tree, tree.nodes.map(bytesToHex))
    assert.strictEqual(Checkpoint.toJsonText(state), JSON.stringify(doc))
    assert.deepStrictEqual(Checkpoint.lastOf(doc), { sequence: 4, entry_hash: run.entries[4]!.entry_hash })
  })

  it("a version 1 document of the same state decodes to the same state, its newest entries in the window", () => {
    const old = Result.getOrThrow(Checkpoint.decode(JSON.parse(JSON.stringify(Legacy.v1Of(state, run.entries)))))
    // Its retained entries do not reach back to sequence 0: the tree is unknown.
    assert.strictEqual(old.tree, null)
    assert.deepStrictEqual(flat(old), flat(JournalState.withoutTree(state)))
    assert.deepStrictEqual(Checkpoint.encode(old), Checkpoint.encode(JournalState.withoutTree(state)))
    assert.deepStrictEqual(JournalState.entries(old), run.entries.slice(-3))
    const none = Result.getOrThrow(Checkpoint.decode(JSON.parse(JSON.stringify(Legacy.v1Of(state, run.entries))), 0))
    assert.deepStrictEqual(JournalState.entries(none), [])
    assert.deepStrictEqual(flat(none), flat(JournalState.withoutTree(state)))
  })

  const cases: ReadonlyArray<readonly [string, (d: any) => unknown, RegExp]> = [
    ["version 1 with hashes", (d) => ({ ...d, v: 1 }), /malformed/],
    ["entries besides the hashes", (d) => ({ ...d, entries: [] }), /malformed/],
    ["hashes that are not an array", (d) => ({ ...d, hashes: {} }), /malformed/],
    [
      "an upper-case hash, named by index",
      (d) => ({ ...d, hashes: d.hashes.map((h: string, i: number) => i === 1 ? h.toUpperCase() : h) }),
      /hashes\[1\]/
    ],
    ["a hash that is not a string", (d) => ({ ...d, hashes: [1, ...d.hashes.slice(1)] }), /hashes\[0\]/],
    [
      "more hashes than entry_cap",
      (d) => ({ ...d, entry_cap: 2, tool_sequence: d.tool_sequence.slice(-2) }),
      /entry_cap/
    ],
    ["more hashes than entries", (d) => ({ ...d, next_sequence: 2 }), /more retained hashes/],
    ["hashes missing while evicted_head is null", (d) => ({ ...d, evicted_head: null }), /evicted_head/],
    ["a counter above 2^64 - 1", (d) => ({ ...d, message_count: "18446744073709551616" }), /2\^64/],
    ["a streak without a tool", (d) => ({ ...d, current_streak_tool: null }), /streak/],
    [
      "a tree of another size",
      (d) => ({ ...d, tree: d.tree.slice(1) }),
      /tree has 1 node hashes, a tree of 5 leaves has 2/
    ],
    ["a tree node that is no hash", (d) => ({ ...d, tree: [d.tree[0], "x"] }), /tree\[1\]/],
    ["a tree that is not an array", (d) => ({ ...d, tree: "x" }), /malformed/],
    ["no tree field in version 3", ({ tree: _, ...d }) => d, /malformed/]
  ]

  for (const [name, damage, reason] of cases) {
    it(name, () => {
      const r = Checkpoint.decode(damage(structuredClone(doc)))
      assert.isTrue(Result.isFailure(r))
      if (Result.isFailure(r)) assert.match(r.failure, reason)
    })
  }
})

describe("Checkpoint: version 4 holds the policy's state", () => {
  const state = "maxInvocations(5, of: [\"Bash(npm test *)\"], per: \"1m\")"
  const run = A.run({ entry_cap: 3 }, [
    A.record("Bash"),
    { op: "append", ts: 1_764_400_000, kind: "guard.state", payload: { [state]: { s: 7, c: [1] } } },
    A.record("Read"),
    A.record("Read"),
    A.record("Read")
  ])
  const last = run.states.at(-1)!

  it("round trips through its text, and v1–v3 documents decode with what they can show", () => {
    assert.deepStrictEqual(last.guard_state, { [state]: { s: 7, c: [1] } })
    const back = Result.getOrThrow(Checkpoint.decode(JSON.parse(Checkpoint.toJsonText(last))))
    assert.deepStrictEqual(back.guard_state, last.guard_state)
    assert.strictEqual(Checkpoint.toJsonText(back), Checkpoint.toJsonText(last))
    // Version 3: guard_state null (no earlier release wrote a guard.state entry).
    const { guard_state: _, ...v3 } = { ...JSON.parse(Checkpoint.toJsonText(last)), v: 3 }
    assert.isNull(Result.getOrThrow(Checkpoint.decode(v3)).guard_state)
    // Version 1: the newest guard.state among its retained entries, when one is retained.
    const early = run.states[2]!
    const v1 = JSON.parse(JSON.stringify(Legacy.v1Of(early, run.entries)))
    assert.deepStrictEqual(Result.getOrThrow(Checkpoint.decode(v1)).guard_state, early.guard_state)
    const evicted = JSON.parse(JSON.stringify(Legacy.v1Of(last, run.entries)))
    assert.isNull(Result.getOrThrow(Checkpoint.decode(evicted)).guard_state)
  })

  it("a guard_state that is no state, or in a version 3 document, is refused", () => {
    const doc = JSON.parse(Checkpoint.toJsonText(last))
    for (const bad of [[1], "x", 3, { big: "x".repeat(70_000) }]) {
      const r = Checkpoint.decode({ ...doc, guard_state: bad })
      assert.isTrue(Result.isFailure(r), JSON.stringify(bad).slice(0, 40))
    }
    assert.isTrue(Result.isFailure(Checkpoint.decode({ ...doc, v: 3 })))
  })
})

describe("Checkpoint: a long session's tree with a bulk SHA-256", () => {
  it("Merkle.fromEntryHashes gives the builder's range for any hashes and any digest that is SHA-256", () => {
    fc.assert(
      fc.property(fc.array(fc.uint8Array({ minLength: 32, maxLength: 32 }), { maxLength: 70 }), (leaves) => {
        const hashes = leaves.map(bytesToHex)
        const builder = Merkle.builder()
        for (const h of hashes) builder.appendEntryHash(h)
        const bulk = Merkle.fromEntryHashes(hashes, Sha256.noble)
        assert.deepStrictEqual(bulk.nodes.map(bytesToHex), builder.range().nodes.map(bytesToHex))
        assert.strictEqual(bulk.size, hashes.length)
      }),
      { seed: Number(process.env["FC_SEED"] ?? Date.now() % 2 ** 31), verbose: true }
    )
    assert.throws(() => Merkle.fromEntryHashes(["A".repeat(64)], Sha256.noble), TypeError)
  })

  it.effect("a load rebuilds the tree with it, to the same state, and a tree that does not match is still refused", () =>
    Effect.gen(function*() {
      const { states } = A.run(
        { entry_cap: 4096, tool_counts_cap: 4096 },
        Array.from({ length: 300 }, (_, i) => A.record(`t${i % 7}`))
      )
      const doc = JSON.parse(Checkpoint.toJsonText(states.at(-1)!)) as { tree: Array<string> }
      const plain = Result.getOrThrow(Checkpoint.decode(doc))
      let bulkCalls = 0
      const counted: Sha256.HexDigest = (bytes) => {
        bulkCalls++
        return Sha256.noble(bytes)
      }
      yield* Effect.sync(() => {
        const loaded = Result.getOrThrow(Checkpoint.decode(doc))
        assert.isAbove(bulkCalls, 600, "the tree was rebuilt with the bulk SHA-256")
        assert.deepStrictEqual(flat(loaded), flat(plain))
        assert.deepStrictEqual(loaded.tree!.nodes.map(bytesToHex), plain.tree!.nodes.map(bytesToHex))
        const forged = { ...doc, tree: doc.tree.map((h, i) => i === 0 ? "0".repeat(64) : h) }
        assert.deepStrictEqual(Checkpoint.decode(forged), Result.fail("tree does not match the retained hashes"))
      }).pipe(Effect.provide(Sha256.layerBulk("counted", () => counted)))
    }))
})
