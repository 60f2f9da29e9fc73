/**
 * `Transparency.signedHeads` on real segment files: the signed checkpoints follow the
 * session as it is written (each head the RFC 6962 tree of its size over the stored
 * entries), and a legitimate `repair` that sets signed entries aside ends the stream
 * with `TreeUnavailable` (`rewritten`) instead of signing a tree that could not be
 * consistent with the heads before it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Merkle, SessionJournal, SignedNote, Transparency } from "@session-journal/core"
import { toolParams } from "@session-journal/core/test/fixtures"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import * as Stream from "effect/Stream"
import * as fs from "node:fs"
import * as path from "node:path"
import { NodePersistence } from "../src/index.ts"
import { tempDir } from "./helpers.ts"

const call = (tool_name: string) => toolParams(tool_name, { bytes_written: 1 })

const journalAt = (root: string) =>
  SessionJournal.layer({ changesFrom: "storage" }).pipe(
    Layer.provide(NodePersistence.layer({ root, pollInterval: "20 millis" }))
  )

const until = (check: () => boolean, what: string) =>
  Effect.gen(function*() {
    for (let i = 0; i < 1000; i++) {
      if (check()) return
      yield* Effect.sleep("10 millis")
    }
    assert.fail(`timed out waiting until ${what}`)
  })

describe("Transparency.signedHeads on the filesystem", () => {
  it.live("signs as the session grows, and ends when a repair sets signed entries aside", () => {
    const root = tempDir("signed-heads")
    return Effect.gen(function*() {
      const journal = yield* SessionJournal.SessionJournal
      const signer = Result.getOrThrow(SignedNote.signerFromSeed("journal.example", new Uint8Array(32).fill(5)))
      const written = []
      for (let i = 0; i < 6; i++) written.push(yield* journal.record("h", call(`t${i}`)))
      const heads: Array<{ size: number; root: Uint8Array; note: string }> = []
      const fiber = yield* Transparency.signedHeads("h", signer).pipe(
        Stream.runForEach(({ head, note }) =>
          Effect.sync(() => void heads.push({ size: head.size, root: head.root, note }))
        ),
        Effect.forkChild
      )
      yield* until(() => heads.at(-1)?.size === 6, "the history is signed")
      for (let i = 6; i < 9; i++) written.push(yield* journal.record("h", call(`t${i}`)))
      yield* until(() => heads.at(-1)?.size === 9, "the appends are signed")
      for (const h of heads) {
        const expected = Merkle.root(
          Merkle.fromLeaves(written.slice(0, h.size).map((e) => Merkle.entryLeaf(e.entry_hash)))
        )
        assert.deepStrictEqual(h.root, expected, `size ${h.size}`)
        assert.isTrue(Result.isSuccess(SignedNote.open(h.note, [signer.verifier])))
      }

      // Entry 4 damaged at rest after it was signed; repair sets 4..8 aside.
      yield* journal.close("h")
      const segment = fs.readdirSync(path.join(root, "h")).find((n) => n.endsWith(".jsonl"))!
      const file = path.join(root, "h", segment)
      fs.writeFileSync(
        file,
        fs.readFileSync(file, "latin1").replace("\"tool_name\":\"t4\"", "\"tool_name\":\"x4\""),
        "latin1"
      )
      const report = yield* NodePersistence.repair({ root }, "h")
      assert.deepStrictEqual(report.lost, { from: 4, to: 8 })
      const result = yield* Fiber.await(fiber).pipe(Effect.timeout("20 seconds"))
      assert.strictEqual(result._tag, "Failure")
      const failure = result._tag === "Failure" ? String(result.cause) : ""
      assert.include(failure, "TreeUnavailable")
      assert.include(failure, "a repair set entries 4..8 aside after they were signed")
      assert.strictEqual(heads.at(-1)!.size, 9, "nothing signed after the repair")
    }).pipe(Effect.scoped, Effect.provide(journalAt(root)))
  }, 60_000)
})
