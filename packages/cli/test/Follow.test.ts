/**
 * Followers of the command line as an attacker and an operator meet them, with the
 * real binary on real files: `tail --follow` never prints an entry edited in place
 * ahead of it, nor a cut followed by new writes of equal length as one chain (it
 * says so on stderr and exits 1); after a legitimate `repair` it says which printed
 * entries were set aside, prints the recovery entry and goes on; `serve`'s live
 * updates stop with a failure event instead of appending another chain's entries.
 * An idle `tail --follow` loads the session once and then waits on a watch of the
 * session directory: its file operations, counted by `strace`, are one listing a
 * safety poll and no segment opened again.
 */
import { assert, describe, it } from "@effect/vitest"
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as path from "node:path"
import { afterAll } from "vitest"
import { baseEnv, BIN, cleanup, exited, killAll, run, start, tempDir, waitForLine } from "./Run.ts"

const started: Array<ChildProcess> = []

afterAll(async () => {
  await killAll(started)
  cleanup()
})

const importLines = (dir: string, id: string, tools: ReadonlyArray<string>) =>
  run(["--dir", dir, "import", id, "-"], {
    input: tools.map((t) => JSON.stringify({ tool_name: t, server_id: "s", agent_id: "a" })).join("\n") + "\n"
  })

const pad = (i: number) => String(i).padStart(2, "0")
const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i)

const segmentOf = (dir: string, id: string): string => {
  const name = fs.readdirSync(path.join(dir, id)).find((n) => /^\d{20}\.jsonl$/.test(n))
  assert.isDefined(name)
  return path.join(dir, id, name!)
}

// Replaces `from` by `to` (same length) in the segment, in place.
const editInPlace = (dir: string, id: string, from: string, to: string) => {
  const file = segmentOf(dir, id)
  const text = fs.readFileSync(file, "latin1")
  assert.include(text, from)
  const fd = fs.openSync(file, "r+")
  fs.writeSync(fd, Buffer.from(to, "latin1"), 0, to.length, text.indexOf(from))
  fs.closeSync(fd)
}

// Whoever can write the files: the checkpoint goes, the segment is cut at entry 80.
const cutAt80 = (dir: string, id: string) => {
  const file = segmentOf(dir, id)
  const at = fs.readFileSync(file, "latin1").indexOf(`{"k":"entry","v":1,"e":{"sequence":80,`)
  assert.isAbove(at, 0)
  fs.rmSync(path.join(dir, id, "checkpoint.json"), { force: true })
  fs.truncateSync(file, at)
}

// Everything a child writes to a stream, as it arrives.
const collect = (child: ChildProcess, stream: "stdout" | "stderr") => {
  const out = { text: "" }
  child[stream]!.on("data", (b: Buffer) => (out.text += b.toString("utf8")))
  return out
}

const follower = (dir: string, id: string) => {
  const child = start(["--dir", dir, "--json", "tail", id, "-n", "1000", "--follow"])
  started.push(child)
  return { child, stdout: collect(child, "stdout"), stderr: collect(child, "stderr") }
}

const sequencesOf = (text: string) =>
  text.split("\n").filter((l) => l.length > 0).map((l) =>
    JSON.parse(l) as { sequence: number; tool_name?: string; kind: string }
  )

const within = <A>(p: Promise<A>, ms: number, what: string): Promise<A> =>
  Promise.race([
    p,
    new Promise<A>((_, reject) => setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms))
  ])

// `serve` over `dir`, started for the file's tests; its base URL.
const serve = async (dir: string): Promise<string> => {
  const server = start(["--dir", dir, "serve", "--port", "0"])
  started.push(server)
  const line = await waitForLine(server, (l) => l.startsWith("serving "))
  return line.slice(line.indexOf("http://"))
}

// A live events request, its text as it arrives.
const events = (url: string) => {
  const out = { text: "", req: http.get(url, (res) => res.on("data", (b: Buffer) => (out.text += b.toString("utf8")))) }
  return out
}

// The data of every overview event in a live events text.
const overviewsOf = (
  text: string
): Array<{ readonly last: number | null; readonly entries: number; readonly stopped: string | null }> =>
  text.split("\n\n").filter((e) => e.startsWith("event: overview\n")).map((e) =>
    JSON.parse(e.slice(e.indexOf("data: ") + 6))
  )

