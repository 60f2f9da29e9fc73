/**
 * A clock no stored entry can hold, on the filesystem: the service's writes fail
 * typed and nothing acknowledged is lost (the suite shared with the memory
 * adapter), and `repair` refuses before it sets anything aside rather than date
 * its recovery entry with it.
 */
import { Persistence, StorageReason } from "@session-journal/core"
import { badClocks, serviceOver, suite } from "@session-journal/core/test/ClockBounds"
import * as Effect from "effect/Effect"
import { TestClock } from "effect/testing"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { NodePersistence } from "../src/index.ts"
import { adapter, appendChain, asUnpreallocated, JournalState, run, tempDir, withWriter } from "./helpers.ts"

const roots: Array<string> = []
const root = (prefix: string) => {
  const dir = tempDir(prefix)
  roots.push(dir)
  return dir
}
afterAll(() => {
  for (const dir of roots) fs.rmSync(dir, { recursive: true, force: true })
})

// One directory per test, shared by the services the test builds over it.
suite("a writer's clock on the filesystem adapter", () => serviceOver(adapter({ root: root("clock") })))

describe("repair with a clock no entry can hold", () => {
  for (const [label, millis] of badClocks) {
    it(`a clock ${label}: repair fails typed and changes nothing; with a good clock it repairs`, async () => {
      const dir = root("clock-repair")
      await run({ root: dir }, withWriter("s", (h) => appendChain(h, JournalState.empty("s"), 5)))
      asUnpreallocated(path.join(dir, "s"))
      fs.appendFileSync(path.join(dir, "s", "00000000000000000000.jsonl"), "not an entry\n")
      // Every file of the session but its lock, with its bytes.
      const snapshot = () =>
        fs.readdirSync(path.join(dir, "s")).sort().filter((f) => f !== "lock")
          .map((f) => [f, fs.readFileSync(path.join(dir, "s", f)).toString("base64")])
      const before = snapshot()
      const refused = await Effect.runPromise(Effect.flip(
        Effect.andThen(TestClock.setTime(millis), NodePersistence.repair({ root: dir }, "s")).pipe(
          Effect.provide(TestClock.layer())
        )
      ))
      expect(refused._tag).toBe("StorageError")
      expect(refused._tag === "StorageError" ? refused.reason : undefined).toEqual(
        new StorageReason.ClockOutOfRange({ millis })
      )
      expect(refused.message).toContain("clock")
      expect(snapshot()).toEqual(before)
      const repaired = await Effect.runPromise(NodePersistence.repair({ root: dir }, "s"))
      expect(repaired.entry?.kind).toBe("recovery")
      expect(repaired.after.stopped).toBeNull()
      const loaded = await run(
        { root: dir },
        Effect.scoped(
          Effect.flatMap(Persistence.Persistence, (p) => Effect.flatMap(p.open("s", { mode: "read" }), (h) => h.load))
        )
      )
      expect(loaded.state.next_sequence).toBe(6)
    })
  }
})
