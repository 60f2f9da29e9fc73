/**
 * The session lock from the command line, with real processes: concurrent
 * `record`s never fail with a storage error because the lock changed hands while
 * one read it; with `--wait` they all succeed; an `import` whose lock is removed
 * and taken by another writer stops (exit 3) instead of writing a second chain;
 * `unlock` removes a lock only when its holder is proved gone.
 */
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { cleanup, exited, ownBoot, ownPidns, run, start, tempDir, waitForLine } from "./Run.ts"

afterAll(cleanup)

const STRESS = process.env["STRESS"] === "1"

const recordArgs = (dir: string, id: string, i: number, extra: ReadonlyArray<string> = []) => [
  "--dir",
  dir,
  "record",
  id,
  "--tool",
  "read_file",
  "--server",
  "fs",
  "--agent",
  `a${i}`,
  ...extra
]

const entriesOf = async (dir: string, id: string) => {
  const r = await run(["--dir", dir, "--json", "export", id])
  expect(r.code, r.stderr).toBe(0)
  return r.stdout.split("\n").filter((l) => l.length > 0).map((l) =>
    JSON.parse(l) as { sequence: number; entry_hash: string }
  )
}

const verified = async (dir: string, id: string) => {
  const r = await run(["--dir", dir, "verify", id])
  expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(0)
}

const deadPid = (): number => spawnSync(process.execPath, ["-e", ""]).pid!

const plantLock = (dir: string, id: string, record: Record<string, unknown>) =>
  fs.writeFileSync(path.join(dir, id, "lock"), `${JSON.stringify(record)}\n`, { mode: 0o600 })

describe("the command line", () => {
  it("unlock and --wait are documented in --help", async () => {
    const unlock = await run(["unlock", "--help"])
    expect(unlock.code, unlock.stderr).toBe(0)
    expect(unlock.stdout).toContain("--force")
    for (const cmd of ["record", "append", "import"]) {
      const help = await run([cmd, "--help"])
      expect(help.code, help.stderr).toBe(0)
      expect(help.stdout, cmd).toContain("--wait")
    }
  }, 60_000)
})

// Separate processes, each its own writer, as the command runs in practice.
describe("concurrent writers on one session", () => {
  const n = STRESS ? 64 : 8

  it(`${n} concurrent records with --wait 60s all succeed, and the session verifies with ${n} entries`, async () => {
    const dir = tempDir()
    const results = await Promise.all(
      Array.from({ length: n }, (_, i) => run(recordArgs(dir, "w", i, ["--wait", "60s"]), { process: true }))
    )
    for (const r of results) expect(r.code, r.stderr).toBe(0)
    const entries = await entriesOf(dir, "w")
    expect(entries.map((e) => e.sequence)).toEqual(Array.from({ length: n }, (_, i) => i))
    await verified(dir, "w")
  }, STRESS ? 600_000 : 180_000)

  const racing = STRESS ? 64 : 8
  it(
    `${racing} concurrent records without --wait: each succeeds or is locked out (exit 4), none fails with a storage error`,
    async () => {
      const dir = tempDir()
      const results = await Promise.all(
        Array.from({ length: racing }, (_, i) => run(recordArgs(dir, "nw", i), { process: true }))
      )
      for (const r of results) {
        expect([0, 4], r.stderr).toContain(r.code)
        expect(r.stderr).not.toMatch(/remove it|rm /)
      }
      const ok = results.filter((r) => r.code === 0).length
      expect(ok).toBeGreaterThan(0)
      expect((await entriesOf(dir, "nw")).length).toBe(ok)
      await verified(dir, "nw")
    },
    STRESS ? 600_000 : 180_000
  )

  it("a --wait that runs out ends with exit 4 and says how long it waited", async () => {
    const dir = tempDir()
    expect((await run(recordArgs(dir, "t", 0))).code).toBe(0)
    const holder = spawn("sleep", ["600"], { stdio: "ignore" })
    try {
      plantLock(dir, "t", {
        pid: holder.pid,
        host: os.hostname(),
        start: null,
        token: "held",
        acquired_at: Date.now(),
        boot: ownBoot,
        pidns: ownPidns
      })
      const r = await run(recordArgs(dir, "t", 1, ["--wait", "300ms"]))
      expect(r.code, r.stderr).toBe(4)
      expect(r.stderr).toMatch(/gave up after waiting \d+\.\d+ s/)
      const bad = await run(recordArgs(dir, "t", 1, ["--wait", "soon"]))
      expect(bad.code).toBe(2)
    } finally {
      holder.kill("SIGKILL")
    }
  }, 60_000)
})

