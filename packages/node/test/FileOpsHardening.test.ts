/**
 * The file primitives under hostile conditions: a copy-aside on a full disk leaves
 * no side file behind and its names never run out; a zero-filled tail longer than
 * the line bound is a torn tail that a write or `repair` sets aside; odd files in
 * place of the lock (a symlink, a directory, a FIFO) never break or hang a reader
 * and give a writer a clear typed error; lock records are judged strictly.
 */
import { SessionLocked, StorageError } from "@session-journal/core"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { Lock, NodePersistence } from "../src/index.ts"
import * as Base from "../src/internal/fileOps/base.ts"
import * as Lines from "../src/internal/fileOps/lines.ts"
import * as Open from "../src/internal/fileOps/open.ts"
import * as Replace from "../src/internal/fileOps/replace.ts"
import {
  appendChain,
  asUnpreallocated,
  chain,
  JournalState,
  loadRead,
  requestOf,
  run,
  tempDir,
  withWriter,
  wrapHandle
} from "./helpers.ts"

const SEG0 = "00000000000000000000.jsonl"
// Failed copies retried on a full disk (STRESS=1: 150).
const FULL_DISK_RETRIES = process.env["STRESS"] === "1" ? 150 : 20
const MiB = 1024 * 1024
// The zero-filled tail copied aside in chunks (STRESS=1: 300 MiB).
const SPARSE_TAIL = (process.env["STRESS"] === "1" ? 300 : 48) * MiB

const context = (root: string, fsImpl: Base.Fs = Base.nodeFs): Base.Context => ({
  fs: fsImpl,
  clock: Clock.Clock.defaultValue(),
  root,
  uid: typeof process.getuid === "function" ? process.getuid() : null,
  maxFileBytes: Base.MAX_FILE_BYTES,
  maxLineBytes: Base.MAX_LINE_BYTES
})

/** A filesystem whose writes to temp files fail with ENOSPC (a full disk). */
const fullDisk = (): Base.Fs => ({
  ...Base.nodeFs,
  open: async (p, flags, mode) => {
    const h = await Base.nodeFs.open(p, flags, mode)
    if (!path.basename(p).startsWith(Replace.TEMP_PREFIX)) return h
    return wrapHandle(h, {
      write: async () => {
        throw Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" })
      }
    })
  }
})

const sessionDir = (prefix: string) => {
  const root = tempDir(prefix)
  const dir = path.join(root, "s")
  fs.mkdirSync(dir, { mode: 0o700 })
  return { root, dir }
}

const seed = async (root: string, id: string, n: number) =>
  run({ root }, withWriter(id, (h) => appendChain(h, JournalState.empty(id), n)))

const readAll = async (reader: Lines.LineReader) => {
  const out: Array<Lines.Line> = []
  for (let item = await Effect.runPromise(reader.next); item !== null; item = await Effect.runPromise(reader.next)) {
    out.push(item)
  }
  return out
}

const lineReader = async (ctx: Base.Context, file: string) => {
  const fh = await Effect.runPromise(Open.openRead(ctx, file))
  const size = (await fh.stat()).size
  return { fh, reader: new Lines.LineReader(ctx, fh, file, file, 0, size), size }
}

