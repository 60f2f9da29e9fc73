/**
 * The one recovery of a stored session, attacked: clean histories recover to the
 * plain fold in both modes, and every way of damaging or forging the records or the
 * checkpoint is either reported where it starts or provably harmless.
 */
import { assert, describe, it } from "@effect/vitest"
import type * as Schema from "effect/Schema"
import * as fc from "fast-check"
import { Checkpoint, Entry, JournalState, Recovery } from "../src/index.ts"
import * as A from "./arbitraries.ts"
import * as Legacy from "./legacy.ts"

const ID = "rec-session"
const LOC = "store"

type Input = Recovery.Input
type Mode = "load" | "verify"

/** A history: ops folded from empty with `caps`; `states[i]` is the state after i entries. */
const history = (caps: JournalState.Caps, ops: ReadonlyArray<A.Op>, id = ID) => A.run(caps, ops, id)

/** `n` simple operations: tools with a streak, a message now and then, growing byte counts. */
const simpleOps = (n: number, salt = 0): Array<A.Op> =>
  Array.from({ length: n }, (_, i) =>
    i % 5 === 4
      ? A.message({ i, salt })
      : A.record(i % 3 === 0 ? "read_file" : "search", {
        bytes_read: 10 * i + salt,
        bytes_written: i,
        delegation_depth: i % 4
      }))

const segName = (base: number) => `${String(base).padStart(20, "0")}.jsonl`

/**
 * The inputs of `entries` stored in segments that start at the given sequences
 * (the first at the first entry's sequence). Offsets are fake byte offsets: the
 * open line is 20 bytes, each record 100.
 */
const segments = (entries: ReadonlyArray<Entry.Entry>, starts: ReadonlyArray<number> = []): Array<Input> => {
  const out: Array<Input> = []
  const first = entries[0]?.sequence ?? 0
  const bases = new Set([first, ...starts])
  let segment = segName(first)
  let offset = 0
  for (const entry of entries) {
    if (bases.has(entry.sequence) || out.length === 0) {
      segment = segName(entry.sequence)
      out.push({ _tag: "Segment", segment, base: entry.sequence })
      offset = 20
    }
    out.push({ _tag: "Entry", entry, segment, offset })
    offset += 100
  }
  if (out.length === 0) out.push({ _tag: "Segment", segment, base: first })
  return out
}

const doc = (state: JournalState.JournalState): Recovery.CheckpointInput => ({
  _tag: "Document",
  // Through JSON, as storage holds it.
  document: JSON.parse(JSON.stringify(Checkpoint.encode(state))),
  location: "checkpoint.json"
})

const forged = (state: JournalState.JournalState, f: (d: Record<string, any>) => void): Recovery.CheckpointInput => {
  const d = JSON.parse(JSON.stringify(Checkpoint.encode(state)))
  f(d)
  return { _tag: "Document", document: d, location: "checkpoint.json" }
}

// A version 1 document (the retained entries in full), as earlier releases wrote it.
const forgedV1 = (
  state: JournalState.JournalState,
  history: ReadonlyArray<Entry.Entry>,
  f: (d: Record<string, any>) => void
): Recovery.CheckpointInput => {
  const d = JSON.parse(JSON.stringify(Legacy.v1Of(state, history)))
  f(d)
  return { _tag: "Document", document: d, location: "checkpoint.json" }
}

const recover = (
  mode: Mode,
  checkpoint: Recovery.CheckpointInput,
  inputs: Iterable<Input>,
  extra: Partial<Recovery.Options> = {}
) => Recovery.run({ id: ID, mode, checkpoint, location: LOC, ...extra }, inputs)

/** Every field `firstDifference` compares, plus the head: equal states give null. */
const sameState = (a: JournalState.JournalState, b: JournalState.JournalState): string | null => {
  const d = Recovery.firstDifference(a, b)
  if (d !== null) return `${d.field}: ${d.claimed} vs ${d.actual}`
  if (JournalState.head(a) !== JournalState.head(b)) return "head"
  return null
}

const assertState = (actual: JournalState.JournalState, expected: JournalState.JournalState) => {
  assert.strictEqual(sameState(expected, actual), null)
  assert.strictEqual(actual.next_sequence, expected.next_sequence)
  assert.strictEqual(JournalState.head(actual), JournalState.head(expected))
}

const assertClean = (outcome: Recovery.Outcome, expected: JournalState.JournalState) => {
  assert.isNull(outcome.report.stopped, JSON.stringify(outcome.report.stopped))
  assert.isNull(outcome.report.tornTail)
  assertState(outcome.state, expected)
}

const modes: ReadonlyArray<Mode> = ["load", "verify"]
const capsCases: ReadonlyArray<JournalState.Caps> = [
  { entry_cap: 0 },
  { entry_cap: 1, tool_counts_cap: 1 },
  { entry_cap: 3, tool_counts_cap: 0 },
  {}
]

