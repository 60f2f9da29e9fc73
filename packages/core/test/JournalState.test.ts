/**
 * The pure JournalState fold: the behaviours chio-http-session's own suite pins, and
 * properties over random operation sequences and caps (counters, rings, sequences,
 * verification, message entries, entry_cap 0, structural sharing of the rings).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Result from "effect/Result"
import * as fc from "fast-check"
import { Checkpoint, Entry, JournalState } from "../src/index.ts"
import * as A from "./arbitraries.ts"

const U64_MAX = JournalState.U64_MAX
const sat = (n: bigint): bigint => n > U64_MAX ? U64_MAX : n

const sortedCounts = (state: JournalState.JournalState): Array<[string, bigint]> =>
  Array.from(state.tool_counts, ([k, v]): [string, bigint] => [k, v]).sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0)

/** Everything observable about a state, as plain comparable data. */
const view = (state: JournalState.JournalState) => ({
  checkpoint: Checkpoint.encode(state),
  head: JournalState.head(state),
  snapshot: JournalState.snapshotToJson(JournalState.snapshot(state))
})

const fold = (state: JournalState.JournalState, o: A.Op): JournalState.JournalState =>
  JournalState.fold(state, A.entryFor(state, o))

const foldOps = (state: JournalState.JournalState, list: ReadonlyArray<A.Op>): JournalState.JournalState =>
  list.reduce(fold, state)

