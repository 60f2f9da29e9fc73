/**
 * The journal's promise tried as an adversary and an unlucky operator would: cut
 * tails, forged checkpoints and counters, forged and copied records, complete
 * garbage lines, records of another version. Each case runs the real command
 * against a session written by the library in a temp dir, then damaged by hand.
 */
import { assert, describe, it } from "@effect/vitest"
import { Checkpoint, Entry, JournalState, SessionJournal } from "@session-journal/core"
import { NodePersistence } from "@session-journal/node"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll } from "vitest"
import { cleanup, run, tempDir } from "./Run.ts"

afterAll(cleanup)

const call = (i: number) => ({
  tool_name: i % 3 === 0 ? "read_file" : i % 3 === 1 ? "write_file" : "bash",
  server_id: "srv",
  agent_id: "agent",
  bytes_read: 100 + i,
  bytes_written: i % 7,
  delegation_depth: i % 2
})

/**
 * Writes `count` entries one append at a time with small segments, until the
 * checkpoint covers every entry: the state a cut tail hides behind.
 */
const seed = async (dir: string, id: string, count: number, options?: { readonly coverAll?: boolean }) => {
  const layer = SessionJournal.layer({ checkpointMinBytes: 4096 }).pipe(
    Layer.provide(NodePersistence.layer({ root: dir }))
  )
  const cpNext = () => {
    const file = path.join(dir, id, "checkpoint.json")
    return fs.existsSync(file)
      ? (JSON.parse(fs.readFileSync(file, "utf8")) as { next_sequence: number }).next_sequence
      : -1
  }
  return Effect.runPromise(
    Effect.gen(function*() {
      const journal = yield* SessionJournal.SessionJournal
      // The service stores a due checkpoint after it answers the append: closing the
      // session waits for it.
      const settled = Effect.andThen(journal.close(id), Effect.sync(cpNext))
      let n = 0
      for (; n < count || (options?.coverAll === true && (yield* settled) !== n); n++) {
        if (n % 5 === 4) yield* journal.append(id, "message", { role: "user", text: `turn ${n}` })
        else yield* journal.record(id, call(n))
      }
      return { count: n, head: yield* journal.head(id) }
    }).pipe(Effect.provide(layer))
  )
}

const segments = (dir: string, id: string) =>
  fs.readdirSync(path.join(dir, id)).filter((n) => /^[0-9]{20}\.jsonl$/.test(n)).sort()

const lines = (file: string) => {
  const text = fs.readFileSync(file, "utf8")
  return text.slice(0, -1).split("\n")
}

const verifyJson = async (dir: string, id: string) => {
  const r = await run(["--dir", dir, "verify", id, "--json"])
  return { code: r.code, stderr: r.stderr, report: JSON.parse(r.stdout).sessions[0] }
}

const recordCode = async (dir: string, id: string) => {
  const r = await run(["--dir", dir, "record", id, "--tool", "t", "--server", "s", "--agent", "a", "--json"])
  return r
}