describe("copyAside", () => {
  it("a copy that fails on a full disk leaves no side file and no temp file, however often it is retried", async () => {
    const { root, dir } = sessionDir("aside-full")
    fs.writeFileSync(path.join(dir, SEG0), "good\ntorn tail bytes", { mode: 0o600 })
    const ctx = context(root, fullDisk())
    for (let i = 0; i < FULL_DISK_RETRIES; i++) {
      const error = await Effect.runPromise(Replace.copyAside(ctx, dir, SEG0, 5)).then(() => null, (e: unknown) => e)
      expect(error).toBeInstanceOf(Error)
      expect(Base.codeOf((error as { cause?: unknown }).cause)).toBe("ENOSPC")
    }
    expect(fs.readdirSync(dir).sort()).toEqual([SEG0])
    // Once there is space again, the bytes are kept under the first name.
    const name = await Effect.runPromise(Replace.copyAside(context(root), dir, SEG0, 5))
    expect(name).toBe(`${SEG0}.damaged-5`)
    expect(fs.readFileSync(path.join(dir, name), "utf8")).toBe("torn tail bytes")
    expect(fs.statSync(path.join(dir, name)).mode & 0o777).toBe(0o600)
    expect(fs.readdirSync(dir).sort()).toEqual([SEG0, name])
  })

  it("side-file names never run out: the next free name is taken, existing ones are untouched", async () => {
    const { root, dir } = sessionDir("aside-names")
    fs.writeFileSync(path.join(dir, SEG0), "good\nbad", { mode: 0o600 })
    const taken = [`${SEG0}.damaged-5`, ...Array.from({ length: 150 }, (_, i) => `${SEG0}.damaged-5.${i + 1}`)]
    for (const n of taken) fs.writeFileSync(path.join(dir, n), `old ${n}`, { mode: 0o600 })
    const name = await Effect.runPromise(Replace.copyAside(context(root), dir, SEG0, 5))
    expect(name).toBe(`${SEG0}.damaged-5.151`)
    expect(fs.readFileSync(path.join(dir, name), "utf8")).toBe("bad")
    for (const n of taken) expect(fs.readFileSync(path.join(dir, n), "utf8")).toBe(`old ${n}`)
    expect(fs.readdirSync(dir).filter((n) => n.startsWith(Replace.TEMP_PREFIX))).toEqual([])
  })

  it("copies a large sparse zero-filled tail in bounded chunks, byte for byte", async () => {
    const { root, dir } = sessionDir("aside-sparse")
    const file = path.join(dir, SEG0)
    fs.writeFileSync(file, "head\n", { mode: 0o600 })
    fs.truncateSync(file, 5 + SPARSE_TAIL)
    fs.appendFileSync(file, "end")
    const name = await Effect.runPromise(Replace.copyAside(context(root), dir, SEG0, 5))
    const copy = path.join(dir, name)
    expect(fs.statSync(copy).size).toBe(SPARSE_TAIL + 3)
    const fd = fs.openSync(copy, "r")
    try {
      const buf = Buffer.alloc(MiB)
      let nonZero = ""
      for (let pos = 0; pos < SPARSE_TAIL + 3; pos += MiB) {
        const n = fs.readSync(fd, buf, 0, MiB, pos)
        for (let i = 0; i < n; i++) if (buf[i] !== 0) nonZero += String.fromCharCode(buf[i]!)
      }
      expect(nonZero).toBe("end")
    } finally {
      fs.closeSync(fd)
    }
    // Hundreds of MiB through the filesystem (STRESS=1): I/O shared with other work can take minutes.
  }, 180_000)
})

