/**
 * `session-journal mirror` end to end, on real directories: the backup of a
 * session is only ever replaced by a copy that verifies and extends it. A live
 * import in a child process while mirrors run, a different chain of the same
 * sizes, a truncated source, a destination inside the journal reached through a
 * symlinked ancestor, symlinked destinations, and what a run that died leaves
 * behind.
 */
import { assert, describe, it } from "@effect/vitest"
import { SessionJournal } from "@session-journal/core"
import { NodePersistence } from "@session-journal/node"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll } from "vitest"
import { cleanup, exited, filesUnder, run, tempDir, waitForLine } from "./Run.ts"

afterAll(cleanup)

const WRITER = path.join(import.meta.dirname, "fixtures", "writer.ts")

const recordArgs = (
  dir: string,
  id: string,
  tool = "read_file"
) => ["--dir", dir, "record", id, "--tool", tool, "--server", "srv", "--agent", "agent"]

const toolLine = (i: number, tool = "tool") =>
  JSON.stringify({
    tool_name: `${tool}_${i % 7}`,
    server_id: "srv",
    agent_id: "agent",
    bytes_read: i,
    bytes_written: 1,
    delegation_depth: 0
  })

const importFile = (n: number, tool = "tool"): string => {
  const file = path.join(tempDir(), "input.jsonl")
  fs.writeFileSync(file, Array.from({ length: n }, (_, i) => toolLine(i, tool)).join("\n") + "\n")
  return file
}

interface SessionJson {
  readonly id: string
  readonly outcome: string
  readonly reason: string | null
  readonly entries: number | null
  readonly attempts: number
}

const mirror = async (dir: string, dest: string) => {
  const r = await run(["--dir", dir, "mirror", dest, "--json"])
  const json = r.stdout.length > 0 ? JSON.parse(r.stdout) : null
  const sessions = new Map<string, SessionJson>((json?.sessions ?? []).map((s: SessionJson) => [s.id, s]))
  return { ...r, json, sessions }
}

/** Every file under `dir` with its bytes, to compare a backup before and after. */
const snapshot = (dir: string): Map<string, string> =>
  new Map(filesUnder(dir).map((f) => [f, fs.readFileSync(path.join(dir, f)).toString("base64")]))

const inspect = (root: string, id: string) => Effect.runPromise(NodePersistence.inspect({ root }, id))

/**
 * What a backup of `id` holds, checked without trusting the verifier: the
 * sequences of the entry records of its segments are 0..n-1 without a gap, and
 * its checkpoint claims no more than they hold.
 */
const stored = (root: string, id: string): { readonly entries: number; readonly checkpointNext: number | null } => {
  const dir = path.join(root, id)
  const names = fs.readdirSync(dir).sort()
  const sequences: Array<number> = []
  for (const name of names.filter((n) => /^\d{20}\.jsonl$/.test(n))) {
    for (const line of fs.readFileSync(path.join(dir, name), "utf8").split("\n")) {
      try {
        const record = JSON.parse(line)
        if (record.k === "entry") sequences.push(record.e.sequence)
      } catch {
        // A torn last line.
      }
    }
  }
  sequences.forEach((s, i) => assert.strictEqual(s, i, `${id}: entry records in order without a gap`))
  const checkpointNext = names.includes("checkpoint.json")
    ? JSON.parse(fs.readFileSync(path.join(dir, "checkpoint.json"), "utf8")).next_sequence as number
    : null
  if (checkpointNext !== null) {
    assert.isAtMost(
      checkpointNext,
      sequences.length,
      `${id}: the checkpoint claims no more entries than the segments hold`
    )
  }
  return { entries: sequences.length, checkpointNext }
}

/** A backup that verifies and holds every entry it claims; returns its entry count. */
const assertGoodBackup = async (root: string, id: string): Promise<number> => {
  const report = await inspect(root, id)
  assert.isTrue(report.ok, `${id} backup verifies`)
  const { entries } = stored(root, id)
  assert.strictEqual(report.nextSequence, entries, `${id}: verified entries are stored`)
  return entries
}

// Mirror runs against a live writer: 4 in the normal suite, 24 under STRESS=1.
const LIVE_RUNS = process.env["STRESS"] === "1" ? 24 : 4