describe("clean histories", () => {
  for (const caps of capsCases) {
    for (const mode of modes) {
      it(`${mode}, caps ${JSON.stringify(caps)}: with no checkpoint, a checkpoint at every position, in one or several segments, equals the fold`, () => {
        const h = history(caps, simpleOps(12))
        const final = h.states[12]!
        for (const starts of [[], [4, 9], [1, 2, 3, 11]]) {
          const inputs = segments(h.entries, starts)
          const none = recover(mode, null, inputs, { caps })
          assertClean(none, final)
          assert.strictEqual(none.report.checkpoint, "none")
          assert.strictEqual(none.report.replayed, 12)
          assert.strictEqual(none.storedNext, 12)
          for (let c = 0; c <= 12; c++) {
            const out = recover(mode, doc(h.states[c]!), inputs)
            assertClean(out, final)
            assert.isNull(out.brokenCheckpoint)
            assert.strictEqual(out.report.replayed, mode === "verify" ? 12 : 12 - c)
            if (mode === "verify" && c > 0) assert.strictEqual(out.report.checkpoint, "verified")
            if (mode === "load") assert.strictEqual(out.report.checkpoint, "loaded")
          }
        }
      })
    }
  }

  it("an empty session with an empty checkpoint is clean in both modes", () => {
    const empty = JournalState.empty(ID)
    for (const mode of modes) {
      const out = recover(mode, doc(empty), segments([]))
      assertClean(out, empty)
      assert.isTrue(out.exists)
      assert.isFalse(recover(mode, null, []).exists)
    }
  })

  it("load mode from the segment that holds next_sequence − 1 on (the adapter skips older segments)", () => {
    const h = history({ entry_cap: 2 }, simpleOps(15))
    const out = recover("load", doc(h.states[10]!), segments(h.entries.slice(8), [12]))
    assertClean(out, h.states[15]!)
    assert.strictEqual(out.report.replayed, 5)
  })

  it("verify mode with retention (first segment base > 0) takes the checkpoint for the removed history", () => {
    const h = history({ entry_cap: 3 }, simpleOps(15))
    const inputs = segments(h.entries.slice(8), [12])
    const out = recover("verify", doc(h.states[10]!), inputs, { retention: true })
    assertClean(out, h.states[15]!)
    // Without retention the same storage lacks entries 0..7.
    const cut = recover("verify", doc(h.states[10]!), inputs)
    assert.strictEqual(cut.report.stopped?.reason, "missing")
    assert.deepStrictEqual(cut.report.stopped?.missing, { from: 0, to: 7 })
  })
})

describe("cut tails and missing entries", () => {
  for (const mode of modes) {
    it(`${mode}: a history cut at a record boundary under a checkpoint is missing exactly the cut range`, () => {
      const h = history({ entry_cap: 4 }, simpleOps(12))
      for (let kept = 0; kept < 10; kept++) {
        const out = recover(mode, doc(h.states[10]!), segments(h.entries.slice(0, kept), [5]))
        const s = out.report.stopped
        assert.strictEqual(s?.reason, "missing", `kept ${kept}`)
        assert.deepStrictEqual(s?.missing, { from: kept, to: 9 })
        assert.strictEqual(s?.sequence, kept)
      }
      // No segment at all.
      const none = recover(mode, doc(h.states[10]!), [])
      assert.strictEqual(none.report.stopped?.reason, "missing")
      assert.deepStrictEqual(none.report.stopped?.missing, { from: 0, to: 9 })
    })
  }

  it("storedCount larger than the stored records is missing the difference", () => {
    const h = history({}, simpleOps(6))
    for (const mode of modes) {
      const out = recover(mode, null, Recovery.rows(LOC, 0, h.entries), { storedCount: 9 })
      assert.strictEqual(out.report.stopped?.reason, "missing")
      assert.deepStrictEqual(out.report.stopped?.missing, { from: 6, to: 8 })
      assertState(out.state, h.states[6]!)
      assertClean(recover(mode, null, Recovery.rows(LOC, 0, h.entries), { storedCount: 6 }), h.states[6]!)
    }
  })

  it("no checkpoint and a first segment past 0 is missing the head of the history", () => {
    const h = history({}, simpleOps(6))
    for (const mode of modes) {
      const out = recover(mode, null, segments(h.entries.slice(2)))
      assert.strictEqual(out.report.stopped?.reason, "missing")
      assert.deepStrictEqual(out.report.stopped?.missing, { from: 0, to: 1 })
    }
  })
})

const fields: ReadonlyArray<readonly [string, (d: Record<string, any>) => void]> = [
  ["data_flow.total_bytes_read", (d) => {
    d.data_flow.total_bytes_read = 0
  }],
  ["data_flow.total_bytes_written", (d) => {
    d.data_flow.total_bytes_written = 123456
  }],
  ["data_flow.total_invocations", (d) => {
    d.data_flow.total_invocations = 1
  }],
  ["data_flow.max_delegation_depth", (d) => {
    d.data_flow.max_delegation_depth = 77
  }],
  ["tool_counts", (d) => {
    d.tool_counts = d.tool_counts.map(([k, v]: [string, number]) => [k, v + 1])
  }],
  ["current_streak_len", (d) => {
    d.current_streak_len = 41
  }],
  ["message_count", (d) => {
    d.message_count = 0
  }],
  ["evicted_head", (d) => {
    d.evicted_head = "ab".repeat(32)
  }],
  ["tool_sequence", (d) => {
    d.tool_sequence = d.tool_sequence.map(() => "forged")
  }],
  ["current_streak_tool", (d) => {
    d.current_streak_tool = "forged"
  }]
]