describe("JournalState: chio's pinned behaviours", () => {
  it("an empty journal's head is ZERO_HASH", () => {
    const state = JournalState.empty("s")
    assert.strictEqual(JournalState.head(state), Entry.ZERO_HASH)
    assert.strictEqual(JournalState.snapshot(state).head_hash, Entry.ZERO_HASH)
    assert.strictEqual(JournalState.entryCount(state), 0)
    assert.deepStrictEqual(JournalState.verify(state), Result.succeed(0))
  })

  it("caps default to 4096 and 4096", () => {
    const state = JournalState.empty("s")
    assert.strictEqual(state.entry_cap, JournalState.DEFAULT_ENTRY_CAP)
    assert.strictEqual(state.tool_counts_cap, JournalState.DEFAULT_TOOL_COUNTS_CAP)
    assert.strictEqual(JournalState.DEFAULT_ENTRY_CAP, 4096)
    assert.strictEqual(JournalState.DEFAULT_TOOL_COUNTS_CAP, 4096)
  })

  it("cap 4 with 10 alternating records keeps at most 4 entries, counts 10, ends at sequence 9 and verifies", () => {
    let state = JournalState.empty("s", { entry_cap: 4 })
    for (let i = 0; i < 10; i++) {
      state = fold(state, A.record(i % 2 === 0 ? "read_file" : "write_file", { bytes_read: 10, bytes_written: 1 }))
      assert.isAtMost(JournalState.entryCount(state), 4)
    }
    const retained = JournalState.entries(state)
    assert.strictEqual(retained.length, 4)
    assert.deepStrictEqual(retained.map((e) => e.sequence), [6, 7, 8, 9])
    assert.strictEqual(retained[retained.length - 1]!.sequence, 9)
    assert.strictEqual(state.next_sequence, 10)
    assert.strictEqual(state.data_flow.total_invocations, 10n)
    assert.strictEqual(state.data_flow.total_bytes_read, 100n)
    assert.strictEqual(state.data_flow.total_bytes_written, 10n)
    assert.deepStrictEqual(sortedCounts(state), [["read_file", 5n], ["write_file", 5n]])
    assert.deepStrictEqual(JournalState.snapshot(state).tool_sequence, [
      "read_file",
      "write_file",
      "read_file",
      "write_file"
    ])
    assert.strictEqual(JournalState.snapshot(state).entry_count, 4)
    assert.isTrue(Result.isSuccess(JournalState.verify(state)))
  })

  it("tool_counts cap 2: known names keep counting, 10,000 new names never enter, 10,004 invocations", () => {
    let state = JournalState.empty("s", { entry_cap: 4, tool_counts_cap: 2 })
    state = foldOps(state, [A.record("alpha"), A.record("beta")])
    for (let i = 0; i < 10_000; i++) state = fold(state, A.record(`new-${i}`))
    state = foldOps(state, [A.record("alpha"), A.record("beta")])
    assert.deepStrictEqual(sortedCounts(state), [["alpha", 2n], ["beta", 2n]])
    assert.strictEqual(state.data_flow.total_invocations, 10_004n)
    assert.strictEqual(state.next_sequence, 10_004)
    assert.strictEqual(JournalState.snapshot(state).tool_counts.size, 2)
    assert.isFalse(JournalState.snapshot(state).tool_counts.has("new-0"))
    assert.isTrue(Result.isSuccess(JournalState.verify(state)))
  })

  it("with cap 2 the head is the last hash after 2 records and differs from it after 4; the snapshot head is the head", () => {
    let state = JournalState.empty("s", { entry_cap: 2 })
    state = foldOps(state, [A.record("a"), A.record("b")])
    assert.strictEqual(state.evicted_head, null)
    assert.strictEqual(JournalState.head(state), JournalState.lastHash(state))
    assert.strictEqual(JournalState.snapshot(state).head_hash, JournalState.head(state))
    state = foldOps(state, [A.record("c"), A.record("d")])
    assert.isNotNull(state.evicted_head)
    assert.notStrictEqual(JournalState.head(state), JournalState.lastHash(state))
    assert.strictEqual(JournalState.snapshot(state).head_hash, JournalState.head(state))
    assert.isTrue(Result.isSuccess(JournalState.verify(state)))
  })

  it("denied records count everywhere", () => {
    let state = JournalState.empty("s", { entry_cap: 8 })
    state = fold(state, A.record("scan", { allowed: true, bytes_read: 5, bytes_written: 1, delegation_depth: 1 }))
    state = fold(state, A.record("scan", { allowed: false, bytes_read: 7, bytes_written: 2, delegation_depth: 3 }))
    state = fold(state, A.record("exfil", { allowed: false, bytes_read: 11, bytes_written: 4, delegation_depth: 2 }))
    const snap = JournalState.snapshot(state)
    assert.strictEqual(snap.data_flow.total_invocations, 3n)
    assert.strictEqual(snap.data_flow.total_bytes_read, 23n)
    assert.strictEqual(snap.data_flow.total_bytes_written, 7n)
    assert.strictEqual(snap.data_flow.max_delegation_depth, 3)
    assert.deepStrictEqual(sortedCounts(state), [["exfil", 1n], ["scan", 2n]])
    assert.deepStrictEqual(snap.tool_sequence, ["scan", "scan", "exfil"])
    assert.strictEqual(snap.current_streak_tool, "exfil")
    assert.strictEqual(snap.current_streak_len, 1n)
    assert.strictEqual(snap.entry_count, 3)
    assert.deepStrictEqual(JournalState.entries(state).map((e) => Entry.isTool(e) && e.allowed), [true, false, false])
  })

  it("a snapshot does not change after later records", () => {
    let state = JournalState.empty("s", { entry_cap: 3, tool_counts_cap: 3 })
    state = foldOps(state, [A.record("a", { bytes_read: 1 }), A.record("a"), A.record("b")])
    const snap = JournalState.snapshot(state)
    const before = JournalState.snapshotToJson(snap)
    state = foldOps(state, [A.record("b"), A.record("c", { bytes_read: 9 }), A.record("d"), A.message({ m: 1 })])
    assert.deepStrictEqual(JournalState.snapshotToJson(snap), before)
    assert.notDeepEqual(JournalState.snapshotToJson(JournalState.snapshot(state)), before)
  })

  it("mutating a snapshot's collections does not reach the state", () => {
    let state = JournalState.empty("s")
    state = foldOps(state, [A.record("a"), A.record("b")])
    const snap = JournalState.snapshot(state)
    ;(snap.tool_sequence as Array<string>).push("injected")
    ;(snap.tool_counts as Map<string, bigint>).set("injected", 99n)
    const again = JournalState.snapshot(state)
    assert.deepStrictEqual(again.tool_sequence, ["a", "b"])
    assert.isFalse(again.tool_counts.has("injected"))
  })
})