const eventually = async (check: () => boolean, what: string, ms = 15_000) => {
  const until = Date.now() + ms
  while (!check() && Date.now() < until) await new Promise((r) => setTimeout(r, 25))
  assert.isTrue(check(), what)
}

describe("tail --follow checks what it prints", () => {
  it("an entry edited in place ahead of the follower is never printed: one line on stderr, exit 1", async () => {
    const dir = tempDir()
    assert.strictEqual((await importLines(dir, "e", range(0, 10).map((i) => `t${pad(i)}`))).code, 0)
    const f = follower(dir, "e")
    await waitForLine(f.child, (l) => l.includes("\"sequence\":9"))
    // The follower is held while entries are written and one of them is edited.
    f.child.kill("SIGSTOP")
    assert.strictEqual((await importLines(dir, "e", range(10, 15).map((i) => `t${pad(i)}`))).code, 0)
    editInPlace(dir, "e", "\"tool_name\":\"t12\"", "\"tool_name\":\"x12\"")
    f.child.kill("SIGCONT")
    const code = await within(exited(f.child), 20_000, "the follower exits")
    assert.strictEqual(code, 1, f.stderr.text)
    assert.deepStrictEqual(sequencesOf(f.stdout.text).map((e) => e.sequence), range(0, 12))
    assert.notInclude(f.stdout.text, "x12")
    assert.match(
      f.stderr.text,
      /^session-journal: integrity violation at index 12 \(sequence 12\): entry_hash expected [0-9a-f]{64}, found [0-9a-f]{64}\.\n$/
    )
  }, 60_000)

  it("a cut back to entry 80 and 40 new writes of equal length is reported as history replaced, exit 1", async () => {
    const dir = tempDir()
    assert.strictEqual((await importLines(dir, "c", range(0, 100).map((i) => `old-${pad(i)}`))).code, 0)
    const f = follower(dir, "c")
    await waitForLine(f.child, (l) => l.includes("\"sequence\":99"))
    cutAt80(dir, "c")
    assert.strictEqual((await importLines(dir, "c", range(80, 120).map((i) => `new-${i < 100 ? pad(i) : i}`))).code, 0)
    const code = await within(exited(f.child), 20_000, "the follower exits")
    assert.strictEqual(code, 1, f.stderr.text)
    const printed = sequencesOf(f.stdout.text)
    assert.deepStrictEqual(printed.map((e) => e.sequence), range(0, 100))
    assert.notInclude(f.stdout.text, "new-")
    assert.match(
      f.stderr.text,
      /^session-journal: session c: the history shown was replaced: entries 80\.\.99 as shown are no longer stored \(at 80 [0-9a-f]{64} was shown, storage now holds [0-9a-f]{64}\)\.\n$/
    )
  }, 60_000)

  it(
    "after a legitimate repair it says which printed entries were set aside, prints the recovery entry and goes on",
    async () => {
      const dir = tempDir()
      assert.strictEqual((await importLines(dir, "r", range(0, 10).map((i) => `t${pad(i)}`))).code, 0)
      const f = follower(dir, "r")
      await waitForLine(f.child, (l) => l.includes("\"sequence\":9"))
      // Entry 5 is damaged at rest after it was printed; repair sets 5..9 aside.
      editInPlace(dir, "r", "\"tool_name\":\"t05\"", "\"tool_name\":\"x05\"")
      const repair = await run(["--dir", dir, "--json", "repair", "r"])
      assert.strictEqual(repair.code, 0, repair.stderr)
      assert.deepStrictEqual(JSON.parse(repair.stdout).lost, { from: 5, to: 9 })
      await eventually(() => sequencesOf(f.stdout.text).length === 11, "the recovery entry is printed")
      assert.strictEqual(
        f.stderr.text,
        "session-journal: session r was repaired: entries 5..9 printed above are no longer part of it; its recovery entry 5 follows\n"
      )
      assert.strictEqual((await importLines(dir, "r", ["after"])).code, 0)
      await eventually(() => sequencesOf(f.stdout.text).length === 12, "the follower goes on")
      const printed = sequencesOf(f.stdout.text)
      assert.deepStrictEqual(printed.map((e) => e.sequence), [...range(0, 10), 5, 6])
      assert.strictEqual(printed[10]!.kind, "recovery")
      assert.strictEqual(printed[11]!.tool_name, "after")
      assert.isNull(f.child.exitCode)
      assert.strictEqual((await run(["--dir", dir, "verify", "r"])).code, 0)
    },
    60_000
  )
})

