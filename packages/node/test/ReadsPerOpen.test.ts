/**
 * A session opened once per event, as Claude Code's command hook opens it (a
 * process per tool call: open, load, one append, close), with a checkpoint as often
 * as the policy allows (`checkpointMinBytes` 1) and segments that a checkpoint
 * completes only once they are large (`segmentMinBytes`): what each event reads
 * (file bytes and directory listings, counted through the `Fs` seam) does not grow
 * with the session's length. The load starts at the line of the checkpoint's last
 * entry (`Segment.lineOf`) instead of the segment's first line, and the segments do
 * not multiply. A checkpoint whose last entry cannot be found that way (a line
 * changed under it) is still read from the segment's start and judged as before.
 */
import { Checkpoint, SessionJournal } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { NodePersistence } from "../src/index.ts"
import { tempDir } from "./helpers.ts"

type FileHandle = Awaited<ReturnType<NodePersistence.Fs["open"]>>

// The real filesystem, counting the bytes its reads return and the names its
// listings return.
const counting = () => {
  const count = { bytes: 0 }
  const real = NodePersistence.nodeFs
  const wrap = (h: FileHandle): FileHandle => ({
    fd: h.fd,
    read: async (b, o, l, pos) => {
      const got = await h.read(b, o, l, pos)
      count.bytes += got.bytesRead
      return got
    },
    write: (b, o, l, pos) => h.write(b, o, l, pos),
    datasync: () => h.datasync(),
    sync: () => h.sync(),
    stat: () => h.stat(),
    chmod: (m) => h.chmod(m),
    truncate: (n) => h.truncate(n),
    close: () => h.close()
  })
  const injected: NodePersistence.Fs = {
    ...real,
    open: async (p, flags, mode) => wrap(await real.open(p, flags, mode)),
    readdir: async (p) => {
      const names = await real.readdir(p)
      for (const name of names) count.bytes += Buffer.byteLength(name) + 1
      return names
    }
  }
  return { fs: injected, count }
}

const ID = "hooked-1"
// Small caps: the checkpoint stops growing after a few entries, so what remains to
// grow is what the load reads besides it.
const CAPS = { entry_cap: 16, tool_counts_cap: 16 }

// One event: a fresh service on the session, one entry, closed.
const event = (root: string, injected: NodePersistence.Fs, i: number) =>
  Effect.runPromise(
    Effect.scoped(Effect.gen(function*() {
      const j = yield* SessionJournal.SessionJournal
      yield* j.record(ID, {
        tool_name: `t${i % 3}`,
        server_id: "s",
        agent_id: "a",
        bytes_read: 1000,
        bytes_written: 0,
        delegation_depth: 0
      })
    })).pipe(
      Effect.provide(
        SessionJournal.layer({ checkpointMinBytes: 1, caps: CAPS }).pipe(
          Layer.provide(
            NodePersistence.layer({ root, segmentMinBytes: Checkpoint.MIN_BYTES }).pipe(
              Layer.provide(NodePersistence.layerFs(injected))
            )
          )
        )
      )
    )
  )

const readsPerEvent = async (root: string, events: number): Promise<Array<number>> => {
  const { count, fs: injected } = counting()
  const reads: Array<number> = []
  for (let i = 0; i < events; i++) {
    const before = count.bytes
    await event(root, injected, i)
    reads.push(count.bytes - before)
  }
  return reads
}

// Events in the session: 200 in the normal suite, 400 under STRESS=1.
const EVENTS = process.env["STRESS"] === "1" ? 400 : 200

describe("a session opened once per event", () => {
  it(`reads per event what was stored since its checkpoint, not the session's history (${EVENTS} events)`, async () => {
    const root = tempDir("reads-per-open")
    try {
      const reads = await readsPerEvent(root, EVENTS)
      const dir = path.join(root, ID)
      const segments = fs.readdirSync(dir).filter((n) => n.endsWith(".jsonl"))
      // The largest read of the second eighth of the events, and of the last eighth.
      const early = Math.max(...reads.slice(EVENTS / 8, EVENTS / 4))
      const late = Math.max(...reads.slice(EVENTS - EVENTS / 8, EVENTS))
      // Every event reads the same few kilobytes: the checkpoint (bounded by the
      // caps), the line it ends with and what came after it.
      // (Numbers in the entries grow a digit meanwhile, hence the tenth.)
      expect(late, `bytes read per event: ${reads.join(" ")}`).toBeLessThanOrEqual(early * 1.1)
      expect(late).toBeLessThan(8 * 1024)
      // One segment (about 140 KiB at 400 events), not a segment per checkpoint.
      expect(segments).toHaveLength(1)
      const size = fs.statSync(path.join(dir, segments[0]!)).size
      expect(size).toBeGreaterThan(10 * late)
    } finally {
      fs.rmSync(root, { recursive: true, force: true })
    }
  }, process.env["STRESS"] === "1" ? 600_000 : 120_000)

  it(
    "a checkpoint whose last entry is not found near the segment's end: the segment is read from its start",
    async () => {
      const root = tempDir("reads-per-open-far")
      try {
        await readsPerEvent(root, 30)
        const dir = path.join(root, ID)
        const segment = fs.readdirSync(dir).find((n) => n.endsWith(".jsonl"))
        const file = path.join(dir, segment!)
        // The checkpoint's last entry line, its hash changed: the load does not start
        // there, reads the segment from its first line and finds the damage it found
        // before (a record that does not verify), so the session refuses writes.
        const text = fs.readFileSync(file, "utf8").replace(/\0+$/, "")
        const lines = text.split("\n")
        const last = lines.length - 2
        lines[last] = lines[last]!.replace(
          /"entry_hash":"([0-9a-f])/,
          (_m, c: string) => `"entry_hash":"${c === "0" ? "1" : "0"}`
        )
        fs.writeFileSync(file, lines.join("\n"))
        const { fs: injected } = counting()
        const failed = await event(root, injected, 30).then(() => null, (e: unknown) => e)
        expect(String(failed)).toMatch(/CorruptJournal|integrity|corrupt/i)
      } finally {
        fs.rmSync(root, { recursive: true, force: true })
      }
    },
    120_000
  )
})