describe("forged checkpoints", () => {
  for (const [field, forge] of fields) {
    it(`a forged ${field}: load may accept it, verify stops with reason checkpoint naming ${field}`, () => {
      const h = history({ entry_cap: 3 }, simpleOps(10))
      const cp = forged(h.states[8]!, forge)
      const out = recover("verify", cp, segments(h.entries, [4]))
      assert.isNull(out.brokenCheckpoint)
      assert.strictEqual(out.report.stopped?.reason, "checkpoint")
      assert.strictEqual(out.report.stopped?.sequence, 8)
      assert.include(out.report.stopped?.detail, `checkpoint's ${field} is`)
      // The state is the replay up to the checkpoint, never the forged claim.
      assertState(out.state, h.states[8]!)
      // Load mode may take the claim: only verify replays what the counters sum up.
      assert.isNull(recover("load", cp, segments(h.entries, [4])).brokenCheckpoint)
    })
  }

  it("a forged counter of the checkpoint of the empty state is caught by verify", () => {
    const h = history({}, simpleOps(4))
    const forges: ReadonlyArray<readonly [string, (d: Record<string, any>) => void]> = [
      ["data_flow.total_bytes_read", (d) => {
        d.data_flow.total_bytes_read = 5
      }],
      ["data_flow.total_invocations", (d) => {
        d.data_flow.total_invocations = 2
      }],
      ["data_flow.max_delegation_depth", (d) => {
        d.data_flow.max_delegation_depth = 4
      }],
      ["message_count", (d) => {
        d.message_count = 3
      }]
    ]
    for (const [field, forge] of forges) {
      const out = recover("verify", forged(h.states[0]!, forge), segments(h.entries))
      assert.isNull(out.brokenCheckpoint)
      assert.strictEqual(out.report.stopped?.reason, "checkpoint", field)
      assert.include(out.report.stopped?.detail, `checkpoint's ${field} is`)
    }
  })

  it("a checkpoint of another session is never used", () => {
    const h = history({}, simpleOps(6))
    const other = history({}, simpleOps(6), "other-session")
    for (const mode of modes) {
      const out = recover(mode, doc(other.states[6]!), segments(h.entries))
      assert.include(out.brokenCheckpoint, "other-session")
      assert.isNull(out.checkpoint)
      assert.strictEqual(out.report.checkpoint, "rebuilt")
      // A load rebuilds around it; a verify reports it.
      if (mode === "verify") {
        assert.strictEqual(out.report.stopped?.reason, "checkpoint")
        continue
      }
      // Rebuilt from the records, which reach back to 0.
      assertClean(out, h.states[6]!)
    }
  })

  it("a checkpoint that does not decode, or whose window does not verify, is broken and rebuilt", () => {
    const h = history({ entry_cap: 4 }, simpleOps(8))
    const bad: ReadonlyArray<Recovery.CheckpointInput> = [
      { _tag: "Unreadable", reason: "unexpected end of JSON", location: "checkpoint.json" },
      { _tag: "Document", document: { v: 1 }, location: "checkpoint.json" },
      forged(h.states[8]!, (d) => {
        d.v = 5
      }),
      forged(h.states[8]!, (d) => {
        d.extra = 1
      }),
      forgedV1(h.states[8]!, h.entries, (d) => {
        d.entries[1].bytes_read += 1
      }),
      forgedV1(h.states[8]!, h.entries, (d) => {
        d.entries[2].prev_hash = "cd".repeat(32)
      }),
      forged(h.states[8]!, (d) => {
        d.hashes = [...d.hashes, d.hashes[0]]
      }),
      forged(h.states[8]!, (d) => {
        d.hashes[1] = "XY".repeat(32)
      }),
      forgedV1(h.states[8]!, h.entries, (d) => {
        d.next_sequence = 9
      }),
      forged(h.states[8]!, (d) => {
        d.current_streak_len = 0
      })
    ]
    for (const cp of bad) {
      for (const mode of modes) {
        const out = recover(mode, cp, segments(h.entries), { caps: { entry_cap: 4 } })
        assert.isNotNull(out.brokenCheckpoint, JSON.stringify(cp))
        assert.strictEqual(out.report.checkpoint, "rebuilt")
        if (mode === "verify") {
          assert.strictEqual(out.report.stopped?.reason, "checkpoint")
          continue
        }
        assertClean(out, h.states[8]!)
      }
    }
  })

  it("a version 2 checkpoint whose retained hashes the records contradict is refused in both modes", () => {
    const h = history({ entry_cap: 4 }, simpleOps(8))
    for (const at of [0, 2, 3]) {
      const cp = forged(h.states[8]!, (d) => {
        d.hashes[at] = "cd".repeat(32)
      })
      for (const mode of modes) {
        const out = recover(mode, cp, segments(h.entries))
        assert.isNull(out.brokenCheckpoint)
        assert.strictEqual(out.report.stopped?.reason, "checkpoint", `${mode} ${at}`)
      }
    }
    // A next_sequence the hashes do not end at is what storage must bear out: the
    // entry at next_sequence - 1 with the last hash is not stored.
    const ahead = forged(h.states[8]!, (d) => {
      d.next_sequence = 9
      d.tree = null
    })
    for (const mode of modes) {
      const out = recover(mode, ahead, segments(h.entries))
      assert.isNull(out.brokenCheckpoint)
      assert.strictEqual(out.report.stopped?.reason, mode === "load" ? "checkpoint" : "missing")
    }
  })

  it("a version 1 checkpoint (as earlier releases wrote it) loads and verifies like the version 2 one", () => {
    for (const caps of [{ entry_cap: 0 }, { entry_cap: 3 }, {}]) {
      const h = history(caps, simpleOps(10))
      for (const at of [0, 4, 10]) {
        const v1 = forgedV1(h.states[at]!, h.entries, () => {})
        for (const mode of modes) {
          const old = recover(mode, v1, segments(h.entries, [5]))
          const now = recover(mode, doc(h.states[at]!), segments(h.entries, [5]))
          assert.isNull(old.brokenCheckpoint)
          assert.deepStrictEqual(old.report, now.report)
          // Loaded from a version 1 document whose entries do not reach back to
          // sequence 0, the state does not know its tree; verify replays it all.
          const known = mode === "verify" || h.states[at]!.evicted_head === null
          assertClean(old, known ? h.states[10]! : JournalState.withoutTree(h.states[10]!))
        }
      }
    }
  })

  it("a checkpoint's tree is checked: against its retained hashes when they reach back to 0, by verify always", () => {
    const edit = (d: Record<string, any>) => {
      d.tree[0] = "ab".repeat(32)
    }
    // Retained hashes from sequence 0: the document does not decode.
    const whole = history({}, simpleOps(6))
    for (const mode of modes) {
      const out = recover(mode, forged(whole.states[6]!, edit), segments(whole.entries))
      assert.include(out.brokenCheckpoint ?? "", "tree does not match the retained hashes")
      assert.strictEqual(out.report.checkpoint, "rebuilt")
    }
    // An evicted prefix: a claim, as evicted_head is; verify names the field.
    const cut = history({ entry_cap: 2 }, simpleOps(6))
    const out = recover("verify", forged(cut.states[6]!, edit), segments(cut.entries))
    assert.isNull(out.brokenCheckpoint)
    assert.strictEqual(out.report.stopped?.reason, "checkpoint")
    assert.include(out.report.stopped?.detail, "tree")
    // A load takes the claim and continues it.
    const loaded = recover("load", forged(cut.states[6]!, (d) => void d), segments(cut.entries))
    assertClean(loaded, cut.states[6]!)
    // A document without a tree (null) claims nothing: verify passes, the load does not know it.
    const none = forged(cut.states[6]!, (d) => {
      d.tree = null
    })
    assertClean(recover("verify", none, segments(cut.entries)), cut.states[6]!)
    assertClean(recover("load", none, segments(cut.entries)), JournalState.withoutTree(cut.states[6]!))
  })

  it("a checkpoint's guard_state is a claim: verify replays the guard.state entries and names the field", () => {
    const ops: Array<A.Op> = [
      ...simpleOps(4),
      { op: "append", ts: 1_764_400_000, kind: "guard.state", payload: { "maxInvocations(1, per: \"1m\")": { n: 1 } } },
      ...simpleOps(4, 1)
    ]
    const cut = history({ entry_cap: 2 }, ops)
    const last = cut.states[ops.length]!
    assert.deepStrictEqual(last.guard_state, { "maxInvocations(1, per: \"1m\")": { n: 1 } })
    assertClean(recover("verify", forged(last, (d) => void d), segments(cut.entries)), last)
    const forgedState = forged(last, (d) => {
      d.guard_state = {}
    })
    const out = recover("verify", forgedState, segments(cut.entries))
    assert.strictEqual(out.report.stopped?.reason, "checkpoint")
    assert.include(out.report.stopped?.detail, "guard_state")
    // A load takes the claim, as it takes evicted_head.
    assert.deepStrictEqual(recover("load", forgedState, segments(cut.entries)).state.guard_state, {})
    // One that is no state does not decode: rebuilt from the records (which reach back to 0).
    const bad = recover(
      "load",
      forged(last, (d) => {
        d.guard_state = [1]
      }),
      segments(cut.entries)
    )
    assert.include(bad.brokenCheckpoint ?? "", "guard_state")
  })

  it("a self-consistent checkpoint of another chain of the same length is refused in both modes", () => {
    for (const caps of [{ entry_cap: 1 }, { entry_cap: 3 }, {}]) {
      const h = history(caps, simpleOps(10))
      const other = history(caps, simpleOps(10, 1))
      for (const c of [1, 5, 10]) {
        for (const mode of modes) {
          const out = recover(mode, doc(other.states[c]!), segments(h.entries, [4]))
          assert.isNull(out.brokenCheckpoint)
          assert.strictEqual(out.report.stopped?.reason, "checkpoint", `${mode} ${JSON.stringify(caps)} at ${c}`)
          assert.isAtMost(out.report.stopped!.sequence!, c)
        }
      }
    }
  })

  it("with entry_cap 0 another chain's checkpoint holds no hash a load could check; verify refuses it", () => {
    const h = history({ entry_cap: 0 }, simpleOps(10))
    const other = history({ entry_cap: 0 }, simpleOps(10, 1))
    const out = recover("verify", doc(other.states[6]!), segments(h.entries))
    assert.strictEqual(out.report.stopped?.reason, "checkpoint")
    assert.include(out.report.stopped?.detail, "evicted_head")
  })

  it("load: a record the checkpoint covers, with changed content but its old hash, is an integrity failure", () => {
    const h = history({}, simpleOps(10))
    const entries = h.entries.slice()
    entries[8] = { ...entries[8]!, timestamp_secs: entries[8]!.timestamp_secs + 1 } as Entry.Entry
    const out = recover("load", doc(h.states[10]!), segments(entries))
    assert.strictEqual(out.report.stopped?.reason, "integrity")
    assert.strictEqual(out.report.stopped?.sequence, 8)
  })

  it("a checkpoint of an earlier prefix is legitimate: the records after it replay", () => {
    const h = history({ entry_cap: 2 }, simpleOps(10))
    for (const mode of modes) {
      for (const c of [0, 3, 9]) assertClean(recover(mode, doc(h.states[c]!), segments(h.entries, [5])), h.states[10]!)
    }
  })
})

