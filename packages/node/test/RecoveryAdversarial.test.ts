/**
 * Forged checkpoints and doctored segments on a real filesystem, through
 * `inspect` and `repair`: the records carry their own proof, so repair never sets
 * aside records that verify from the start; a checkpoint that disagrees with them
 * is the one thing set aside and rebuilt; every repair that changes anything
 * appends a `recovery` entry.
 */
import { Checkpoint, Entry, Recovery } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { NodePersistence } from "../src/index.ts"
import { appendChain, chain, JournalState, loadRead, run, tempDir, withWriter } from "./helpers.ts"

const SEG0 = "00000000000000000000.jsonl"
const CP = "checkpoint.json"

/** A session of `n` entries written by the adapter; returns its directory and final state. */
const seed = async (root: string, id: string, n: number) => {
  const c = await run({ root }, withWriter(id, (h) => appendChain(h, JournalState.empty(id), n)))
  const dir = path.join(root, id)
  return { dir, state: c.state, segment: fs.readFileSync(path.join(dir, SEG0)) }
}

const writeCheckpoint = (dir: string, document: unknown) =>
  fs.writeFileSync(path.join(dir, CP), JSON.stringify(document), { mode: 0o600 })

const forgedCheckpoint = (state: JournalState.JournalState, f: (d: Record<string, any>) => void) => {
  const d = JSON.parse(JSON.stringify(Checkpoint.encode(state)))
  f(d)
  return d
}

const inspect = (root: string, id: string) => Effect.runPromise(NodePersistence.inspect({ root }, id))
const repair = (root: string, id: string) => Effect.runPromise(NodePersistence.repair({ root }, id))

/** The stored segment still begins with every byte it had: nothing was set aside or cut. */
const expectRecordsKept = (dir: string, segment: Buffer, sideFiles: ReadonlyArray<string> = []) => {
  const now = fs.readFileSync(path.join(dir, SEG0))
  expect(now.subarray(0, segment.length)).toEqual(segment)
  expect(fs.readdirSync(dir).filter((n) => n.startsWith(SEG0) && n !== SEG0)).toEqual(sideFiles)
}

/** Repairs a session whose records verify and whose checkpoint is wrong. */
const expectCheckpointOnlyRepair = async (
  root: string,
  id: string,
  dir: string,
  segment: Buffer,
  truth: JournalState.JournalState
) => {
  const before = await inspect(root, id)
  expect(before.ok).toBe(false)
  const repaired = await repair(root, id)
  expect(repaired.setAside).toEqual([`${CP}.damaged-0`])
  expect(repaired.truncated).toEqual([])
  expect(repaired.checkpointRebuilt).toBe(true)
  expect(repaired.entry?.kind).toBe(NodePersistence.RECOVERY_KIND)
  expect(repaired.entry?.sequence).toBe(truth.next_sequence)
  expect(repaired.after.stopped).toBeNull()
  expect(repaired.nextSequence).toBe(truth.next_sequence + 1)
  expectRecordsKept(dir, segment)
  const after = await inspect(root, id)
  expect(after.ok).toBe(true)
  expect(after.checkpoint.status).toBe("ok")
  // The repaired state is the truth plus the recovery entry.
  const loaded = await run({ root }, loadRead(id))
  expect(Recovery.firstDifference(JournalState.fold(truth, repaired.entry!), loaded.state)).toBeNull()
  return { before, repaired }
}

