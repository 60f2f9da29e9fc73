/**
 * Built-in guards, evaluated purely on snapshots built with JournalState.fold: each
 * allows at its boundary and denies one step past it, keeps holding after the rings
 * evicted what it counts, and fails closed where information was dropped.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { type Entry, Guard, JournalState } from "../src/index.ts"
import * as A from "./arbitraries.ts"

const snap = (ops: ReadonlyArray<A.Op>, caps: JournalState.Caps = {}): JournalState.Snapshot =>
  JournalState.snapshot(A.run(caps, ops).states.at(-1)!)

const call = A.call

const allowed = (g: Guard.Guard, s: JournalState.Snapshot, p: Entry.ValidToolParams): boolean => {
  const v = g(s, p)
  if (v._tag === "Deny") {
    assert.isAbove(v.reason.length, 0)
    assert.isAbove(v.guard.length, 0)
  }
  return Guard.isAllowed(v)
}

const empty = snap([])

describe("Guard: byte, invocation and depth limits at their boundary", () => {
  it("maxBytesRead allows up to the limit including this call, denies one byte past", () => {
    const s = snap([A.record("r", { bytes_read: 60 }), A.record("r", { bytes_read: 40, allowed: false })])
    assert.strictEqual(s.data_flow.total_bytes_read, 100n)
    assert.isTrue(allowed(Guard.maxBytesRead(150), s, call("r", { bytes_read: 50 })))
    assert.isFalse(allowed(Guard.maxBytesRead(150), s, call("r", { bytes_read: 51 })))
    assert.isTrue(allowed(Guard.maxBytesRead(100), s, call("r")))
    assert.isFalse(allowed(Guard.maxBytesRead(99), s, call("r")))
    assert.isTrue(allowed(Guard.maxBytesRead(0), empty, call("r")))
    assert.isFalse(allowed(Guard.maxBytesRead(0), empty, call("r", { bytes_read: 1 })))
  })

  it("maxBytesWritten allows up to the limit including this call, denies one byte past", () => {
    const s = snap([A.record("w", { bytes_written: 7 })])
    assert.isTrue(allowed(Guard.maxBytesWritten(10), s, call("w", { bytes_written: 3 })))
    assert.isFalse(allowed(Guard.maxBytesWritten(10), s, call("w", { bytes_written: 4 })))
    // Reads do not count against the write limit.
    assert.isTrue(allowed(Guard.maxBytesWritten(10), s, call("w", { bytes_read: 1000 })))
  })

  it("byte limits above 2^53 work as bigints, also on saturated counters", () => {
    const limit = 2n ** 60n
    const s = snap(Array.from({ length: 3 }, () => A.record("r", { bytes_read: 2 ** 53 - 1 })))
    assert.isTrue(allowed(Guard.maxBytesRead(limit), s, call("r", { bytes_read: 2 ** 53 - 1 })))
    assert.isFalse(allowed(Guard.maxBytesRead(3n * (2n ** 53n - 1n)), s, call("r", { bytes_read: 1 })))
    assert.isTrue(allowed(Guard.maxBytesRead(3n * (2n ** 53n - 1n)), s, call("r")))
    const saturated = { ...s, data_flow: { ...s.data_flow, total_bytes_read: JournalState.U64_MAX } }
    assert.isFalse(allowed(Guard.maxBytesRead(JournalState.U64_MAX), saturated, call("r", { bytes_read: 1 })))
    assert.isTrue(allowed(Guard.maxBytesRead(JournalState.U64_MAX), saturated, call("r")))
  })

  it("property: maxBytesRead denies exactly when the total plus this call exceeds the limit", () => {
    fc.assert(
      fc.property(fc.array(fc.nat(1000), { maxLength: 8 }), fc.nat(1000), fc.nat(9000), (reads, now, limit) => {
        const s = snap(reads.map((n) => A.record("r", { bytes_read: n })), { entry_cap: 2 })
        const total = reads.reduce((a, b) => a + b, 0)
        assert.strictEqual(allowed(Guard.maxBytesRead(limit), s, call("r", { bytes_read: now })), total + now <= limit)
      })
    )
  })

  it("maxInvocations allows the limit-th call and denies the next; denied calls count", () => {
    const two = snap([A.record("a"), A.record("b", { allowed: false })])
    assert.isTrue(allowed(Guard.maxInvocations(3), two, call("c")))
    assert.isFalse(allowed(Guard.maxInvocations(2), two, call("c")))
    assert.isFalse(allowed(Guard.maxInvocations(0), empty, call("c")))
    assert.isTrue(allowed(Guard.maxInvocations(1), empty, call("c")))
    // Messages are not invocations.
    const withMessages = snap([A.record("a"), A.message(1), A.message(2)])
    assert.isTrue(allowed(Guard.maxInvocations(2), withMessages, call("c")))
  })

  it("maxDelegationDepth allows the limit and denies one more", () => {
    assert.isTrue(allowed(Guard.maxDelegationDepth(2), empty, call("d", { delegation_depth: 2 })))
    assert.isFalse(allowed(Guard.maxDelegationDepth(2), empty, call("d", { delegation_depth: 3 })))
    assert.isTrue(allowed(Guard.maxDelegationDepth(0), empty, call("d")))
    assert.isTrue(allowed(Guard.maxDelegationDepth(2 ** 32 - 1), empty, call("d", { delegation_depth: 2 ** 32 - 1 })))
  })

  it("limits that are not whole numbers never make a guard throw", () => {
    const s = snap([A.record("r", { bytes_read: 1, delegation_depth: 1 })])
    assert.isTrue(allowed(Guard.maxBytesRead(1.5), s, call("r")))
    assert.isFalse(allowed(Guard.maxBytesRead(1.5), s, call("r", { bytes_read: 1 })))
    assert.isTrue(allowed(Guard.maxBytesRead(Infinity), s, call("r", { bytes_read: 2 ** 53 - 1 })))
    assert.isTrue(allowed(Guard.maxInvocations(Infinity), s, call("r")))
    // NaN and -Infinity fail closed.
    assert.isFalse(allowed(Guard.maxBytesRead(NaN), s, call("r")))
    assert.isFalse(allowed(Guard.maxBytesWritten(-Infinity), s, call("r")))
    assert.isFalse(allowed(Guard.maxDelegationDepth(NaN), s, call("r")))
    assert.isFalse(allowed(Guard.maxStreak(NaN), s, call("x")))
    assert.isFalse(allowed(Guard.maxInvocations(-1), empty, call("r")))
    assert.isTrue(allowed(Guard.maxDelegationDepth(1.9), s, call("r", { delegation_depth: 1 })))
    assert.isFalse(allowed(Guard.maxDelegationDepth(1.9), s, call("r", { delegation_depth: 2 })))
  })
})

describe("Guard.maxStreak", () => {
  it("allows the limit-th call in a row and denies the next; another tool resets it", () => {
    const two = snap([A.record("b"), A.record("a"), A.record("a")])
    assert.isTrue(allowed(Guard.maxStreak(3), two, call("a")))
    assert.isFalse(allowed(Guard.maxStreak(2), two, call("a")))
    assert.isTrue(allowed(Guard.maxStreak(2), two, call("b")))
    assert.isTrue(allowed(Guard.maxStreak(1), two, call("b")))
    assert.isFalse(allowed(Guard.maxStreak(1), two, call("a")))
  })

  it("a first call is a run of one: limit 0 denies it", () => {
    assert.isFalse(allowed(Guard.maxStreak(0), empty, call("a")))
    assert.isTrue(allowed(Guard.maxStreak(1), empty, call("a")))
  })

  it("still denies after the streak outgrew entry_cap (cap 2, streak 5)", () => {
    const s = snap(Array.from({ length: 5 }, () => A.record("loop")), { entry_cap: 2 })
    assert.strictEqual(s.entry_count, 2)
    assert.deepStrictEqual(s.tool_sequence, ["loop", "loop"])
    assert.strictEqual(s.current_streak_len, 5n)
    assert.isFalse(allowed(Guard.maxStreak(5), s, call("loop")))
    assert.isFalse(allowed(Guard.maxStreak(3), s, call("loop")))
    assert.isTrue(allowed(Guard.maxStreak(6), s, call("loop")))
  })

  it("denied calls extend the streak and messages do not break it", () => {
    const s = snap([A.record("a"), A.message("hi"), A.record("a", { allowed: false }), A.message("again")])
    assert.strictEqual(s.current_streak_len, 2n)
    assert.isFalse(allowed(Guard.maxStreak(2), s, call("a")))
  })
})

describe("Guard.forbiddenTransitions", () => {
  const g = Guard.forbiddenTransitions([["read_secret", "http_post"], ["a", "a"]])

  it("denies a listed pair and allows everything else", () => {
    const afterRead = snap([A.record("read_secret")])
    assert.isFalse(allowed(g, afterRead, call("http_post")))
    assert.isTrue(allowed(g, afterRead, call("read_file")))
    assert.isTrue(allowed(g, snap([A.record("read_file")]), call("http_post")))
    assert.isTrue(allowed(g, empty, call("http_post")))
    assert.isFalse(allowed(g, snap([A.record("a")]), call("a")))
    // The pair is ordered.
    assert.isTrue(allowed(g, snap([A.record("http_post")]), call("read_secret")))
  })

  it("looks at the last tool even when messages came after it or the ring is empty", () => {
    assert.isFalse(allowed(g, snap([A.record("read_secret"), A.message({ m: 1 })]), call("http_post")))
    assert.isFalse(allowed(g, snap([A.record("read_secret")], { entry_cap: 0 }), call("http_post")))
  })
})

describe("Guard.requirePredecessors", () => {
  const g = Guard.requirePredecessors({ deploy: ["test", "build"] })

  it("denies until every predecessor ran, naming the missing one", () => {
    const denied = g(snap([A.record("test")]), call("deploy"))
    assert.isTrue(denied._tag === "Deny" && denied.reason.includes("build"))
    assert.isFalse(allowed(g, empty, call("deploy")))
    assert.isTrue(allowed(g, snap([A.record("build"), A.record("x"), A.record("test")]), call("deploy")))
    assert.isTrue(allowed(g, empty, call("other")))
  })

  it("keeps holding after the predecessors were evicted from the ring", () => {
    const s = snap([A.record("test"), A.record("build"), A.record("x"), A.record("y"), A.record("z")], { entry_cap: 2 })
    assert.isFalse(s.tool_sequence.includes("test"))
    assert.isTrue(allowed(g, s, call("deploy")))
  })

  it("fails closed when a predecessor was dropped because tool_counts_cap was full", () => {
    const s = snap([A.record("x"), A.record("y"), A.record("build"), A.record("test")], { tool_counts_cap: 2 })
    assert.isTrue(s.tool_sequence.includes("test") && s.tool_sequence.includes("build"))
    assert.isFalse(s.tool_counts.has("test"))
    assert.isFalse(allowed(g, s, call("deploy")))
  })

  it("tool names that are Object.prototype keys do not confuse the lookup", () => {
    for (const name of ["__proto__", "constructor", "toString", "hasOwnProperty"]) {
      assert.isTrue(allowed(g, empty, call(name)))
    }
    const own = Guard.requirePredecessors(JSON.parse(`{"__proto__":["test"]}`))
    assert.isFalse(allowed(own, empty, call("__proto__")))
    assert.isTrue(allowed(own, snap([A.record("test")]), call("__proto__")))
  })
})

describe("Guard lists and combinators", () => {
  it("allowList and denyList", () => {
    const allowL = Guard.allowList(["read_file", "search"])
    const denyL = Guard.denyList(["rm"])
    assert.isTrue(allowed(allowL, empty, call("search")))
    assert.isFalse(allowed(allowL, empty, call("rm")))
    assert.isFalse(allowed(allowL, empty, call("read_file2")))
    assert.isFalse(allowed(denyL, empty, call("rm")))
    assert.isTrue(allowed(denyL, empty, call("rm2")))
    assert.isFalse(allowed(Guard.allowList([]), empty, call("x")))
  })

  it("all: every guard must allow; the first denial in order is the verdict; none allows", () => {
    const g = Guard.all(Guard.denyList(["x"]), Guard.maxInvocations(0))
    assert.deepStrictEqual(g(empty, call("x")), Guard.deny("x is on the deny list", "denyList([\"x\"])"))
    const second = g(empty, call("y"))
    assert.isTrue(second._tag === "Deny" && second.reason.includes("invocations"))
    assert.isTrue(allowed(Guard.all(Guard.denyList(["x"]), Guard.maxInvocations(1)), empty, call("y")))
    assert.isTrue(allowed(Guard.all(), empty, call("y")))
  })

  it("any: one allowing guard is enough; otherwise every reason; no guards denies", () => {
    const g = Guard.any(Guard.allowList(["a"]), Guard.allowList(["b"]))
    assert.isTrue(allowed(g, empty, call("a")))
    assert.isTrue(allowed(g, empty, call("b")))
    const v = g(empty, call("c"))
    assert.isTrue(v._tag === "Deny" && v.reason.includes("allow list") && v.reason.split(";").length === 2)
    assert.isFalse(allowed(Guard.any(), empty, call("a")))
  })

  it("property: guards are pure — same inputs, same verdict, snapshot untouched", () => {
    const guards = [
      Guard.maxBytesRead(500),
      Guard.maxBytesWritten(500),
      Guard.maxInvocations(5),
      Guard.maxDelegationDepth(2),
      Guard.maxStreak(2),
      Guard.forbiddenTransitions([["a", "b"]]),
      Guard.requirePredecessors({ b: ["a"] }),
      Guard.any(Guard.allowList(["a"]), Guard.maxStreak(1)),
      Guard.all(Guard.denyList(["search"]), Guard.maxInvocations(8))
    ]
    fc.assert(
      fc.property(A.caps, A.ops(12), A.toolParams, (c, list, p) => {
        const s = JournalState.snapshot(A.run(c, list).states.at(-1)!)
        const before = JournalState.snapshotToJson(s)
        for (const g of guards) assert.deepStrictEqual(g(s, p), g(s, p))
        assert.deepStrictEqual(JournalState.snapshotToJson(s), before)
      }),
      { numRuns: A.runs(50) }
    )
  })
})

describe("Guard: a denial names its guard", () => {
  const guardOf = (g: Guard.Guard, s: JournalState.Snapshot, p: Entry.ValidToolParams): string | null => {
    const v = g(s, p)
    return v._tag === "Deny" ? v.guard : null
  }

  it("each combinator with the arguments that decided, in the policy file's notation", () => {
    const afterWrite = snap([A.record("Write", { bytes_read: 10, bytes_written: 10 })])
    assert.strictEqual(guardOf(Guard.maxBytesRead(5), afterWrite, call("r")), "maxBytesRead(5)")
    assert.strictEqual(guardOf(Guard.maxBytesWritten(5n), afterWrite, call("r")), "maxBytesWritten(5)")
    assert.strictEqual(guardOf(Guard.maxInvocations(1), afterWrite, call("r")), "maxInvocations(1)")
    assert.strictEqual(
      guardOf(Guard.maxDelegationDepth(0), empty, call("r", { delegation_depth: 1 })),
      "maxDelegationDepth(0)"
    )
    assert.strictEqual(guardOf(Guard.maxStreak(1), afterWrite, call("Write")), "maxStreak(1)")
    // The pair that matched, not the whole list.
    assert.strictEqual(
      guardOf(Guard.forbiddenTransitions([["Read", "Bash"], ["Write", "Bash"]]), afterWrite, call("Bash")),
      "forbiddenTransitions([[\"Write\",\"Bash\"]])"
    )
    // The denied tool's entry, also for a name that is an Object.prototype key.
    assert.strictEqual(
      guardOf(Guard.requirePredecessors({ Bash: ["Write", "Read"], Edit: ["Read"] }), afterWrite, call("Bash")),
      "requirePredecessors({\"Bash\":[\"Write\",\"Read\"]})"
    )
    assert.strictEqual(
      guardOf(Guard.requirePredecessors(JSON.parse(`{"__proto__":["Read"]}`)), empty, call("__proto__")),
      "requirePredecessors({\"__proto__\":[\"Read\"]})"
    )
    assert.strictEqual(
      guardOf(Guard.allowList(["Read", "Grep"]), empty, call("Bash")),
      "allowList([\"Read\",\"Grep\"])"
    )
    assert.strictEqual(guardOf(Guard.denyList(["rm", "Bash"]), empty, call("Bash")), "denyList([\"Bash\"])")
  })

  it("all passes the first denial through; any names every denying guard; any() itself", () => {
    const g = Guard.all(Guard.denyList(["x"]), Guard.maxInvocations(0))
    assert.strictEqual(guardOf(g, empty, call("y")), "maxInvocations(0)")
    assert.strictEqual(
      guardOf(Guard.any(Guard.allowList(["a"]), Guard.maxStreak(0)), empty, call("b")),
      "any(allowList([\"a\"]), maxStreak(0))"
    )
    assert.strictEqual(guardOf(Guard.any(), empty, call("b")), "any()")
  })

  it("limits that are not whole numbers are named as given", () => {
    assert.strictEqual(guardOf(Guard.maxBytesRead(NaN), empty, call("r")), "maxBytesRead(NaN)")
    assert.strictEqual(guardOf(Guard.maxStreak(1.5), snap([A.record("a")]), call("a")), "maxStreak(1.5)")
  })
})