describe("strict records", () => {
  const h = history({ entry_cap: 4 }, simpleOps(10))
  const withChange = (e: Entry.Entry): Entry.Entry =>
    Entry.isTool(e) ? { ...e, bytes_read: e.bytes_read + 1 } : { ...e, payload: { forged: true } }
  const rehash = (e: Entry.Entry): Entry.Entry => ({ ...e, entry_hash: Entry.computeHash(e) })

  for (const mode of modes) {
    for (const cp of [null, 10, 6]) {
      it(`${mode}, checkpoint ${cp}: a forged record at a used sequence mid-history is corruption at its offset`, () => {
        const inputs = segments(h.entries)
        // After entry 6, a rehashed change of entry 3 (well linked, wrong content).
        const forgedEntry = rehash(withChange(h.entries[3]!))
        const attacked = [...inputs.slice(0, 8), {
          _tag: "Entry" as const,
          entry: forgedEntry,
          segment: segName(0),
          offset: 4242
        }, ...inputs.slice(8)]
        const out = recover(mode, cp === null ? null : doc(h.states[cp]!), attacked, { caps: { entry_cap: 4 } })
        assert.strictEqual(out.report.stopped?.reason, "corruption")
        assert.strictEqual(out.report.stopped?.offset, 4242)
        // `sequence` is where the valid prefix ends (after entry 6); the forged one is named in the detail.
        assert.strictEqual(out.report.stopped?.sequence, 7)
        assert.include(out.report.stopped?.detail, "sequence 3")
      })

      it(`${mode}, checkpoint ${cp}: an identical re-append of retained entries is skipped, clean`, () => {
        const inputs = segments(h.entries)
        const again = inputs.slice(8, 10) // entries 7 and 8 again, after 8
        const attacked = [...inputs.slice(0, 10), ...again, ...inputs.slice(10)]
        const out = recover(mode, cp === null ? null : doc(h.states[cp]!), attacked, { caps: { entry_cap: 4 } })
        assertClean(out, h.states[10]!)
        assert.strictEqual(out.report.skipped, 2)
      })
    }
  }

  it("a record whose content changed but not its hash is an integrity failure at its sequence", () => {
    for (const mode of modes) {
      const entries = h.entries.map((e, i) => i === 5 ? withChange(e) : e)
      const out = recover(mode, null, segments(entries), { caps: { entry_cap: 4 } })
      assert.strictEqual(out.report.stopped?.reason, "integrity")
      assert.strictEqual(out.report.stopped?.sequence, 5)
      assert.strictEqual(out.report.stopped?.violation?.what, "entry_hash")
      assertState(out.state, h.states[5]!)
    }
  })

  it("a segment copied under another base (its records start before the base) is corruption", () => {
    for (const mode of modes) {
      // Segment 0: entries 0..5; then a segment named 6 that holds a copy of 4..9.
      const inputs: Array<Input> = [
        ...segments(h.entries.slice(0, 6)),
        { _tag: "Segment", segment: segName(6), base: 6 },
        ...h.entries.slice(4).map((entry, i): Input => ({
          _tag: "Entry",
          entry,
          segment: segName(6),
          offset: 20 + 100 * i
        }))
      ]
      const out = recover(mode, null, inputs, { caps: { entry_cap: 4 } })
      assert.strictEqual(out.report.stopped?.reason, "corruption")
      assert.strictEqual(out.report.stopped?.segment, segName(6))
      assert.strictEqual(out.report.stopped?.offset, 20)
      assertState(out.state, h.states[6]!)
      // A segment whose base goes back is corruption too.
      const back = recover(mode, null, [...segments(h.entries.slice(0, 6)), ...segments(h.entries.slice(4))], {
        caps: { entry_cap: 4 }
      })
      assert.strictEqual(back.report.stopped?.reason, "corruption")
      assert.strictEqual(back.report.stopped?.sequence, 6)
    }
  })

  it("a segment base that skips ahead is a gap naming the missing range", () => {
    for (const mode of modes) {
      const out = recover(mode, null, [...segments(h.entries.slice(0, 4)), ...segments(h.entries.slice(7))], {
        caps: { entry_cap: 4 }
      })
      assert.strictEqual(out.report.stopped?.reason, "gap")
      assert.strictEqual(out.report.stopped?.sequence, 4)
      assert.deepStrictEqual(out.report.stopped?.missing, { from: 4, to: 6 })
      assertState(out.state, h.states[4]!)
    }
  })

  it("a record past the next sequence inside a segment is a gap naming the missing range", () => {
    for (const mode of modes) {
      const out = recover(mode, null, segments([...h.entries.slice(0, 4), ...h.entries.slice(6)]), {
        caps: { entry_cap: 4 }
      })
      assert.strictEqual(out.report.stopped?.reason, "gap")
      assert.deepStrictEqual(out.report.stopped?.missing, { from: 4, to: 5 })
    }
  })

  const damaged = (terminated: boolean, zeros: boolean, atEnd: boolean): Input => ({
    _tag: "Damaged",
    segment: segName(0),
    offset: 1020,
    reason: "line does not parse",
    terminated,
    zeros,
    atEnd,
    bytes: 37
  })

  for (const mode of modes) {
    it(`${mode}: a complete damaged last line is corruption; an unterminated or zero-filled one at the end is a torn tail`, () => {
      const inputs = segments(h.entries)
      const complete = recover(mode, doc(h.states[10]!), [...inputs, damaged(true, false, true)])
      assert.strictEqual(complete.report.stopped?.reason, "corruption")
      assert.strictEqual(complete.report.stopped?.offset, 1020)
      assert.strictEqual(complete.report.stopped?.sequence, 10)
      assert.isNull(complete.report.tornTail)
      for (const [terminated, zeros] of [[false, false], [false, true], [true, true]] as const) {
        const torn = recover(mode, doc(h.states[10]!), [...inputs, damaged(terminated, zeros, true)])
        assertState(torn.state, h.states[10]!)
        assert.isNull(torn.report.stopped)
        assert.deepStrictEqual(torn.report.tornTail, { segment: segName(0), offset: 1020, bytes: 37 })
        // The same damage followed by anything is corruption.
        for (
          const next of [
            inputs[3]!,
            { _tag: "Segment" as const, segment: segName(10), base: 10 },
            damaged(false, false, true)
          ]
        ) {
          const more = recover(mode, doc(h.states[10]!), [...inputs, damaged(terminated, zeros, true), next])
          assert.strictEqual(more.report.stopped?.reason, "corruption")
          assert.strictEqual(more.report.stopped?.offset, 1020)
          assert.isNull(more.report.tornTail)
        }
        // Damage that the adapter knows is not at the end is corruption.
        const mid = recover(mode, doc(h.states[10]!), [...inputs, damaged(terminated, zeros, false)])
        assert.strictEqual(mid.report.stopped?.reason, "corruption")
      }
    })

    it(`${mode}: a record of an unknown version ends the valid prefix at its byte offset`, () => {
      const inputs = segments(h.entries)
      const out = recover(mode, null, [...inputs.slice(0, 7), {
        _tag: "UnknownVersion",
        segment: segName(0),
        offset: 620,
        version: 2
      }, ...inputs.slice(7)], { caps: { entry_cap: 4 } })
      assert.strictEqual(out.report.stopped?.reason, "unknown_version")
      assert.strictEqual(out.report.stopped?.offset, 620)
      assert.strictEqual(out.report.stopped?.segment, segName(0))
      assert.strictEqual(out.report.stopped?.sequence, 6)
      assertState(out.state, h.states[6]!)
    })
  }
})

