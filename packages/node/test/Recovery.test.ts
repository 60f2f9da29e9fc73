/**
 * Recovery on a real filesystem: torn tails at every byte offset of the last two
 * records, zero-fill and garbage, mid-file corruption told apart from a torn
 * tail, integrity failures, repair that keeps every damaged byte.
 */
import { Checkpoint, Persistence } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { NodePersistence } from "../src/index.ts"
import {
  appendChain,
  asUnpreallocated,
  chain,
  checkpointing,
  historyOf,
  JournalState,
  loadAndAppendOne,
  loadRead,
  requestOf,
  run,
  tempDir,
  withWriter
} from "./helpers.ts"

const SEG0 = "00000000000000000000.jsonl"

/**
 * Builds a session of `n` entries and returns its directory's files; with
 * `unpreallocated`, its segment as releases before preallocation wrote it.
 */
const seed = async (root: string, id: string, n: number, unpreallocated = false) => {
  await run({ root }, withWriter(id, (h) => appendChain(h, JournalState.empty(id), n)))
  const dir = path.join(root, id)
  if (unpreallocated) asUnpreallocated(dir)
  return {
    segment: fs.readFileSync(path.join(dir, SEG0)),
    checkpoint: fs.readFileSync(path.join(dir, "checkpoint.json"))
  }
}

const lineStarts = (bytes: Buffer): Array<number> => {
  const starts = [0]
  for (let i = 0; i < bytes.length; i++) if (bytes[i] === 10 && i + 1 < bytes.length) starts.push(i + 1)
  return starts
}

const plant = (root: string, id: string, files: { segment: Buffer; checkpoint: Buffer }) => {
  const dir = path.join(root, id)
  fs.mkdirSync(dir, { mode: 0o700 })
  fs.writeFileSync(path.join(dir, SEG0), files.segment, { mode: 0o600 })
  fs.writeFileSync(path.join(dir, "checkpoint.json"), files.checkpoint, { mode: 0o600 })
  return dir
}

/** Reopens, checks the prefix, appends one more entry, reopens again. */
const reopenAndContinue = async (root: string, id: string, expectedNext: number, torn: boolean) => {
  const loaded = await run({ root }, loadAndAppendOne(id))
  expect(loaded.state.next_sequence).toBe(expectedNext)
  expect(loaded.recovery.stopped).toBeNull()
  expect(loaded.recovery.tornTail !== null).toBe(torn)
  const again = await run({ root }, loadRead(id))
  expect(again.state.next_sequence).toBe(expectedNext + 1)
  expect(again.recovery.stopped).toBeNull()
  expect(again.recovery.tornTail).toBeNull()
  const all = await run({ root }, historyOf(id))
  expect(all.map((e) => e.sequence)).toEqual(Array.from({ length: expectedNext + 1 }, (_, i) => i))
  return loaded
}

// One more entry through a writer, as the outcome of the attempt.
const appendOne = (root: string, id: string) => run({ root }, Effect.exit(loadAndAppendOne(id)))

/**
 * Every byte offset under STRESS=1; in the normal suite every line boundary, the
 * offsets next to each, and a seeded sample of the others (the seed is printed;
 * SEED=<n> repeats a run).
 */
const STRESS = process.env["STRESS"] === "1"
const SEED = Number(process.env["SEED"] ?? Math.floor(Math.random() * 2 ** 31))
const SAMPLED_CUTS = 60

