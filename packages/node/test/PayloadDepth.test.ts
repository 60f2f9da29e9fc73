/**
 * Payload bounds on the filesystem adapter: a payload at Entry.MAX_PAYLOAD_DEPTH is
 * appended, checkpointed and read back by a fresh service; deeper ones are refused
 * before anything reaches a segment; a hand-written segment line or checkpoint with
 * a payload past the limit loads as a typed failure, never a crash. The property
 * of the core suite, with checkpoints forced after every append.
 */
import { Entry, JournalState, Persistence, SessionJournal } from "@session-journal/core"
import * as Legacy from "@session-journal/core/test/legacy"
import { deepArray, item, nest, writeAndReread } from "@session-journal/core/test/Payloads"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as fc from "fast-check"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { NodePersistence } from "../src/index.ts"
import { historyOf, loadRead, run, runExit, tempDir } from "./helpers.ts"

const LIMIT = Entry.MAX_PAYLOAD_DEPTH
const SEG0 = "00000000000000000000.jsonl"

/** Runs `f` with the adapter at `root`. */
const withAdapter = <A, E>(root: string, f: (p: Persistence.Persistence["Service"]) => Effect.Effect<A, E>) =>
  Effect.runPromise(
    Effect.scoped(Persistence.Persistence.use(f)).pipe(
      Effect.provide(Layer.fresh(NodePersistence.layer({ root })))
    ) as Effect.Effect<A, unknown>
  )