// ---------------------------------------------------------------------------
// Properties

interface Case {
  readonly caps: { entry_cap: number; tool_counts_cap: number }
  readonly ops: Array<A.Op>
  readonly cp: number | null
  readonly starts: Array<number>
}

const caseArb: fc.Arbitrary<Case> = fc.record({ caps: A.caps, ops: A.ops(24) }).chain(({ caps, ops }) =>
  fc.record({
    caps: fc.constant(caps),
    ops: fc.constant(ops),
    cp: fc.option(fc.nat(ops.length), { nil: null }),
    starts: fc.uniqueArray(fc.nat(Math.max(ops.length - 1, 0)), { maxLength: 4 })
  })
)

describe("properties", () => {
  it("an unmodified history recovers cleanly in both modes to the fold", () => {
    fc.assert(
      fc.property(caseArb, ({ caps, ops, cp, starts }) => {
        const h = history(caps, ops)
        const final = h.states[ops.length]!
        const inputs = segments(h.entries, starts)
        for (const mode of modes) {
          const out = recover(mode, cp === null ? null : doc(h.states[cp]!), inputs, { caps })
          assertClean(out, final)
          assert.strictEqual(out.storedNext, ops.length)
          assert.strictEqual(out.report.replayed, mode === "verify" || cp === null ? ops.length : ops.length - cp)
        }
      }),
      { numRuns: A.runs(150) }
    )
  })

  type Mutation =
    | { readonly m: "dropTail"; readonly k: number }
    | { readonly m: "dropMiddle"; readonly i: number }
    | { readonly m: "duplicateChanged"; readonly i: number; readonly after: number; readonly rehash: boolean }
    | { readonly m: "swap"; readonly i: number; readonly j: number }
    | { readonly m: "counter"; readonly which: number }
    | { readonly m: "shorterCheckpoint"; readonly c: number }
    | { readonly m: "field"; readonly i: number; readonly which: number; readonly rehash: boolean }

  const mutationArb = (n: number): fc.Arbitrary<Mutation> => {
    const idx = fc.nat(Math.max(n - 1, 0))
    return fc.oneof(
      fc.record({ m: fc.constant("dropTail" as const), k: fc.integer({ min: 1, max: Math.max(n, 1) }) }),
      fc.record({ m: fc.constant("dropMiddle" as const), i: idx }),
      fc.record({ m: fc.constant("duplicateChanged" as const), i: idx, after: idx, rehash: fc.boolean() }),
      fc.record({ m: fc.constant("swap" as const), i: idx, j: idx }),
      fc.record({ m: fc.constant("counter" as const), which: fc.nat(7) }),
      fc.record({ m: fc.constant("shorterCheckpoint" as const), c: fc.nat(n) }),
      fc.record({ m: fc.constant("field" as const), i: idx, which: fc.nat(9), rehash: fc.boolean() })
    )
  }

  const changeField = (e: Entry.Entry, which: number): Entry.Entry => {
    const flipHex = (s: string) => (s[0] === "0" ? "1" : "0") + s.slice(1)
    switch (which) {
      case 0:
        return { ...e, prev_hash: flipHex(e.prev_hash) }
      case 1:
        return { ...e, entry_hash: flipHex(e.entry_hash) }
      case 2:
        return { ...e, timestamp_secs: e.timestamp_secs === 0 ? 1 : e.timestamp_secs - 1 }
      default:
        if (!Entry.isTool(e)) return { ...e, payload: { changed: which, was: e.payload } as Schema.Json }
        switch (which) {
          case 3:
            return { ...e, tool_name: e.tool_name === "zz" ? "zy" : "zz" }
          case 4:
            return { ...e, server_id: e.server_id + "x" }
          case 5:
            return { ...e, agent_id: e.agent_id + "x" }
          case 6:
            return { ...e, bytes_read: e.bytes_read === 0 ? 1 : e.bytes_read - 1 }
          case 7:
            return { ...e, bytes_written: e.bytes_written === 0 ? 1 : e.bytes_written - 1 }
          case 8:
            return { ...e, delegation_depth: e.delegation_depth === 0 ? 1 : e.delegation_depth - 1 }
          default:
            return { ...e, allowed: !e.allowed }
        }
    }
  }

  const counterForge = (which: number) => (d: Record<string, any>) => {
    const bump = (v: number | string) => typeof v === "number" ? (v === 0 ? 1 : v - 1) : (BigInt(v) - 1n).toString()
    switch (which) {
      case 0:
        d.data_flow.total_bytes_read = bump(d.data_flow.total_bytes_read)
        break
      case 1:
        d.data_flow.total_bytes_written = bump(d.data_flow.total_bytes_written)
        break
      case 2:
        d.data_flow.total_invocations = bump(d.data_flow.total_invocations)
        break
      case 3:
        d.data_flow.max_delegation_depth = bump(d.data_flow.max_delegation_depth)
        break
      case 4:
        d.message_count = bump(d.message_count)
        break
      case 5:
        if (d.current_streak_tool !== null) {
          d.current_streak_len = bump(d.current_streak_len) === 0
            ? 2
            : bump(d.current_streak_len)
        } else d.message_count = bump(d.message_count)
        break
      case 6:
        if (d.tool_counts.length > 0) d.tool_counts[0][1] = bump(d.tool_counts[0][1])
        else d.data_flow.total_bytes_read = bump(d.data_flow.total_bytes_read)
        break
      default:
        d.evicted_head = d.evicted_head === null
          ? null
          : (d.evicted_head[0] === "0" ? "1" : "0") + d.evicted_head.slice(1)
        if (d.evicted_head === null) d.message_count = bump(d.message_count)
    }
  }

  it("verify mode never returns a clean state that is not the fold unless the mutation is benign, and stops at or before it", () => {
    fc.assert(
      fc.property(
        caseArb.filter((c) => c.ops.length > 0).chain((c) => fc.tuple(fc.constant(c), mutationArb(c.ops.length))),
        ([{ caps, ops, cp, starts }, mutation]) => {
          const n = ops.length
          const h = history(caps, ops)
          let entries: Array<Entry.Entry> = [...h.entries]
          let checkpoint: Recovery.CheckpointInput = cp === null ? null : doc(h.states[cp]!)
          // What a clean outcome must equal, or null when the mutation must be detected;
          // `limit`: the stop must point at or before this sequence.
          let benign: JournalState.JournalState | null = null
          let limit = n
          let inputs: Array<Input>
          switch (mutation.m) {
            case "dropTail": {
              const kept = n - mutation.k
              entries = entries.slice(0, kept)
              // Truncating after the last claim is undetectable by design.
              benign = cp === null || cp <= kept ? h.states[kept]! : null
              limit = kept
              inputs = segments(entries, starts.filter((s) => s < kept))
              break
            }
            case "dropMiddle": {
              if (mutation.i === n - 1) return
              entries.splice(mutation.i, 1)
              limit = mutation.i
              inputs = segments(h.entries, starts).filter((x) =>
                !(x._tag === "Entry" && x.entry.sequence === mutation.i)
              )
              break
            }
            case "duplicateChanged": {
              const after = Math.max(mutation.after, mutation.i)
              const changed0 = changeField(h.entries[mutation.i]!, 6)
              const changed = mutation.rehash ? { ...changed0, entry_hash: Entry.computeHash(changed0) } : changed0
              const base = segments(h.entries, starts)
              const at = base.findIndex((x) => x._tag === "Entry" && x.entry.sequence === after)
              const seg = (base[at] as Extract<Input, { _tag: "Entry" }>).segment
              inputs = [
                ...base.slice(0, at + 1),
                { _tag: "Entry", entry: changed, segment: seg, offset: 99999 },
                ...base.slice(at + 1)
              ]
              limit = after + 1
              break
            }
            case "swap": {
              const [i, j] = [Math.min(mutation.i, mutation.j), Math.max(mutation.i, mutation.j)]
              if (i === j) return
              const base = segments(h.entries, starts)
              const pi = base.findIndex((x) => x._tag === "Entry" && x.entry.sequence === i)
              const pj = base.findIndex((x) => x._tag === "Entry" && x.entry.sequence === j)
              const a = base[pi] as Extract<Input, { _tag: "Entry" }>
              const b = base[pj] as Extract<Input, { _tag: "Entry" }>
              base[pi] = { ...a, entry: b.entry }
              base[pj] = { ...b, entry: a.entry }
              inputs = base
              limit = i
              break
            }
            case "counter": {
              if (cp === null) return
              const d = JSON.parse(JSON.stringify(Checkpoint.encode(h.states[cp]!)))
              const before = JSON.stringify(d)
              counterForge(mutation.which)(d)
              if (JSON.stringify(d) === before) return
              checkpoint = { _tag: "Document", document: d, location: "checkpoint.json" }
              inputs = segments(h.entries, starts)
              limit = cp
              break
            }
            case "shorterCheckpoint": {
              const c = cp === null ? mutation.c : Math.min(mutation.c, cp)
              checkpoint = doc(h.states[c]!)
              benign = h.states[n]!
              inputs = segments(h.entries, starts)
              break
            }
            case "field": {
              const changed0 = changeField(h.entries[mutation.i]!, mutation.which)
              const changed = mutation.rehash ? { ...changed0, entry_hash: Entry.computeHash(changed0) } : changed0
              inputs = segments(h.entries, starts).map((x) =>
                x._tag === "Entry" && x.entry.sequence === mutation.i ? { ...x, entry: changed } : x
              )
              limit = mutation.i
              if (mutation.rehash && mutation.which === 1) return // rehashing undoes the change
              if (mutation.rehash && mutation.which !== 0) {
                // A well-linked, rehashed forgery is found only by the next record's
                // link or by a checkpoint that covers it. With entry_cap 0 nothing
                // links (every prev_hash is ZERO_HASH): only the checkpoint's
                // evicted_head can tell, at the checkpoint's sequence.
                const uncovered = cp === null || cp <= mutation.i
                limit = caps.entry_cap === 0 && !uncovered ? cp! : mutation.i + 1
                if ((mutation.i === n - 1 || caps.entry_cap === 0) && uncovered) {
                  benign = JournalState.foldAll(
                    JournalState.empty(ID, caps),
                    h.entries.map((e) => e.sequence === mutation.i ? changed : e)
                  )
                }
              }
              break
            }
          }
          const out = recover("verify", checkpoint, inputs, { caps })
          const s = out.report.stopped
          const ctx = JSON.stringify({ mutation, cp, n, stopped: s })
          if (s === null) {
            assert.isNotNull(benign, `undetected: ${ctx}`)
            assertState(out.state, benign!)
          } else {
            assert.isNotNull(s.sequence, ctx)
            assert.isAtMost(s.sequence!, limit, ctx)
            // Whatever stopped, the state is a fold of a prefix of what was stored and verified.
            assert.isAtMost(out.state.next_sequence, limit, ctx)
            if (
              out.state.next_sequence <= Math.min(limit, n) &&
              !(mutation.m === "field" && mutation.rehash && out.state.next_sequence > mutation.i)
            ) {
              assertState(out.state, h.states[out.state.next_sequence]!)
            }
          }
          if (mutation.m === "counter") {
            assert.strictEqual(s?.reason, "checkpoint", ctx)
            assert.strictEqual(s?.sequence, cp, ctx)
          }
        }
      ),
      { numRuns: A.runs(200) }
    )
  })
})