describe("LineReader and zero-filled tails", () => {
  it("a run of zeros from a line start to the end is one zero-filled tail, whatever its length", async () => {
    const { root, dir } = sessionDir("zeros")
    const file = path.join(dir, SEG0)
    fs.writeFileSync(file, "one\ntwo\n", { mode: 0o600 })
    fs.truncateSync(file, 8 + 20 * MiB)
    const { fh, reader } = await lineReader(context(root), file)
    try {
      const items = await readAll(reader)
      expect(items.map((i) => [i.offset, Buffer.from(i.line).toString(), i.complete, i.zeros === true])).toEqual([
        [0, "one", true, false],
        [4, "two", true, false],
        [8, "", false, true]
      ])
    } finally {
      await Effect.runPromise(Replace.close(fh))
    }
  })

  it("zeros followed by other bytes are not a zero-filled tail", async () => {
    const { root, dir } = sessionDir("zeros-more")
    const cases: Array<[string, Buffer, Array<[number, number, boolean]>]> = [
      // A short zero run, then a line: one complete (damaged) line.
      ["line", Buffer.concat([Buffer.from("a\n"), Buffer.alloc(1000), Buffer.from("b\n")]), [[0, 1, true], [
        2,
        1001,
        true
      ]]],
      // A short zero run, then an unterminated line: an ordinary incomplete tail.
      ["tail", Buffer.concat([Buffer.from("a\n"), Buffer.alloc(1000), Buffer.from("b")]), [[0, 1, true], [
        2,
        1001,
        false
      ]]]
    ]
    for (const [name, bytes, expected] of cases) {
      const file = path.join(dir, name)
      fs.writeFileSync(file, bytes, { mode: 0o600 })
      const { fh, reader } = await lineReader(context(root), file)
      try {
        const items = await readAll(reader)
        expect(items.map((i) => [i.offset, i.line.length, i.complete]), name).toEqual(expected)
        expect(items.some((i) => i.zeros === true), name).toBe(false)
      } finally {
        await Effect.runPromise(Replace.close(fh))
      }
    }
    // A zero run longer than the line bound, followed by other bytes, is still refused at the bound.
    const file = path.join(dir, "long")
    fs.writeFileSync(file, "a\n", { mode: 0o600 })
    fs.truncateSync(file, 2 + 9 * MiB)
    fs.appendFileSync(file, "x")
    const { fh, reader } = await lineReader(context(root), file)
    try {
      await expect(readAll(reader)).rejects.toMatchObject({ _tag: "CorruptJournal", offset: 2 })
    } finally {
      await Effect.runPromise(Replace.close(fh))
    }
  })

  it(
    "a 20 MiB zero-filled tail loads as a torn tail; the next write sets it aside and the session verifies",
    async () => {
      const root = tempDir("zeros-load")
      await seed(root, "z", 3)
      asUnpreallocated(path.join(root, "z"))
      const file = path.join(root, "z", SEG0)
      const size = fs.statSync(file).size
      fs.truncateSync(file, size + 20 * MiB)
      const loaded = await run({ root }, loadRead("z"))
      expect(loaded.state.next_sequence).toBe(3)
      expect(loaded.recovery.stopped).toBeNull()
      expect(loaded.recovery.tornTail).toEqual({ segment: file, offset: size, bytes: 20 * MiB })
      await run(
        { root },
        withWriter("z", (h) =>
          Effect.gen(function*() {
            const l = yield* h.load
            const c = chain(l.state, 1)
            yield* h.append(requestOf(l.state, c.entries))
          }))
      )
      const aside = path.join(root, "z", `${SEG0}.damaged-${size}`)
      expect(fs.statSync(aside).size).toBe(20 * MiB)
      const again = await run({ root }, loadRead("z"))
      expect(again.state.next_sequence).toBe(4)
      expect(again.recovery.tornTail).toBeNull()
      const report = await Effect.runPromise(NodePersistence.inspect({ root }, "z"))
      expect(report.ok).toBe(true)
    },
    60_000
  )
})

// ---------------------------------------------------------------------------
// The command line, run as users run it.

const BIN = path.join(import.meta.dirname, "..", "..", "cli", "bin", "session-journal.js")