describe("a checkpoint proves nothing by itself", () => {
  it("a tail cut at a line boundary under the checkpoint: verify fails naming the range, writes refuse, repair records the loss", async () => {
    const dir = tempDir()
    const { count, head } = await seed(dir, "cut", 300, { coverAll: true })
    const last = path.join(dir, "cut", segments(dir, "cut").at(-1)!)
    const rows = lines(last)
    const cutN = Math.min(40, rows.length - 1)
    fs.writeFileSync(last, rows.slice(0, rows.length - cutN).join("\n") + "\n")
    const from = count - cutN

    const v = await verifyJson(dir, "cut")
    assert.strictEqual(v.code, 1, v.stderr)
    assert.isFalse(v.report.ok)
    assert.strictEqual(v.report.corruption.kind, "missing")
    assert.deepStrictEqual(v.report.corruption.missing, { from, to: count - 1 })
    assert.notStrictEqual(v.report.head, head, "the old head is never reported for a cut history")

    // The cut is visible to every reader, not only to verify.
    const list = JSON.parse((await run(["--dir", dir, "list", "--json"])).stdout)
    assert.match(list.sessions[0].problem, /^missing/)
    const listText = await run(["--dir", dir, "list"])
    assert.match(listText.stdout, /cut \(DAMAGED\)/)
    assert.strictEqual((await run(["--dir", dir, "stats", "cut"])).code, 1)

    const blocked = await recordCode(dir, "cut")
    assert.strictEqual(blocked.code, 1, blocked.stderr)
    assert.include(blocked.stderr, `${from}..${count - 1}`)

    const repaired = await run(["--dir", dir, "repair", "cut", "--json"])
    assert.strictEqual(repaired.code, 0, repaired.stderr)
    const r = JSON.parse(repaired.stdout)
    assert.isTrue(r.writable)
    assert.isTrue(r.checkpoint_rebuilt)
    assert.deepStrictEqual(r.lost, { from, to: count - 1 })
    assert.strictEqual(r.previous_head, head)
    assert.strictEqual(r.entry.kind, "recovery")
    assert.strictEqual(r.entry.sequence, from)
    assert.deepStrictEqual(r.entry.payload.lost, { from, to: count - 1 })
    assert.deepStrictEqual(r.set_aside, ["checkpoint.json.damaged-0"])

    const after = await verifyJson(dir, "cut")
    assert.strictEqual(after.code, 0, after.stderr)
    const next = await recordCode(dir, "cut")
    assert.strictEqual(next.code, 0, next.stderr)
    assert.strictEqual(JSON.parse(next.stdout.trim().split("\n")[0]!).sequence, from + 1)
  })

  it("a tail cut after the checkpoint shows as a different head and count, to compare with a head kept elsewhere", async () => {
    const dir = tempDir()
    const { count, head } = await seed(dir, "after", 60)
    const last = path.join(dir, "after", segments(dir, "after").at(-1)!)
    const rows = lines(last)
    const cpNext = JSON.parse(fs.readFileSync(path.join(dir, "after", "checkpoint.json"), "utf8"))
      .next_sequence as number
    const beyond = count - cpNext
    if (beyond < 2) return // the checkpoint happened to cover everything: the case above
    fs.writeFileSync(last, rows.slice(0, rows.length - 1).join("\n") + "\n")
    const v = await verifyJson(dir, "after")
    assert.strictEqual(v.code, 0, v.stderr)
    assert.strictEqual(v.report.entries_checked, count - 1)
    assert.notStrictEqual(v.report.head, head)
  })

  it("forged checkpoint counters: verify names the field; repair rebuilds the checkpoint and keeps every record", async () => {
    const dir = tempDir()
    const { count } = await seed(dir, "forged", 200, { coverAll: true })
    const file = path.join(dir, "forged", "checkpoint.json")
    const doc = JSON.parse(fs.readFileSync(file, "utf8"))
    const honest = doc.data_flow.total_bytes_read
    doc.data_flow.total_bytes_read = 0
    doc.tool_counts = []
    fs.writeFileSync(file, JSON.stringify(doc))
    const segmentBytes = segments(dir, "forged").map((n) => fs.readFileSync(path.join(dir, "forged", n)))

    const v = await verifyJson(dir, "forged")
    assert.strictEqual(v.code, 1, v.stderr)
    assert.strictEqual(v.report.corruption.kind, "checkpoint")
    assert.include(v.report.corruption.reason, "data_flow.total_bytes_read")

    const repaired = JSON.parse((await run(["--dir", dir, "repair", "forged", "--json"])).stdout)
    assert.isTrue(repaired.checkpoint_rebuilt)
    assert.isNull(repaired.lost)
    assert.deepStrictEqual(repaired.set_aside, ["checkpoint.json.damaged-0"])
    assert.deepStrictEqual(repaired.truncated, [])
    assert.strictEqual(repaired.entry.sequence, count)
    // Every record that verified is still where it was.
    segments(dir, "forged").slice(0, segmentBytes.length).forEach((n, i) => {
      const now = fs.readFileSync(path.join(dir, "forged", n))
      assert.isTrue(now.subarray(0, segmentBytes[i]!.length).equals(segmentBytes[i]!), n)
    })
    assert.strictEqual((await verifyJson(dir, "forged")).code, 0)
    const stats = JSON.parse((await run(["--dir", dir, "stats", "forged", "--json"])).stdout)
    assert.strictEqual(JSON.stringify(stats).includes(String(honest)), true)
  })

  it("a self-consistent checkpoint of another chain: repair sets aside only the checkpoint", async () => {
    const dir = tempDir()
    const { count } = await seed(dir, "victim", 120, { coverAll: true })
    // A chain of the same session id and length, built elsewhere.
    await seed(dir, "other", 1)
    let state = JournalState.empty("victim")
    for (let i = 0; i < count; i++) {
      state = JournalState.fold(state, JournalState.nextOther(state, 1_700_000_000 + i, "message", { forged: i }))
    }
    fs.writeFileSync(path.join(dir, "victim", "checkpoint.json"), Entry.toJsonText(Checkpoint.encode(state)))

    const v = await verifyJson(dir, "victim")
    assert.strictEqual(v.code, 1, v.stderr)
    const blocked = await recordCode(dir, "victim")
    assert.strictEqual(blocked.code, 1, blocked.stderr)

    const repaired = JSON.parse((await run(["--dir", dir, "repair", "victim", "--json"])).stdout)
    assert.deepStrictEqual(repaired.set_aside, ["checkpoint.json.damaged-0"])
    assert.deepStrictEqual(repaired.truncated, [])
    assert.isNull(repaired.lost)
    assert.strictEqual(repaired.next_sequence, count + 1)
    const after = await verifyJson(dir, "victim")
    assert.strictEqual(after.code, 0, after.stderr)
    assert.strictEqual(after.report.entries_checked, count + 1)
  })
})

