/**
 * The `session-journal` command as users script it: the real binary in child
 * processes against temporary directories. Exit codes, `--json` shapes, errors on
 * stderr, and the cross-process behaviour (locks, `tail --follow`) are checked as
 * they really happen.
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
import {
  baseEnv,
  BIN,
  cleanup,
  exited,
  filesUnder,
  hasNodeAdapter,
  run,
  SHIM,
  start,
  tempDir,
  waitForLine
} from "./Run.ts"

const nodeAdapter = await hasNodeAdapter()
const hasScript = spawnSync("script", ["--version"]).status === 0

afterAll(cleanup)

const TOOL_KEYS = [
  "agent_id",
  "allowed",
  "bytes_read",
  "bytes_written",
  "delegation_depth",
  "entry_hash",
  "kind",
  "prev_hash",
  "sequence",
  "server_id",
  "timestamp_secs",
  "tool_name"
]
const OTHER_KEYS = ["entry_hash", "kind", "payload", "prev_hash", "sequence", "timestamp_secs"]

// Independent invocations, a few at a time (each is a Node start-up).
const inParallel = async <A, B>(items: ReadonlyArray<A>, f: (a: A) => Promise<B>): Promise<Array<[A, B]>> => {
  const out: Array<[A, B]> = []
  for (let i = 0; i < items.length; i += 4) {
    const slice = items.slice(i, i + 4)
    const done = await Promise.all(slice.map(f))
    slice.forEach((a, j) => out.push([a, done[j]!]))
  }
  return out
}

const lines = (s: string): Array<string> => s.split("\n").filter((l) => l.length > 0)
const jsonLines = (s: string): Array<Record<string, unknown>> => lines(s).map((l) => JSON.parse(l))

const recordArgs = (
  dir: string,
  id: string,
  tool = "read_file",
  extra: ReadonlyArray<string> = []
) => [
  "--dir",
  dir,
  "record",
  id,
  "--tool",
  tool,
  "--server",
  "srv-1",
  "--agent",
  "agent-1",
  "--read",
  "100",
  "--written",
  "7",
  ...extra
]

describe("session-journal (any storage)", () => {
  it("the workspace shim runs on Node 22", async () => {
    const r = await run(["--version"], { command: SHIM })
    assert.strictEqual(r.code, 0, r.stderr)
    assert.match(r.stdout, /^session-journal v\S+ \(node v22\.\d+\.\d+\)/)
  })

  it("--help works on every command and exits 0", async () => {
    const cmds = [
      "",
      "record",
      "append",
      "import",
      "list",
      "show",
      "stats",
      "verify",
      "tail",
      "export",
      "checkpoint",
      "repair",
      "mirror",
      "demo"
    ]
    const results = await inParallel(cmds, (cmd) => run(cmd === "" ? ["--help"] : [cmd, "--help"]))
    for (const [cmd, r] of results) {
      assert.strictEqual(r.code, 0, `${cmd}: ${r.stderr}`)
      assert.include(r.stdout, "USAGE", cmd)
      assert.include(r.stdout, "--dir", cmd)
      assert.strictEqual(r.stderr, "", cmd)
    }
    const top = results.find(([cmd]) => cmd === "")![1].stdout.replace(/\s+/g, " ")
    assert.include(
      top,
      "Exit codes: 0 ok, 1 verification failed, 2 bad usage or input, 3 storage error, 4 session locked by another writer, 5 the policy would deny calls (policy test), 6 output failed (what was written is durable: do not write it again), 7 spans did not reach the collector (otel export), 70 unexpected failure (a bug), 130 interrupted."
    )
  })

  it("bad usage and invalid input exit 2 with one sentence naming the field", async () => {
    const dir = tempDir()
    const cases: Array<[Array<string>, RegExp]> = [
      [recordArgs(dir, "bad id"), /invalid session id "bad id"/],
      [["--dir", dir, "record", "s", "--tool", " x", "--server", "s", "--agent", "a"], /tool_name.*--tool/],
      [["--dir", dir, "record", "s", "--tool", "t", "--server", "s", "--agent", "a\u0007"], /agent_id.*--agent/],
      [["--dir", dir, "record", "s", "--tool", "t", "--server", "s", "--agent", "a", "--read", "x"], /--read/],
      [["--dir", dir, "record", "s", "--tool", "t", "--server", "s"], /--agent/],
      [["--dir", dir, "append", "s", "--payload", "{nope"], /--payload/],
      [["--dir", dir, "append", "s", "--kind", "tool", "--payload", "{}"], /kind/],
      [["--dir", dir, "show", "s", "--from", "-3"], /from/],
      [["--dir", dir, "nonsense"], /nonsense/],
      [["--dir", dir, "list", "--no-such-flag"], /no-such-flag/]
    ]
    const results = await inParallel(cases, ([args]) => run(args))
    for (const [[args, pattern], r] of results) {
      assert.strictEqual(r.code, 2, `${args.join(" ")}: ${r.stderr}`)
      assert.match(r.stderr, pattern, args.join(" "))
      assert.strictEqual(lines(r.stderr).length, 1, `one line: ${r.stderr}`)
      assert.notInclude(r.stderr, "    at ", "no stack trace without --verbose")
    }
    const verbose = await run(["--verbose", ...recordArgs(dir, "bad id")])
    assert.strictEqual(verbose.code, 2)
    assert.include(verbose.stderr, "    at ", "a stack trace with --verbose")
  })

  it("import names the line and the field of a bad input line", async () => {
    const dir = tempDir()
    const input = [
      JSON.stringify({ tool_name: "a", server_id: "s", agent_id: "g" }),
      JSON.stringify({ tool_name: "b", server_id: "", agent_id: "g" })
    ].join("\n")
    const r = await run(["--dir", dir, "import", "imp", "-"], { input })
    assert.strictEqual(r.code, 2, r.stderr)
    assert.match(r.stderr, /server_id on line 2/)
    const notJson = await run(["--dir", dir, "import", "imp"], { input: "{\"kind\":\"message\",\"payload\":1}\n[1,2" })
    assert.strictEqual(notJson.code, 2)
    assert.match(notJson.stderr, /line 2/)
  })

  it("record and append print the entry; --json prints it with chio field names", async () => {
    const dir = tempDir()
    const text = await run(recordArgs(dir, "shape"))
    assert.strictEqual(text.code, 0, text.stderr)
    assert.match(
      text.stdout,
      /^#0 \S+ tool read_file srv-1\/agent-1 read=100 written=7 depth=0 allowed [0-9a-f]{12}\n$/
    )

    const tool = await run(["--json", ...recordArgs(dir, "shape-json", "bash", ["--depth", "2", "--denied"])])
    assert.strictEqual(tool.code, 0, tool.stderr)
    const [entry] = jsonLines(tool.stdout)
    assert.deepStrictEqual(Object.keys(entry!).sort(), TOOL_KEYS)
    assert.strictEqual(entry!["kind"], "tool")
    assert.strictEqual(entry!["tool_name"], "bash")
    assert.strictEqual(entry!["delegation_depth"], 2)
    assert.strictEqual(entry!["allowed"], false)
    assert.match(String(entry!["entry_hash"]), /^[0-9a-f]{64}$/)

    const msg = await run([
      "--dir",
      dir,
      "append",
      "shape-msg",
      "--payload",
      "{\"role\":\"user\",\"content\":\"hi\"}",
      "--json"
    ])
    assert.strictEqual(msg.code, 0, msg.stderr)
    const [m] = jsonLines(msg.stdout)
    assert.deepStrictEqual(Object.keys(m!).sort(), OTHER_KEYS)
    assert.strictEqual(m!["kind"], "message")
    assert.deepStrictEqual(m!["payload"], { role: "user", content: "hi" })

    const other = await run(["--dir", dir, "append", "shape-msg2", "--kind", "note", "--payload", "[1,2]", "--json"])
    assert.strictEqual(other.code, 0, other.stderr)
    assert.strictEqual(jsonLines(other.stdout)[0]!["kind"], "note")
  })

  it("demo runs clean twice in a row, each time into a new session", async () => {
    const cwd = tempDir()
    const first = await run(["demo", "--json"], { cwd })
    assert.strictEqual(first.code, 0, first.stderr)
    const second = await run(["demo", "--json"], { cwd })
    assert.strictEqual(second.code, 0, second.stderr)
    const a = JSON.parse(first.stdout)
    const b = JSON.parse(second.stdout)
    assert.notStrictEqual(a.session, b.session)
    for (const doc of [a, b]) {
      assert.match(doc.session, /^demo-\d+$/)
      assert.isTrue(doc.verify.ok)
      assert.strictEqual(doc.verify.violation, null)
      assert.isAbove(doc.denied, 0)
      assert.isAbove(doc.stats.message_count, 0)
      assert.strictEqual(doc.entries.length, doc.verify.entries_checked)
    }
    const text = await run(["demo"], { cwd })
    assert.strictEqual(text.code, 0, text.stderr)
    assert.match(text.stdout, /DENY {4}deploy: deploy may not follow write_file/)
    assert.match(text.stdout, /^ok {4}demo-\d+: \d+ entries/m)
    if (nodeAdapter) {
      // The default directory is ./.session-journal in the working directory.
      assert.isTrue(fs.existsSync(path.join(cwd, ".session-journal", a.session)))
      const list = await run(["list", "--json"], { cwd })
      const ids = JSON.parse(list.stdout).sessions.map((s: { id: string }) => s.id)
      assert.includeMembers(ids, [a.session, b.session])
      // Every denial of the library's `decide` names its guard on the chain.
      const stats = await run(["stats", a.session], { cwd })
      assert.strictEqual(stats.code, 0, stats.stderr)
      assert.notInclude(stats.stdout, "no guard recorded")
      assert.match(stats.stdout, /forbiddenTransitions/)
    }
  })
})

describe.skipIf(!nodeAdapter)("session-journal on the filesystem", () => {
  it("every command's happy path and --json shape", async () => {
    const dir = tempDir()
    for (const tool of ["read_file", "read_file", "write_file"]) {
      const r = await run(recordArgs(dir, "s1", tool))
      assert.strictEqual(r.code, 0, r.stderr)
    }
    const app = await run(["--dir", dir, "append", "s1", "--payload", "{\"role\":\"assistant\",\"content\":\"done\"}"])
    assert.strictEqual(app.code, 0, app.stderr)

    const list = await run(["--dir", dir, "list", "--json"])
    assert.strictEqual(list.code, 0, list.stderr)
    const sessions = JSON.parse(list.stdout).sessions
    assert.strictEqual(sessions.length, 1)
    assert.deepStrictEqual(Object.keys(sessions[0]).sort(), ["bytes", "entries", "head", "id", "last_hash", "updated"])
    assert.strictEqual(sessions[0].id, "s1")
    assert.strictEqual(sessions[0].entries, 4)
    assert.isAbove(sessions[0].bytes, 0)

    const show = await run(["--dir", dir, "show", "s1", "--json"])
    assert.strictEqual(show.code, 0, show.stderr)
    const all = jsonLines(show.stdout)
    assert.deepStrictEqual(all.map((e) => e["sequence"]), [0, 1, 2, 3])
    assert.strictEqual(all[1]!["prev_hash"], all[0]!["entry_hash"])
    const window = jsonLines((await run(["--dir", dir, "show", "s1", "--from", "1", "--limit", "2", "--json"])).stdout)
    assert.deepStrictEqual(window.map((e) => e["sequence"]), [1, 2])

    const stats = await run(["--dir", dir, "stats", "s1", "--json"])
    assert.strictEqual(stats.code, 0, stats.stderr)
    const snap = JSON.parse(stats.stdout)
    for (
      const key of [
        "session_id",
        "entry_count",
        "head_hash",
        "data_flow",
        "tool_sequence",
        "tool_counts",
        "current_streak_tool",
        "current_streak_len",
        "message_count",
        "meta"
      ]
    ) {
      assert.property(snap, key)
    }
    assert.deepStrictEqual(snap.tool_counts, { read_file: 2, write_file: 1 })
    assert.strictEqual(snap.data_flow.total_bytes_read, 300)
    assert.strictEqual(snap.message_count, 1)
    // Nothing evicted: the exported head is the newest stored entry's hash.
    assert.strictEqual(snap.head_hash, sessions[0].head)
    assert.strictEqual(sessions[0].last_hash, sessions[0].head)
    assert.strictEqual(snap.head_hash, all[3]!["entry_hash"])
    const listText = await run(["--dir", dir, "list"])
    assert.match(listText.stdout, /^ID +ENTRIES +HEAD +UPDATED +BYTES\n/)
    assert.include(listText.stdout, String(all[3]!["entry_hash"]).slice(0, 16))

    const tail = jsonLines((await run(["--dir", dir, "tail", "s1", "-n", "2", "--json"])).stdout)
    assert.deepStrictEqual(tail.map((e) => e["sequence"]), [2, 3])

    const jsonl = await run(["--dir", dir, "export", "s1"])
    assert.strictEqual(jsonl.code, 0, jsonl.stderr)
    assert.deepStrictEqual(jsonLines(jsonl.stdout), all)
    const doc = await run(["--dir", dir, "export", "s1", "--format", "json"])
    assert.deepStrictEqual(JSON.parse(doc.stdout), all)
    assert.strictEqual(doc.stderr, "", "no progress bar when stderr is not a terminal")

    const cp = await run(["--dir", dir, "checkpoint", "s1", "--json"])
    assert.strictEqual(cp.code, 0, cp.stderr)
    assert.deepStrictEqual(JSON.parse(cp.stdout), { id: "s1", next_sequence: 4, head: snap.head_hash })

    const verify = await run(["--dir", dir, "verify", "--json"])
    assert.strictEqual(verify.code, 0, verify.stderr)
    const report = JSON.parse(verify.stdout)
    assert.deepStrictEqual(Object.keys(report), ["sessions"])
    assert.deepStrictEqual(Object.keys(report.sessions[0]).sort(), [
      "corruption",
      "entries_checked",
      "head",
      "id",
      "ok",
      "torn_tail",
      "violation"
    ])
    assert.deepStrictEqual(report.sessions[0], {
      id: "s1",
      ok: true,
      head: snap.head_hash,
      entries_checked: 4,
      torn_tail: null,
      corruption: null,
      violation: null
    })
    const fromEnv = await run(["list", "--json"], { env: { SESSION_JOURNAL_DIR: dir } })
    assert.deepStrictEqual(JSON.parse(fromEnv.stdout).sessions.map((x: { id: string }) => x.id), ["s1"])
    const missing = await run(["--dir", dir, "show", "nobody"])
    assert.strictEqual(missing.code, 2)
    assert.match(missing.stderr, /nobody not found/)
  })

  it("list prints the exported head, and last_hash beside it once the ring has evicted", async () => {
    const dir = tempDir()
    // The command line only creates sessions with the default caps; a small ring
    // comes from the library.
    const journal = SessionJournal.layer({ caps: { entry_cap: 2 } }).pipe(
      Layer.provide(NodePersistence.layer({ root: dir }))
    )
    await Effect.runPromise(
      Effect.gen(function*() {
        const j = yield* SessionJournal.SessionJournal
        for (let i = 0; i < 5; i++) {
          yield* j.record("small", {
            tool_name: "read_file",
            server_id: "srv-1",
            agent_id: "agent-1",
            bytes_read: i,
            bytes_written: 0,
            delegation_depth: 0
          })
        }
      }).pipe(Effect.provide(journal))
    )

    const list = await run(["--dir", dir, "list", "--json"])
    assert.strictEqual(list.code, 0, list.stderr)
    const [info] = JSON.parse(list.stdout).sessions
    const all = jsonLines((await run(["--dir", dir, "show", "small", "--json"])).stdout)
    assert.strictEqual(info.entries, 5)
    assert.strictEqual(info.last_hash, all[4]!["entry_hash"])
    assert.notStrictEqual(info.head, info.last_hash)
    const stats = await run(["--dir", dir, "stats", "small", "--json"])
    assert.strictEqual(stats.code, 0, stats.stderr)
    assert.strictEqual(info.head, JSON.parse(stats.stdout).head_hash)
    const verify = await run(["--dir", dir, "verify", "small", "--json"])
    assert.strictEqual(JSON.parse(verify.stdout).sessions[0].head, info.head)
    const text = await run(["--dir", dir, "list"])
    assert.include(text.stdout, info.head.slice(0, 16))
    assert.notInclude(text.stdout, info.last_hash.slice(0, 16))
  })

  it.skipIf(!hasScript)("draws a progress bar on stderr only when it is a terminal", async () => {
    const dir = tempDir()
    const file = path.join(dir, "in.jsonl")
    fs.writeFileSync(
      file,
      Array.from({ length: 3000 }, (_, i) => JSON.stringify({ kind: "message", payload: i })).join("\n")
    )
    assert.strictEqual((await run(["--dir", dir, "import", "p1", file])).code, 0)
    // `script` gives the command a pseudo-terminal; stdout goes to /dev/null inside it.
    const command = `${JSON.stringify(process.execPath)} ${JSON.stringify(BIN)} --dir ${
      JSON.stringify(dir)
    } export p1 >/dev/null`
    const tty = await run(["-qec", command, "/dev/null"], { command: "script" })
    assert.strictEqual(tty.code, 0, tty.stderr)
    assert.include(tty.stdout, "\r\x1b[2Kexport p1 [")
    const piped = await run(["--dir", dir, "export", "p1"])
    assert.strictEqual(piped.stderr, "")
    assert.strictEqual(lines(piped.stdout).length, 3000)
  })

  it("a tampered byte in a segment makes verify exit 1", async () => {
    const dir = tempDir()
    for (let i = 0; i < 3; i++) assert.strictEqual((await run(recordArgs(dir, "t1"))).code, 0)
    assert.strictEqual((await run(recordArgs(dir, "t2"))).code, 0)
    const segment = filesUnder(path.join(dir, "t1")).find((f) => f.endsWith(".jsonl"))!
    const file = path.join(dir, "t1", segment)
    const bytes = fs.readFileSync(file, "utf8")
    const at = bytes.indexOf("read_file")
    assert.isAbove(at, 0)
    fs.writeFileSync(file, bytes.slice(0, at) + "reaD" + bytes.slice(at + 4))
    const r = await run(["--dir", dir, "verify", "--json"])
    assert.strictEqual(r.code, 1, r.stderr)
    const bySession = Object.fromEntries(JSON.parse(r.stdout).sessions.map((s: { id: string }) => [s.id, s]))
    assert.isFalse(bySession["t1"].ok)
    assert.isTrue(bySession["t1"].violation !== null || bySession["t1"].corruption !== null)
    assert.isTrue(bySession["t2"].ok)
    assert.match(r.stderr, /verification failed for 1 of 2 sessions/)
    const one = await run(["--dir", dir, "verify", "t1"])
    assert.strictEqual(one.code, 1)
    assert.match(one.stdout, /^FAIL {2}t1: /)
  })

  it("a torn tail is reported by verify, still ok, and set aside by the next write", async () => {
    const dir = tempDir()
    for (let i = 0; i < 2; i++) assert.strictEqual((await run(recordArgs(dir, "torn"))).code, 0)
    const segment = path.join(dir, "torn", filesUnder(path.join(dir, "torn")).find((f) => f.endsWith(".jsonl"))!)
    const size = fs.statSync(segment).size
    fs.appendFileSync(segment, "{\"k\":\"entry\",\"v\":1,\"e\":{\"seq")
    const verify = await run(["--dir", dir, "verify", "torn", "--json"])
    assert.strictEqual(verify.code, 0, verify.stderr)
    const report = JSON.parse(verify.stdout).sessions[0]
    assert.isTrue(report.ok)
    assert.strictEqual(report.entries_checked, 2)
    assert.deepStrictEqual(report.torn_tail, { segment, offset: size, bytes: 28 })
    const next = await run(recordArgs(dir, "torn", "read_file", ["--json"]))
    assert.strictEqual(next.code, 0, next.stderr)
    assert.strictEqual(jsonLines(next.stdout)[0]!["sequence"], 2)
    const after = JSON.parse((await run(["--dir", dir, "verify", "torn", "--json"])).stdout).sessions[0]
    assert.isTrue(after.ok)
    assert.isNull(after.torn_tail)
    assert.strictEqual(after.entries_checked, 3)
  })

  it("damage followed by more data blocks writes until repair sets it aside", async () => {
    const dir = tempDir()
    for (const tool of ["t1", "t2", "t3", "t4"]) assert.strictEqual((await run(recordArgs(dir, "r1", tool))).code, 0)
    const segment = path.join(dir, "r1", filesUnder(path.join(dir, "r1")).find((f) => f.endsWith(".jsonl"))!)
    const rows = fs.readFileSync(segment, "utf8").split("\n")
    rows[2] = "X" + rows[2]!.slice(1) // the second entry's line no longer parses; two more follow
    fs.writeFileSync(segment, rows.join("\n"))

    const verify = await run(["--dir", dir, "verify", "r1", "--json"])
    assert.strictEqual(verify.code, 1, verify.stderr)
    const report = JSON.parse(verify.stdout).sessions[0]
    assert.isFalse(report.ok)
    assert.isNotNull(report.corruption)
    assert.isNull(report.torn_tail, "damage followed by more lines is never a torn tail")
    const blocked = await run(recordArgs(dir, "r1", "t5"))
    assert.strictEqual(blocked.code, 1, blocked.stderr)
    assert.match(blocked.stderr, /needs repair/)

    const repair = await run(["--dir", dir, "repair", "r1", "--json"])
    assert.strictEqual(repair.code, 0, repair.stderr)
    const r = JSON.parse(repair.stdout)
    assert.isTrue(r.repaired)
    assert.isTrue(r.writable)
    // Sequence 1 is the repair's own `recovery` entry, saying what was set aside.
    assert.strictEqual(r.next_sequence, 2)
    assert.strictEqual(r.entry.sequence, 1)
    assert.deepStrictEqual(r.lost, { from: 1, to: 3 })
    assert.isAbove(r.set_aside.length, 0)
    for (const kept of r.set_aside) assert.isTrue(fs.existsSync(path.join(dir, "r1", kept)), kept)

    assert.strictEqual((await run(["--dir", dir, "verify", "r1"])).code, 0)
    const again = await run(recordArgs(dir, "r1", "t5", ["--json"]))
    assert.strictEqual(again.code, 0, again.stderr)
    assert.strictEqual(jsonLines(again.stdout)[0]!["sequence"], 2)
  })

  it("an unusable journal directory exits 3", async () => {
    const base = tempDir()
    const file = path.join(base, "file.txt")
    fs.writeFileSync(file, "not a directory")
    const r = await run(recordArgs(path.join(file, "sub"), "x"))
    assert.strictEqual(r.code, 3, r.stderr)
    assert.match(r.stderr, /^session-journal: storage .*\.\n$/)
  })

  it("stdout failing after a durable write exits 6 with one sentence naming the durable entry, never a retry's twin", async () => {
    const dir = tempDir()
    // The child's stdout is /dev/full: every write to it fails with ENOSPC.
    const toFull = (args: ReadonlyArray<string>, input?: string): Promise<{ code: number | null; stderr: string }> =>
      new Promise((resolve, reject) => {
        const full = fs.openSync("/dev/full", "w")
        const child = spawn(process.execPath, [BIN, "--dir", dir, ...args], {
          cwd: dir,
          env: baseEnv(),
          stdio: [input === undefined ? "ignore" : "pipe", full, "pipe"]
        })
        fs.closeSync(full)
        const err: Array<Buffer> = []
        child.stderr!.on("data", (b: Buffer) => err.push(b))
        child.on("error", reject)
        child.on("close", (code) => resolve({ code, stderr: Buffer.concat(err).toString("utf8") }))
        if (input !== undefined) child.stdin!.end(input)
      })
    const exported = async () => jsonLines((await run(["--dir", dir, "export", "full"])).stdout)
    const oneSentence = (stderr: string) => {
      assert.match(stderr, /^session-journal: [^\n]+\.\n$/, stderr)
      assert.notMatch(stderr, /\n\s+at /)
    }

    const recorded = await toFull(recordArgs(dir, "full").slice(2))
    assert.strictEqual(recorded.code, 6, recorded.stderr)
    oneSentence(recorded.stderr)
    let entries = await exported()
    assert.strictEqual(entries.length, 1)
    assert.include(recorded.stderr, `entry 0 of full (hash ${entries[0]!["entry_hash"]}) is durable`)
    assert.include(recorded.stderr, "ENOSPC")

    const appended = await toFull(["--json", "append", "full", "--payload", "{\"n\":1}"])
    assert.strictEqual(appended.code, 6, appended.stderr)
    oneSentence(appended.stderr)
    entries = await exported()
    assert.strictEqual(entries.length, 2)
    assert.include(appended.stderr, `entry 1 of full (hash ${entries[1]!["entry_hash"]}) is durable`)

    const lines3 = [1, 2, 3].map((n) => JSON.stringify({ kind: "message", payload: n })).join("\n") + "\n"
    for (const mode of [["--json"], []]) {
      const imported = await toFull([...mode, "import", "full", "-"], lines3)
      assert.strictEqual(imported.code, 6, imported.stderr)
      oneSentence(imported.stderr)
      entries = await exported()
      const last = entries[entries.length - 1]!
      assert.include(
        imported.stderr,
        `3 entries of full through sequence ${last["sequence"]} (hash ${last["entry_hash"]}) are durable`
      )
    }
    assert.strictEqual(entries.length, 8)

    // A command that wrote nothing exits 6 too, without claiming a write.
    const read = await toFull(["export", "full"])
    assert.strictEqual(read.code, 6, read.stderr)
    oneSentence(read.stderr)
    assert.notInclude(read.stderr, "durable")
    assert.strictEqual((await run(["--dir", dir, "verify", "full"])).code, 0)
  })

  it("a second writer gets exit 4 while another process holds the session", async () => {
    const dir = tempDir()
    // `import` from a pipe that stays open holds the session for writing after
    // its first durable batch.
    const holder = start(["--dir", dir, "--json", "import", "held", "-"])
    const batch = Array.from(
      { length: 1000 },
      (_, i) => JSON.stringify({ tool_name: "t", server_id: "s", agent_id: `a${i}` })
    )
    holder.stdin!.write(batch.join("\n") + "\n")
    await waitForLine(holder, (l) => l.includes("\"sequence\":999"))
    const second = await run(recordArgs(dir, "held"))
    assert.strictEqual(second.code, 4, second.stderr)
    assert.match(second.stderr, /locked/)
    holder.stdin!.end()
    assert.strictEqual(await exited(holder), 0)
    const after = await run(recordArgs(dir, "held", "read_file", ["--json"]))
    assert.strictEqual(after.code, 0, after.stderr)
    assert.strictEqual(jsonLines(after.stdout)[0]!["sequence"], 1000)
  })

  it("tail --follow sees an entry appended by another process within a second", async () => {
    const dir = tempDir()
    assert.strictEqual((await run(recordArgs(dir, "f1"))).code, 0)
    const follower = start(["--dir", dir, "--json", "tail", "f1", "--follow"])
    try {
      await waitForLine(follower, (l) => l.includes("\"sequence\":0"))
      const seen = waitForLine(follower, (l) => l.includes("\"sequence\":1"))
      const writer = await run(recordArgs(dir, "f1", "write_file"))
      assert.strictEqual(writer.code, 0, writer.stderr)
      const written = Date.now()
      const line = await seen
      assert.isBelow(Date.now() - written, 1000, "seen within a second")
      assert.strictEqual(JSON.parse(line)["tool_name"], "write_file")
    } finally {
      follower.kill("SIGKILL")
    }
  })

  it("an interrupt (SIGINT or SIGTERM) ends the command with exit 130", async () => {
    const dir = tempDir()
    assert.strictEqual((await run(recordArgs(dir, "i1"))).code, 0)
    for (const signal of ["SIGINT", "SIGTERM"] as const) {
      const follower = start(["--dir", dir, "--json", "tail", "i1", "--follow"])
      try {
        await waitForLine(follower, (l) => l.includes("\"sequence\":0"))
        const code = exited(follower)
        follower.kill(signal)
        assert.strictEqual(await code, 130, signal)
      } finally {
        follower.kill("SIGKILL")
      }
    }
  })

  // 100,000 lines under STRESS=1, 20,000 in the normal suite (several durable batches either way).
  const importLines = process.env["STRESS"] === "1" ? 100_000 : 20_000
  it(
    `imports ${importLines.toLocaleString("en-US")} lines, printing each durable entry once, and verifies`,
    async () => {
      const dir = tempDir()
      const n = importLines
      const input: Array<string> = []
      for (let i = 0; i < n; i++) {
        input.push(
          i % 10 === 9
            ? JSON.stringify({ kind: "message", payload: { role: "assistant", n: i } })
            : JSON.stringify({
              tool_name: `tool_${i % 7}`,
              server_id: "srv",
              agent_id: "agent",
              bytes_read: i,
              bytes_written: 1,
              delegation_depth: 0
            })
        )
      }
      const file = path.join(tempDir(), "big.jsonl")
      fs.writeFileSync(file, input.join("\n") + "\n")
      const r = await run(["--dir", dir, "--json", "import", "big", file])
      assert.strictEqual(r.code, 0, r.stderr)
      const out = lines(r.stdout)
      assert.strictEqual(out.length, n)
      assert.strictEqual(JSON.parse(out[n - 1]!)["sequence"], n - 1)
      const verify = await run(["--dir", dir, "verify", "big", "--json"])
      assert.strictEqual(verify.code, 0, verify.stderr)
      const report = JSON.parse(verify.stdout).sessions[0]
      assert.isTrue(report.ok)
      assert.strictEqual(report.entries_checked, n)
      const text = await run(["--dir", dir, "import", "big"], { input: input[0]! })
      assert.strictEqual(text.stdout, `imported 1 entry into big (last sequence ${n})\n`)
    },
    120_000
  )
})