interface Ran {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

const cli = (args: ReadonlyArray<string>): Promise<Ran> =>
  new Promise((resolve, reject) => {
    const env = { ...process.env }
    delete env["SESSION_JOURNAL_DIR"]
    delete env["SESSION_JOURNAL_PG_URL"]
    const child = spawn(process.execPath, [BIN, ...args], { cwd: os.tmpdir(), env, stdio: ["pipe", "pipe", "pipe"] })
    const out: Array<Buffer> = []
    const err: Array<Buffer> = []
    child.stdout.on("data", (b: Buffer) => out.push(b))
    child.stderr.on("data", (b: Buffer) => err.push(b))
    child.on("error", reject)
    child.on("close", (code) =>
      resolve({ code, stdout: Buffer.concat(out).toString("utf8"), stderr: Buffer.concat(err).toString("utf8") }))
    child.stdin.end("")
  })

const record = (dir: string, id: string, extra: ReadonlyArray<string> = []) =>
  cli([
    "--dir",
    dir,
    "record",
    id,
    "--tool",
    "read_file",
    "--server",
    "srv-1",
    "--agent",
    "agent-1",
    "--read",
    "1",
    "--written",
    "2",
    ...extra
  ])

describe("command line", () => {
  it("repair sets a 20 MiB zero-filled tail aside; the session is writable and verifies", async () => {
    const dir = tempDir("cli-zeros")
    for (let i = 0; i < 2; i++) expect((await record(dir, "z")).code).toBe(0)
    asUnpreallocated(path.join(dir, "z"))
    const file = path.join(dir, "z", SEG0)
    const size = fs.statSync(file).size
    fs.truncateSync(file, size + 20 * MiB)
    const verify = await cli(["--dir", dir, "verify", "z", "--json"])
    expect(verify.code, verify.stderr).toBe(0)
    const report = JSON.parse(verify.stdout).sessions[0]
    expect(report.ok).toBe(true)
    expect(report.torn_tail).toEqual({ segment: file, offset: size, bytes: 20 * MiB })
    const repair = await cli(["--dir", dir, "repair", "z", "--json"])
    expect(repair.code, repair.stderr).toBe(0)
    const repaired = JSON.parse(repair.stdout)
    expect(repaired.writable).toBe(true)
    // Sequence 2 is the repair's own `recovery` entry naming the bytes it set aside.
    expect(repaired.next_sequence).toBe(3)
    expect(repaired.entry.kind).toBe("recovery")
    expect(fs.statSync(path.join(dir, "z", `${SEG0}.damaged-${size}`)).size).toBe(20 * MiB)
    const next = await record(dir, "z", ["--json"])
    expect(next.code, next.stderr).toBe(0)
    const after = await cli(["--dir", dir, "verify", "z", "--json"])
    expect(after.code, after.stderr).toBe(0)
    const s = JSON.parse(after.stdout).sessions[0]
    expect(s.ok).toBe(true)
    expect(s.torn_tail).toBeNull()
    expect(s.entries_checked).toBeGreaterThanOrEqual(3)
    // Five starts of the command line: each takes seconds on a loaded machine.
  }, 180_000)
})

// ---------------------------------------------------------------------------
// Odd files where the lock must be.

const ODD_KINDS = ["symlink", "dangling symlink", "directory", "fifo"] as const

const plantOdd = (dir: string, kind: (typeof ODD_KINDS)[number], name = Lock.LOCK_FILE) => {
  const file = path.join(dir, name)
  fs.rmSync(file, { force: true })
  switch (kind) {
    case "symlink":
      fs.symlinkSync(path.join(dir, "checkpoint.json"), file)
      break
    case "dangling symlink":
      fs.symlinkSync(path.join(dir, "nowhere"), file)
      break
    case "directory":
      fs.mkdirSync(file, { mode: 0o700 })
      break
    case "fifo": {
      const made = spawnSync("mkfifo", ["-m", "600", file])
      if (made.status !== 0) throw new Error(`mkfifo failed: ${made.stderr}`)
      break
    }
  }
  return file
}

describe("odd lock files", () => {
  it("Lock.inspect reports each kind without failing; a writer gets a StorageError naming it", async () => {
    const root = tempDir("odd-inspect")
    for (const kind of ODD_KINDS) {
      const id = kind.replace(/ /g, "-")
      await seed(root, id, 1)
      const dir = path.join(root, id)
      const file = plantOdd(dir, kind)
      const seen = await Effect.runPromise(Lock.inspect(context(root), dir))
      expect(seen?.record, kind).toBeNull()
      expect(seen?.alive, kind).toBe(false)
      expect(seen?.problem, kind).toContain(
        kind === "fifo" ? "a FIFO" : kind === "directory" ? "a directory" : "a symbolic link"
      )
      const error = await Effect.runPromise(Lock.acquire(context(root), dir, id)).then(() => null, (e: unknown) => e)
      expect(error, kind).toBeInstanceOf(StorageError)
      expect((error as StorageError).message, kind).toContain("remove it")
      // Nothing was followed, removed or replaced.
      expect(fs.lstatSync(file).isFile(), kind).toBe(false)
      const report = await Effect.runPromise(NodePersistence.inspect({ root }, id))
      expect(report.ok, kind).toBe(true)
    }
  })

  it("an odd takeover claim next to a stale lock gives a writer a StorageError naming the claim", async () => {
    const root = tempDir("odd-claim")
    await seed(root, "c", 1)
    const dir = path.join(root, "c")
    fs.writeFileSync(path.join(dir, Lock.LOCK_FILE), JSON.stringify({ ...liveRecord(deadPid()), start: null }), {
      mode: 0o600
    })
    plantOdd(dir, "directory", Lock.CLAIM_FILE)
    const error = await Effect.runPromise(Lock.acquire(context(root), dir, "c")).then(() => null, (e: unknown) => e)
    expect(error).toBeInstanceOf(StorageError)
    expect((error as StorageError).message).toContain(Lock.CLAIM_FILE)
  })

  // Every kind is tested in-process above; through the command line, the normal
  // suite takes a symbolic link and a FIFO (the one that could hang), STRESS=1 all.
  for (const kind of process.env["STRESS"] === "1" ? ODD_KINDS : (["symlink", "fifo"] as const)) {
    it(
      `command line, lock is a ${kind}: verify exits 0, record fails with a storage error and does not hang`,
      async () => {
        const dir = tempDir("odd-cli")
        expect((await record(dir, "s")).code).toBe(0)
        const file = plantOdd(path.join(dir, "s"), kind)
        const verify = await cli(["--dir", dir, "verify", "s"])
        expect(verify.code, verify.stderr).toBe(0)
        const all = await cli(["--dir", dir, "verify"])
        expect(all.code, all.stderr).toBe(0)
        const write = await record(dir, "s")
        expect(write.code, write.stderr).toBe(3)
        expect(write.stderr).toContain(file)
        expect(write.stderr).toMatch(/remove it/)
        expect(fs.lstatSync(file).isFile()).toBe(false)
      },
      // Four starts of the command line: each takes seconds on a loaded machine.
      180_000
    )
  }
})

// ---------------------------------------------------------------------------
// Lock records judged strictly.

const deadPid = (): number => spawnSync(process.execPath, ["-e", ""]).pid!

const liveRecord = (pid: number): Lock.LockRecord => ({
  pid,
  host: os.hostname(),
  start: Lock.processStat(pid)?.start ?? null,
  token: "someone-else",
  acquired_at: Date.now()
})

/**
 * A process that stays alive until killed; `zombie` is a child it never reaps (perl
 * forks it and sleeps without waiting: a shell may reap a background job first).
 */
const startSleeper = async (): Promise<{ pid: number; zombie: number; stop: () => Promise<void> }> => {
  const child = spawn("perl", ["-e", "$| = 1; my $p = fork(); exit 0 if $p == 0; print \"$p\\n\"; sleep 600"], {
    stdio: ["ignore", "pipe", "ignore"]
  })
  const zombie = await new Promise<number>((resolve, reject) => {
    child.stdout.once("data", (b: Buffer) => resolve(Number(b.toString().trim())))
    child.once("error", reject)
  })
  const exited = new Promise<void>((resolve) => child.once("close", () => resolve()))
  return {
    pid: child.pid!,
    zombie,
    stop: async () => {
      child.kill("SIGKILL")
      await exited
    }
  }
}

const writeLock = (dir: string, content: string) =>
  fs.writeFileSync(path.join(dir, Lock.LOCK_FILE), content, { mode: 0o600 })

const takes = async (root: string, dir: string) => {
  let held: Lock.Held
  try {
    held = await Effect.runPromise(Lock.acquire(context(root), dir, "s"))
  } catch (e) {
    return e
  }
  const onDisk = JSON.parse(fs.readFileSync(path.join(dir, Lock.LOCK_FILE), "utf8")) as Lock.LockRecord
  expect(onDisk.token).toBe(held.record.token)
  await Effect.runPromise(held.release)
  return "taken"
}

/** Waits until `pid` is a zombie; fails at once if it was reaped instead. */
const zombieSeen = async (pid: number): Promise<void> => {
  for (let stat = Lock.processStat(pid); stat?.state !== "Z"; stat = Lock.processStat(pid)) {
    if (stat === null) throw new Error(`process ${pid} was reaped before it could be seen as a zombie`)
    await new Promise((resolve) => setImmediate(resolve))
  }
}

describe.runIf(Lock.processStat(process.pid) !== null)("lock holders", () => {
  it("a live holder keeps the lock; the same pid with another start time, a zombie, or another boot does not", async () => {
    const { dir, root } = sessionDir("holders")
    const sleeper = await startSleeper()
    try {
      writeLock(dir, JSON.stringify(liveRecord(sleeper.pid)))
      expect(await takes(root, dir)).toBeInstanceOf(SessionLocked)
      // The pid was reused by another process: the start time differs.
      writeLock(dir, JSON.stringify({ ...liveRecord(sleeper.pid), start: "1" }))
      expect(await takes(root, dir)).toBe("taken")
      // A holder of an earlier boot is gone, whatever now runs under its pid.
      writeLock(dir, JSON.stringify({ ...liveRecord(sleeper.pid), boot: "00000000-0000-0000-0000-000000000000" }))
      expect(await takes(root, dir)).toBe("taken")
      // A zombie is dead.
      await zombieSeen(sleeper.zombie)
      writeLock(dir, JSON.stringify(liveRecord(sleeper.zombie)))
      expect(Lock.pidAlive(sleeper.zombie)).toBe(false)
      expect(await takes(root, dir)).toBe("taken")
    } finally {
      await sleeper.stop()
    }
  })

  it("a holder in another pid namespace of this host cannot be checked, so it keeps the lock", async () => {
    const { dir, root } = sessionDir("pidns")
    writeLock(dir, JSON.stringify({ ...liveRecord(deadPid()), pidns: "pid:[1]" }))
    const error = await takes(root, dir)
    expect(error).toBeInstanceOf(SessionLocked)
    expect((error as SessionLocked).message).toContain("another pid namespace")
  })

  it("garbage, an oversized file and pids that address process groups are stale records, taken over", async () => {
    const { dir, root } = sessionDir("garbage")
    const base = liveRecord(process.pid)
    const cases: Array<[string, string]> = [
      ["empty", ""],
      ["binary", "\u0000\u0001garbage"],
      ["array", "[1,2,3]"],
      ["pid 0", JSON.stringify({ ...base, pid: 0 })],
      ["pid -1", JSON.stringify({ ...base, pid: -1 })],
      ["pid 1.5", JSON.stringify({ ...base, pid: 1.5 })],
      ["huge pid", JSON.stringify({ ...base, pid: 1e20 })],
      ["no host", JSON.stringify({ ...base, host: "" })],
      ["oversized", " ".repeat(200 * 1024) + JSON.stringify(base)]
    ]
    for (const [name, content] of cases) {
      writeLock(dir, content)
      const seen = await Effect.runPromise(Lock.inspect(context(root), dir))
      expect(seen?.record, name).toBeNull()
      expect(seen?.problem, name).toContain("unreadable lock file")
      expect(await takes(root, dir), name).toBe("taken")
    }
  })

  it("temp files of a lock attempt are cleared only when their process is dead or a zombie", async () => {
    const { dir, root } = sessionDir("temps")
    const sleeper = await startSleeper()
    try {
      await zombieSeen(sleeper.zombie)
      const names = [sleeper.pid, sleeper.zombie, deadPid()].map((pid) =>
        `${Lock.LOCK_FILE}${Replace.TEMP_PREFIX}${pid}-x`
      )
      for (const n of names) fs.writeFileSync(path.join(dir, n), "{}", { mode: 0o600 })
      await Effect.runPromise(Lock.clearStaleTemps(context(root), dir, names))
      expect(fs.readdirSync(dir)).toEqual([names[0]])
    } finally {
      await sleeper.stop()
    }
  })
})