describe("strict records", () => {
  it("a forged line at a used sequence mid-segment is corruption at its byte offset", async () => {
    const dir = tempDir()
    await seed(dir, "fl", 30)
    const first = path.join(dir, "fl", segments(dir, "fl")[0]!)
    const rows = lines(first)
    const victim = JSON.parse(rows[3]!)
    const forged = { ...victim, e: { ...victim.e, tool_name: "exfiltrate", entry_hash: "f".repeat(64) } }
    rows.splice(5, 0, JSON.stringify(forged))
    fs.writeFileSync(first, rows.join("\n") + "\n")
    const offset = rows.slice(0, 5).reduce((n, l) => n + Buffer.byteLength(l) + 1, 0)
    const v = await verifyJson(dir, "fl")
    assert.strictEqual(v.code, 1, v.stderr)
    assert.strictEqual(v.report.corruption.kind, "corruption")
    assert.strictEqual(v.report.corruption.segment, first)
    assert.strictEqual(v.report.corruption.offset, offset)
    // The valid prefix ends before the forged line: after the two records before it.
    assert.strictEqual(v.report.corruption.sequence, victim.e.sequence + 2)
    assert.include(v.report.corruption.reason, `already used sequence ${victim.e.sequence}`)
    // History readers never skip it as a harmless duplicate either.
    const shown = await run(["--dir", dir, "export", "fl"])
    assert.strictEqual(shown.code, 1, shown.stderr)
    assert.include(shown.stderr, `sequence ${victim.e.sequence}`)
  })

  it("a segment saved again under a later base, its open record fixed up, is corruption", async () => {
    const dir = tempDir()
    const { count } = await seed(dir, "dup", 200)
    const names = segments(dir, "dup")
    assert.isAbove(names.length, 2)
    const rows = lines(path.join(dir, "dup", names[1]!))
    // A copy of segment 1 after the last entry, under the base that would come next.
    rows[0] = JSON.stringify({ k: "open", v: 1, base: count })
    const copy = path.join(dir, "dup", `${String(count).padStart(20, "0")}.jsonl`)
    fs.writeFileSync(copy, rows.join("\n") + "\n")
    const v = await verifyJson(dir, "dup")
    assert.strictEqual(v.code, 1, v.stderr)
    assert.strictEqual(v.report.corruption.kind, "corruption")
    assert.strictEqual(v.report.corruption.segment, copy)
    assert.strictEqual(v.report.corruption.sequence, count)
    assert.strictEqual((await recordCode(dir, "dup")).code, 1)
  })

  it("a complete last line that does not parse is corruption: the acknowledged entry keeps its sequence", async () => {
    const dir = tempDir()
    const { count, head } = await seed(dir, "gl", 10)
    const last = path.join(dir, "gl", segments(dir, "gl").at(-1)!)
    fs.appendFileSync(last, "{\"k\":\"entry\",\"v\":1,\"e\":{\"garbage\":true}}\n")
    const v = await verifyJson(dir, "gl")
    assert.strictEqual(v.code, 1, v.stderr)
    assert.strictEqual(v.report.corruption.kind, "corruption")
    assert.isNull(v.report.torn_tail)
    assert.strictEqual(v.report.corruption.sequence, count)
    const blocked = await recordCode(dir, "gl")
    assert.strictEqual(blocked.code, 1, blocked.stderr)
    // Nothing moved: the head is still the acknowledged one once the line is set aside.
    const repaired = JSON.parse((await run(["--dir", dir, "repair", "gl", "--json"])).stdout)
    assert.strictEqual(repaired.entry.sequence, count)
    assert.strictEqual(repaired.entry.prev_hash === head || count > 4096, true)
  })

  it("an unknown-version record is reported at its byte offset in its segment file", async () => {
    const dir = tempDir()
    const { count } = await seed(dir, "uv", 8)
    const last = path.join(dir, "uv", segments(dir, "uv").at(-1)!)
    const offset = fs.statSync(last).size
    fs.appendFileSync(last, JSON.stringify({ k: "entry", v: 2, e: {} }) + "\n")
    const v = await verifyJson(dir, "uv")
    assert.strictEqual(v.code, 1, v.stderr)
    assert.strictEqual(v.report.corruption.kind, "unknown_version")
    assert.strictEqual(v.report.corruption.segment, last)
    assert.strictEqual(v.report.corruption.offset, offset)
    assert.strictEqual(v.report.corruption.sequence, count)
  })

  it("a tampered entry is a violation with sequence, segment and byte offset fields", async () => {
    const dir = tempDir()
    await seed(dir, "tv", 12)
    const first = path.join(dir, "tv", segments(dir, "tv")[0]!)
    const rows = lines(first)
    const row = JSON.parse(rows[4]!)
    row.e.bytes_read = row.e.bytes_read + 1
    rows[4] = JSON.stringify(row)
    fs.writeFileSync(first, rows.join("\n") + "\n")
    const offset = rows.slice(0, 4).reduce((n, l) => n + Buffer.byteLength(l) + 1, 0)
    const v = await verifyJson(dir, "tv")
    assert.strictEqual(v.code, 1, v.stderr)
    assert.strictEqual(v.report.violation.sequence, row.e.sequence)
    assert.strictEqual(v.report.violation.what, "entry_hash")
    assert.strictEqual(v.report.violation.segment, first)
    assert.strictEqual(v.report.violation.offset, offset)
  })
})

