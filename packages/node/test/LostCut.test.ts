/**
 * A crash that loses the unsynced cut of zero tails (DESIGN §11): every segment of
 * a session, earlier ones included, is back at its preallocated size, zeros after
 * its data. The session loads and verifies as it did, the next append continues
 * the chain, and no byte of any segment's data changes.
 */
import { Checkpoint } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { NodePersistence } from "../src/index.ts"
import { chain, dataEnd, historyOf, JournalState, loadRead, requestOf, run, tempDir, withWriter } from "./helpers.ts"

const segments = (dir: string) => fs.readdirSync(dir).filter((n) => /^[0-9]{20}\.jsonl$/.test(n)).sort()

describe("a lost cut of the zero tails", () => {
  it("segments that kept their zero tails, earlier ones too, load, verify and take appends exactly", async () => {
    const root = tempDir("losttrim")
    await run(
      { root },
      withWriter("e", (h) =>
        Effect.gen(function*() {
          let s = JournalState.empty("e")
          for (let round = 0; round < 3; round++) {
            const c = chain(s, 3)
            yield* h.append(requestOf(s, c.entries))
            yield* h.checkpoint(Checkpoint.encode(c.state))
            s = c.state
          }
          const c = chain(s, 2)
          yield* h.append(requestOf(s, c.entries))
        }))
    )
    const dir = path.join(root, "e")
    const segs = segments(dir)
    expect(segs.length).toBeGreaterThan(1)
    const before = await run({ root }, loadRead("e"))
    const originals = segs.map((n) => fs.readFileSync(path.join(dir, n)))
    // Every earlier segment and the last: the cut did not reach the disk.
    for (const n of segs) {
      const file = path.join(dir, n)
      const len = fs.statSync(file).size
      expect(len).toBe(dataEnd(file))
      fs.truncateSync(file, Math.ceil(len / 4096) * 4096 + 64 * 1024)
    }
    const after = await run({ root }, loadRead("e"))
    expect(after.recovery.stopped).toBeNull()
    expect(after.recovery.tornTail).toBeNull()
    expect(after.state).toEqual(before.state)
    const report = await Effect.runPromise(NodePersistence.inspect({ root }, "e"))
    expect(report.ok, JSON.stringify(report)).toBe(true)
    expect((await run({ root }, historyOf("e"))).map((e) => e.sequence)).toEqual(
      Array.from({ length: 11 }, (_, i) => i)
    )
    await run(
      { root },
      withWriter("e", (h) =>
        Effect.gen(function*() {
          const l = yield* h.load
          expect(l.recovery.stopped).toBeNull()
          const c = chain(l.state, 1)
          yield* h.append(requestOf(l.state, c.entries))
        }))
    )
    const report2 = await Effect.runPromise(NodePersistence.inspect({ root }, "e"))
    expect(report2.ok, JSON.stringify(report2)).toBe(true)
    expect(report2.nextSequence).toBe(12)
    for (const [i, n] of segs.entries()) {
      const bytes = fs.readFileSync(path.join(dir, n))
      expect(bytes.subarray(0, originals[i]!.length)).toEqual(originals[i])
    }
    expect(fs.readdirSync(dir).filter((n) => n.includes(".damaged-"))).toEqual([])
  })
})