describe("JournalState: the rings share structure without leaking it", () => {
  it("folding an old state again forks without disturbing the newer state", () => {
    const base = foldOps(JournalState.empty("s", { entry_cap: 4 }), [A.record("a"), A.record("b"), A.record("c")])
    const newer = foldOps(base, [A.record("d"), A.record("e")])
    const newerView = view(newer)
    const fork = foldOps(base, [A.record("x"), A.record("y")])
    // The fork is exactly what a fresh fold of the same history gives.
    const fresh = foldOps(JournalState.empty("s", { entry_cap: 4 }), [
      A.record("a"),
      A.record("b"),
      A.record("c"),
      A.record("x"),
      A.record("y")
    ])
    assert.deepStrictEqual(view(fork), view(fresh))
    assert.deepStrictEqual(view(newer), newerView)
    assert.deepStrictEqual(JournalState.snapshot(newer).tool_sequence, ["b", "c", "d", "e"])
    assert.deepStrictEqual(JournalState.snapshot(fork).tool_sequence, ["b", "c", "x", "y"])
    assert.deepStrictEqual(JournalState.snapshot(base).tool_sequence, ["a", "b", "c"])
    assert.isTrue(Result.isSuccess(JournalState.verify(newer)))
    assert.isTrue(Result.isSuccess(JournalState.verify(fork)))
    assert.isTrue(Result.isSuccess(JournalState.verify(base)))
  })

  it("property: any state of a history, folded with other operations, equals a fresh fold and leaves every other state alone", () => {
    fc.assert(
      fc.property(A.caps, A.ops(30), A.ops(10), fc.nat(), (c, list, alt, pick) => {
        const { states } = A.run(c, list)
        const views = states.map(view)
        const k = pick % states.length
        const fork = foldOps(states[k]!, alt)
        const fresh = A.run(c, [...list.slice(0, k), ...alt]).states.at(-1)!
        assert.deepStrictEqual(view(fork), view(fresh))
        // Continue the newest state too, then check nothing earlier moved.
        foldOps(states.at(-1)!, alt)
        states.forEach((s, i) => assert.deepStrictEqual(view(s), views[i]))
      }),
      { numRuns: A.runs(60) }
    )
  })

  it("property: fold never changes its argument", () => {
    fc.assert(
      fc.property(A.caps, A.ops(20), A.op, (c, list, extra) => {
        const state = A.run(c, list).states.at(-1)!
        const before = view(state)
        fold(state, extra)
        fold(state, extra)
        assert.deepStrictEqual(view(state), before)
      }),
      { numRuns: A.runs(60) }
    )
  })
})

