/**
 * `JournalSessionStore` as a session's history grows: the work of an append of
 * fresh uuids does not grow with the uuids already stored. Counted, not timed: the
 * stored entries the store reads (through the journal's `entries`) while it
 * appends 20,000 uuids in batches of 200 (100,000 with `STRESS=1`) on the
 * filesystem, within its `indexBytes`, stay under one generation of the index's
 * filters in all (a false hit reads that generation's lines, never the history);
 * a retried batch and a replay of old uuids read only the generations that hold
 * them and store nothing. A property test: whatever batches of fresh and repeated
 * uuids arrive, with a budget small enough that generations merge, each uuid is
 * stored once, in the order of its first append. The seed is in the test's name
 * (`SEED=…` replays).
 */
import { SessionJournal } from "@session-journal/core"
import { NodePersistence } from "@session-journal/node"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Stream from "effect/Stream"
import * as fc from "fast-check"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, assert, describe, it } from "vitest"
import { JournalSessionStore } from "../src/index.ts"
import * as StoreIndex from "../src/internal/storeIndex.ts"

const SEED = Number(process.env["SEED"] ?? Math.floor(Math.random() * 2 ** 31))
const STRESS = process.env["STRESS"] === "1"

const made: Array<string> = []
afterAll(() => {
  for (const dir of made.splice(0)) fs.rmSync(dir, { recursive: true, force: true })
})

// A store on a fresh journal directory whose journal counts the stored entries read.
const countingStore = (options: JournalSessionStore.Options) => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "sj-store-history-"))
  made.push(root)
  const reads = { entries: 0 }
  const counting = Layer.effect(
    SessionJournal.SessionJournal,
    Effect.map(Effect.service(SessionJournal.SessionJournal), (j) =>
      SessionJournal.SessionJournal.of({
        ...j,
        entries: (id, o) => Stream.tap(j.entries(id, o), () => Effect.sync(() => void reads.entries++))
      }))
  ).pipe(
    Layer.provide(SessionJournal.layer()),
    Layer.provide(NodePersistence.layer({ root }))
  )
  const runtime = ManagedRuntime.make(JournalSessionStore.layer(options).pipe(Layer.provide(counting)))
  return {
    reads,
    store: () => runtime.runPromise(Effect.service(JournalSessionStore.Service)),
    close: () => runtime.dispose()
  }
}

const key = { projectKey: "-tmp-history", sessionId: "5f8c2a4e-0000-4000-8000-00000000abcd" }
const uuid = (i: number) => `00000000-0000-4000-8000-${i.toString(16).padStart(12, "0")}`
const entry = (i: number): JournalSessionStore.SessionStoreEntry => ({
  type: i % 2 === 0 ? "user" : "assistant",
  uuid: uuid(i),
  message: { role: "user", content: `line ${i}` }
})
const batchOf = (from: number, count: number) => Array.from({ length: count }, (_, k) => entry(from + k))

describe("JournalSessionStore as the history grows", () => {
  const total = STRESS ? 100_000 : 20_000
  // Small enough in the normal suite that the single filter of old filled up.
  const indexBytes = STRESS ? StoreIndex.DEFAULT_BUDGET : 256 * 1024
  const generation = new StoreIndex.Generations(indexBytes / 2).capacity

  it(`${total} uuids in batches of 200: appends read under one generation of stored lines in all`, async () => {
    const { close, reads, store } = countingStore({ indexBytes })
    try {
      const ops = await store()
      const perAppend: Array<number> = []
      for (let i = 0; i < total; i += 200) {
        const before = reads.entries
        await Effect.runPromise(ops.append(key, batchOf(i, 200)))
        perAppend.push(reads.entries - before)
      }
      const all = perAppend.reduce((a, b) => a + b, 0)
      assert.isAtMost(all, generation, `stored entries read over ${perAppend.length} appends`)
      assert.isAtMost(Math.max(...perAppend.slice(-10)), generation)

      // A retried batch and a replay of the first 200 uuids store nothing; they
      // read the lines of the generations holding them, not the history.
      let before = reads.entries
      await Effect.runPromise(ops.append(key, batchOf(total - 200, 200)))
      assert.strictEqual(reads.entries - before, 0)
      before = reads.entries
      await Effect.runPromise(ops.append(key, batchOf(0, 200)))
      assert.isAtMost(reads.entries - before, 2 * generation)
      const loaded = await Effect.runPromise(ops.load(key))
      assert.strictEqual(loaded?.length, total)
      assert.deepStrictEqual(loaded?.[total - 1], entry(total - 1))
    } finally {
      await close()
    }
  }, 600_000)

  it(
    `any batches of fresh and repeated uuids store each uuid once, in order, within a small budget (seed ${SEED})`,
    async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.array(
            fc.array(fc.oneof(fc.constant(-1), fc.nat({ max: 10_000 })), { minLength: 1, maxLength: 120 }),
            { minLength: 1, maxLength: 12 }
          ),
          async (batches) => {
            // 2 KiB: a few uuids in the map, generations of 16 that merge.
            const { close, store } = countingStore({ indexBytes: 2048 })
            try {
              const ops = await store()
              let next = 0
              const expected: Array<string> = []
              const seen = new Set<string>()
              for (const batch of batches) {
                // -1: a fresh uuid; n: an earlier one (fresh when there is none yet).
                const entries = batch.map((n) => {
                  const i = n < 0 || next === 0 ? next++ : n % next
                  const u = uuid(i)
                  if (!seen.has(u)) {
                    seen.add(u)
                    expected.push(u)
                  }
                  return entry(i)
                })
                await Effect.runPromise(ops.append(key, entries))
              }
              const loaded = await Effect.runPromise(ops.load(key))
              assert.deepStrictEqual(loaded?.map((e) => e.uuid), expected)
            } finally {
              await close()
            }
          }
        ),
        { seed: SEED, numRuns: STRESS ? 100 : 15 }
      )
    },
    600_000
  )
})
