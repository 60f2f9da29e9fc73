/**
 * An appended payload is the journal's own: the caller changing its object after
 * the call changes neither the stored entry nor the retained ring, so verify holds.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { Persistence, SessionJournal } from "../src/index.ts"

const Journal = SessionJournal.layer().pipe(Layer.provide(Persistence.layerMemory()))

describe("payload ownership", () => {
  it.effect("a payload changed by its caller after append leaves the journal intact", () =>
    Effect.gen(function*() {
      const journal = yield* SessionJournal.SessionJournal
      const payload = { role: "user", parts: [{ text: "hello" }] }
      const entry = yield* journal.append("owned", "message", payload)
      payload.parts[0]!.text = "tampered"
      payload.role = "assistant"
      assert.deepStrictEqual(entry.payload, { role: "user", parts: [{ text: "hello" }] })
      const stored = yield* Stream.runCollect(journal.entries("owned"))
      assert.deepStrictEqual((stored[0] as typeof entry).payload, { role: "user", parts: [{ text: "hello" }] })
      const report = yield* journal.verify("owned")
      assert.strictEqual(report.entriesChecked, 1)
      assert.strictEqual((yield* journal.state("owned")).window.items.length, 1)
    }).pipe(Effect.provide(Journal)))
})
