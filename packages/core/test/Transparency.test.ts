/**
 * A session's tree from its stored history, on the in-memory adapter: the tree's leaves
 * are the entries' hashes in sequence order, every inclusion and consistency proof it
 * hands out verifies with `Merkle` alone, the check against a tree head tells a
 * consistent journal from a cut, a replaced one and another session's head, and a
 * history that skips a sequence or holds an entry that does not recompute to its hash
 * has no tree.
 */
import { assert, layer } from "@effect/vitest"
import { Entry, Merkle, Persistence, SessionJournal, SignedNote, Transparency, TreeHead } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import * as Stream from "effect/Stream"
import { nthToolParams } from "./fixtures.ts"

const Live = SessionJournal.layer().pipe(Layer.provideMerge(Persistence.layerMemory()))

const params = (i: number): Entry.ToolParams => nthToolParams(i)

const fill = (id: string, n: number) =>
  Effect.gen(function*() {
    const j = yield* SessionJournal.SessionJournal
    const out: Array<Entry.Entry> = []
    for (let i = 0; i < n; i++) {
      out.push(i % 2 === 0 ? yield* j.record(id, params(i)) : yield* j.append(id, "message", { i }))
    }
    return out
  })

const ok = (r: Result.Result<unknown, unknown>) => Result.isSuccess(r)

layer(Live)("Transparency on memory", (it) => {
  it.effect("the tree is RFC 6962 over the entry hashes; every proof it gives verifies", () =>
    Effect.gen(function*() {
      const entries = yield* fill("tree", 13)
      const tree = yield* Transparency.tree("tree")
      const expected = Merkle.fromLeaves(entries.map((e) => Merkle.entryLeaf(e.entry_hash)))
      assert.strictEqual(tree.size, 13)
      assert.deepStrictEqual(Merkle.root(tree), Merkle.root(expected))
      for (let size = 1; size <= 13; size++) {
        for (let seq = 0; seq < size; seq++) {
          const p = yield* Transparency.inclusion("tree", seq, size)
          assert.strictEqual(p.entry.entry_hash, entries[seq]!.entry_hash)
          const leaf = Merkle.leafHash(Merkle.entryLeaf(p.entry.entry_hash))
          assert.isTrue(ok(Merkle.verifyInclusion(seq, size, leaf, p.proof, p.root)), `${seq} in ${size}`)
        }
        for (let old = 0; old <= size; old++) {
          const c = yield* Transparency.consistency("tree", old, size)
          assert.isTrue(ok(Merkle.verifyConsistency(old, size, c.proof, c.oldRoot, c.newRoot)), `${old} to ${size}`)
        }
      }
      const last = yield* Transparency.inclusion("tree", 12)
      assert.strictEqual(last.treeSize, 13)
      const failure = yield* Effect.flip(Transparency.inclusion("tree", 3, 14))
      assert.strictEqual(failure._tag, "TreeUnavailable")
      const beyond = yield* Effect.flip(Transparency.consistency("tree", 5, 20))
      assert.strictEqual(beyond._tag === "TreeUnavailable" && beyond.reason, "size")
    }))

  it.effect("a tree head is checked: consistent, cut, replaced, another session's", () =>
    Effect.gen(function*() {
      yield* fill("heads", 9)
      const t5 = yield* Effect.map(Transparency.consistency("heads", 5, 5), (c) => c.oldRoot)
      const origin = TreeHead.origin("journal.example", "heads")
      const head = (size: number, root: Uint8Array): TreeHead.TreeHead => ({ origin, size, root, extensions: [] })
      const good = yield* Transparency.checkHead("heads", head(5, t5), origin)
      assert.strictEqual(good._tag, "consistent")
      if (good._tag === "consistent") assert.strictEqual(good.currentSize, 9)
      const cut = yield* Transparency.checkHead("heads", head(12, t5), origin)
      assert.deepStrictEqual(cut, { _tag: "cut", size: 12, currentSize: 9 })
      const replaced = yield* Transparency.checkHead("heads", head(6, t5), origin)
      assert.strictEqual(replaced._tag, "replaced")
      const other = yield* Transparency.checkHead("heads", head(5, t5), TreeHead.origin("journal.example", "else"))
      assert.strictEqual(other._tag, "other_log")
    }))

  it.effect("signedHeads signs the stored history, then again after appends, each head the tree of its size", () =>
    Effect.gen(function*() {
      const first = yield* fill("live", 5)
      const signer = Result.getOrThrow(SignedNote.signerFromSeed("journal.example", new Uint8Array(32).fill(3)))
      const fiber = yield* Transparency.signedHeads("live", signer).pipe(
        Stream.takeUntil((h) => h.head.size >= 8),
        Stream.runCollect,
        Effect.forkChild
      )
      const more = yield* fill("live", 3)
      const heads = yield* Fiber.join(fiber)
      const all = [...first, ...more]
      assert.isAtLeast(heads.length, 1)
      let previous = 0
      for (const { head, note } of heads) {
        assert.isAtLeast(head.size, previous)
        previous = head.size
        assert.strictEqual(head.origin, "journal.example/live")
        const opened = Result.getOrThrow(SignedNote.open(note, [signer.verifier]))
        assert.deepStrictEqual(Result.getOrThrow(TreeHead.parse(opened.text)).root, head.root)
        const expected = Merkle.root(
          Merkle.fromLeaves(all.slice(0, head.size).map((e) => Merkle.entryLeaf(e.entry_hash)))
        )
        assert.deepStrictEqual(head.root, expected, `size ${head.size}`)
      }
      assert.strictEqual(previous, 8)
    }))

  it.effect("signedHeads from the state: after a reopen it reads no history before the state's size", () =>
    Effect.scoped(Effect.gen(function*() {
      const persistence = yield* Persistence.makeMemory()
      const signer = Result.getOrThrow(SignedNote.signerFromSeed("journal.example", new Uint8Array(32).fill(5)))
      const reads: Array<number> = []
      const counted: Persistence.Persistence["Service"] = {
        ...persistence,
        history: (id, options) => {
          reads.push(options?.from ?? 0)
          return persistence.history(id, options)
        }
      }
      const written: Array<Entry.Entry> = []
      const write = (from: number, to: number) =>
        Effect.gen(function*() {
          const j = yield* SessionJournal.make({ checkpointMinBytes: 2_000, caps: { entry_cap: 8 } })
          for (let i = from; i < to; i++) written.push(yield* j.record("resume", params(i)))
          return j
        }).pipe(Effect.provideService(Persistence.Persistence, counted))
      yield* (yield* write(0, 200)).close("resume")
      const j = yield* write(200, 200)
      reads.length = 0
      const fiber = yield* Transparency.signedHeads("resume", signer, { start: "state" }).pipe(
        Stream.take(1),
        Stream.runCollect,
        Effect.provideService(SessionJournal.SessionJournal, j),
        Effect.forkChild
      )
      yield* Effect.yieldNow
      written.push(yield* j.record("resume", params(200)))
      const [head] = yield* Fiber.join(fiber)
      assert.strictEqual(head!.head.size, 201)
      const expected = Merkle.root(Merkle.fromLeaves(written.map((e) => Merkle.entryLeaf(e.entry_hash))))
      assert.deepStrictEqual(head!.head.root, expected)
      // Whatever the load replayed after the checkpoint, nothing from sequence 0.
      assert.isFalse(reads.includes(0), JSON.stringify(reads))
    })))

  it.effect("a session that does not exist has no tree", () =>
    Effect.gen(function*() {
      const e = yield* Effect.flip(Transparency.tree("nobody"))
      assert.strictEqual(e._tag, "SessionNotFound")
    }))
})

