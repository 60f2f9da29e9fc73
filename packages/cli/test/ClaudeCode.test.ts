/**
 * `session-journal claude-code` as a user runs it: archive a transcripts tree,
 * export each transcript back byte for byte, `follow` a live transcript, and a
 * SIGKILL in the middle of an archive followed by a rerun that completes with no
 * duplicate and no gap.
 */
import { SessionIds } from "@session-journal/claude-code"
import * as F from "@session-journal/claude-code/test/Fixtures"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { baseEnv, BIN, cleanup, exited, run, start, tempDir, waitForLine } from "./Run.ts"

afterAll(cleanup)

const mainId = SessionIds.sessionId({ _tag: "Main", project: F.PROJECT, session: F.SESSION })
const subId = SessionIds.sessionId({
  _tag: "SubAgent",
  project: F.PROJECT,
  session: F.SESSION,
  stem: `agent-${F.AGENT}`,
  agentId: F.AGENT
})

// stdout as bytes (a transcript may hold a line that is not UTF-8).
const exportBytes = (dir: string, id: string): Promise<Buffer> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, "--dir", dir, "claude-code", "export", id], {
      env: baseEnv(),
      stdio: ["ignore", "pipe", "pipe"]
    })
    const out: Array<Buffer> = []
    child.stdout.on("data", (b: Buffer) => out.push(b))
    child.on("error", reject)
    child.on("close", (code) => (code === 0 ? resolve(Buffer.concat(out)) : reject(new Error(`export exited ${code}`))))
  })

interface Shown {
  readonly kind?: string
  readonly tool_name?: string
  readonly payload?: { readonly n?: number }
}

const shown = async (dir: string, id: string): Promise<Array<Shown>> => {
  const r = await run(["--dir", dir, "--json", "show", id])
  expect(r.code).toBe(0)
  return r.stdout.trim().split("\n").map((l) => JSON.parse(l) as Shown)
}