describe("payload depth on the filesystem", () => {
  it("depth = limit is appended, checkpointed and read back; limit + 1 and 100,000 are refused", async () => {
    const root = tempDir("depth")
    const accepted = await withAdapter(root, (p) =>
      Effect.scoped(writeAndReread(p, "edge", [
        { _tag: "append", kind: "message", payload: nest(LIMIT) },
        { _tag: "append", kind: "message", payload: deepArray(LIMIT + 1) },
        { _tag: "append", kind: "message", payload: deepArray(100_000) },
        { _tag: "meta", data: deepArray(100_000) },
        { _tag: "meta", data: nest(LIMIT, -0) },
        { _tag: "append", kind: "message", payload: nest(LIMIT, -0) }
      ])))
    expect(accepted.length).toBe(2)
    // A checkpoint was taken after the deep entry (`writeAndReread` makes one due after
    // every append); it holds the entry's hash, the entry itself is read back from its segment.
    const dir = path.join(root, "edge")
    const checkpoint = JSON.parse(fs.readFileSync(path.join(dir, "checkpoint.json"), "utf8"))
    expect(checkpoint.next_sequence).toBeGreaterThanOrEqual(1)
    expect(checkpoint.hashes[0]).toBe(accepted[0]!.entry_hash)
    // A read-only load straight from the files agrees.
    const loaded = await run({ root }, loadRead("edge"))
    expect(loaded.recovery.stopped).toBeNull()
    expect(JournalState.head(loaded.state)).toBe(accepted[1]!.entry_hash)
  })

  it("property: whatever append accepts reads back through a fresh service after a checkpoint", async () => {
    const root = tempDir("depth-prop", true)
    let n = 0
    await fc.assert(
      fc.asyncProperty(
        fc.array(item, { minLength: 1, maxLength: 5 }),
        (items) =>
          withAdapter(root, (p) => Effect.scoped(writeAndReread(p, `prop-${n++}`, items))).then(() => undefined)
      ),
      {
        numRuns: 25,
        reporter: (details) => {
          if (details.failed) {
            throw new Error(
              `property failed (seed ${details.seed}, path ${details.counterexamplePath}): ${details.errorInstance}`
            )
          }
        }
      }
    )
  }, 120_000)

  describe("stored payloads past the limit load as typed failures", () => {
    // A session of one entry at the limit, then its stored payload made one level deeper.
    const seed = async (id: string) => {
      const root = tempDir("depth-stored")
      await withAdapter(root, (p) =>
        Effect.scoped(Effect.gen(function*() {
          const j = yield* SessionJournal.make({ checkpointMinBytes: 1 }).pipe(
            Effect.provideService(Persistence.Persistence, p)
          )
          yield* j.append(id, "message", deepArray(LIMIT))
          yield* j.append(id, "message", "after")
        })))
      return { root, dir: path.join(root, id) }
    }
    const deepen = (text: string, extra: number) =>
      text.replace("[".repeat(LIMIT) + "]".repeat(LIMIT), "[".repeat(LIMIT + extra) + "]".repeat(LIMIT + extra))

    // The line is corruption: the load stops before it (reported) or fails, as a value.
    const expectTypedFailure = async (root: string, id: string) => {
      const exit = await runExit({ root }, loadRead(id))
      if (Exit.isFailure(exit)) {
        expect(exit.cause.reasons.some((r) => r._tag === "Die")).toBe(false)
        expect(String(exit.cause)).not.toMatch(/RangeError|call stack/)
      } else {
        expect(exit.value.recovery.stopped?.reason).toBe("corruption")
        expect(exit.value.recovery.stopped?.sequence).toBe(0)
        expect(exit.value.state.next_sequence).toBe(0)
      }
      // The service never dies on it either, nor claims the entry verified.
      const verify = await withAdapter(root, (p) =>
        Effect.scoped(Effect.gen(function*() {
          const j = yield* SessionJournal.make({ checkpointMinBytes: 1 }).pipe(
            Effect.provideService(Persistence.Persistence, p)
          )
          return yield* Effect.exit(j.verify(id))
        })))
      if (Exit.isFailure(verify)) expect(verify.cause.reasons.some((r) => r._tag === "Die")).toBe(false)
      else expect(verify.value.entriesChecked).toBe(0)
    }

    for (const extra of [1, 100_000]) {
      it(`a segment line ${extra} level(s) past the limit`, async () => {
        const { root, dir } = await seed(`seg${extra}`)
        fs.rmSync(path.join(dir, "checkpoint.json"))
        const seg = path.join(dir, SEG0)
        fs.writeFileSync(seg, deepen(fs.readFileSync(seg, "utf8"), extra))
        await expectTypedFailure(root, `seg${extra}`)
      })

      it(`a checkpoint ${extra} level(s) past the limit`, async () => {
        const { root, dir } = await seed(`cp${extra}`)
        // A checkpoint as earlier releases wrote it, the retained entries in full.
        const cp = path.join(dir, "checkpoint.json")
        const stored = await run({ root }, historyOf(`cp${extra}`))
        const text = JSON.stringify(Legacy.encodeV1(Legacy.foldAll(`cp${extra}`, undefined, stored)))
        expect(text).toContain("[".repeat(LIMIT))
        fs.writeFileSync(cp, deepen(text, extra))
        // Segments reach back to 0, so storage may rebuild from them; either way no crash.
        const exit = await runExit({ root }, loadRead(`cp${extra}`))
        if (Exit.isFailure(exit)) expect(exit.cause.reasons.some((r) => r._tag === "Die")).toBe(false)
        else expect(exit.value.recovery.checkpoint).not.toBe("loaded")
      })
    }

    it("a metadata line past the limit", async () => {
      const { root, dir } = await seed("meta")
      await withAdapter(root, (p) =>
        Effect.scoped(Effect.gen(function*() {
          const j = yield* SessionJournal.make({ checkpointMinBytes: 1 }).pipe(
            Effect.provideService(Persistence.Persistence, p)
          )
          yield* j.setMeta("meta", { data: deepArray(LIMIT) })
        })))
      const segs = fs.readdirSync(dir).filter((n) => n.endsWith(".jsonl")).sort()
      const last = path.join(dir, segs.at(-1)!)
      const text = fs.readFileSync(last, "utf8")
      expect(text).toContain("\"k\":\"meta\"")
      fs.writeFileSync(last, deepen(text, 100_000))
      const exit = await runExit({ root }, loadRead("meta"))
      if (Exit.isFailure(exit)) expect(exit.cause.reasons.some((r) => r._tag === "Die")).toBe(false)
    })
  })
})