// A storage whose history is given (the damage is the point), for the stream's checks.
const storing = (entries: ReadonlyArray<Entry.Entry>) =>
  Layer.effect(
    Persistence.Persistence,
    Effect.map(Persistence.makeMemory(), (memory) => ({ ...memory, history: () => Stream.fromIterable(entries) }))
  )

const chain = (n: number): Array<Entry.Entry> => {
  const out: Array<Entry.Entry> = []
  for (let i = 0; i < n; i++) {
    out.push(
      Entry.makeOther(
        { sequence: i, prev_hash: out[i - 1]?.entry_hash ?? Entry.ZERO_HASH, timestamp_secs: 1 },
        "message",
        { i }
      )
    )
  }
  return out
}

layer(storing([...chain(4).slice(0, 2), ...chain(4).slice(3)]))("Transparency: a history with a gap", (it) => {
  it.effect("has no tree (missing)", () =>
    Effect.gen(function*() {
      const e = yield* Effect.flip(Transparency.tree("s"))
      assert.strictEqual(e._tag === "TreeUnavailable" && e.reason, "missing")
    }))
})

layer(storing(chain(4).slice(2)))("Transparency: a history that starts later", (it) => {
  it.effect("has no tree (missing)", () =>
    Effect.gen(function*() {
      const e = yield* Effect.flip(Transparency.tree("s"))
      assert.isTrue(
        e._tag === "TreeUnavailable" && e.reason === "missing" && e.detail.includes("starts at sequence 2"),
        e.message
      )
    }))
})

layer(storing(chain(3).map((e, i) => i === 1 ? { ...e, payload: { i: 99 } } as Entry.Entry : e)))(
  "Transparency: an edited entry",
  (it) => {
    it.effect("has no tree (entry_hash)", () =>
      Effect.gen(function*() {
        const e = yield* Effect.flip(Transparency.tree("s"))
        assert.strictEqual(e._tag === "TreeUnavailable" && e.reason, "entry_hash")
      }))
  }
)
