/**
 * Whether a writer is alone — it made its adapter's last durable write and none
 * is in the thread pool — decides that it writes on the calling thread
 * (`Fs.writeSync`). That knowledge belongs to the adapter instance, not the
 * process: two adapters in one process do not share it, so one's writes never
 * make the other's writer lose its turn.
 */
import { SessionJournal } from "@session-journal/core"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { NodePersistence } from "../src/index.ts"
import { tempDir } from "./helpers.ts"

const params = (i: number) => ({
  tool_name: "t",
  server_id: "s",
  agent_id: "a",
  bytes_read: i,
  bytes_written: 0,
  delegation_depth: 0
})

// The real filesystem, counting the durable writes made on the calling thread.
const counting = () => {
  const seen = { sync: 0 }
  const real = NodePersistence.nodeFs
  const writeSync = real.writeSync!
  const injected: NodePersistence.Fs = {
    ...real,
    writeSync: (fd, bytes, offset, length, position) => {
      seen.sync++
      return writeSync(fd, bytes, offset, length, position)
    }
  }
  return { fs: injected, seen }
}

const journalOn = (root: string, injected: NodePersistence.Fs) =>
  Effect.map(
    Layer.build(
      SessionJournal.layer().pipe(
        Layer.provide(NodePersistence.layer({ root }).pipe(Layer.provide(NodePersistence.layerFs(injected))))
      )
    ),
    (context) => Context.get(context, SessionJournal.SessionJournal)
  )

describe("a writer alone in its adapter", () => {
  it("two adapters in one process keep their own turns: one's write does not take the other's", async () => {
    const dir = tempDir("turns")
    const roots = [path.join(dir, "a"), path.join(dir, "b")]
    for (const root of roots) fs.mkdirSync(root, { mode: 0o700 })
    const a = counting()
    const b = counting()
    const during = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const ja = yield* journalOn(roots[0]!, a.fs)
      const jb = yield* journalOn(roots[1]!, b.fs)
      yield* ja.record("s", params(0))
      yield* ja.record("s", params(1))
      // B's first record creates its segment; its second is a durable write into it.
      yield* jb.record("s", params(0))
      yield* jb.record("s", params(1))
      // A's writer made its adapter's last durable write: it is alone there,
      // whatever B's adapter did in between.
      const before = a.seen.sync
      yield* ja.record("s", params(2))
      return a.seen.sync - before
    })))
    expect(during).toBe(1)
  })
})