describe("forged checkpoints on disk", () => {
  const forges: ReadonlyArray<readonly [string, (d: Record<string, any>) => void]> = [
    ["data_flow.total_bytes_read", (d) => {
      d.data_flow.total_bytes_read = 0
    }],
    ["tool_counts", (d) => {
      d.tool_counts[0][1] += 1
    }],
    ["current_streak_len", (d) => {
      d.current_streak_len = 99
    }],
    ["message_count", (d) => {
      d.message_count = 5
    }]
  ]
  for (const [field, forge] of forges) {
    it(`a forged ${field}: inspect names it, repair sets only the checkpoint aside and rebuilds it`, async () => {
      const root = tempDir("forged")
      const id = "s"
      const { dir, state, segment } = await seed(root, id, 8)
      writeCheckpoint(dir, forgedCheckpoint(state, forge))
      const { before } = await expectCheckpointOnlyRepair(root, id, dir, segment, state)
      expect(before.checkpoint.status).toBe("mismatch")
      expect(before.recovery.stopped?.reason).toBe("checkpoint")
      expect(before.recovery.stopped?.detail).toContain(`checkpoint's ${field} is`)
      expect(JSON.parse(fs.readFileSync(path.join(dir, `${CP}.damaged-0`), "utf8"))).toEqual(
        forgedCheckpoint(state, forge)
      )
    })
  }

  it("a forged checkpoint of the empty state is found by inspect and rebuilt by repair", async () => {
    const root = tempDir("forged-empty")
    const id = "s"
    const { dir, state, segment } = await seed(root, id, 6)
    writeCheckpoint(
      dir,
      forgedCheckpoint(JournalState.empty(id), (d) => {
        d.data_flow.total_bytes_read = 1000
      })
    )
    const { before } = await expectCheckpointOnlyRepair(root, id, dir, segment, state)
    expect(before.recovery.stopped?.reason).toBe("checkpoint")
    expect(before.recovery.stopped?.detail).toContain("data_flow.total_bytes_read")
  })

  it("a self-consistent checkpoint of another chain of the same length is set aside, the records kept", async () => {
    const root = tempDir("other-chain")
    const id = "s"
    const { dir, state, segment } = await seed(root, id, 7)
    const other = chain(JournalState.empty(id), 7, 12345)
    expect(JournalState.head(other.state)).not.toBe(JournalState.head(state))
    writeCheckpoint(dir, Checkpoint.encode(other.state))
    const loaded = await run({ root }, loadRead(id))
    expect(loaded.recovery.stopped?.reason).toBe("checkpoint")
    await expectCheckpointOnlyRepair(root, id, dir, segment, state)
  })

  it("records cut under the checkpoint: repair keeps every record that verifies and reports the loss", async () => {
    const root = tempDir("cut")
    const id = "s"
    const { dir, state, segment } = await seed(root, id, 9)
    const starts = [0]
    for (let i = 0; i < segment.length; i++) if (segment[i] === 10 && i + 1 < segment.length) starts.push(i + 1)
    // The writer checkpoints only when a segment is due; claim the whole history.
    writeCheckpoint(dir, Checkpoint.encode(state))
    // Open line, then entries 0..8: keep entries 0..4.
    const kept = segment.subarray(0, starts[6]!)
    fs.writeFileSync(path.join(dir, SEG0), kept)
    const before = await inspect(root, id)
    expect(before.recovery.stopped?.reason).toBe("missing")
    expect(before.recovery.stopped?.missing).toEqual({ from: 5, to: 8 })
    const repaired = await repair(root, id)
    expect(repaired.setAside).toEqual([`${CP}.damaged-0`])
    expect(repaired.checkpointRebuilt).toBe(true)
    expect(repaired.lost).toEqual({ from: 5, to: 8 })
    expect(repaired.entry?.sequence).toBe(5)
    expect(repaired.entry?.kind).toBe(NodePersistence.RECOVERY_KIND)
    expectRecordsKept(dir, kept)
    expect((await inspect(root, id)).ok).toBe(true)
    expect(state.next_sequence).toBe(9)
  })
})

describe("doctored segments on disk", () => {
  it("an identical re-append of the last record is skipped: inspect is clean, repair does nothing", async () => {
    const root = tempDir("reappend")
    const id = "s"
    const { dir, state, segment } = await seed(root, id, 5)
    const lines = segment.toString("utf8").split("\n").filter((l) => l.length > 0)
    fs.appendFileSync(path.join(dir, SEG0), `${lines[lines.length - 1]}\n`)
    const report = await inspect(root, id)
    expect(report.ok).toBe(true)
    expect(report.recovery.skipped).toBe(1)
    expect(report.nextSequence).toBe(state.next_sequence)
    const repaired = await repair(root, id)
    expect(repaired.entry).toBeNull()
    expect(repaired.setAside).toEqual([])
    expect(repaired.truncated).toEqual([])
  })

  it("a forged record at a used sequence is corruption at its offset; repair sets aside only from there", async () => {
    const root = tempDir("forged-record")
    const id = "s"
    const { dir, state, segment } = await seed(root, id, 6)
    const lines = segment.toString("utf8").split("\n").filter((l) => l.length > 0)
    // Entry 3 (a tool call) again, with another byte count and a recomputed hash.
    const record = JSON.parse(lines[4]!)
    const e = { ...record.e, bytes_read: record.e.bytes_read + 1 }
    e.entry_hash = Entry.computeHash(Result.getOrThrow(Entry.decode(e)))
    const forgedLine = `${JSON.stringify({ ...record, e })}\n`
    fs.appendFileSync(path.join(dir, SEG0), forgedLine)
    const report = await inspect(root, id)
    expect(report.ok).toBe(false)
    expect(report.recovery.stopped?.reason).toBe("corruption")
    expect(report.recovery.stopped?.offset).toBe(segment.length)
    // `sequence` is where the valid prefix ends: after the six records before the forged one.
    expect(report.recovery.stopped?.sequence).toBe(6)
    expect(report.recovery.stopped?.detail).toContain("sequence 3")
    const repaired = await repair(root, id)
    expect(repaired.lost).toBeNull()
    expect(repaired.truncated).toEqual([{ segment: SEG0, length: segment.length }])
    expect(repaired.setAside).toEqual([`${SEG0}.damaged-${segment.length}`])
    expect(fs.readFileSync(path.join(dir, repaired.setAside[0]!), "utf8")).toBe(forgedLine)
    expect(repaired.entry?.sequence).toBe(state.next_sequence)
    expect(repaired.after.stopped).toBeNull()
    expectRecordsKept(dir, segment, repaired.setAside)
    expect((await inspect(root, id)).ok).toBe(true)
  })
})
