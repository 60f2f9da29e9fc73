/**
 * Preallocated segments (README "Preallocated segments"): the zero tail of a
 * preallocated segment is unused space, not a torn tail; a writer that reopens the
 * session continues in it without a gap; a partial line or a line with unwritten
 * (zero) bytes in it is still a torn tail and set aside; segments written before
 * preallocation keep their rules; and SIGKILLs at random moments never leave a hole.
 */
import { Checkpoint, SessionJournal } from "@session-journal/core"
import { toolParams } from "@session-journal/core/test/fixtures"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { NodePersistence } from "../src/index.ts"
import {
  acks,
  appendChain,
  asUnpreallocated,
  dataEnd,
  historyOf,
  JournalState,
  loadAndAppendOne,
  loadRead,
  run,
  runExit,
  spawnFixture,
  tempDir,
  withWriter,
  wrapHandle
} from "./helpers.ts"

const SEG0 = "00000000000000000000.jsonl"
const STRESS = process.env["STRESS"] === "1"
const MiB = 1024 * 1024

const segments = (dir: string) => fs.readdirSync(dir).filter((n) => /^[0-9]{20}\.jsonl$/.test(n)).sort()
const sideFiles = (dir: string) => fs.readdirSync(dir).filter((n) => n.includes(".damaged-"))

// One more entry through a writer; returns the load it started from.
const appendOne = (root: string, id: string) => run({ root }, loadAndAppendOne(id))

// Starts a writer process that appends `count` entries, keeps the session open and
// is then killed: its active segment is left as a crash leaves it.
const killedAfter = async (root: string, id: string, count: number) => {
  const child = spawnFixture("appender", {
    SJ_ROOT: root,
    SJ_ID: id,
    SJ_COUNT: String(count),
    SJ_FIBERS: "1",
    SJ_HOLD: "1"
  })
  const done = await child.waitFor((l) => l === "done")
  expect(done, child.lines.join("\n")).toBe(true)
  await child.kill()
  return acks(child.lines)
}

type Handle = Awaited<ReturnType<NodePersistence.Fs["open"]>>

// The real filesystem, with the calls of each handle it opens replaced by `over`'s
// (given the handle and its path).
const handlesOver = (over: (fh: Handle, p: string) => Partial<Omit<Handle, "fd">>): NodePersistence.Fs => ({
  ...NodePersistence.nodeFs,
  open: async (p, flags, mode) => {
    const fh = await NodePersistence.nodeFs.open(p, flags, mode)
    return wrapHandle(fh, over(fh, p))
  }
})

// Whether any byte of the first `end` bytes of `file` is zero (a hole in the data).
const holeBefore = (file: string, end: number) => fs.readFileSync(file).subarray(0, end).includes(0)

