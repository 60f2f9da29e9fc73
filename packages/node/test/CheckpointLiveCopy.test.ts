/**
 * A live copy of a session directory taken while version 3 checkpoints are being
 * written (docs/DESIGN.md §10, §14): each copy is taken file by file in readdir's
 * order, as `cp -r` would, one file between two appends, so a copy can hold an old
 * checkpoint with newer segments or a new checkpoint with older segments. A fresh
 * journal opened on a copy loads it or fails with a typed error, never a defect (a
 * checkpoint newer than a segment copied before it reads as a cut, `CorruptJournal`,
 * which `repair` mends as any other); what it loads verifies, its tree is null or the
 * tree of the entries it reads from 0, and it loses none of the entries the copy's
 * segments hold from sequence 0 on.
 */
import { assert, describe, it } from "@effect/vitest"
import { Entry, Merkle, SessionJournal } from "@session-journal/core"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as fs from "node:fs"
import * as path from "node:path"
import { NodePersistence } from "../src/index.ts"
import * as Segment from "../src/internal/segment.ts"
import { tempDir } from "./helpers.ts"

const ID = "live-1"
const ENTRIES = 120

const layerAt = (root: string, entryCap: number) =>
  SessionJournal.layer({ checkpointMinBytes: 400, caps: { entry_cap: entryCap } }).pipe(
    Layer.provide(NodePersistence.layer({ root }))
  )

// A copy in progress: the names readdir gave when it started, copied one per step.
interface Copy {
  readonly to: string
  readonly names: Array<string>
}

// The order files are copied in: readdir's, or the checkpoint first (an old
// checkpoint with newer segments) or last (a new checkpoint with older segments),
// so both mixes happen whatever order this filesystem's readdir gives.
type Order = "readdir" | "checkpoint first" | "checkpoint last"
const ORDERS: ReadonlyArray<Order> = ["readdir", "checkpoint first", "checkpoint last"]

const startCopy = (dir: string, to: string, order: Order): Copy => {
  fs.mkdirSync(to, { recursive: true })
  const names = fs.readdirSync(dir)
  if (order === "readdir") return { to, names }
  const others = names.filter((n) => n !== "checkpoint.json")
  const checkpoint = names.includes("checkpoint.json") ? ["checkpoint.json"] : []
  return { to, names: order === "checkpoint first" ? [...checkpoint, ...others] : [...others, ...checkpoint] }
}

// Copies the next file; a file removed since readdir is skipped, as `cp` reports
// and goes on. Returns whether the copy is done.
const stepCopy = (dir: string, copy: Copy): boolean => {
  const name = copy.names.shift()
  if (name === undefined) return true
  try {
    fs.writeFileSync(path.join(copy.to, name), fs.readFileSync(path.join(dir, name)), { mode: 0o600 })
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e
  }
  return copy.names.length === 0
}

// The entries the copy's segments hold, by sequence: every complete entry line.
const heldBySegments = (dir: string): Map<number, Entry.Entry> => {
  const held = new Map<number, Entry.Entry>()
  for (const { name } of Segment.segmentsOf(fs.readdirSync(dir))) {
    const lines = fs.readFileSync(path.join(dir, name), "utf8").split("\n")
    lines.pop() // the part after the last newline is not a complete line
    for (const line of lines) {
      const record = Segment.parseText(line)
      if (record._tag === "Entry") held.set(record.entry.sequence, record.entry)
    }
  }
  return held
}

const treeOf = (entries: ReadonlyArray<Entry.Entry>) =>
  Merkle.fromLeaves(entries.map((e) => Merkle.entryLeaf(e.entry_hash)))

const hex = (range: Merkle.CompactRange | null) =>
  range === null ? null : { size: range.size, nodes: range.nodes.map((n) => Buffer.from(n).toString("hex")) }

const open = (copy: string, entryCap: number) =>
  Effect.runPromiseExit(
    Effect.gen(function*() {
      const journal = yield* SessionJournal.SessionJournal
      const state = yield* journal.state(ID)
      const report = yield* journal.verify(ID)
      const all = yield* Stream.runCollect(journal.entries(ID))
      return { state, report, all }
    }).pipe(Effect.provide(layerAt(path.dirname(copy), entryCap)), Effect.scoped)
  )

const tagOf = (failure: { readonly _tag: "Some"; readonly value: unknown } | { readonly _tag: "None" }): string =>
  failure._tag === "Some" && typeof failure.value === "object" && failure.value !== null && "_tag" in failure.value
    ? String(failure.value._tag)
    : "unknown"