describe("session-journal mirror", () => {
  it(
    `mirrored ${LIVE_RUNS} times while a child process appends to the source, every run publishes a verified copy or refuses`,
    async () => {
      const dir = tempDir()
      const dest = path.join(tempDir(), "backup")
      // The writer starts a new segment and replaces the checkpoint every few
      // appends; it appends from "go" to "stop", that is for the whole mirror run.
      const writer = spawn(process.execPath, [WRITER, dir, "live"], { stdio: ["pipe", "pipe", "inherit"] })
      const written = async (): Promise<number> => {
        const pending = waitForLine(writer, (l) => l.startsWith("written "))
        writer.stdin!.write("stop\n")
        return Number((await pending).slice("written ".length))
      }
      writer.stdin!.write("go\n")
      let total = await written()
      let published = 0
      let last = 0
      for (let i = 0; i < LIVE_RUNS; i++) {
        writer.stdin!.write("go\n")
        const r = await mirror(dir, dest)
        total = await written()
        assert.include([0, 1], r.code, r.stderr)
        const s = r.sessions.get("live")!
        assert.include(["copied", "extended", "unchanged", "refused"], s.outcome, s.reason ?? "")
        assert.strictEqual(r.code === 1, s.outcome === "refused", r.stderr)
        if (s.outcome !== "refused") published++
        if (fs.existsSync(path.join(dest, "live"))) {
          const entries = await assertGoodBackup(dest, "live")
          assert.isAtLeast(entries, last, "a backup never loses entries")
          last = entries
        }
      }
      writer.stdin!.end()
      assert.strictEqual(await exited(writer), 0)
      assert.isAbove(published, 0)
      // Once the writer is done, the backup catches up with everything it wrote.
      const final = await mirror(dir, dest)
      assert.strictEqual(final.code, 0, final.stderr)
      assert.include(["copied", "extended", "unchanged"], final.sessions.get("live")!.outcome)
      assert.strictEqual(await assertGoodBackup(dest, "live"), total)
      assert.deepStrictEqual(fs.readdirSync(path.join(dest, ".mirror")), [], "no staging left behind")
    },
    process.env["STRESS"] === "1" ? 900_000 : 240_000
  )

  it("a different chain of the same sizes is never skipped: it is refused and the backup kept", async () => {
    const good = tempDir()
    const other = tempDir()
    const dest = path.join(tempDir(), "backup")
    // Same number of entries, tool names of the same length: every file has the same size.
    assert.strictEqual((await run(["--dir", good, "import", "s", importFile(50, "aaaa")])).code, 0)
    assert.strictEqual((await run(["--dir", other, "import", "s", importFile(50, "bbbb")])).code, 0)
    const sizes = (root: string) =>
      filesUnder(root).filter((f) => !/lock/.test(f)).map((f) => `${f}:${fs.statSync(path.join(root, f)).size}`)
    assert.strictEqual((await mirror(good, dest)).code, 0)
    const before = snapshot(dest)
    assert.deepStrictEqual(sizes(other), sizes(good), "every file of the other chain has the backup's size")
    const r = await mirror(other, dest)
    assert.strictEqual(r.code, 1, r.stderr)
    const s = r.sessions.get("s")!
    assert.strictEqual(s.outcome, "refused")
    assert.match(s.reason!, /differs from the backup|different chain/)
    assert.match(r.stderr, /verification failed/)
    assert.deepStrictEqual(snapshot(dest), before, "backup unchanged byte for byte")
    assert.strictEqual(await assertGoodBackup(dest, "s"), 50)
  }, 60_000)

  it("a truncated source is refused against a good backup, which stays byte for byte", async () => {
    const dir = tempDir()
    const dest = path.join(tempDir(), "backup")
    assert.strictEqual((await run(["--dir", dir, "import", "t", importFile(3000)])).code, 0)
    const first = await mirror(dir, dest)
    assert.strictEqual(first.code, 0, first.stderr)
    assert.strictEqual(await assertGoodBackup(dest, "t"), 3000)
    const before = snapshot(dest)

    // Cut the last 100 entries off the last segment, at a line boundary.
    const sessionDir = path.join(dir, "t")
    const lastSegment = fs.readdirSync(sessionDir).filter((n) => /^\d{20}\.jsonl$/.test(n)).sort().pop()!
    const file = path.join(sessionDir, lastSegment)
    const text = fs.readFileSync(file, "utf8")
    const lines = text.split("\n").slice(0, -1)
    const entryLines = lines.filter((l) => JSON.parse(l).k === "entry")
    assert.isAbove(entryLines.length, 100)
    const keep = lines.slice(0, lines.indexOf(entryLines[entryLines.length - 100]!))
    fs.truncateSync(file, Buffer.byteLength(keep.join("\n") + "\n"))

    const r = await mirror(dir, dest)
    assert.strictEqual(r.code, 1, r.stderr)
    const s = r.sessions.get("t")!
    assert.strictEqual(s.outcome, "refused")
    assert.strictEqual(s.entries, 3000, "the backup keeps its 3000 entries")
    assert.match(s.reason!, /fewer than the 3000|lacks entry 2999|stores no entry 2999|does not verify/)
    assert.deepStrictEqual(snapshot(dest), before, "backup unchanged byte for byte")
    assert.strictEqual(await assertGoodBackup(dest, "t"), 3000)
  }, 60_000)

  it("a checkpoint that does not parse is read again, then the session is refused and no copy published", async () => {
    const dir = tempDir()
    const dest = path.join(tempDir(), "backup")
    assert.strictEqual((await run(["--dir", dir, "import", "c", importFile(20)])).code, 0)
    assert.strictEqual((await run(["--dir", dir, "import", "d", importFile(20)])).code, 0)
    assert.strictEqual((await mirror(dir, dest)).code, 0)
    const before = snapshot(dest)
    assert.strictEqual((await run(["--dir", dir, "import", "c", importFile(5)])).code, 0)
    // A torn checkpoint, as a copy made across its replacement would read it.
    const cp = path.join(dir, "c", "checkpoint.json")
    fs.writeFileSync(cp, fs.readFileSync(cp).subarray(0, 100))
    const r = await mirror(dir, dest)
    assert.strictEqual(r.code, 1, r.stderr)
    const s = r.sessions.get("c")!
    assert.strictEqual(s.outcome, "refused")
    assert.strictEqual(s.attempts, 5)
    assert.match(s.reason!, /checkpoint\.json is not valid JSON/)
    assert.strictEqual(r.sessions.get("d")!.outcome, "unchanged")
    assert.deepStrictEqual(snapshot(dest), before, "backup unchanged byte for byte")
    // Without a backup, nothing is published for it.
    const fresh = path.join(tempDir(), "fresh")
    const first = await mirror(dir, fresh)
    assert.strictEqual(first.code, 1, first.stderr)
    assert.strictEqual(first.sessions.get("c")!.outcome, "refused")
    assert.isFalse(fs.existsSync(path.join(fresh, "c")))
    assert.strictEqual(await assertGoodBackup(fresh, "d"), 20)
  }, 60_000)

  it("refuses a destination inside the journal reached through a symlinked ancestor of --dir", async () => {
    const base = tempDir()
    const real = path.join(base, "real")
    fs.mkdirSync(path.join(real, "journal"), { recursive: true, mode: 0o700 })
    fs.symlinkSync(real, path.join(base, "link"))
    const dir = path.join(base, "link", "journal")
    assert.strictEqual((await run(recordArgs(dir, "s1"))).code, 0)
    const before = filesUnder(path.join(real, "journal"))
    const inside = path.join(real, "journal", "backup")
    const r = await run(["--dir", dir, "mirror", inside])
    assert.strictEqual(r.code, 2, r.stderr)
    assert.match(r.stderr, /must not contain or be inside the journal directory/)
    assert.isFalse(fs.existsSync(inside))
    assert.deepStrictEqual(filesUnder(path.join(real, "journal")), before)
    // And the other way round: the journal inside the destination.
    const around = await run(["--dir", dir, "mirror", real])
    assert.strictEqual(around.code, 2, around.stderr)
  }, 60_000)

  it("copies, then extends what grew, leaves the rest unchanged, and the mirror verifies", async () => {
    const dir = tempDir()
    const dest = path.join(tempDir(), "backup")
    for (let i = 0; i < 3; i++) assert.strictEqual((await run(recordArgs(dir, "m1"))).code, 0)
    assert.strictEqual((await run(recordArgs(dir, "m2"))).code, 0)
    // A symlink in the journal directory is skipped, never followed.
    fs.symlinkSync("/etc/hostname", path.join(dir, "m2", "link"))
    const first = await mirror(dir, dest)
    assert.strictEqual(first.code, 0, first.stderr)
    assert.deepStrictEqual([...first.sessions.values()].map((s) => `${s.id}:${s.outcome}`), ["m1:copied", "m2:copied"])
    assert.isAbove(first.json.copied, 0)
    assert.isAtLeast(first.json.skipped, 1)
    assert.strictEqual(fs.statSync(dest).mode & 0o777, 0o700)
    const isLock = (f: string) => /(^|\/)lock(\.takeover)?$/.test(f)
    assert.deepStrictEqual(filesUnder(dest), filesUnder(dir).filter((f) => !isLock(f)))
    assert.notInclude(fs.readdirSync(path.join(dest, "m2")), "link")

    assert.strictEqual((await run(recordArgs(dir, "m1", "write_file"))).code, 0)
    const second = await mirror(dir, dest)
    assert.strictEqual(second.code, 0, second.stderr)
    assert.strictEqual(second.sessions.get("m1")!.outcome, "extended")
    assert.strictEqual(second.sessions.get("m2")!.outcome, "unchanged")
    for (const f of filesUnder(dir).filter((x) => !isLock(x))) {
      assert.isTrue(fs.readFileSync(path.join(dest, f)).equals(fs.readFileSync(path.join(dir, f))), f)
    }
    const text = await run(["--dir", dir, "mirror", dest])
    assert.match(text.stdout, /copied 0, extended 0, refreshed 0, skipped \d+, failed 0/)

    const verify = await run(["--dir", dest, "verify", "--json"])
    assert.strictEqual(verify.code, 0, verify.stderr)
    const ids = JSON.parse(verify.stdout).sessions.map((s: { id: string; ok: boolean }) => `${s.id}:${s.ok}`)
    assert.deepStrictEqual(ids.sort(), ["m1:true", "m2:true"])
    const inside = await run(["--dir", dir, "mirror", path.join(dir, "nested")])
    assert.strictEqual(inside.code, 2)

    // A session removed from the source stays in the backup.
    fs.rmSync(path.join(dir, "m2"), { recursive: true })
    const kept = await mirror(dir, dest)
    assert.strictEqual(kept.code, 0, kept.stderr)
    assert.isTrue(
      fs.existsSync(path.join(dest, "m2", "checkpoint.json")) || filesUnder(path.join(dest, "m2")).length > 0
    )
  }, 120_000)

  it(
    "a preallocated segment is mirrored up to its data; the copy verifies and extends as the source writes into its zeros",
    async () => {
      const dir = tempDir()
      const dest = path.join(tempDir(), "backup")
      const segment = path.join(dir, "p", "00000000000000000000.jsonl")
      const dataEnd = (file: string) => {
        const bytes = fs.readFileSync(file)
        let end = bytes.length
        while (end > 0 && bytes[end - 1] === 0) end--
        return end
      }
      const params = (i: number) => ({
        tool_name: "t",
        server_id: "srv",
        agent_id: "agent",
        bytes_read: i,
        bytes_written: 0,
        delegation_depth: 0
      })
      const live = SessionJournal.layer().pipe(Layer.provide(NodePersistence.layer({ root: dir })))
      // The writer stays open across both mirror runs: its segment keeps a zero tail.
      await Effect.runPromise(Effect.provide(
        Effect.gen(function*() {
          const j = yield* SessionJournal.SessionJournal
          for (let i = 0; i < 5; i++) yield* j.record("p", params(i))
          assert.isAbove(fs.statSync(segment).size, dataEnd(segment), "the source segment has a zero tail")
          const first = yield* Effect.promise(() => mirror(dir, dest))
          assert.strictEqual(first.code, 0, first.stderr)
          assert.strictEqual(first.sessions.get("p")!.outcome, "copied")
          const copy = path.join(dest, "p", "00000000000000000000.jsonl")
          assert.isTrue(
            fs.readFileSync(copy).equals(fs.readFileSync(segment).subarray(0, dataEnd(segment))),
            "the copy is the source's data"
          )
          assert.strictEqual((yield* Effect.promise(() => inspect(dest, "p"))).nextSequence, 5)
          for (let i = 5; i < 8; i++) yield* j.record("p", params(i))
          const second = yield* Effect.promise(() => mirror(dir, dest))
          assert.strictEqual(second.code, 0, second.stderr)
          assert.strictEqual(second.sessions.get("p")!.outcome, "extended")
          assert.isTrue(
            fs.readFileSync(copy).equals(fs.readFileSync(segment).subarray(0, dataEnd(segment))),
            "the copy is the source's data"
          )
          const report = yield* Effect.promise(() => inspect(dest, "p"))
          assert.isTrue(report.ok)
          assert.strictEqual(report.nextSequence, 8)
          assert.isNull(report.recovery.tornTail)
        }),
        live
      ))
    },
    120_000
  )

  it("refuses a symlinked destination, never writing through it", async () => {
    const dir = tempDir()
    assert.strictEqual((await run(recordArgs(dir, "s1"))).code, 0)
    assert.strictEqual((await run(recordArgs(dir, "s2"))).code, 0)
    const base = tempDir()
    const elsewhere = path.join(base, "elsewhere")
    fs.mkdirSync(elsewhere, { mode: 0o755 })
    fs.chmodSync(elsewhere, 0o755)
    const link = path.join(base, "link")
    fs.symlinkSync(elsewhere, link)

    // The destination root itself, and a destination below a symlinked ancestor.
    for (const dest of [link, path.join(link, "sub")]) {
      const r = await run(["--dir", dir, "mirror", dest])
      assert.strictEqual(r.code, 3, r.stderr)
      assert.match(r.stderr, /refused .*link: a symbolic link/)
      assert.strictEqual(r.stdout, "")
    }
    assert.strictEqual(fs.readlinkSync(link), elsewhere)
    assert.deepStrictEqual(fs.readdirSync(elsewhere), [])
    assert.strictEqual(fs.statSync(elsewhere).mode & 0o777, 0o755)

    // A symlinked session directory inside the mirror fails that session alone.
    const dest = path.join(base, "backup")
    fs.mkdirSync(dest)
    fs.symlinkSync(elsewhere, path.join(dest, "s2"))
    const partial = await mirror(dir, dest)
    assert.strictEqual(partial.code, 3, partial.stderr)
    assert.strictEqual(partial.sessions.get("s1")!.outcome, "copied")
    assert.strictEqual(partial.sessions.get("s2")!.outcome, "failed")
    assert.match(partial.sessions.get("s2")!.reason!, /s2.*a symbolic link/)
    assert.match(partial.stderr, /1 session could not be mirrored/)
    assert.deepStrictEqual(fs.readdirSync(elsewhere), [])
    assert.strictEqual(fs.readlinkSync(path.join(dest, "s2")), elsewhere)
    assert.strictEqual(fs.statSync(dest).mode & 0o777, 0o700)
  }, 60_000)

  it("finishes what a run that died left: a previous copy is put back, staging removed", async () => {
    const dir = tempDir()
    const dest = path.join(tempDir(), "backup")
    for (let i = 0; i < 2; i++) assert.strictEqual((await run(recordArgs(dir, "t1"))).code, 0)
    assert.strictEqual((await mirror(dir, dest)).code, 0)
    const before = snapshot(path.join(dest, "t1"))
    // A run that died between its two renames, with a staging directory and a lock of a dead process.
    const house = path.join(dest, ".mirror")
    fs.renameSync(path.join(dest, "t1"), path.join(house, "prev-t1"))
    fs.mkdirSync(path.join(house, "stage-1-abc", "t1"), { recursive: true, mode: 0o700 })
    fs.writeFileSync(path.join(house, "stage-1-abc", "t1", "checkpoint.json"), "{\"torn", { mode: 0o600 })
    const dead = spawnSync(process.execPath, ["-e", ""]).pid!
    fs.writeFileSync(
      path.join(house, "lock"),
      JSON.stringify({
        pid: dead,
        host: (await import("node:os")).hostname(),
        start: null,
        token: "x",
        acquired_at: 0
      }) + "\n",
      { mode: 0o600 }
    )
    // A per-file temporary an older version left in the backup is not session data.
    fs.writeFileSync(path.join(house, "prev-t1", `checkpoint.json.mirror-${dead}-0-0123456789ab.tmp`), "partial", {
      mode: 0o600
    })

    const r = await mirror(dir, dest)
    assert.strictEqual(r.code, 0, r.stderr)
    assert.strictEqual(r.sessions.get("t1")!.outcome, "unchanged")
    assert.deepStrictEqual(fs.readdirSync(house), [])
    const after = snapshot(path.join(dest, "t1"))
    for (const [f, bytes] of before) assert.strictEqual(after.get(f), bytes, f)

    assert.strictEqual((await run(recordArgs(dir, "t1", "write_file"))).code, 0)
    const grown = await mirror(dir, dest)
    assert.strictEqual(grown.code, 0, grown.stderr)
    assert.strictEqual(grown.sessions.get("t1")!.outcome, "extended")
    assert.notInclude(fs.readdirSync(path.join(dest, "t1")).join(" "), ".mirror-")
    assert.strictEqual(await assertGoodBackup(dest, "t1"), 3)

    // A run in progress (a live process holds the lock): another run exits 4 and changes nothing.
    const held = snapshot(dest)
    fs.writeFileSync(
      path.join(house, "lock"),
      JSON.stringify({
        pid: process.pid,
        host: (await import("node:os")).hostname(),
        start: null,
        token: "y",
        acquired_at: 0
      }) + "\n",
      { mode: 0o600 }
    )
    assert.strictEqual((await run(recordArgs(dir, "t1", "write_file"))).code, 0)
    const locked = await run(["--dir", dir, "mirror", dest])
    assert.strictEqual(locked.code, 4, locked.stderr)
    fs.unlinkSync(path.join(house, "lock"))
    assert.deepStrictEqual(snapshot(dest), held)
  }, 60_000)

  it.runIf(fs.existsSync("/proc/self/stat"))(
    "a lock held by a zombie is a dead run's: the next run takes it over",
    async () => {
      const dir = tempDir()
      const dest = path.join(tempDir(), "backup")
      assert.strictEqual((await run(recordArgs(dir, "z1"))).code, 0)
      assert.strictEqual((await mirror(dir, dest)).code, 0)
      // A child that exits and is never reaped: perl forks it, prints its pid and sleeps
      // without waiting (a shell may reap a background job before it execs).
      const parent = spawn(
        "perl",
        ["-e", "$| = 1; my $p = fork(); exit 0 if $p == 0; print \"$p\\n\"; sleep 600"],
        { stdio: ["ignore", "pipe", "ignore"] }
      )
      const closed = new Promise<void>((resolve) => parent.once("close", () => resolve()))
      try {
        const zombie = await new Promise<number>((resolve, reject) => {
          parent.stdout.once("data", (b: Buffer) => resolve(Number(b.toString().trim())))
          parent.once("error", reject)
        })
        const state = () => {
          try {
            const stat = fs.readFileSync(`/proc/${zombie}/stat`, "utf8")
            return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0]
          } catch {
            return null
          }
        }
        for (let s = state(); s !== "Z"; s = state()) {
          if (s === null) throw new Error(`process ${zombie} was reaped before it could be seen as a zombie`)
          await new Promise((resolve) => setTimeout(resolve, 10))
        }
        const house = path.join(dest, ".mirror")
        fs.writeFileSync(
          path.join(house, "lock"),
          JSON.stringify({
            pid: zombie,
            host: (await import("node:os")).hostname(),
            start: null,
            token: "z",
            acquired_at: 0
          }) + "\n",
          { mode: 0o600 }
        )
        assert.strictEqual((await run(recordArgs(dir, "z1", "write_file"))).code, 0)
        const r = await mirror(dir, dest)
        assert.strictEqual(r.code, 0, r.stderr)
        assert.strictEqual(r.sessions.get("z1")!.outcome, "extended")
        assert.deepStrictEqual(fs.readdirSync(house), [])
      } finally {
        parent.kill("SIGKILL")
        await closed
      }
    },
    60_000
  )
})