describe("a writer whose lock is taken", () => {
  it(
    "an import whose lock is removed and taken by record stops with exit 3; every acknowledged entry is on the one chain",
    async () => {
      const dir = tempDir()
      const importer = start(["--dir", dir, "--json", "import", "imp", "-"])
      const line = (i: number) => JSON.stringify({ tool_name: "t", server_id: "s", agent_id: `a${i}` })
      const acked: Array<{ sequence: number; entry_hash: string }> = []
      let buffer = ""
      importer.stdout!.on("data", (b: Buffer) => {
        buffer += b.toString("utf8")
        let nl: number
        while ((nl = buffer.indexOf("\n")) >= 0) {
          const l = buffer.slice(0, nl)
          buffer = buffer.slice(nl + 1)
          if (l.includes("\"entry_hash\"")) acked.push(JSON.parse(l))
        }
      })
      let stderr = ""
      importer.stderr!.on("data", (b: Buffer) => {
        stderr += b.toString("utf8")
      })
      const before = STRESS ? 50_000 : 200
      importer.stdin!.write(Array.from({ length: before }, (_, i) => line(i)).join("\n") + "\n")
      await waitForLine(importer, (l) => l.includes(`"sequence":${before - 1}`))
      // The advice the old message gave, followed while the import runs.
      fs.unlinkSync(path.join(dir, "imp", "lock"))
      const others = []
      for (let i = 0; i < 3; i++) others.push(await run(recordArgs(dir, "imp", 1000 + i)))
      for (const r of others) expect(r.code, r.stderr).toBe(0)
      // The importer's next batch finds the lock taken (by a record) or removed.
      importer.stdin!.write(Array.from({ length: 200 }, (_, i) => line(before + i)).join("\n") + "\n")
      importer.stdin!.end()
      const code = await exited(importer)
      expect(code, stderr).toBe(3)
      expect(stderr).toContain("no longer this writer's")
      await verified(dir, "imp")
      const stored = await entriesOf(dir, "imp")
      const bySequence = new Map(stored.map((e) => [e.sequence, e.entry_hash]))
      for (const a of acked) expect(bySequence.get(a.sequence), `acknowledged ${a.sequence}`).toBe(a.entry_hash)
      expect(stored.length).toBe(acked.length + 3)
    },
    STRESS ? 600_000 : 120_000
  )
})

describe.runIf(ownBoot !== null && ownPidns !== null)("unlock", () => {
  const record = (pid: number, extra: Record<string, unknown> = {}) => ({
    pid,
    host: os.hostname(),
    start: null,
    token: "someone",
    acquired_at: Date.now(),
    boot: ownBoot,
    pidns: ownPidns,
    ...extra
  })

  it("refuses while the holder is alive (exit 4), removes the lock once it is proved gone", async () => {
    const dir = tempDir()
    expect((await run(recordArgs(dir, "u", 0))).code).toBe(0)
    const holder = spawn("sleep", ["600"], { stdio: "ignore" })
    const holderExited = new Promise((resolve) => holder.once("close", resolve))
    try {
      plantLock(dir, "u", record(holder.pid!))
      const refused = await run(["--dir", dir, "unlock", "u"])
      expect(refused.code, refused.stderr).toBe(4)
      expect(refused.stderr).toContain("the holder is alive")
      const forced = await run(["--dir", dir, "unlock", "u", "--force"])
      expect(forced.code, forced.stderr).toBe(4)
      expect(fs.existsSync(path.join(dir, "u", "lock"))).toBe(true)
    } finally {
      holder.kill("SIGKILL")
      await holderExited
    }
    const removed = await run(["--dir", dir, "unlock", "u"])
    expect(removed.code, removed.stderr).toBe(0)
    expect(removed.stdout).toMatch(/its holder is gone \(no live process \d+ runs on this host\)/)
    expect(fs.existsSync(path.join(dir, "u", "lock"))).toBe(false)
    const none = await run(["--dir", dir, "--json", "unlock", "u"])
    expect(none.code).toBe(0)
    expect(JSON.parse(none.stdout)).toMatchObject({ removed: false })
  }, 60_000)

  it(
    "a lock of a restarted container (same kernel and pid namespace, another host name) is taken over by the next record",
    async () => {
      const dir = tempDir()
      expect((await run(recordArgs(dir, "c", 0))).code).toBe(0)
      plantLock(dir, "c", record(deadPid(), { host: "container-1", start: "4242" }))
      const r = await run(recordArgs(dir, "c", 1))
      expect(r.code, r.stderr).toBe(0)
      expect((await entriesOf(dir, "c")).length).toBe(2)
    },
    60_000
  )

  it(
    "a holder under another kernel cannot be proved gone: record and unlock refuse, unlock --force removes it and says so",
    async () => {
      const dir = tempDir()
      expect((await run(recordArgs(dir, "k", 0))).code).toBe(0)
      plantLock(dir, "k", record(deadPid(), { host: "elsewhere", boot: "00000000-0000-0000-0000-000000000000" }))
      const locked = await run(recordArgs(dir, "k", 1))
      expect(locked.code, locked.stderr).toBe(4)
      const refused = await run(["--dir", dir, "unlock", "k"])
      expect(refused.code).toBe(4)
      expect(refused.stderr).toContain("cannot be proved gone")
      expect(refused.stderr).toContain("another kernel")
      const forced = await run(["--dir", dir, "unlock", "k", "--force"])
      expect(forced.code, forced.stderr).toBe(0)
      expect(forced.stdout).toContain("by force")
      expect((await run(recordArgs(dir, "k", 2))).code).toBe(0)
    },
    60_000
  )
})
