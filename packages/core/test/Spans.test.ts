/**
 * The service's spans: one per writer batch (`SessionJournal.batch`, a root span
 * with the session, the batch size and the bytes stored), one per append to
 * storage inside it (`Persistence.append`, with the entries and bytes), and one per
 * load (`Persistence.load`, for an opening, a reload and a read), on a tracer that
 * keeps every span it is given.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Tracer from "effect/Tracer"
import { Persistence, SessionJournal } from "../src/index.ts"
import { toolParams } from "./fixtures.ts"

const params = toolParams()

const recording = () => {
  const spans: Array<Tracer.NativeSpan> = []
  const tracer = Tracer.make({
    span(options) {
      const span = new Tracer.NativeSpan(options)
      spans.push(span)
      return span
    }
  })
  return { spans, tracer }
}

describe("spans", () => {
  it.effect("a batch span holds its append span; loads have their own", () => {
    const { spans, tracer } = recording()
    return Effect.scoped(
      Effect.gen(function*() {
        const persistence = yield* Persistence.makeMemory()
        const j = yield* SessionJournal.make().pipe(Effect.provideService(Persistence.Persistence, persistence))
        yield* Effect.forEach(Array.from({ length: 8 }), () => j.record("traced", params), { concurrency: "unbounded" })
        yield* j.close("traced")
        yield* j.state("traced")

        const batches = spans.filter((s) => s.name === "SessionJournal.batch")
        const appends = spans.filter((s) => s.name === "Persistence.append")
        const loads = spans.filter((s) => s.name === "Persistence.load")
        assert.isAbove(batches.length, 0)
        assert.strictEqual(appends.length, batches.length)
        // Every request lands in one batch; every batch stored its entries.
        assert.strictEqual(batches.reduce((n, s) => n + (s.attributes.get("batch.size") as number), 0), 8)
        assert.strictEqual(appends.reduce((n, s) => n + (s.attributes.get("entries") as number), 0), 8)
        for (const batch of batches) {
          assert.strictEqual(batch.attributes.get("session"), "traced")
          assert.isTrue(batch.parent._tag === "None", "a batch is a root span")
          assert.strictEqual(batch.status._tag, "Ended")
          const append = appends.find((a) => a.parent._tag === "Some" && a.parent.value === batch)
          assert.isDefined(append, "each batch holds its append")
          assert.strictEqual(append?.attributes.get("session"), "traced")
          assert.isAbove(append?.attributes.get("bytes") as number, 0)
          assert.strictEqual(batch.attributes.get("bytes"), append?.attributes.get("bytes"))
        }
        // The opening for writing, then the read after the close.
        assert.deepStrictEqual(loads.map((s) => [s.attributes.get("session"), s.attributes.get("mode")]), [
          ["traced", "write"],
          ["traced", "read"]
        ])
        assert.strictEqual(loads[1]?.attributes.get("entries"), 8)
        assert.isTrue(loads.every((s) => s.status._tag === "Ended"))
      }).pipe(Effect.provideService(Tracer.Tracer, tracer))
    )
  })
})
