/**
 * The durable steps of a session touched once (one record, then the service
 * closes it): each sync the adapter makes, counted through the `Fs` seam. A new
 * session syncs its parent directory (the new directory), its first checkpoint
 * (file and directory) and the directory of its first segment, whose write is
 * itself durable (`O_DSYNC`); cutting the zero tail off at close is not synced
 * (DESIGN §11). A crash that loses that cut leaves a zero tail that loads, takes
 * appends and verifies exactly as the cut segment does.
 */
import { SessionJournal } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { NodePersistence } from "../src/index.ts"
import { dataEnd, historyOf, loadRead, run, tempDir } from "./helpers.ts"

const params = (i: number) => ({
  tool_name: `t${i % 3}`,
  server_id: "s",
  agent_id: "a",
  bytes_read: i,
  bytes_written: 0,
  delegation_depth: 0
})

// The real filesystem, noting each sync (`fsync`/`fdatasync`) and each write
// through an `O_DSYNC` descriptor, by the path (relative to `root`) of its handle.
type FileHandle = Awaited<ReturnType<NodePersistence.Fs["open"]>>

const counting = (root: string) => {
  const steps: Array<string> = []
  const real = NodePersistence.nodeFs
  const rel = (p: string) => path.relative(root, p).replace(/\.tmp-checkpoint\.json-.*$/, ".tmp-checkpoint") || "."
  const wrap = (h: FileHandle, p: string, dsync: boolean): FileHandle => ({
    fd: h.fd,
    read: (b, o, l, pos) => h.read(b, o, l, pos),
    write: async (b, o, l, pos) => {
      if (dsync) steps.push(`dsync-write ${rel(p)}`)
      return h.write(b, o, l, pos)
    },
    datasync: async () => {
      steps.push(`fdatasync ${rel(p)}`)
      return h.datasync()
    },
    sync: async () => {
      steps.push(`fsync ${rel(p)}`)
      return h.sync()
    },
    stat: () => h.stat(),
    chmod: (m) => h.chmod(m),
    truncate: (n) => h.truncate(n),
    close: () => h.close()
  })
  // Without `writeSync`: writes on the calling thread go through `FileHandle.write`
  // instead, so they are seen.
  const { writeSync: _, ...rest } = real
  const injected: NodePersistence.Fs = {
    ...rest,
    open: async (p, flags, mode) => wrap(await real.open(p, flags, mode), p, (flags & fs.constants.O_DSYNC) !== 0)
  }
  return { fs: injected, steps }
}

const touchOnce = (root: string, injected: NodePersistence.Fs, ids: ReadonlyArray<string>) =>
  Effect.runPromise(
    Effect.scoped(Effect.gen(function*() {
      const j = yield* SessionJournal.SessionJournal
      for (const [i, id] of ids.entries()) yield* j.record(id, params(i))
    })).pipe(
      Effect.provide(
        SessionJournal.layer().pipe(
          Layer.provide(NodePersistence.layer({ root }).pipe(Layer.provide(NodePersistence.layerFs(injected))))
        )
      )
    )
  )

describe("the syncs of a session touched once", () => {
  it("a new session: its directory, first checkpoint and first segment; nothing at close", async () => {
    const root = path.join(tempDir("syncs"), "root")
    fs.mkdirSync(root, { mode: 0o700 })
    const probe = counting(root)
    await touchOnce(root, probe.fs, ["one"])
    expect(probe.steps).toEqual([
      // The new session directory, in its parent.
      "fsync .",
      // The checkpoint of the empty session (its caps), replaced atomically.
      "fsync one/.tmp-checkpoint",
      "fsync one",
      // The first segment: its open line and the record in one durable write, then its name.
      "dsync-write one/00000000000000000000.jsonl",
      "fsync one"
    ])
    // Closed cleanly: the segment holds only its data.
    const file = path.join(root, "one", "00000000000000000000.jsonl")
    expect(fs.statSync(file).size).toBe(dataEnd(file))
  })

  it("a crash that loses the cut at close leaves a zero tail that loads, appends and verifies exactly", async () => {
    const root = path.join(tempDir("syncs-crash"), "root")
    fs.mkdirSync(root, { mode: 0o700 })
    await touchOnce(root, NodePersistence.nodeFs, ["c", "c", "c"])
    const file = path.join(root, "c", "00000000000000000000.jsonl")
    const cut = fs.readFileSync(file)
    const before = await run({ root }, loadRead("c"))
    // What the disk holds when the unsynced ftruncate did not reach it: the
    // preallocated size, zeros after the data.
    fs.truncateSync(file, Math.ceil(cut.length / 4096) * 4096 + 64 * 1024)
    const after = await run({ root }, loadRead("c"))
    expect(after.recovery.stopped).toBeNull()
    expect(after.recovery.tornTail).toBeNull()
    expect(after.state).toEqual(before.state)
    await touchOnce(root, NodePersistence.nodeFs, ["c"])
    const bytes = fs.readFileSync(file)
    // The next record follows the data, with no gap; the close cut the file again.
    expect(bytes.subarray(0, cut.length)).toEqual(cut)
    expect(bytes.length).toBe(dataEnd(file))
    expect(bytes.subarray(cut.length).toString("utf8")).toMatch(
      /^\{"k":"entry","v":1,"e":\{[^\n]*"sequence":3[^\n]*\}\}\n$/
    )
    expect(fs.readdirSync(path.join(root, "c")).filter((n) => n.includes(".damaged-"))).toEqual([])
    const report = await Effect.runPromise(NodePersistence.inspect({ root }, "c"))
    expect(report.ok).toBe(true)
    expect(report.nextSequence).toBe(4)
    expect((await run({ root }, historyOf("c"))).map((e) => e.sequence)).toEqual([0, 1, 2, 3])
  })
})
