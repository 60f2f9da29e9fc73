/**
 * The public file primitives: `entryHashAt` finds the entry stored at every
 * sequence across segments (and nothing past the end), `privateDir` makes a
 * directory 0700 and refuses a symlink; the names of segments, the checkpoint
 * and side files.
 */
import { assert, describe, it } from "@effect/vitest"
import { SessionJournal } from "@session-journal/core"
import { toolParams } from "@session-journal/core/test/fixtures"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as fc from "fast-check"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Files, NodePersistence } from "../src/index.ts"

const tempDir = (): string => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sj-files-"))
  fs.chmodSync(dir, 0o700)
  return dir
}

const write = (root: string, id: string, n: number) =>
  Effect.runPromise(
    Effect.gen(function*() {
      const journal = yield* SessionJournal.SessionJournal
      const items = Array.from({ length: n }, (_, i): SessionJournal.WriteItem => ({
        _tag: "Tool",
        params: toolParams(`tool_${i % 3}`, { bytes_read: i })
      }))
      const out = []
      for (let i = 0; i < n; i += 10) out.push(...(yield* journal.writeAll(id, items.slice(i, i + 10))))
      return out
    }).pipe(
      Effect.provide(
        SessionJournal.layer({ checkpointMinBytes: 4096 }).pipe(Layer.provide(NodePersistence.layer({ root })))
      ),
      Effect.scoped
    )
  )

describe("Files", () => {
  it("entryHashAt reads the entry stored at each sequence, across segments", async () => {
    const root = tempDir()
    try {
      const entries = await write(root, "s", 200)
      const dir = path.join(root, "s")
      assert.isAbove(fs.readdirSync(dir).filter((n) => Files.segmentBase(n) !== null).length, 1)
      const ctx = Files.context(root)
      for (const e of entries) {
        assert.strictEqual(await Effect.runPromise(Files.entryHashAt(ctx, dir, e.sequence)), e.entry_hash)
      }
      assert.isNull(await Effect.runPromise(Files.entryHashAt(ctx, dir, 200)))
      assert.isNull(await Effect.runPromise(Files.entryHashAt(ctx, path.join(root, "missing"), 0)))
    } finally {
      fs.rmSync(root, { recursive: true, force: true })
    }
  })

  it("privateDir makes a directory 0700 and refuses a symlink", async () => {
    const root = tempDir()
    try {
      const ctx = Files.context(root)
      const dir = path.join(root, "d")
      fs.mkdirSync(dir, { mode: 0o755 })
      fs.chmodSync(dir, 0o755)
      await Effect.runPromise(Files.privateDir(ctx, dir))
      assert.strictEqual(fs.statSync(dir).mode & 0o777, 0o700)
      fs.symlinkSync(dir, path.join(root, "link"))
      const error = await Effect.runPromise(Files.privateDir(ctx, path.join(root, "link"))).then(
        () => null,
        (e: unknown) => e
      )
      assert.match(String((error as Error).message), /a symbolic link/)
    } finally {
      fs.rmSync(root, { recursive: true, force: true })
    }
  })
})

describe("Files names", () => {
  it("segment names round-trip through segmentBase; other names are not segments", () => {
    fc.assert(fc.property(fc.maxSafeNat(), (base) => {
      const name = Files.segmentName(base)
      assert.isTrue(Files.isSegmentName(name))
      assert.strictEqual(Files.segmentBase(name), base)
    }))
    for (const name of [Files.CHECKPOINT_FILE, "0001.jsonl", `${Files.segmentName(0)}.damaged-0`, "lock"]) {
      assert.isFalse(Files.isSegmentName(name), name)
    }
  })

  it("freeName is the first of base, base.1, base.2, ... not taken", () => {
    const base = Files.damagedName(Files.CHECKPOINT_FILE, 0)
    assert.strictEqual(base, "checkpoint.json.damaged-0")
    assert.strictEqual(Files.freeName(new Set(), base), base)
    assert.strictEqual(Files.freeName(new Set([base, `${base}.1`, `${base}.3`]), base), `${base}.2`)
    fc.assert(fc.property(fc.uniqueArray(fc.nat(20)), (ns) => {
      const taken = new Set(ns.map((n) => n === 0 ? base : `${base}.${n}`))
      const free = Files.freeName(taken, base)
      assert.isFalse(taken.has(free))
      const n = free === base ? 0 : Number(free.slice(base.length + 1))
      for (let m = 0; m < n; m++) assert.isTrue(taken.has(m === 0 ? base : `${base}.${m}`))
    }))
  })
})