describe("session-journal claude-code", () => {
  it("archives a tree and exports every transcript byte for byte; a symbolic link is refused with exit 3", async () => {
    const dir = tempDir()
    const source = path.join(dir, "projects")
    fs.mkdirSync(source)
    const tree = F.writeTree(source)
    const journal = path.join(dir, "journal")
    const first = await run(["--dir", journal, "--json", "claude-code", "archive", "--source", source])
    expect(first.stderr).toBe("")
    expect(first.code).toBe(0)
    const report = JSON.parse(first.stdout) as { files: Array<{ session: string; status: string; tools: number }> }
    expect(report.files.map((f) => [f.session, f.status, f.tools])).toEqual([
      [mainId, "created", 7],
      [subId, "created", 2]
    ])
    expect((await exportBytes(journal, mainId)).equals(fs.readFileSync(tree.main))).toBe(true)
    expect((await exportBytes(journal, subId)).equals(fs.readFileSync(tree.sub))).toBe(true)
    const stats = await run(["--dir", journal, "--json", "stats", mainId])
    expect(JSON.parse(stats.stdout).tool_counts).toEqual(F.mainTools())
    const verify = await run(["--dir", journal, "verify"])
    expect(verify.code).toBe(0)

    // A symbolic link makes the run report it and exit 3, after archiving the rest.
    fs.symlinkSync(tree.main, path.join(tree.projectDir, "33333333-3333-4333-8333-333333333333.jsonl"))
    const linked = await run(["--dir", journal, "claude-code", "archive", "--source", source])
    expect(linked.code).toBe(3)
    expect(linked.stdout).toMatch(
      /refused +-home-dev-shop-app-v2\/33333333-3333-4333-8333-333333333333\.jsonl: refused: a symbolic link/
    )
    expect(linked.stderr).toContain("1 path under")
  })

  it("follow journals a new line within a second, until interrupted", async () => {
    const dir = tempDir()
    const source = path.join(dir, "projects")
    fs.mkdirSync(source)
    const tree = F.writeTree(source)
    const journal = path.join(dir, "journal")
    const child = start(["--dir", journal, "--json", "claude-code", "follow", "--source", source])
    try {
      await waitForLine(child, (l) => l.includes(subId))
      const t0 = Date.now()
      fs.appendFileSync(tree.main, F.mainTurn(9).slice(0, 4).join("\n") + "\n")
      const line = JSON.parse(await waitForLine(child, (l) => l.includes("extended"))) as {
        lines: number
        session: string
      }
      const took = Date.now() - t0
      expect(line.session).toBe(mainId)
      expect(line.lines).toBe(4)
      expect(took).toBeLessThan(1000)
      child.kill("SIGINT")
      expect(await exited(child)).toBe(130)
    } finally {
      child.kill("SIGKILL")
    }
    expect((await exportBytes(journal, mainId)).equals(fs.readFileSync(tree.main))).toBe(true)
  })

  // Lines of `child`'s stdout as they come.
  const linesOf = (child: ReturnType<typeof start>) => {
    const lines: Array<string> = []
    let buffer = ""
    child.stdout!.on("data", (b: Buffer) => {
      buffer += b.toString("utf8")
      const parts = buffer.split("\n")
      buffer = parts.pop()!
      lines.push(...parts)
    })
    return lines
  }
  const until = async (p: () => boolean, ms: number, what: string) => {
    const t0 = Date.now()
    while (!p()) {
      if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}`)
      await new Promise((r) => setTimeout(r, 20))
    }
  }
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

  // A bound that catches a polling loop, not a budget: under three test files at a
  // time the idle process measured 3-10 % of a core; a busy loop is near 100 %.
  it("an idle follow of a wide tree does not keep a core busy (measured in CPU time)", async () => {
    const dir = tempDir()
    const source = path.join(dir, "projects")
    fs.mkdirSync(source)
    const count = process.env["STRESS"] === "1" ? 5_000 : 150
    const files = F.writeWideTree(source, count)
    const journal = path.join(dir, "journal")
    const child = start(["--dir", journal, "--json", "claude-code", "follow", "--source", source])
    try {
      const lines = linesOf(child)
      await until(
        () => lines.filter((l) => l.includes("\"created\"")).length >= files.length,
        count * 200,
        "the first pass"
      )
      // The report is printed at the end of the pass; let the process settle.
      await sleep(1_000)
      const cpu0 = F.cpuMillis(child.pid!)
      const t0 = performance.now()
      await sleep(3_000)
      const cpu = F.cpuMillis(child.pid!) - cpu0
      const wall = performance.now() - t0
      expect(cpu / wall, `${cpu.toFixed(0)} ms of CPU in ${wall.toFixed(0)} ms idle`).toBeLessThan(0.5)
      // Still following: a new line is journaled.
      fs.appendFileSync(files[7]!, F.mainTurn(1).slice(0, 2).join("\n") + "\n")
      await until(() => lines.some((l) => l.includes("\"extended\"")), 10_000, "the new lines")
      child.kill("SIGINT")
      expect(await exited(child)).toBe(130)
    } finally {
      child.kill("SIGKILL")
      // Thousands of files: removed here, within the test's time, not by the shared cleanup.
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }, process.env["STRESS"] === "1" ? 1_200_000 : 120_000)

  // A 2 MB transcript and 20 appended lines under STRESS=1; 1 MB and 10 in the normal suite.
  const followHistory = process.env["STRESS"] === "1" ? { lines: 4_000, bytes: 2_000_000, appends: 20 } : {
    lines: 2_000,
    bytes: 1_000_000,
    appends: 10
  }
  it("follow reads only what was appended: at most 4 bytes read per byte of each appended line", async () => {
    const dir = tempDir()
    const source = path.join(dir, "projects")
    const project = path.join(source, F.PROJECT)
    fs.mkdirSync(project, { recursive: true })
    const file = path.join(project, `${F.SESSION}.jsonl`)
    fs.writeFileSync(file, F.longTranscript(followHistory.lines, followHistory.bytes))
    const journal = path.join(dir, "journal")
    const child = start(["--dir", journal, "--json", "claude-code", "follow", "--source", source])
    try {
      const lines = linesOf(child)
      await until(() => lines.some((l) => l.includes("\"created\"")), 60_000, "the first pass")
      await sleep(1_000)
      const read0 = F.readBytes(child.pid!)
      let appended = 0
      const turn = F.mainTurn(500)
      for (let i = 0; i < followHistory.appends; i++) {
        const line = turn[i % turn.length]! + "\n"
        const before = lines.length
        fs.appendFileSync(file, line)
        appended += Buffer.byteLength(line)
        await until(() => lines.slice(before).some((l) => l.includes("\"extended\"")), 10_000, `line ${i}`)
      }
      const read = F.readBytes(child.pid!) - read0
      expect(read / appended).toBeLessThanOrEqual(4)
      child.kill("SIGINT")
      expect(await exited(child)).toBe(130)
    } finally {
      child.kill("SIGKILL")
    }
    expect(
      (await exportBytes(journal, SessionIds.sessionId({ _tag: "Main", project: F.PROJECT, session: F.SESSION })))
        .equals(fs.readFileSync(file))
    ).toBe(true)
  }, 120_000)

  it("a SIGKILL during archive: the rerun completes with no duplicate and no gap", async () => {
    const dir = tempDir()
    const source = path.join(dir, "projects")
    const projectDir = path.join(source, F.PROJECT)
    fs.mkdirSync(projectDir, { recursive: true })
    const file = path.join(projectDir, `${F.SESSION}.jsonl`)
    const turns = Number(process.env["STRESS"] === "1" ? 2000 : 400)
    fs.writeFileSync(file, F.longTranscript(turns * 10, turns * 1600))
    const journal = path.join(dir, "journal")
    const sessionDir = path.join(journal, mainId)
    const stored = () =>
      fs.existsSync(sessionDir)
        ? fs.readdirSync(sessionDir).filter((n) => n.endsWith(".jsonl")).reduce(
          (n, f) => n + fs.statSync(path.join(sessionDir, f)).size,
          0
        )
        : 0
    // Each run is killed once it has stored some more batches, before its last one.
    const kills = process.env["STRESS"] === "1" ? 5 : 1
    for (let k = 0; k < kills; k++) {
      const from = stored()
      const child = start(["--dir", journal, "claude-code", "archive", "--source", source])
      const deadline = Date.now() + 30_000
      let killed = false
      while (Date.now() < deadline && child.exitCode === null) {
        if (stored() > from + 100_000) {
          child.kill("SIGKILL")
          killed = true
          break
        }
        await new Promise((r) => setTimeout(r, 5))
      }
      await exited(child)
      expect(killed).toBe(true)
    }
    const rerun = await run(["--dir", journal, "--json", "claude-code", "archive", "--source", source])
    expect(rerun.code).toBe(0)
    const status = (JSON.parse(rerun.stdout) as { files: Array<{ status: string }> }).files[0]!.status
    expect(["extended", "created"]).toContain(status)
    const entries = await shown(journal, mainId)
    const numbers = entries.filter((e) => e.kind === "claude-code.line").map((e) => e.payload!.n!)
    expect(numbers).toEqual(Array.from({ length: turns * 10 }, (_, i) => i + 1))
    const tools = entries.filter((e) => e.kind === "tool")
    expect(tools.length).toBe(turns * 3)
    expect((await exportBytes(journal, mainId)).equals(fs.readFileSync(file))).toBe(true)
  }, process.env["STRESS"] === "1" ? 600_000 : 60_000)
})