const hasStrace = spawnSync("strace", ["-V"]).status === 0

describe.runIf(hasStrace)("an idle tail --follow, its file operations counted by strace", () => {
  it(
    "opens the segment twice (one load, one reader), then lists the directory once a safety poll and opens nothing",
    async () => {
      const dir = tempDir()
      assert.strictEqual((await importLines(dir, "i", range(0, 5).map((i) => `t${pad(i)}`))).code, 0)
      const trace = path.join(dir, "trace")
      const child = spawn(
        "strace",
        ["-f", "-qq", "-e", "trace=openat", "-o", trace, process.execPath, BIN, "--dir", dir, "tail", "i", "--follow"],
        // Its own process group: strace and the follower it runs end together; the
        // environment without a PostgreSQL URL, so --dir is the journal.
        { stdio: ["pipe", "pipe", "pipe"], detached: true, env: baseEnv() }
      )
      const stop = async (signal: NodeJS.Signals) => {
        if (child.exitCode !== null || child.signalCode !== null) return
        process.kill(-child.pid!, signal)
        await exited(child)
      }
      try {
        await waitForLine(child, (l) => l.includes("t04"))
        const session = path.join(dir, "i")
        const count = () => {
          const lines = fs.existsSync(trace) ? fs.readFileSync(trace, "utf8").split("\n") : []
          return {
            segmentOpens: lines.filter((l) => l.includes(`openat(`) && /\/i\/\d{20}\.jsonl"/.test(l)).length,
            listings: lines.filter((l) => l.includes(`"${session}", `) && l.includes("O_DIRECTORY")).length
          }
        }
        // Counted, not timed: three safety polls are three more listings, however long they take.
        await eventually(() => count().segmentOpens >= 2 && count().listings >= 1, "the follower started", 30_000)
        const startup = count()
        await eventually(() => count().listings >= startup.listings + 3, "three safety polls", 60_000)
        await stop("SIGTERM")
        const idle = count()
        // Before, the follower opened the segment and listed the directory every 50 ms.
        assert.strictEqual(idle.segmentOpens, 2, "one load and one reader; no segment opened again while idle")
        assert.isAtMost(idle.listings - startup.listings, 4)
      } finally {
        await stop("SIGKILL")
      }
    },
    90_000
  )
})

describe("serve's live updates check what they send", () => {
  it(
    "a cut and new writes of equal length end the live stream with a failure event, never another chain's rows",
    async () => {
      const dir = tempDir()
      assert.strictEqual((await importLines(dir, "v", range(0, 100).map((i) => `old-${pad(i)}`))).code, 0)
      const base = await serve(dir)
      let text = ""
      let ended = false
      const req = http.get(`${base}/sessions/v/events?from=0`, (res) => {
        res.on("data", (b: Buffer) => (text += b.toString("utf8")))
        res.on("end", () => (ended = true))
      })
      try {
        await eventually(() => text.includes("\nid: 99:"), "entries 0..99 are sent")
        cutAt80(dir, "v")
        assert.strictEqual(
          (await importLines(dir, "v", range(80, 120).map((i) => `new-${i < 100 ? pad(i) : i}`))).code,
          0
        )
        await eventually(() => text.includes("event: failure"), "a failure event is sent")
        assert.notInclude(text, "new-")
        assert.match(
          text,
          /event: failure\ndata: \{"message":"session v: the history shown was replaced: entries 80\.\.99/
        )
        await eventually(() => ended, "the stream ends")
      } finally {
        req.destroy()
      }
    },
    60_000
  )

  it(
    "a page of the new history after a cut and new writes never gets the header of the history it replaced",
    async () => {
      const dir = tempDir()
      assert.strictEqual((await importLines(dir, "h", range(0, 100).map((i) => `old-${pad(i)}`))).code, 0)
      const base = await serve(dir)
      const a = events(`${base}/sessions/h/events?from=0`)
      try {
        // The session's live header is drawn for the old history.
        await eventually(() => a.text.includes("\nid: 99:") && overviewsOf(a.text).length > 0, "entries and a header")
        cutAt80(dir, "h")
        assert.strictEqual(
          (await importLines(dir, "h", range(80, 120).map((i) => `new-${i < 100 ? pad(i) : i}`))).code,
          0
        )
        await eventually(() => a.text.includes("event: failure"), "the old page's stream fails")
      } finally {
        a.req.destroy()
      }
      // Pages opened now are of the new history. The header kept for the old one is
      // never sent to them (before, it was at once); once it stops, a page gets a new one.
      let fresh = false
      for (let attempt = 0; attempt < 40 && !fresh; attempt++) {
        const b = events(`${base}/sessions/h/events?from=0`)
        try {
          await eventually(() => b.text.includes("\nid: 119:"), "the new history's entries")
          await new Promise((r) => setTimeout(r, 250))
          for (const o of overviewsOf(b.text)) assert.deepInclude(o, { last: 119, entries: 120, stopped: null })
          fresh = overviewsOf(b.text).length > 0
        } finally {
          b.req.destroy()
        }
      }
      assert.isTrue(fresh, "a page of the new history gets its header")
    },
    90_000
  )

  it(
    "a page that joined the shared header of a history replaced under it gets a header of its own history once that one stops",
    async () => {
      const dir = tempDir()
      assert.strictEqual((await importLines(dir, "r", range(0, 100).map((i) => `old-${pad(i)}`))).code, 0)
      // Another history of the same length, put in place of the first at once (a rename):
      // the header follower, at the end of the first, sees no new bytes, so it goes on
      // until the next write.
      assert.strictEqual((await importLines(dir, "x", range(0, 100).map((i) => `new-${pad(i)}`))).code, 0)
      const base = await serve(dir)
      const a = events(`${base}/sessions/r/events?from=0`)
      const pages = [a]
      try {
        await eventually(() => a.text.includes("\nid: 99:") && overviewsOf(a.text).length > 0, "entries and a header")
        const segment = segmentOf(dir, "x")
        assert.strictEqual(fs.statSync(segment).size, fs.statSync(segmentOf(dir, "r")).size)
        fs.rmSync(path.join(dir, "r", "checkpoint.json"), { force: true })
        fs.renameSync(segment, segmentOf(dir, "r"))
        // A page of the new history joins the header kept for the old one.
        const b = events(`${base}/sessions/r/events?from=0`)
        pages.push(b)
        await eventually(() => b.text.includes("\nid: 99:"), "the new history's entries")
        assert.include(b.text, "new-99")
        // The next write: the old header stops, and the page gets one of its own history.
        assert.strictEqual((await importLines(dir, "r", ["new-100"])).code, 0)
        await eventually(() => b.text.includes("\nid: 100:"), "the new entry")
        await eventually(
          () => overviewsOf(b.text).some((o) => o.last === 100 && o.entries === 101),
          "a header of the page's own history"
        )
        for (const o of overviewsOf(b.text)) assert.deepInclude(o, { stopped: null })
      } finally {
        for (const p of pages) p.req.destroy()
      }
    },
    60_000
  )

  it("after a repair that set shown entries aside, the live stream says so in a failure event and ends", async () => {
    const dir = tempDir()
    assert.strictEqual((await importLines(dir, "w", range(0, 10).map((i) => `t${pad(i)}`))).code, 0)
    const base = await serve(dir)
    let text = ""
    let ended = false
    const req = http.get(`${base}/sessions/w/events?from=0`, (res) => {
      res.on("data", (b: Buffer) => (text += b.toString("utf8")))
      res.on("end", () => (ended = true))
    })
    try {
      await eventually(() => text.includes("\nid: 9:"), "entries 0..9 are sent")
      editInPlace(dir, "w", "\"tool_name\":\"t05\"", "\"tool_name\":\"x05\"")
      assert.strictEqual((await run(["--dir", dir, "repair", "w"])).code, 0)
      await eventually(() => ended, "the stream ends")
      assert.match(
        text,
        /event: failure\ndata: \{"message":"the session was repaired: entries 5\.\.9 shown here are no longer part of it \(recovery entry 5\); reload the page"\}/
      )
    } finally {
      req.destroy()
    }
  }, 60_000)
})