describe("JournalState: properties over random operations and caps", () => {
  it("sequence numbers start at 0 and strictly increase; next_sequence follows the last", () => {
    fc.assert(
      fc.property(A.caps, A.ops(), (c, list) => {
        const { entries, states } = A.run(c, list)
        entries.forEach((e, i) => assert.strictEqual(e.sequence, i))
        for (const s of states) {
          const retained = JournalState.entries(s)
          for (let i = 1; i < retained.length; i++) assert.isAbove(retained[i]!.sequence, retained[i - 1]!.sequence)
          if (retained.length > 0) assert.strictEqual(s.next_sequence, retained.at(-1)!.sequence + 1)
        }
        assert.strictEqual(states.at(-1)!.next_sequence, list.length)
      })
    )
  })

  it("counters equal the sums of what was recorded (outcomes' bytes included)", () => {
    fc.assert(
      fc.property(A.caps, A.ops(), (c, list) => {
        const state = A.run(c, list).states.at(-1)!
        let read = 0n, written = 0n, invocations = 0n, depth = 0, messages = 0n
        const counts = new Map<string, bigint>()
        let streakTool: string | null = null
        let streakLen = 0n
        for (const o of list) {
          if (o.op === "append") {
            messages++
            // An outcome adds the bytes it reports, and nothing else (DESIGN §13).
            if (o.kind === Entry.OUTCOME_KIND) {
              const flow = Entry.outcomeBytes(o.payload)
              read += BigInt(flow.read)
              written += BigInt(flow.written)
            }
            continue
          }
          const p = o.params
          read += BigInt(p.bytes_read)
          written += BigInt(p.bytes_written)
          invocations++
          depth = Math.max(depth, p.delegation_depth)
          const known = counts.get(p.tool_name)
          if (known !== undefined) counts.set(p.tool_name, known + 1n)
          else if (counts.size < c.tool_counts_cap) counts.set(p.tool_name, 1n)
          streakLen = streakTool === p.tool_name ? streakLen + 1n : 1n
          streakTool = p.tool_name
        }
        assert.strictEqual(state.data_flow.total_bytes_read, sat(read))
        assert.strictEqual(state.data_flow.total_bytes_written, sat(written))
        assert.strictEqual(state.data_flow.total_invocations, invocations)
        assert.strictEqual(state.data_flow.max_delegation_depth, depth)
        assert.strictEqual(state.message_count, messages)
        assert.deepStrictEqual(sortedCounts(state), [...counts].sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0))
        assert.strictEqual(state.current_streak_tool, streakTool)
        assert.strictEqual(state.current_streak_len, streakLen)
        assert.isAtMost([...state.tool_counts].length, c.tool_counts_cap)
      })
    )
  })

  it("rings never exceed the cap and hold exactly the newest entries and tool names", () => {
    fc.assert(
      fc.property(A.caps, A.ops(), (c, list) => {
        const { entries, states } = A.run(c, list)
        states.forEach((s, i) => {
          const retained = JournalState.entries(s)
          const names = JournalState.snapshot(s).tool_sequence
          assert.isAtMost(retained.length, c.entry_cap)
          assert.isAtMost(names.length, c.entry_cap)
          const all = entries.slice(0, i)
          assert.deepStrictEqual(retained, c.entry_cap === 0 ? [] : all.slice(-c.entry_cap))
          const allNames = all.flatMap((e) => Entry.isTool(e) ? [e.tool_name] : [])
          assert.deepStrictEqual(names, c.entry_cap === 0 ? [] : allNames.slice(-c.entry_cap))
          assert.strictEqual(s.evicted_head === null, i <= c.entry_cap)
        })
      })
    )
  })

  it("verify passes on every fold result", () => {
    fc.assert(
      fc.property(A.caps, A.ops(), (c, list) => {
        for (const s of A.run(c, list).states) {
          assert.deepStrictEqual(JournalState.verify(s), Result.succeed(JournalState.entryCount(s)))
        }
      })
    )
  })

  it("message entries touch only the chain, the ring and message_count", () => {
    fc.assert(
      fc.property(A.caps, A.ops(20), A.otherKind, A.json, (c, list, kind, payload) => {
        const before = A.run(c, list).states.at(-1)!
        const after = fold(before, { op: "append", ts: 1, kind, payload })
        assert.strictEqual(after.message_count, before.message_count + 1n)
        assert.strictEqual(after.next_sequence, before.next_sequence + 1)
        assert.strictEqual(after.data_flow, before.data_flow)
        assert.strictEqual(after.tool_counts, before.tool_counts)
        assert.strictEqual(after.tool_sequence, before.tool_sequence)
        assert.strictEqual(after.current_streak_tool, before.current_streak_tool)
        assert.strictEqual(after.current_streak_len, before.current_streak_len)
        assert.strictEqual(after.meta, before.meta)
        assert.strictEqual(after.session_id, before.session_id)
        assert.notStrictEqual(JournalState.head(after), JournalState.head(before))
        if (c.entry_cap > 0) assert.strictEqual(JournalState.entries(after).at(-1)!.kind, kind)
      })
    )
  })

  it("entry_cap 0 keeps nothing and every prev_hash is ZERO_HASH", () => {
    fc.assert(
      fc.property(A.ops(), fc.nat(4), (list, toolCap) => {
        const { entries, states } = A.run({ entry_cap: 0, tool_counts_cap: toolCap }, list)
        for (const e of entries) assert.strictEqual(e.prev_hash, Entry.ZERO_HASH)
        for (const s of states) {
          assert.strictEqual(JournalState.entryCount(s), 0)
          assert.deepStrictEqual(JournalState.snapshot(s).tool_sequence, [])
        }
        const last = states.at(-1)!
        assert.strictEqual(last.data_flow.total_invocations, BigInt(list.filter((o) => o.op === "record").length))
        if (list.length > 0) {
          assert.isNotNull(last.evicted_head)
          assert.notStrictEqual(JournalState.head(last), Entry.ZERO_HASH)
        }
      })
    )
  })
})