describe("checkpoint claims found by review", () => {
  it("a checkpoint at sequence 0 with forged counters is caught by verify and by every load", async () => {
    const dir = tempDir()
    await seed(dir, "zero", 3)
    const file = path.join(dir, "zero", "checkpoint.json")
    const doc = JSON.parse(fs.readFileSync(file, "utf8"))
    assert.strictEqual(doc.next_sequence, 0)
    doc.tool_counts = [["auth", 5]]
    fs.writeFileSync(file, JSON.stringify(doc))
    const v = await verifyJson(dir, "zero")
    assert.strictEqual(v.code, 1, v.stderr)
    assert.strictEqual(v.report.corruption.kind, "checkpoint")
    assert.include(v.report.corruption.reason, "tool_counts")
    assert.strictEqual((await recordCode(dir, "zero")).code, 1)
    const repaired = JSON.parse((await run(["--dir", dir, "repair", "zero", "--json"])).stdout)
    assert.deepStrictEqual(repaired.set_aside, ["checkpoint.json.damaged-0"])
    assert.isNull(repaired.lost)
    assert.strictEqual((await verifyJson(dir, "zero")).code, 0)
  })

  it("forged caps in the checkpoint: repair keeps every record and rebuilds the checkpoint", async () => {
    const dir = tempDir()
    const { count } = await seed(dir, "caps", 6)
    const file = path.join(dir, "caps", "checkpoint.json")
    const doc = JSON.parse(fs.readFileSync(file, "utf8"))
    doc.entry_cap = 0
    fs.writeFileSync(file, JSON.stringify(doc))
    assert.strictEqual((await verifyJson(dir, "caps")).code, 1)
    const repaired = JSON.parse((await run(["--dir", dir, "repair", "caps", "--json"])).stdout)
    assert.deepStrictEqual(repaired.truncated, [])
    assert.deepStrictEqual(repaired.set_aside, ["checkpoint.json.damaged-0"])
    assert.isNull(repaired.lost)
    assert.strictEqual(repaired.next_sequence, count + 1)
    const after = await verifyJson(dir, "caps")
    assert.strictEqual(after.code, 0, after.stderr)
  })

  it("a forged copy of an old record after the last one: repair cuts only that line and loses nothing", async () => {
    const dir = tempDir()
    const { count } = await seed(dir, "tail", 10)
    const last = path.join(dir, "tail", segments(dir, "tail").at(-1)!)
    const rows = lines(last)
    const copy = JSON.parse(rows[2]!)
    copy.e.tool_name = "forged"
    fs.appendFileSync(last, JSON.stringify(copy) + "\n")
    const repaired = JSON.parse((await run(["--dir", dir, "repair", "tail", "--json"])).stdout)
    assert.isNull(repaired.lost)
    assert.strictEqual(repaired.entry.sequence, count)
    assert.strictEqual((await verifyJson(dir, "tail")).code, 0)
  })

  it("an unparsable checkpoint is rebuilt on disk by the next writer, keeping the session's caps", async () => {
    const dir = tempDir()
    await seed(dir, "rebuild", 4)
    const file = path.join(dir, "rebuild", "checkpoint.json")
    fs.writeFileSync(file, "{\"v\":1,\"broken")
    const v = await verifyJson(dir, "rebuild")
    assert.strictEqual(v.code, 1, v.stderr)
    const next = await recordCode(dir, "rebuild")
    assert.strictEqual(next.code, 0, next.stderr)
    assert.strictEqual(JSON.parse(fs.readFileSync(file, "utf8")).v, Checkpoint.VERSION)
    assert.isTrue(fs.existsSync(`${file}.damaged-0`))
    assert.strictEqual((await verifyJson(dir, "rebuild")).code, 0)
  })
})

