/**
 * The contract every `Persistence` adapter passes. Each adapter's test file calls
 * `suite(name, layer)`; the layer is built once per suite and each test works in
 * its own fresh session.
 */
import { assert, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import type * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import * as Stream from "effect/Stream"
import { Checkpoint, Entry, JournalState, Persistence, type SessionMeta } from "../src/index.ts"

let counter = 0
/** A session id unique within the process and across runs. */
export const freshId = (prefix = "s"): string =>
  `${prefix}-${Date.now().toString(36)}-${process.pid}-${(counter++).toString(36)}`

const tool = (i: number): Entry.ValidToolParams => ({
  tool_name: ["read_file", "grep", "bash", "web_fetch"][i % 4]!,
  server_id: "srv-1",
  agent_id: "agent-1",
  bytes_read: i * 10,
  bytes_written: i,
  delegation_depth: i % 3,
  allowed: i % 5 !== 4
})

/**
 * Builds `count` chained entries on top of `state`: tool entries, with every third a
 * message and every seventh an entry of a kind this version does not know.
 */
export const chain = (state: JournalState.JournalState, count: number, ts = 1764400000) => {
  let s = state
  const entries: Array<Entry.Entry> = []
  for (let i = 0; i < count; i++) {
    const n = s.next_sequence
    const e = n % 7 === 6
      ? JournalState.nextOther(s, ts + n, "x-future-kind", { nested: { list: [1, "two", null, true] }, n })
      : n % 3 === 2
      ? JournalState.nextOther(s, ts + n, "message", { role: "user", content: `turn ${n}` })
      : JournalState.nextTool(s, ts + n, tool(n))
    entries.push(e)
    s = JournalState.fold(s, e)
  }
  return { state: s, entries }
}

/** Opens `id` for writing (with `caps` for a new session) and runs `f` with the handle. */
export const withWriter = <A, E>(
  id: string,
  f: (h: Persistence.WriteHandle) => Effect.Effect<A, E>,
  caps?: JournalState.Caps
) =>
  Effect.scoped(Effect.gen(function*() {
    const p = yield* Persistence.Persistence
    const h = yield* p.open(id, { mode: "write", caps })
    return yield* f(h)
  }))

/** The compare-and-append request that stores `entries` on top of `before`. */
export const requestOf = (
  before: JournalState.JournalState,
  entries: ReadonlyArray<Entry.Entry>,
  meta?: SessionMeta.SessionMeta
): Persistence.AppendRequest => ({
  after: Persistence.tipOf(before),
  entries,
  meta,
  head: () => JournalState.head(JournalState.foldAll(before, entries))
})

/** Appends `count` chained entries (`chain`) after `state`, in one batch. */
export const appendChain = (h: Persistence.WriteHandle, state: JournalState.JournalState, count: number) =>
  Effect.gen(function*() {
    const c = chain(state, count)
    yield* h.append(requestOf(state, c.entries))
    return c
  })

const history = (id: string, options?: Persistence.HistoryOptions) =>
  Persistence.Persistence.use((p) => Stream.runCollect(p.history(id, options)))

/**
 * Registers the contract tests for an adapter layer.
 */
export const suite = <E>(name: string, adapter: Layer.Layer<Persistence.Persistence, E>) =>
  layer(adapter, { timeout: "60 seconds", excludeTestServices: true })(`Persistence contract: ${name}`, (it) => {
    it.effect("a new session loads empty and does not exist", () =>
      withWriter(freshId(), (h) =>
        Effect.gen(function*() {
          const loaded = yield* h.load
          assert.isFalse(loaded.exists)
          assert.strictEqual(loaded.state.next_sequence, 0)
          assert.strictEqual(JournalState.head(loaded.state), Entry.ZERO_HASH)
        })))

    it.effect("append then load round-trips state and head", () =>
      Effect.gen(function*() {
        const id = freshId()
        const c = yield* withWriter(id, (h) => appendChain(h, JournalState.empty(id), 25))
        const loaded = yield* withWriter(id, (h) => h.load)
        assert.isTrue(loaded.exists)
        assert.strictEqual(loaded.state.next_sequence, 25)
        assert.strictEqual(JournalState.head(loaded.state), JournalState.head(c.state))
        assert.deepStrictEqual(Checkpoint.encode(loaded.state), Checkpoint.encode(c.state))
        assert.isNull(loaded.recovery.stopped)
      }))

    it.effect("several appends continue one chain", () =>
      Effect.gen(function*() {
        const id = freshId()
        const final = yield* withWriter(id, (h) =>
          Effect.gen(function*() {
            let s = JournalState.empty(id)
            for (let i = 0; i < 5; i++) s = (yield* appendChain(h, s, 1 + i)).state
            return s
          }))
        const loaded = yield* withWriter(id, (h) => h.load)
        assert.strictEqual(loaded.state.next_sequence, 15)
        assert.strictEqual(JournalState.head(loaded.state), JournalState.head(final))
      }))

    it.effect("history reads everything, with from and limit", () =>
      Effect.gen(function*() {
        const id = freshId()
        const c = yield* withWriter(id, (h) => appendChain(h, JournalState.empty(id), 40))
        const all = yield* history(id)
        assert.deepStrictEqual(all.map((e) => e.sequence), c.entries.map((e) => e.sequence))
        assert.deepStrictEqual(all.map((e) => Entry.encode(e)), c.entries.map((e) => Entry.encode(e)))
        const page = yield* history(id, { from: 10, limit: 5 })
        assert.deepStrictEqual(page.map((e) => e.sequence), [10, 11, 12, 13, 14])
        const tail = yield* history(id, { from: 38 })
        assert.deepStrictEqual(tail.map((e) => e.sequence), [38, 39])
        const none = yield* history(id, { from: 40 })
        assert.strictEqual(none.length, 0)
      }))

    it.effect("history of an unknown session fails with SessionNotFound", () =>
      Effect.gen(function*() {
        const exit = yield* Effect.exit(history(freshId()))
        assert.isTrue(Exit.isFailure(exit))
        if (Exit.isFailure(exit)) {
          const e = Exit.findErrorOption(exit)
          assert.strictEqual(e._tag === "Some" ? (e.value as { _tag: string })._tag : "none", "SessionNotFound")
        }
      }))

    it.effect("an append built on a stale tip is refused and stores nothing", () =>
      Effect.gen(function*() {
        const id = freshId()
        yield* withWriter(id, (h) =>
          Effect.gen(function*() {
            const c = yield* appendChain(h, JournalState.empty(id), 6)
            // The same entries again, on the tip they were built on: already stored.
            const again = yield* Effect.exit(h.append(requestOf(JournalState.empty(id), c.entries)))
            assert.isTrue(Exit.isFailure(again))
            // A writer that believes in an older tip (sequence 4 of 6).
            const stale = chain(JournalState.empty(id), 4).state
            const late = yield* Effect.exit(h.append(requestOf(stale, chain(stale, 2).entries)))
            assert.isTrue(Exit.isFailure(late))
            if (Exit.isFailure(late)) {
              const e = Exit.findErrorOption(late)
              assert.strictEqual(e._tag === "Some" ? e.value._tag : "none", "SequenceConflict")
            }
            // The right tip with a wrong hash is refused too.
            const forged = yield* Effect.exit(h.append({
              ...requestOf(c.state, chain(c.state, 1).entries),
              after: { sequence: 6, hash: "f".repeat(64) }
            }))
            assert.isTrue(Exit.isFailure(forged))
            yield* appendChain(h, c.state, 2)
          }))
        const all = yield* history(id)
        assert.deepStrictEqual(all.map((e) => e.sequence), [0, 1, 2, 3, 4, 5, 6, 7])
      }))

    it.effect("a gap or a fork is refused and stores nothing", () =>
      Effect.gen(function*() {
        const id = freshId()
        yield* withWriter(id, (h) =>
          Effect.gen(function*() {
            const c = yield* appendChain(h, JournalState.empty(id), 4)
            const ahead = chain(c.state, 3)
            const gap = yield* Effect.exit(
              h.append({
                ...requestOf(c.state, ahead.entries.slice(1)),
                after: { sequence: 5, hash: ahead.entries[0]!.entry_hash }
              })
            )
            assert.isTrue(Exit.isFailure(gap))
            // A different entry at a stored sequence: same position, other content.
            const forkBase = chain(JournalState.empty(id), 3).state
            const fork = JournalState.nextTool(forkBase, 1, { ...tool(99), tool_name: "forked" })
            const forked = yield* Effect.exit(h.append(requestOf(forkBase, [fork])))
            assert.isTrue(Exit.isFailure(forked))
          }))
        const all = yield* history(id)
        assert.deepStrictEqual(all.map((e) => e.sequence), [0, 1, 2, 3])
        const loaded = yield* withWriter(id, (h) => h.load)
        assert.strictEqual(loaded.state.next_sequence, 4)
      }))

    it.effect("a checkpoint is used on load and entries after it are replayed", () =>
      Effect.gen(function*() {
        const id = freshId()
        const final = yield* withWriter(id, (h) =>
          Effect.gen(function*() {
            const a = yield* appendChain(h, JournalState.empty(id, { entry_cap: 8 }), 30)
            yield* h.checkpoint(Checkpoint.encode(a.state))
            return (yield* appendChain(h, a.state, 12)).state
          }), { entry_cap: 8 })
        const loaded = yield* withWriter(id, (h) => h.load)
        assert.strictEqual(loaded.state.next_sequence, 42)
        assert.strictEqual(loaded.state.entry_cap, 8)
        assert.strictEqual(JournalState.head(loaded.state), JournalState.head(final))
        assert.deepStrictEqual(Checkpoint.encode(loaded.state), Checkpoint.encode(final))
        assert.notStrictEqual(loaded.recovery.checkpoint, "none")
        // History still reaches back past the checkpoint.
        assert.strictEqual((yield* history(id)).length, 42)
      }))

    it.effect("a checkpoint stored as a state (when the handle offers it) follows the checkpoint's contract", () =>
      Effect.gen(function*() {
        const id = freshId()
        const final = yield* withWriter(id, (h) =>
          Effect.gen(function*() {
            const store = h.checkpointState
            const a = yield* appendChain(h, JournalState.empty(id, { entry_cap: 8 }), 30)
            if (store === undefined) return null
            // Ahead of storage, another chain of the same length: refused.
            assert.isTrue(Exit.isFailure(yield* Effect.exit(store(chain(a.state, 2).state))))
            assert.isTrue(
              Exit.isFailure(yield* Effect.exit(store(chain(JournalState.empty(id, { entry_cap: 8 }), 30, 1).state)))
            )
            assert.isAbove(yield* store(a.state), 0)
            // Older than the stored one: refused.
            assert.isTrue(
              Exit.isFailure(yield* Effect.exit(store(chain(JournalState.empty(id, { entry_cap: 8 }), 4).state)))
            )
            return (yield* appendChain(h, a.state, 12)).state
          }), { entry_cap: 8 })
        if (final === null) return
        const loaded = yield* withWriter(id, (h) => h.load)
        assert.strictEqual(loaded.recovery.checkpoint, "loaded")
        assert.strictEqual(loaded.state.next_sequence, 42)
        assert.strictEqual(JournalState.head(loaded.state), JournalState.head(final))
        assert.deepStrictEqual(Checkpoint.encode(loaded.state), Checkpoint.encode(final))
        const verified = yield* withWriter(id, (h) => h.verify)
        assert.isNull(verified.recovery.stopped)
      }))

    it.effect("appends report their bytes, loads report the bytes since the checkpoint", () =>
      Effect.gen(function*() {
        const id = freshId()
        const sizes = yield* withWriter(id, (h) =>
          Effect.gen(function*() {
            const a = chain(JournalState.empty(id), 10)
            const first = yield* h.append(requestOf(JournalState.empty(id), a.entries))
            const size = yield* h.checkpoint(Checkpoint.encode(a.state))
            const b = chain(a.state, 3)
            const second = yield* h.append(requestOf(a.state, b.entries))
            return { first: first.bytes, size, second: second.bytes }
          }))
        assert.isAbove(sizes.first, 10 * 100)
        assert.isAbove(sizes.size, 0)
        assert.isAbove(sizes.second, 0)
        const loaded = yield* withWriter(id, (h) => h.load)
        assert.strictEqual(loaded.state.next_sequence, 13)
        // Counted the adapter's way; what matters is that a reopen carries on.
        assert.isAbove(loaded.checkpointBytes ?? 0, 0)
        assert.isAbove(loaded.sinceCheckpointBytes ?? 0, 0)
      }))

    it.effect("a checkpoint that storage does not bear out is refused", () =>
      Effect.gen(function*() {
        const id = freshId()
        yield* withWriter(id, (h) =>
          Effect.gen(function*() {
            const a = yield* appendChain(h, JournalState.empty(id), 8)
            // Ahead of storage.
            const ahead = chain(a.state, 2).state
            assert.isTrue(Exit.isFailure(yield* Effect.exit(h.checkpoint(Checkpoint.encode(ahead)))))
            // Another chain of the same length.
            const other = chain(JournalState.empty(id), 8, 1).state
            assert.isTrue(Exit.isFailure(yield* Effect.exit(h.checkpoint(Checkpoint.encode(other)))))
            // Older than the stored one.
            yield* h.checkpoint(Checkpoint.encode(a.state))
            const older = chain(JournalState.empty(id), 4).state
            assert.isTrue(Exit.isFailure(yield* Effect.exit(h.checkpoint(Checkpoint.encode(older)))))
          }))
        const loaded = yield* withWriter(id, (h) => h.load)
        assert.isNull(loaded.recovery.stopped)
        assert.strictEqual(loaded.state.next_sequence, 8)
      }))

    it.effect("a read handle has no write methods", () =>
      Effect.gen(function*() {
        const id = freshId()
        yield* withWriter(id, (h) => appendChain(h, JournalState.empty(id), 2))
        const p = yield* Persistence.Persistence
        const keys = yield* Effect.scoped(Effect.map(p.open(id, { mode: "read" }), (h) => Object.keys(h).sort()))
        assert.deepStrictEqual(keys, ["id", "load", "verify"])
      }))

    it.effect("caps of a new session come from the open options", () =>
      Effect.gen(function*() {
        const id = freshId()
        yield* Effect.scoped(Effect.gen(function*() {
          const p = yield* Persistence.Persistence
          const h = yield* p.open(id, { mode: "write", caps: { entry_cap: 0 } })
          const l = yield* h.load
          assert.strictEqual(l.state.entry_cap, 0)
          const c = chain(l.state, 5)
          for (const e of c.entries) assert.strictEqual(e.prev_hash, Entry.ZERO_HASH)
          yield* h.append(requestOf(l.state, c.entries))
          yield* h.checkpoint(Checkpoint.encode(c.state))
        }))
        const again = yield* Effect.scoped(Effect.gen(function*() {
          const p = yield* Persistence.Persistence
          const h = yield* p.open(id, { mode: "write" })
          return yield* h.load
        }))
        assert.strictEqual(again.state.entry_cap, 0)
        assert.strictEqual(again.state.next_sequence, 5)
      }))

    it.effect("caps of a new session survive a reopen without an explicit checkpoint", () =>
      Effect.gen(function*() {
        const id = freshId()
        const p = yield* Persistence.Persistence
        const written = yield* Effect.scoped(Effect.gen(function*() {
          const h = yield* p.open(id, { mode: "write", caps: { entry_cap: 0, tool_counts_cap: 1 } })
          return yield* appendChain(h, (yield* h.load).state, 4)
        }))
        // Reopened with other caps: the session keeps the ones it was created with.
        const again = yield* Effect.scoped(Effect.gen(function*() {
          const h = yield* p.open(id, { mode: "write", caps: { entry_cap: 16, tool_counts_cap: 16 } })
          return yield* h.load
        }))
        assert.strictEqual(again.state.entry_cap, 0)
        assert.strictEqual(again.state.tool_counts_cap, 1)
        assert.strictEqual(JournalState.head(again.state), JournalState.head(written.state))
      }))

    it.effect("entries of unknown kinds survive storage untouched", () =>
      Effect.gen(function*() {
        const id = freshId()
        const payload = { "é": [1.5, -0, 1e21, "\u2028"], z: { b: 1, a: 2 }, "": null }
        const e = Entry.makeOther(
          { sequence: 0, prev_hash: Entry.ZERO_HASH, timestamp_secs: 5 },
          "vendor.custom:v9",
          payload
        )
        yield* withWriter(id, (h) => h.append(requestOf(JournalState.empty(id), [e])))
        const [back] = yield* history(id)
        assert.isDefined(back)
        assert.strictEqual(back!.kind, "vendor.custom:v9")
        assert.deepStrictEqual(Entry.encode(back!), Entry.encode(e))
        assert.strictEqual(Entry.computeHash(back!), e.entry_hash)
      }))

    it.effect("metadata is stored with an append and the newest wins", () =>
      Effect.gen(function*() {
        const id = freshId()
        yield* withWriter(id, (h) =>
          Effect.gen(function*() {
            const c = chain(JournalState.empty(id), 2)
            yield* h.append(requestOf(JournalState.empty(id), c.entries, { title: "first", updated_at: 10 }))
            yield* h.append(requestOf(c.state, [], { title: "second", labels: ["x"], updated_at: 20 }))
          }))
        const loaded = yield* withWriter(id, (h) => h.load)
        assert.strictEqual(loaded.state.meta?.title, "second")
        assert.deepStrictEqual(loaded.state.meta?.labels, ["x"])
      }))

    it.effect("a second writer is refused while the first holds the session", () =>
      Effect.gen(function*() {
        const id = freshId()
        const p = yield* Persistence.Persistence
        yield* Effect.scoped(Effect.gen(function*() {
          yield* p.open(id, { mode: "write" })
          const second = yield* Effect.exit(Effect.scoped(p.open(id, { mode: "write" })))
          assert.isTrue(Exit.isFailure(second))
          // Readers never need the writer's guarantee.
          yield* Effect.scoped(p.open(id, { mode: "read" }))
        }))
        // Released with the first writer's scope.
        yield* Effect.scoped(p.open(id, { mode: "write" }))
      }))

    it.effect("list shows stored sessions; delete removes one", () =>
      Effect.gen(function*() {
        const a = freshId("list")
        const b = freshId("list")
        yield* withWriter(a, (h) => appendChain(h, JournalState.empty(a), 3))
        const cb = yield* withWriter(b, (h) => appendChain(h, JournalState.empty(b), 5))
        const p = yield* Persistence.Persistence
        const listed = yield* p.list
        const infoB = listed.find((s) => s.id === b)
        assert.isDefined(listed.find((s) => s.id === a))
        assert.strictEqual(infoB?.entries, 5)
        assert.strictEqual(infoB?.head, JournalState.head(cb.state))
        assert.strictEqual(infoB?.lastHash, JournalState.lastHash(cb.state))
        assert.strictEqual(infoB?.head, infoB?.lastHash)
        yield* p.delete(a)
        const after = yield* p.list
        assert.isUndefined(after.find((s) => s.id === a))
        assert.isDefined(after.find((s) => s.id === b))
        const gone = yield* Effect.exit(history(a))
        assert.isTrue(Exit.isFailure(gone))
        const again = yield* Effect.exit(p.delete(a))
        assert.isTrue(Exit.isFailure(again))
      }))

    it.effect("list shows the exported head, apart from the newest hash once the ring evicts", () =>
      Effect.gen(function*() {
        const id = freshId("evict")
        const c = yield* withWriter(id, (h) => appendChain(h, JournalState.empty(id, { entry_cap: 2 }), 5), {
          entry_cap: 2
        })
        const head = JournalState.head(c.state)
        const lastHash = JournalState.lastHash(c.state)
        assert.notStrictEqual(head, lastHash)
        assert.strictEqual(lastHash, c.entries[4]!.entry_hash)
        const p = yield* Persistence.Persistence
        const info = (yield* p.list).find((s) => s.id === id)
        assert.strictEqual(info?.entries, 5)
        assert.strictEqual(info?.head, head)
        assert.strictEqual(info?.lastHash, lastHash)
        // A checkpoint and later appends keep the listed head in step.
        const more = yield* withWriter(id, (h) =>
          Effect.gen(function*() {
            yield* h.checkpoint(Checkpoint.encode(c.state))
            return yield* appendChain(h, c.state, 2)
          }))
        const after = (yield* p.list).find((s) => s.id === id)
        assert.strictEqual(after?.entries, 7)
        assert.strictEqual(after?.head, JournalState.head(more.state))
        assert.strictEqual(after?.lastHash, JournalState.lastHash(more.state))
        assert.notStrictEqual(after?.head, info?.head)
      }))

    it.effect("delete is refused while a writer holds the session", () =>
      Effect.gen(function*() {
        const id = freshId()
        const p = yield* Persistence.Persistence
        yield* Effect.scoped(Effect.gen(function*() {
          const h = yield* p.open(id, { mode: "write" })
          yield* appendChain(h, JournalState.empty(id), 2)
          const exit = yield* Effect.exit(p.delete(id))
          assert.isTrue(Exit.isFailure(exit))
        }))
        yield* p.delete(id)
      }))

    it.effect("follow replays from a sequence and then delivers new entries", () =>
      Effect.gen(function*() {
        const id = freshId()
        const p = yield* Persistence.Persistence
        const first = yield* withWriter(id, (h) => appendChain(h, JournalState.empty(id), 5))
        const fiber = yield* p.follow(id, 2).pipe(Stream.take(8), Stream.runCollect, Effect.forkChild)
        yield* Effect.sleep("50 millis")
        yield* withWriter(id, (h) => appendChain(h, first.state, 5))
        const got = yield* Fiber.join(fiber).pipe(Effect.timeout("20 seconds"))
        assert.deepStrictEqual(got.map((e) => e.sequence), [2, 3, 4, 5, 6, 7, 8, 9])
      }))

    it.effect("loaded state verifies", () =>
      Effect.gen(function*() {
        const id = freshId()
        yield* withWriter(id, (h) => appendChain(h, JournalState.empty(id, { entry_cap: 4 }), 20), { entry_cap: 4 })
        const loaded = yield* withWriter(id, (h) => h.load)
        assert.isTrue(Result.isSuccess(JournalState.verify(loaded.state)))
        assert.strictEqual(JournalState.entryCount(loaded.state), 4)
      }))
  })