const probe = async (entryCap: number) => {
  const root = tempDir("live")
  const dir = path.join(root, ID)
  const copies: Array<string> = []
  const written = await Effect.runPromise(
    Effect.gen(function*() {
      const journal = yield* SessionJournal.SessionJournal
      const active: Array<Copy> = []
      for (let i = 0; i < ENTRIES; i++) {
        yield* journal.writeAll(ID, [{
          _tag: "Other" as const,
          kind: "message",
          payload: { n: i, pad: "x".repeat(40) }
        }])
        // A new copy every few appends, each advancing one file per append.
        if (i % 5 === 0) {
          const to = path.join(tempDir("live-copy"), ID)
          copies.push(to)
          active.push(startCopy(dir, to, ORDERS[copies.length % ORDERS.length]!))
        }
        for (let c = active.length - 1; c >= 0; c--) {
          if (stepCopy(dir, active[c]!)) active.splice(c, 1)
        }
      }
      for (const copy of active) while (!stepCopy(dir, copy));
      const all = yield* Stream.runCollect(journal.entries(ID))
      yield* journal.close(ID)
      return all
    }).pipe(Effect.provide(layerAt(root, entryCap)), Effect.scoped)
  )
  assert.strictEqual(written.length, ENTRIES)
  let checkpointsSeen = 0
  let repairs = 0
  for (const copy of copies) {
    const held = heldBySegments(copy)
    // The entries the copy's segments hold from 0 on, each as it was written.
    let prefix = 0
    while (held.get(prefix)?.entry_hash === written[prefix]?.entry_hash && held.has(prefix)) prefix++
    if (fs.existsSync(path.join(copy, "checkpoint.json"))) checkpointsSeen++
    const where = `${copy} (segments hold 0..${prefix - 1})`
    let exit = await open(copy, entryCap)
    if (Exit.isFailure(exit)) {
      assert.isFalse(Cause.hasDies(exit.cause), `${where}: a defect: ${Cause.pretty(exit.cause)}`)
      const failure = Cause.findErrorOption(exit.cause)
      assert.isTrue(failure._tag === "Some", `${where}: ${Cause.pretty(exit.cause)}`)
      // A checkpoint newer than a segment copied before it reads as a cut.
      assert.strictEqual(tagOf(failure), "CorruptJournal", `${where}: ${Cause.pretty(exit.cause)}`)
      repairs++
      // Damage the copy's load reports is repaired as any other: then it loads.
      const repaired = await Effect.runPromiseExit(NodePersistence.repair({ root: path.dirname(copy) }, ID))
      assert.isTrue(
        Exit.isSuccess(repaired),
        `${where}: repair: ${Exit.isFailure(repaired) && Cause.pretty(repaired.cause)}`
      )
      exit = await open(copy, entryCap)
      assert.isTrue(Exit.isSuccess(exit), `${where}: after repair: ${Exit.isFailure(exit) && Cause.pretty(exit.cause)}`)
      if (Exit.isFailure(exit)) continue
    }
    const { all, report, state } = exit.value
    assert.strictEqual(report.nextSequence, state.next_sequence, where)
    assert.strictEqual(all.length, state.next_sequence, where)
    all.forEach((e, i) => assert.strictEqual(e.sequence, i, where))
    if (state.tree !== null) assert.deepStrictEqual(hex(state.tree), hex(treeOf(all)), where)
    let kept = 0
    while (kept < all.length && all[kept]!.entry_hash === written[kept]!.entry_hash) kept++
    assert.isAtLeast(kept, prefix, `${where}: loads ${kept} of the entries written`)
  }
  return { copies: copies.length, checkpointsSeen, repairs }
}

describe("a live copy of a session directory while version 3 checkpoints are written", () => {
  it(
    "loads or fails typed; verifies; its tree is its entries'; loses no entry its segments hold (ring evicts)",
    async () => {
      const r = await probe(16)
      assert.isAbove(r.checkpointsSeen, 10)
      // Both mixes happened: copies that load as they are, and copies that needed repair.
      assert.isAtLeast(r.copies - r.repairs, 5)
      assert.isAbove(r.repairs, 0)
    },
    20_000
  )

  it("the same with a ring that holds the whole history", async () => {
    const r = await probe(100_000)
    assert.isAbove(r.checkpointsSeen, 10)
    // Both mixes happened: copies that load as they are, and copies that needed repair.
    assert.isAtLeast(r.copies - r.repairs, 5)
    assert.isAbove(r.repairs, 0)
  }, 20_000)
})