describe("JournalState: counters saturate at 2^64 - 1", () => {
  it("bytes counters: 2048 maximal records stay exact, the 2049th saturates", () => {
    const max = Entry.MAX_U53
    let state = JournalState.empty("s", { entry_cap: 2 })
    for (let i = 0; i < 2048; i++) state = fold(state, A.record("big", { bytes_read: max, bytes_written: max }))
    const exact = 2048n * BigInt(max)
    assert.isBelow(Number(U64_MAX - exact), 4096)
    assert.strictEqual(state.data_flow.total_bytes_read, exact)
    assert.strictEqual(state.data_flow.total_bytes_written, exact)
    state = fold(state, A.record("big", { bytes_read: max, bytes_written: 0 }))
    assert.strictEqual(state.data_flow.total_bytes_read, U64_MAX)
    assert.strictEqual(state.data_flow.total_bytes_written, exact)
    state = fold(state, A.record("big", { bytes_read: max, bytes_written: max }))
    assert.strictEqual(state.data_flow.total_bytes_read, U64_MAX)
    assert.strictEqual(state.data_flow.total_bytes_written, U64_MAX)
    assert.strictEqual(state.data_flow.total_invocations, 2050n)
    assert.strictEqual(state.current_streak_len, 2050n)
  })

  it("every counter saturates when restored near the top from a checkpoint", () => {
    let state = foldOps(JournalState.empty("s", { entry_cap: 2 }), [A.record("t")])
    const doc = Checkpoint.encode(state)
    const near = (U64_MAX - 1n).toString()
    const restored = Result.getOrThrow(Checkpoint.decode({
      ...doc,
      data_flow: { ...doc.data_flow, total_bytes_read: near, total_bytes_written: near, total_invocations: near },
      tool_counts: [["t", near]],
      current_streak_len: near,
      message_count: near
    }))
    state = foldOps(restored, [
      A.record("t", { bytes_read: 5, bytes_written: 5 }),
      A.record("t", { bytes_read: 5, bytes_written: 5 }),
      A.record("t", { bytes_read: 5, bytes_written: 5 }),
      A.message(1),
      A.message(2)
    ])
    assert.strictEqual(state.data_flow.total_bytes_read, U64_MAX)
    assert.strictEqual(state.data_flow.total_bytes_written, U64_MAX)
    assert.strictEqual(state.data_flow.total_invocations, U64_MAX)
    assert.deepStrictEqual(sortedCounts(state), [["t", U64_MAX]])
    assert.strictEqual(state.current_streak_len, U64_MAX)
    assert.strictEqual(state.message_count, U64_MAX)
    const json = JournalState.snapshotToJson(JournalState.snapshot(state))
    assert.strictEqual(json.data_flow.total_invocations, "18446744073709551615")
    assert.strictEqual(json.current_streak_len, "18446744073709551615")
  })

  it("counterToJson switches to a decimal string exactly above 2^53 - 1", () => {
    assert.strictEqual(JournalState.counterToJson(9007199254740991n), 9007199254740991)
    assert.strictEqual(JournalState.counterToJson(9007199254740992n), "9007199254740992")
    assert.strictEqual(JournalState.counterToJson(0n), 0)
  })
})

describe("JournalState: metadata", () => {
  it("the later updated_at wins and meta never touches the chain", () => {
    const state = foldOps(JournalState.empty("s"), [A.record("a")])
    const a = JournalState.applyMeta(state, { updated_at: 10, title: "first" })
    const b = JournalState.applyMeta(a, { updated_at: 5, title: "older" })
    const c = JournalState.applyMeta(b, { updated_at: 10, title: "tie goes to the last applied" })
    assert.strictEqual(b.meta?.title, "first")
    assert.strictEqual(c.meta?.title, "tie goes to the last applied")
    assert.strictEqual(JournalState.head(c), JournalState.head(state))
    assert.strictEqual(c.next_sequence, state.next_sequence)
  })
})