const cutsOf = (from: number, to: number, starts: ReadonlyArray<number>): Array<number> => {
  const all = Array.from({ length: to - from + 1 }, (_, i) => from + i)
  if (STRESS) return all
  const edges = new Set(starts.flatMap((s) => [s - 1, s, s + 1]).concat([from, from + 1, to - 1, to]))
  const chosen = all.filter((c) => edges.has(c))
  const rest = all.filter((c) => !edges.has(c))
  // mulberry32 over SEED: a partial Fisher-Yates shuffle picks the sample.
  let state = SEED
  const random = () => {
    state = (state + 0x6d2b79f5) | 0
    let t = Math.imul(state ^ (state >>> 15), 1 | state)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  for (let i = 0; i < Math.min(SAMPLED_CUTS, rest.length); i++) {
    const j = i + Math.floor(random() * (rest.length - i))
    ;[rest[i], rest[j]] = [rest[j]!, rest[i]!]
  }
  return chosen.concat(rest.slice(0, SAMPLED_CUTS)).sort((a, b) => a - b)
}

describe("torn tails", () => {
  it(
    `a cut at ${
      STRESS
        ? "every byte offset"
        : `each line boundary, its neighbours and ${SAMPLED_CUTS} sampled byte offsets (seed ${SEED})`
    } of the last two records reopens to the longest valid prefix`,
    async () => {
      const root = tempDir("torn", true)
      const files = await seed(root, "seed", 6)
      const starts = lineStarts(files.segment)
      // Lines: open record, then entries 0..5; the last two records are entries 4 and 5.
      const from = starts[starts.length - 2]!
      const cuts = cutsOf(from, files.segment.length, starts.filter((s) => s >= from))
      let cases = 0
      for (const cut of cuts) {
        const id = `cut-${cut}`
        const dir = plant(root, id, { ...files, segment: files.segment.subarray(0, cut) })
        const complete = starts.filter((s, i) => i > 0 && s <= cut).length - 1 + (cut === files.segment.length ? 1 : 0)
        const boundary = starts.includes(cut) || cut === files.segment.length
        const kept = boundary ? (cut === files.segment.length ? 6 : starts.indexOf(cut) - 1) : complete
        const loaded = await reopenAndContinue(root, id, kept, !boundary)
        if (!boundary) {
          // The torn bytes were copied aside before the segment was cut back.
          const aside = fs.readdirSync(dir).filter((n) => n.startsWith(`${SEG0}.damaged-`))
          expect(aside.length).toBe(1)
          const offset = loaded.recovery.tornTail!.offset
          expect(fs.readFileSync(path.join(dir, aside[0]!))).toEqual(files.segment.subarray(offset, cut))
        }
        cases++
      }
      expect(cases).toBeGreaterThan(STRESS ? 100 : SAMPLED_CUTS)
    },
    120_000
  )

  it("zero-filled blocks and appended garbage are torn tails; nothing acknowledged is lost", async () => {
    const root = tempDir("garbage")
    const files = await seed(root, "seed", 5, true)
    const tails: Array<[string, Buffer]> = [
      ["zeros", Buffer.alloc(4096)],
      ["garbage", Buffer.from("{\"k\":\"entry\",\"v\":1,\"e\":{\"sequence\":5,\"prev")],
      ["binary", Buffer.from(Array.from({ length: 300 }, (_, i) => (i * 37 + 11) % 256).filter((b) => b !== 10))]
    ]
    for (const [name, tail] of tails) {
      plant(root, name, { ...files, segment: Buffer.concat([files.segment, tail]) })
      await reopenAndContinue(root, name, 5, true)
    }
  }, 60_000)
})

describe("corruption", () => {
  it("a complete (newline-terminated) last line that does not parse is corruption, not a torn tail", async () => {
    const root = tempDir("garbage-line")
    const files = await seed(root, "seed", 5)
    const dir = plant(root, "bad", {
      ...files,
      segment: Buffer.concat([files.segment, Buffer.from("not json at all\n")])
    })
    const loaded = await run({ root }, loadRead("bad"))
    expect(loaded.recovery.tornTail).toBeNull()
    expect(loaded.recovery.stopped?.reason).toBe("corruption")
    expect(loaded.recovery.stopped?.offset).toBe(files.segment.length)
    expect(loaded.recovery.stopped?.sequence).toBe(5)
    // The acknowledged history is never given away to a new entry: the write refuses.
    expect(Exit.isFailure(await appendOne(root, "bad"))).toBe(true)
    expect(fs.readFileSync(path.join(dir, SEG0)).subarray(files.segment.length).toString()).toBe("not json at all\n")
  })

  const flip = (
    bytes: Buffer,
    sequence: number,
    find: (line: string) => number,
    to: (b: number) => number = (b) => b === 0x78 ? 0x79 : 0x78
  ) => {
    const starts = lineStarts(bytes)
    const start = starts[sequence + 1]!
    const line = bytes.subarray(start, starts[sequence + 2]! - 1).toString("utf8")
    const copy = Buffer.from(bytes)
    const at = start + find(line)
    copy[at] = to(copy[at]!)
    return { copy, start }
  }

  it("a damaged early record is corruption at its sequence, not a torn tail; writes and verify fail; repair keeps the bytes", async () => {
    const root = tempDir("corrupt")
    const files = await seed(root, "seed", 20)
    const { copy, start } = flip(files.segment, 5, (l) => l.indexOf("{", 1))
    const dir = plant(root, "bad", { ...files, segment: copy })
    const loaded = await run({ root }, loadRead("bad"))
    expect(loaded.recovery.tornTail).toBeNull()
    expect(loaded.recovery.stopped?.reason).toBe("corruption")
    expect(loaded.recovery.stopped?.sequence).toBe(5)
    expect(loaded.recovery.stopped?.offset).toBe(start)
    expect(loaded.state.next_sequence).toBe(5)
    const report = await Effect.runPromise(NodePersistence.inspect({ root }, "bad"))
    expect(report.ok).toBe(false)
    expect(report.segments[0]!.status).toBe("damaged")
    expect(report.segments[0]!.problem?.sequence).toBe(5)
    // The writer refuses to continue past damage.
    expect(Exit.isFailure(await appendOne(root, "bad"))).toBe(true)
    // Repair sets the damaged bytes aside and makes the session writable again.
    const repaired = await Effect.runPromise(NodePersistence.repair({ root }, "bad"))
    expect(repaired.before.stopped?.reason).toBe("corruption")
    expect(repaired.after.stopped).toBeNull()
    // The repair's own entry (sequence 5) says what was set aside and lost.
    expect(repaired.nextSequence).toBe(6)
    expect(repaired.entry?.sequence).toBe(5)
    expect(repaired.entry?.kind).toBe("recovery")
    expect(repaired.lost).toEqual({ from: 5, to: 19 })
    expect(fs.readFileSync(path.join(dir, repaired.setAside[0]!))).toEqual(copy.subarray(start))
    await reopenAndContinue(root, "bad", 6, false)
    expect((await Effect.runPromise(NodePersistence.inspect({ root }, "bad"))).ok).toBe(true)
  })

  it("a record whose hash no longer verifies stops replay with an integrity report", async () => {
    const root = tempDir("integrity")
    const files = await seed(root, "seed", 12)
    const { copy } = flip(
      files.segment,
      7,
      (l) => l.indexOf("\"bytes_read\":") + "\"bytes_read\":".length,
      (b) => b === 0x39 ? 0x31 : b + 1
    )
    plant(root, "tampered", { ...files, segment: copy })
    const loaded = await run({ root }, loadRead("tampered"))
    expect(loaded.recovery.stopped?.reason).toBe("integrity")
    expect(loaded.recovery.stopped?.sequence).toBe(7)
    expect(loaded.state.next_sequence).toBe(7)
    expect((await Effect.runPromise(NodePersistence.inspect({ root }, "tampered"))).ok).toBe(false)
  })

  it("a record of an unknown version ends the valid prefix", async () => {
    const root = tempDir("version")
    const files = await seed(root, "seed", 4)
    const future = Buffer.from("{\"k\":\"entry\",\"v\":2,\"e\":{}}\n")
    plant(root, "future", { ...files, segment: Buffer.concat([files.segment, future, future]) })
    const loaded = await run({ root }, loadRead("future"))
    expect(loaded.recovery.stopped?.reason).toBe("unknown_version")
    expect(loaded.state.next_sequence).toBe(4)
  })

  it("a missing or broken checkpoint is rebuilt from the segments, and the broken one is kept", async () => {
    const root = tempDir("rebuild")
    const id = "cp"
    const final = await run(
      { root },
      withWriter(id, (h) =>
        Effect.gen(function*() {
          const append = checkpointing(1024)
          let s = JournalState.empty(id, { entry_cap: 16 })
          for (let i = 0; i < 20; i++) s = (yield* append(h, s, 5)).state
          return s
        }), { entry_cap: 16 })
    )
    const dir = path.join(root, id)
    expect(fs.readdirSync(dir).filter((n) => n.endsWith(".jsonl")).length).toBeGreaterThan(2)
    fs.writeFileSync(path.join(dir, "checkpoint.json"), "{\"v\":1,")
    // Caps live in the checkpoint; rebuilding from segments takes them from the open options.
    const openWith = (mode: "read" | "write") =>
      Effect.scoped(Effect.gen(function*() {
        const p = yield* Persistence.Persistence
        const h = yield* p.open(id, { mode, caps: { entry_cap: 16 } })
        return yield* h.load
      }))
    const loaded = await run({ root }, openWith("write"))
    expect(loaded.recovery.checkpoint).toBe("rebuilt")
    expect(loaded.state.next_sequence).toBe(100)
    expect(JournalState.head(loaded.state)).toBe(JournalState.head(final))
    expect(fs.readdirSync(dir)).toContain("checkpoint.json.damaged-0")
    expect(fs.readFileSync(path.join(dir, "checkpoint.json.damaged-0"), "utf8")).toBe("{\"v\":1,")
    fs.rmSync(path.join(dir, "checkpoint.json"), { force: true })
    const again = await run({ root }, openWith("read"))
    expect(again.state.next_sequence).toBe(100)
    expect(JournalState.head(again.state)).toBe(JournalState.head(final))
  })

  it("a crash between a checkpoint and the next segment is harmless", async () => {
    const root = tempDir("between")
    const id = "roll"
    const c = await run({ root }, withWriter(id, (h) => checkpointing(1024)(h, JournalState.empty(id), 30)))
    const dir = path.join(root, id)
    // Simulate the crash: the checkpoint covers everything, no new segment exists.
    const segs = fs.readdirSync(dir).filter((n) => n.endsWith(".jsonl")).sort()
    fs.writeFileSync(
      path.join(dir, "checkpoint.json"),
      JSON.stringify((await import("@session-journal/core")).Checkpoint.encode(c.state))
    )
    const more = await run(
      { root },
      withWriter(id, (h) =>
        Effect.gen(function*() {
          const l = yield* h.load
          expect(l.state.next_sequence).toBe(30)
          return yield* checkpointing(1024)(h, l.state, 3)
        }))
    )
    const all = await run({ root }, historyOf(id))
    expect(all.length).toBe(33)
    expect(JournalState.head((await run({ root }, loadRead(id))).state)).toBe(JournalState.head(more.state))
    expect(fs.readdirSync(dir).filter((n) => n.endsWith(".jsonl")).length).toBeGreaterThanOrEqual(segs.length)
  })

  it("retention removes checkpointed segments; history starts later, state and head are unchanged", async () => {
    const root = tempDir("retain")
    const id = "r"
    const options = { root, removeCheckpointedSegments: true }
    const final = await run(
      options,
      withWriter(id, (h) =>
        Effect.gen(function*() {
          const append = checkpointing(1024)
          let s = JournalState.empty(id, { entry_cap: 8 })
          for (let i = 0; i < 30; i++) s = (yield* append(h, s, 3)).state
          return s
        }), { entry_cap: 8 })
    )
    const segs = fs.readdirSync(path.join(root, id)).filter((n) => n.endsWith(".jsonl"))
    expect(segs.length).toBe(1)
    const loaded = await run(options, loadRead(id))
    expect(JournalState.head(loaded.state)).toBe(JournalState.head(final))
    const all = await run(options, historyOf(id))
    expect(all[0]!.sequence).toBeGreaterThan(0)
    expect(all[all.length - 1]!.sequence).toBe(89)
  })
})

describe("a rebuilt checkpoint and the session's caps", () => {
  // The caps live only in checkpoint.json: without it, the caps passed in decide.
  const seedCapped = async (root: string, id: string, caps: JournalState.Caps, n: number) => {
    const c = await run(
      { root },
      Effect.scoped(Effect.gen(function*() {
        const p = yield* Persistence.Persistence
        const h = yield* p.open(id, { mode: "write", caps })
        return yield* appendChain(h, JournalState.empty(id, caps), n)
      }))
    )
    fs.rmSync(path.join(root, id, "checkpoint.json"))
    return JournalState.head(c.state)
  }

  it("entry_cap 2: inspect with the session's caps rebuilds its head, the defaults do not", async () => {
    const root = tempDir("caps-evict")
    const caps = { entry_cap: 2 }
    const head = await seedCapped(root, "small", caps, 6)
    const same = await Effect.runPromise(NodePersistence.inspect({ root }, "small", caps))
    expect(same.ok).toBe(true)
    expect(same.nextSequence).toBe(6)
    expect(same.head).toBe(head)
    const defaults = await Effect.runPromise(NodePersistence.inspect({ root }, "small"))
    expect(defaults.nextSequence).toBe(6)
    expect(defaults.head).not.toBe(head)
    const reopened = await run(
      { root },
      Effect.scoped(Effect.gen(function*() {
        const p = yield* Persistence.Persistence
        return yield* (yield* p.open("small", { mode: "read", caps })).load
      }))
    )
    expect(reopened.recovery.checkpoint).toBe("none")
    expect(JournalState.head(reopened.state)).toBe(head)
  })

  it("entry_cap 0: only the session's caps verify its links; repair with them sets nothing aside", async () => {
    const root = tempDir("caps-zero")
    const caps = { entry_cap: 0 }
    const head = await seedCapped(root, "zero", caps, 4)
    const defaults = await Effect.runPromise(NodePersistence.inspect({ root }, "zero"))
    expect(defaults.ok).toBe(false)
    const same = await Effect.runPromise(NodePersistence.inspect({ root }, "zero", caps))
    expect(same.ok).toBe(true)
    expect(same.head).toBe(head)
    const segment = fs.readFileSync(path.join(root, "zero", SEG0))
    const repaired = await Effect.runPromise(NodePersistence.repair({ root }, "zero", caps))
    expect(repaired.before.stopped).toBeNull()
    expect(repaired.setAside).toEqual([])
    expect(repaired.truncated).toEqual([])
    expect(repaired.nextSequence).toBe(4)
    expect(fs.readFileSync(path.join(root, "zero", SEG0))).toEqual(segment)
  })
})

describe("checkpoint claims written through a handle", () => {
  it("a handle refuses a checkpoint older than the stored one, or of another chain at the same sequence", async () => {
    const root = tempDir("cp-claims")
    const refused = await run(
      { root },
      withWriter("c", (h) =>
        Effect.gen(function*() {
          const l = yield* h.load
          const a = chain(l.state, 4)
          yield* h.append(requestOf(l.state, a.entries))
          const b = chain(a.state, 4)
          yield* h.append(requestOf(a.state, b.entries))
          yield* h.checkpoint(Checkpoint.encode(b.state))
          const older = yield* Effect.exit(h.checkpoint(Checkpoint.encode(a.state)))
          const other = chain(JournalState.empty("c"), 8, 1_700_000_000).state
          const foreign = yield* Effect.exit(h.checkpoint(Checkpoint.encode(other)))
          return { older, foreign }
        }))
    )
    expect(Exit.isFailure(refused.older)).toBe(true)
    expect(Exit.isFailure(refused.foreign)).toBe(true)
    const report = await Effect.runPromise(NodePersistence.inspect({ root }, "c"))
    expect(report.ok).toBe(true)
    expect(report.nextSequence).toBe(8)
  })
})
