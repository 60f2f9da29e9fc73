/**
 * Reading stored entries up to damage: a read yields every stored entry before a
 * gap (lines removed) or a damaged line followed by more data, and only then
 * fails with `CorruptJournal`, never losing the entries of the page that met the
 * damage; a read whose `limit` ends before the damage does not fail at all (it
 * does not look at the line after its last entry); a read from past a gap yields
 * the entries stored from there on.
 */
import { Persistence } from "@session-journal/core"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as fc from "fast-check"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { appendChain, JournalState, run, tempDir, withWriter } from "./helpers.ts"

// A session of `count` chained entries in one segment, and that segment's lines.
const seed = async (root: string, id: string, count: number) => {
  await run({ root }, withWriter(id, (h) => appendChain(h, JournalState.empty(id), count)))
  const file = path.join(root, id, fs.readdirSync(path.join(root, id)).find((n) => n.endsWith(".jsonl"))!)
  const text = fs.readFileSync(file, "utf8")
  const lines = text.slice(0, text.lastIndexOf("\n")).split("\n")
  // The first line is the segment's header; entry n is on line n + 1.
  return { file, lines }
}

// What a read yields before it ends, and how it ends.
const read = (root: string, id: string, options?: Persistence.HistoryOptions) =>
  run(
    { root },
    Effect.gen(function*() {
      const p = yield* Persistence.Persistence
      const got: Array<number> = []
      const exit = yield* Effect.exit(
        Stream.runForEach(p.history(id, options), (e) => Effect.sync(() => got.push(e.sequence)))
      )
      const failure = Exit.isFailure(exit) ? Option.getOrNull(Cause.findErrorOption(exit.cause)) : null
      return { got, failure }
    })
  )

const range = (from: number, to: number) => Array.from({ length: Math.max(0, to - from) }, (_, i) => from + i)

// The failure, which must be the stored history's damage, as its message.
const corruptIn = (failure: { readonly _tag: string; readonly message: string } | null): string => {
  expect(failure?._tag).toBe("CorruptJournal")
  return failure!.message
}

describe("a read that meets damage", () => {
  it("property: a line removed at k yields 0..k-1, then fails (unless the limit ends before k)", async () => {
    const root = tempDir("reader-gap", true)
    const { file, lines } = await seed(root, "g", 40)
    await fc.assert(
      fc.asyncProperty(
        // Not the last: without it the history is only shorter, which the reader cannot see.
        fc.integer({ min: 0, max: 38 }),
        fc.integer({ min: 0, max: 45 }),
        fc.integer({ min: 1, max: 45 }),
        async (k, from, limit) => {
          fs.writeFileSync(file, lines.filter((_, n) => n !== k + 1).join("\n") + "\n")
          const r = await read(root, "g", { from, limit })
          if (from === k) {
            // Reading from the missing entry: the gap is met before anything is yielded.
            expect(r.got).toEqual([])
            corruptIn(r.failure)
            return
          }
          if (from > k) {
            // Past the gap: the entries stored from `from` on, in sequence; the gap is before the range.
            expect(r).toEqual({ got: range(from, Math.min(40, from + limit)), failure: null })
            return
          }
          expect(r.got).toEqual(range(from, Math.min(k, from + limit)))
          if (from + limit <= k) expect(r.failure).toBeNull()
          else corruptIn(r.failure)
        }
      ),
      { numRuns: 60 }
    )
  }, 120_000)

  it("past a page: the entries of the page that meets the gap are yielded before the failure", async () => {
    const root = tempDir("reader-page")
    const { file, lines } = await seed(root, "p", 700)
    fs.writeFileSync(file, lines.filter((_, n) => n !== 601).join("\n") + "\n")
    const r = await read(root, "p")
    expect(r.got).toEqual(range(0, 600))
    expect(corruptIn(r.failure)).toContain("record of sequence 601 where sequence 600 was expected")
    // The same through `limit`, ending just before the gap: no failure.
    const bounded = await read(root, "p", { from: 100, limit: 500 })
    expect(bounded).toEqual({ got: range(100, 600), failure: null })
  }, 60_000)

  it("a damaged line followed by more data: the entries before it, then the failure", async () => {
    const root = tempDir("reader-damaged")
    const { file, lines } = await seed(root, "d", 12)
    fs.writeFileSync(file, lines.map((l, n) => (n === 6 ? l.slice(0, 40) + "#" + l.slice(41) : l)).join("\n") + "\n")
    const r = await read(root, "d")
    expect(r.got).toEqual(range(0, 5))
    corruptIn(r.failure)
    expect((await read(root, "d", { limit: 5 })).failure).toBeNull()
  }, 60_000)
})