describe("preallocated segments", () => {
  it("a preallocated active segment reopened after SIGKILL continues in place with no gap; verify passes", async () => {
    const root = tempDir("prealloc-kill")
    const acked = await killedAfter(root, "k", 20)
    expect(acked).toEqual(Array.from({ length: 20 }, (_, i) => i))
    const file = path.join(root, "k", SEG0)
    const end = dataEnd(file)
    // The writer died with zero blocks ahead of its data.
    expect(fs.statSync(file).size).toBeGreaterThan(end)
    const loaded = await run({ root }, loadRead("k"))
    expect(loaded.recovery.stopped).toBeNull()
    expect(loaded.recovery.tornTail).toBeNull()
    expect(loaded.state.next_sequence).toBe(20)
    await appendOne(root, "k")
    // The next record starts where the data ended: no gap, nothing set aside.
    const bytes = fs.readFileSync(file)
    const newEnd = dataEnd(file)
    expect(newEnd).toBeGreaterThan(end)
    expect(bytes.subarray(end, newEnd).toString("utf8")).toMatch(
      /^\{"k":"entry","v":1,"e":\{[^\n]*"sequence":20[^\n]*\}\}\n$/
    )
    expect(holeBefore(file, newEnd)).toBe(false)
    expect(sideFiles(path.join(root, "k"))).toEqual([])
    // A writer that closed cleanly leaves only data.
    expect(fs.statSync(file).size).toBe(newEnd)
    const report = await Effect.runPromise(NodePersistence.inspect({ root }, "k"))
    expect(report.ok).toBe(true)
    expect(report.recovery.tornTail).toBeNull()
    expect((await run({ root }, historyOf("k"))).map((e) => e.sequence)).toEqual(
      Array.from({ length: 21 }, (_, i) => i)
    )
  }, 60_000)

  it(
    "a long zero tail of a preallocated segment is unused space: loaded clean, written over, cut at close",
    async () => {
      const root = tempDir("prealloc-long")
      await run({ root }, withWriter("z", (h) => appendChain(h, JournalState.empty("z"), 3)))
      const file = path.join(root, "z", SEG0)
      const size = fs.statSync(file).size
      expect(fs.readFileSync(file).subarray(0, 64).toString()).toMatch(
        /^\{"k":"open","v":1,"base":0,"prealloc":true\}\n/
      )
      fs.truncateSync(file, size + 20 * MiB)
      const loaded = await run({ root }, loadRead("z"))
      expect(loaded.recovery.stopped).toBeNull()
      expect(loaded.recovery.tornTail).toBeNull()
      expect(loaded.state.next_sequence).toBe(3)
      await appendOne(root, "z")
      expect(sideFiles(path.join(root, "z"))).toEqual([])
      expect(fs.statSync(file).size).toBe(dataEnd(file))
      expect(holeBefore(file, dataEnd(file))).toBe(false)
      const report = await Effect.runPromise(NodePersistence.inspect({ root }, "z"))
      expect(report.ok).toBe(true)
      expect(report.nextSequence).toBe(4)
    },
    60_000
  )

  it(
    "a torn partial line followed by zeros is reported torn; it is set aside and nothing that verifies is lost",
    async () => {
      const root = tempDir("prealloc-torn")
      await killedAfter(root, "t", 10)
      const file = path.join(root, "t", SEG0)
      const end = dataEnd(file)
      const size = fs.statSync(file).size
      const partial = Buffer.from("{\"k\":\"entry\",\"v\":1,\"e\":{\"sequence\":10,\"prev_hash\":\"ab")
      const fd = fs.openSync(file, "r+")
      fs.writeSync(fd, partial, 0, partial.length, end)
      fs.closeSync(fd)
      expect(fs.statSync(file).size).toBe(size)
      const loaded = await appendOne(root, "t")
      expect(loaded.recovery.stopped).toBeNull()
      expect(loaded.recovery.tornTail).toEqual({ segment: file, offset: end, bytes: size - end })
      expect(loaded.state.next_sequence).toBe(10)
      const aside = path.join(root, "t", `${SEG0}.damaged-${end}`)
      expect(fs.readFileSync(aside).subarray(0, partial.length)).toEqual(partial)
      expect((await run({ root }, historyOf("t"))).map((e) => e.sequence)).toEqual(
        Array.from({ length: 11 }, (_, i) => i)
      )
      const report = await Effect.runPromise(NodePersistence.inspect({ root }, "t"))
      expect(report.ok).toBe(true)
      expect(report.recovery.tornTail).toBeNull()
    },
    60_000
  )

  it(
    "unwritten (zero) bytes inside the last write of a preallocated segment are a torn tail, not corruption",
    async () => {
      const root = tempDir("prealloc-hole")
      await killedAfter(root, "h", 10)
      const file = path.join(root, "h", SEG0)
      const end = dataEnd(file)
      const size = fs.statSync(file).size
      // The pages of an unacknowledged write reached the disk out of order: a later
      // page holds the end of a line (and a whole line), an earlier one is still zero.
      const later = Buffer.from("\",\"entry_hash\":\"00\"}}\n{\"k\":\"entry\",\"v\":1,\"e\":{}}\n")
      const fd = fs.openSync(file, "r+")
      fs.writeSync(fd, later, 0, later.length, end + 4096 - (end % 4096))
      fs.closeSync(fd)
      const loaded = await appendOne(root, "h")
      expect(loaded.recovery.stopped).toBeNull()
      expect(loaded.recovery.tornTail?.offset).toBe(end)
      expect(loaded.recovery.tornTail?.bytes).toBe(size - end)
      expect(loaded.state.next_sequence).toBe(10)
      expect(sideFiles(path.join(root, "h"))).toEqual([`${SEG0}.damaged-${end}`])
      const report = await Effect.runPromise(NodePersistence.inspect({ root }, "h"))
      expect(report.ok).toBe(true)
      expect(report.nextSequence).toBe(11)
    },
    60_000
  )

  it(
    "a segment written before preallocation loads and takes appends as before; the next segment is preallocated",
    async () => {
      const root = tempDir("prealloc-old")
      await run({ root }, withWriter("o", (h) => appendChain(h, JournalState.empty("o"), 4)))
      const dir = path.join(root, "o")
      asUnpreallocated(dir)
      const file = path.join(dir, SEG0)
      const before = fs.readFileSync(file)
      const state = await run(
        { root },
        withWriter("o", (h) =>
          Effect.gen(function*() {
            const l = yield* h.load
            expect(l.recovery.stopped).toBeNull()
            expect(l.recovery.tornTail).toBeNull()
            const c = yield* appendChain(h, l.state, 2)
            // The old segment grows by exactly its lines, with no zero tail.
            const now = fs.readFileSync(file)
            expect(now.subarray(0, before.length)).toEqual(before)
            expect(now.includes(0)).toBe(false)
            yield* h.checkpoint(Checkpoint.encode(c.state))
            return yield* appendChain(h, c.state, 1)
          }))
      )
      expect(state.state.next_sequence).toBe(7)
      const names = segments(dir)
      expect(names).toEqual([SEG0, "00000000000000000006.jsonl"])
      expect(fs.readFileSync(path.join(dir, names[1]!)).subarray(0, 64).toString()).toMatch(
        /^\{"k":"open","v":1,"base":6,"prealloc":true\}\n/
      )
      expect(fs.readFileSync(file).includes(0)).toBe(false)
      const report = await Effect.runPromise(NodePersistence.inspect({ root }, "o"))
      expect(report.ok).toBe(true)
      expect(report.nextSequence).toBe(7)
    },
    60_000
  )

  it(
    "a lone writer writes on the calling thread; a failed or short write there fails the append, and the next one continues the chain",
    async () => {
      const root = tempDir("prealloc-sync")
      const real = NodePersistence.nodeFs
      const state = { calls: 0, mode: "ok" as "ok" | "fail" | "short" }
      const fs_: NodePersistence.Fs = {
        ...real,
        writeSync: (fd, buffer, offset, length, position) => {
          state.calls++
          if (state.mode === "fail") throw Object.assign(new Error("EIO: injected"), { code: "EIO" })
          if (state.mode === "short") {
            // Half the bytes reach the file, then the disk fails.
            state.mode = "fail"
            return real.writeSync!(fd, buffer, offset, Math.max(1, length >> 1), position)
          }
          return real.writeSync!(fd, buffer, offset, length, position)
        }
      }
      const params = (i: number) => toolParams("t", { server_id: "s", agent_id: "a", bytes_read: i })
      const live = SessionJournal.layer().pipe(
        Layer.provide(NodePersistence.layer({ root }).pipe(Layer.provide(NodePersistence.layerFs(fs_))))
      )
      const acked = await Effect.runPromise(Effect.provide(
        Effect.gen(function*() {
          const j = yield* SessionJournal.SessionJournal
          const acked: Array<number> = []
          for (let i = 0; i < 5; i++) acked.push((yield* j.record("w", params(i))).sequence)
          expect(state.calls).toBeGreaterThan(0)
          for (const mode of ["fail", "short"] as const) {
            state.mode = mode
            const failed = yield* Effect.exit(j.record("w", params(100)))
            expect(Exit.isFailure(failed)).toBe(true)
            const e = Exit.findErrorOption(failed)
            expect(e._tag === "Some" ? (e.value as { _tag: string })._tag : "defect").toBe("StorageError")
            state.mode = "ok"
            for (let i = 0; i < 3; i++) acked.push((yield* j.record("w", params(i))).sequence)
          }
          return acked
        }),
        live
      ))
      const stored = (await run({ root }, historyOf("w"))).map((e) => e.sequence)
      expect(stored).toEqual(Array.from({ length: stored.length }, (_, i) => i))
      for (const n of acked) expect(stored[n]).toBe(n)
      const report = await Effect.runPromise(NodePersistence.inspect({ root }, "w"))
      expect(report.ok).toBe(true)
      expect(report.recovery.tornTail).toBeNull()
      const file = path.join(root, "w", SEG0)
      expect(holeBefore(file, dataEnd(file))).toBe(false)
    },
    60_000
  )

  it(
    "zeros are written ahead of the data once, never over data or where an append is in flight; each data byte is written once",
    async () => {
      const root = tempDir("prealloc-fill")
      const real = NodePersistence.nodeFs
      // Every write call to a segment, in issue order: its range, whether its bytes
      // are all zero (a fill: a record line never holds a zero byte), and the number
      // of writes issued before it completed (writes issued in between overlapped it).
      type Call = { file: string; at: number; end: number; zeros: boolean; issued: number; doneBy: number }
      const calls: Array<Call> = []
      let cutWhileFilling = 0
      const byFd = new Map<number, string>()
      const track = (file: string | undefined, b: Uint8Array, o: number, l: number, at: number): Call | null => {
        if (file === undefined || !/[0-9]{20}\.jsonl$/.test(file)) return null
        const c = {
          file,
          at,
          end: at + l,
          zeros: !b.subarray(o, o + l).some((x) => x !== 0),
          issued: calls.length,
          doneBy: Number.POSITIVE_INFINITY
        }
        calls.push(c)
        return c
      }
      const counting: NodePersistence.Fs = {
        ...handlesOver((fh, p) => {
          byFd.set(fh.fd, p)
          return {
            write: async (b, o, l, at) => {
              const c = track(p, b, o, l, at)
              try {
                return await fh.write(b, o, l, at)
              } finally {
                if (c !== null) c.doneBy = calls.length
              }
            },
            truncate: (n) => {
              // The file is never cut or extended while zeros are being written into it.
              if (calls.some((c) => c.file === p && c.zeros && c.doneBy === Number.POSITIVE_INFINITY)) cutWhileFilling++
              return fh.truncate(n)
            }
          }
        }),
        writeSync: (fd, buffer, offset, length, position) => {
          const c = track(byFd.get(fd), buffer, offset, length, position)
          try {
            return real.writeSync!(fd, buffer, offset, length, position)
          } finally {
            if (c !== null) c.doneBy = calls.length
          }
        }
      }
      const params = (i: number) => toolParams("t", { server_id: "s", agent_id: "a", bytes_read: i })
      const live = SessionJournal.layer({ checkpointMinBytes: 64 * 1024 }).pipe(
        Layer.provide(NodePersistence.layer({ root }).pipe(Layer.provide(NodePersistence.layerFs(counting))))
      )
      // Enough records to grow the first segment past several stretches and to roll.
      const sizes = await Effect.runPromise(Effect.provide(
        Effect.gen(function*() {
          const j = yield* SessionJournal.SessionJournal
          for (let i = 0; i < 700; i++) yield* j.record("h", params(i))
          const dir = path.join(root, "h")
          // While the session is open its active segment holds a zero tail.
          const names = segments(dir)
          const last = path.join(dir, names[names.length - 1]!)
          expect(fs.statSync(last).size).toBeGreaterThan(dataEnd(last))
          return names.map((n) => [path.join(dir, n), dataEnd(path.join(dir, n))] as const)
        }),
        live
      ))
      expect(sizes.length).toBeGreaterThan(1)
      expect(cutWhileFilling).toBe(0)
      for (const [file, end] of sizes) {
        const mine = calls.filter((c) => c.file === file)
        const data = mine.filter((c) => !c.zeros)
        const fills = mine.filter((c) => c.zeros)
        // Each data byte once, in order, and nothing else but zeros.
        expect(data.reduce((n, c) => n + c.end - c.at, 0), file).toBe(end)
        data.forEach((c, k) => expect(c.at, file).toBe(k === 0 ? 0 : data[k - 1]!.end))
        // Zeros were written, ahead of the data: each byte at most once, never over
        // data written before, never over a data write in flight at the same time.
        expect(fills.length, file).toBeGreaterThan(0)
        for (const z of fills) {
          for (const other of fills) if (other !== z) expect(other.end <= z.at || z.end <= other.at, file).toBe(true)
          for (const d of data) {
            const before = d.issued < z.issued
            const overlapping = d.issued < z.doneBy && z.issued < d.doneBy
            if (before || overlapping) expect(d.end <= z.at || z.end <= d.at, file).toBe(true)
          }
        }
        // The zeros ahead are bounded: at most the data plus one stretch and its gap.
        const zeroBytes = fills.reduce((n, c) => n + c.end - c.at, 0)
        expect(zeroBytes, file).toBeLessThanOrEqual(end + 64 * 1024 + 16 * 1024 + 4096)
      }
      const report = await Effect.runPromise(NodePersistence.inspect({ root }, "h"))
      expect(report.ok).toBe(true)
      expect(report.nextSequence).toBe(700)
    },
    60_000
  )

  it.each(["first", "later"] as const)(
    "SIGKILL while zeros are written ahead of the data (%s segment): the half-written zeros are unused space; nothing acknowledged is lost, nothing is set aside",
    async (where) => {
      const root = tempDir(`prealloc-fill-kill-${where}`)
      const id = "z"
      const child = spawnFixture("appender", {
        SJ_ROOT: root,
        SJ_ID: id,
        SJ_FIBERS: "1",
        SJ_SEGMENT_BYTES: "16384",
        SJ_FILL_PAUSE: where
      })
      expect(await child.waitFor((l) => l.startsWith("filling ")), child.lines.join("\n")).toBe(true)
      // Appends go on before the zeros while they are being written.
      expect(await child.waitFor((l) => l.startsWith("ack ")), child.lines.join("\n")).toBe(true)
      await child.kill()
      expect(child.lines.filter((l) => l.startsWith("error") || l.startsWith("stderr"))).toEqual([])
      const [, file, from] = child.lines.find((l) => l.startsWith("filling "))!.split(" ")
      const acked = acks(child.lines)
      const dir = path.join(root, id)
      if (where === "later") expect(path.basename(file!)).not.toBe(SEG0)
      // The data stops before the zeros being written; the file holds some of them.
      const end = dataEnd(file!)
      expect(end).toBeLessThanOrEqual(Number(from))
      expect(fs.statSync(file!).size).toBeGreaterThan(Number(from))
      for (const n of segments(dir)) expect(holeBefore(path.join(dir, n), dataEnd(path.join(dir, n))), n).toBe(false)
      const loaded = await run({ root }, loadRead(id))
      expect(loaded.recovery.stopped).toBeNull()
      expect(loaded.recovery.tornTail).toBeNull()
      const stored = (await run({ root }, historyOf(id))).map((e) => e.sequence)
      for (const n of acked) expect(stored[n]).toBe(n)
      // The next writer continues where the data ends, sets nothing aside, and
      // leaves only data when it closes. Where the killed writer had already moved on
      // to a new segment past the bound (the load decides where the kill lands), the
      // next one continues there, and the segment of the zeros keeps them after its
      // data: unused space, as a crash leaves it.
      await appendOne(root, id)
      const newest = path.join(dir, segments(dir).at(-1)!)
      const newEnd = dataEnd(newest)
      if (newest === file) expect(newEnd).toBeGreaterThan(end)
      else expect(dataEnd(file!)).toBe(end)
      expect(holeBefore(newest, newEnd)).toBe(false)
      expect(fs.statSync(newest).size).toBe(newEnd)
      expect(sideFiles(dir)).toEqual([])
      const report = await Effect.runPromise(NodePersistence.inspect({ root }, id))
      expect(report.ok, JSON.stringify(report.segments.filter((s) => s.status !== "ok"))).toBe(true)
      expect(report.nextSequence).toBe(loaded.state.next_sequence + 1)
    },
    60_000
  )

  it(
    "a failed write of zeros ahead (after half of them) fails no append; the session continues in place and closes with only data",
    async () => {
      const root = tempDir("prealloc-fill-fail")
      let failed = 0
      const failing = handlesOver((fh) => ({
        write: async (b, o, l, at) => {
          if (l === 0 || b.subarray(o, o + l).some((x) => x !== 0)) return fh.write(b, o, l, at)
          failed++
          await fh.write(b, o, Math.floor(l / 2), at)
          throw Object.assign(new Error("EIO: injected"), { code: "EIO" })
        }
      }))
      const params = (i: number) => toolParams("t", { server_id: "s", agent_id: "a", bytes_read: i })
      const live = SessionJournal.layer({ checkpointMinBytes: 64 * 1024 }).pipe(
        Layer.provide(NodePersistence.layer({ root }).pipe(Layer.provide(NodePersistence.layerFs(failing))))
      )
      await Effect.runPromise(Effect.provide(
        Effect.gen(function*() {
          const j = yield* SessionJournal.SessionJournal
          for (let i = 0; i < 400; i++) yield* j.record("f", params(i))
        }),
        live
      ))
      // One failed fill per segment: after it, the segment grows by holes.
      const dir = path.join(root, "f")
      expect(failed).toBeGreaterThan(1)
      expect(failed).toBeLessThanOrEqual(segments(dir).length)
      for (const n of segments(dir)) {
        const file = path.join(dir, n)
        expect(holeBefore(file, dataEnd(file)), n).toBe(false)
        expect(fs.statSync(file).size, n).toBe(dataEnd(file))
      }
      expect(sideFiles(dir)).toEqual([])
      const report = await Effect.runPromise(NodePersistence.inspect({ root }, "f"))
      expect(report.ok).toBe(true)
      expect(report.nextSequence).toBe(400)
    },
    60_000
  )

  it(
    "a failed first write into a new segment leaves no zeros: the segment reads as empty, and the next writer sets nothing aside",
    async () => {
      const root = tempDir("prealloc-first-write")
      let writes = 0
      // The pool's write fails once, on the new segment (the calling thread's write is off).
      const { writeSync: _, ...pool } = NodePersistence.nodeFs
      const failing: NodePersistence.Fs = {
        ...pool,
        open: async (p, flags, mode) => {
          const h = await NodePersistence.nodeFs.open(p, flags, mode)
          if (path.basename(p) !== SEG0) return h
          return wrapHandle(h, {
            write: async (b, o, l, at) => {
              if (writes++ === 0) {
                throw Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" })
              }
              return h.write(b, o, l, at)
            }
          })
        }
      }
      const first = await runExit(
        { root, fs: failing },
        withWriter("f", (h) => appendChain(h, JournalState.empty("f"), 3))
      )
      expect(Exit.isFailure(first)).toBe(true)
      const dir = path.join(root, "f")
      expect(fs.statSync(path.join(dir, SEG0)).size).toBe(0)
      const report = await Effect.runPromise(NodePersistence.inspect({ root }, "f"))
      expect(report.recovery.tornTail).toBeNull()
      await run({ root }, withWriter("f", (h) => appendChain(h, JournalState.empty("f"), 3)))
      expect(sideFiles(dir)).toEqual([])
      const stored = (await run({ root }, historyOf("f"))).map((e) => e.sequence)
      expect(stored).toEqual([0, 1, 2])
    },
    60_000
  )

  it("with callingThreadWrites false every durable write goes through the thread pool", async () => {
    const root = tempDir("prealloc-pool")
    const real = NodePersistence.nodeFs
    let calls = 0
    const counting: NodePersistence.Fs = {
      ...real,
      writeSync: (fd, buffer, offset, length, position) => {
        calls++
        return real.writeSync!(fd, buffer, offset, length, position)
      }
    }
    const params = (i: number) => toolParams("t", { server_id: "s", agent_id: "a", bytes_read: i })
    const journal = (callingThreadWrites: boolean) =>
      SessionJournal.layer().pipe(
        Layer.provide(
          NodePersistence.layer({ root, callingThreadWrites }).pipe(Layer.provide(NodePersistence.layerFs(counting)))
        )
      )
    const recordFive = (id: string) =>
      Effect.gen(function*() {
        const j = yield* SessionJournal.SessionJournal
        for (let i = 0; i < 5; i++) yield* j.record(id, params(i))
      })
    await Effect.runPromise(Effect.provide(recordFive("pool"), journal(false)))
    expect(calls).toBe(0)
    await Effect.runPromise(Effect.provide(recordFive("thread"), journal(true)))
    expect(calls).toBeGreaterThan(0)
    const report = await Effect.runPromise(NodePersistence.inspect({ root }, "pool"))
    expect(report.ok).toBe(true)
    expect(report.nextSequence).toBe(5)
  }, 60_000)

  it(
    `crash loop: at least ${
      STRESS ? 200 : 10
    } SIGKILLs at random moments never leave a hole or lose an acknowledged entry`,
    async () => {
      const root = path.join(tempDir("prealloc-crash"), "journal")
      const id = "c"
      const kills = STRESS ? 200 : 10
      let rnd = 4242
      const random = () => {
        rnd = (rnd * 1103515245 + 12345) % 2147483648
        return rnd / 2147483648
      }
      const acked = new Set<number>()
      let zeroTails = 0
      const env = { SJ_ROOT: root, SJ_ID: id, SJ_SEGMENT_BYTES: "16384", SJ_FIBERS: "3", SJ_WAIT: "1" }
      let next = spawnFixture("appender", env)
      // Past its kills the loop goes on until the session has a second segment (a
      // loaded machine acknowledges fewer entries per kill), at most four times as long.
      const more = (round: number) => round < kills || (round < kills * 4 && segments(path.join(root, id)).length < 2)
      let rounds = 0
      for (let round = 0; more(round); round++) {
        rounds++
        const child = next
        next = spawnFixture("appender", env)
        child.send("go")
        expect(await child.waitFor((l) => l === "ready"), child.lines.join("\n")).toBe(true)
        await child.waitFor((l) => l.startsWith("ack "))
        await new Promise((resolve) => setTimeout(resolve, random() * 40))
        await child.kill()
        expect(child.lines.filter((l) => l.startsWith("error") || l.startsWith("locked") || l.startsWith("stderr")))
          .toEqual([])
        for (const n of acks(child.lines)) acked.add(n)
        const dir = path.join(root, id)
        const names = segments(dir)
        const last = path.join(dir, names[names.length - 1]!)
        if (fs.statSync(last).size > dataEnd(last)) zeroTails++
        for (const n of names) expect(holeBefore(path.join(dir, n), dataEnd(path.join(dir, n))), n).toBe(false)
        const loaded = await run({ root }, loadRead(id))
        expect(loaded.recovery.stopped).toBeNull()
        const stored = (await run({ root }, historyOf(id))).map((e) => e.sequence)
        expect(stored).toEqual(Array.from({ length: loaded.state.next_sequence }, (_, i) => i))
        for (const n of acked) expect(stored[n]).toBe(n)
      }
      // The spare writer never got "go": it has not opened the session.
      await next.kill()
      // Most kills hit a writer with zero blocks ahead of its data.
      expect(zeroTails).toBeGreaterThan(rounds / 2)
      const report = await Effect.runPromise(NodePersistence.inspect({ root }, id))
      expect(report.ok, JSON.stringify(report.segments.filter((s) => s.status !== "ok"))).toBe(true)
      expect(segments(path.join(root, id)).length).toBeGreaterThan(1)
    },
    STRESS ? 1_800_000 : 600_000
  )
})