describe("repair never sets aside records that verify", () => {
  it("a garbage line between entries is set aside alone; the entries after it stay", async () => {
    const dir = tempDir()
    const { count, head } = await seed(dir, "mid", 12)
    const first = path.join(dir, "mid", segments(dir, "mid")[0]!)
    const rows = lines(first)
    rows.splice(4, 0, "{\"k\":\"meTa\",\"v\":1,\"meta\":{}}")
    fs.writeFileSync(first, rows.join("\n") + "\n")
    const offset = rows.slice(0, 4).reduce((n, l) => n + Buffer.byteLength(l) + 1, 0)
    assert.strictEqual((await verifyJson(dir, "mid")).code, 1)
    const repaired = JSON.parse((await run(["--dir", dir, "repair", "mid", "--json"])).stdout)
    assert.deepStrictEqual(repaired.set_aside, [`${segments(dir, "mid")[0]}.damaged-${offset}`])
    assert.deepStrictEqual(repaired.truncated, [])
    assert.isNull(repaired.lost)
    assert.strictEqual(repaired.entry.sequence, count)
    assert.strictEqual(repaired.previous_head, head)
    assert.strictEqual(
      fs.readFileSync(path.join(dir, "mid", repaired.set_aside[0]), "utf8"),
      "{\"k\":\"meTa\",\"v\":1,\"meta\":{}}\n"
    )
    const after = await verifyJson(dir, "mid")
    assert.strictEqual(after.code, 0, after.stderr)
    assert.strictEqual(after.report.entries_checked, count + 1)
  })
})

describe("retention", () => {
  it("a session written with retention is missing history to verify, unless SESSION_JOURNAL_RETENTION=1 says so", async () => {
    const dir = tempDir()
    const layer = SessionJournal.layer({ checkpointMinBytes: 2048 }).pipe(
      Layer.provide(NodePersistence.layer({ root: dir, removeCheckpointedSegments: true }))
    )
    await Effect.runPromise(
      Effect.gen(function*() {
        const journal = yield* SessionJournal.SessionJournal
        for (let i = 0; i < 60; i++) yield* journal.record("kept", call(i))
      }).pipe(Effect.provide(layer))
    )
    assert.notStrictEqual(segments(dir, "kept")[0], "00000000000000000000.jsonl")
    const strict = await verifyJson(dir, "kept")
    assert.strictEqual(strict.code, 1, strict.stderr)
    assert.strictEqual(strict.report.corruption.kind, "missing")
    const told = await run(["--dir", dir, "verify", "kept", "--json"], { env: { SESSION_JOURNAL_RETENTION: "1" } })
    assert.strictEqual(told.code, 0, told.stderr)
  })
})
