/**
 * `TranscriptScan.awaitCall`: a door reads the transcript once it holds the call
 * it decides (Claude Code writes its transcript in batches; the lines before a
 * call are there once the call's own line is).
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, assert, describe, it } from "vitest"
import * as TranscriptScan from "../src/internal/transcriptScan.ts"

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sj-await-"))
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

const line = (id: string) =>
  JSON.stringify({ type: "assistant", message: { content: [{ type: "tool_use", id, name: "Bash", input: {} }] } }) +
  "\n"

describe("TranscriptScan.awaitCall", () => {
  it("finds a call already written, and one written while it waits (split across reads too)", async () => {
    const file = path.join(dir, "a.jsonl")
    fs.writeFileSync(file, "x".repeat(3 * 1024 * 1024) + line("toolu_first"))
    assert.isTrue(await TranscriptScan.awaitCall(file, "toolu_first", { polls: 0 }))
    const written = TranscriptScan.awaitCall(file, "toolu_later", { polls: 1000, everyMs: 1 })
    // Written in two pieces, the id cut in the middle, while the call waits.
    const whole = line("toolu_later")
    const cut = whole.indexOf("later")
    await new Promise((resolve) => setTimeout(resolve, 5))
    fs.appendFileSync(file, whole.slice(0, cut))
    await new Promise((resolve) => setTimeout(resolve, 5))
    fs.appendFileSync(file, whole.slice(cut))
    assert.isTrue(await written)
  })

  it("finds a call followed by other lines, wherever it stands across the steps it reads back, and not past 4 MiB", async () => {
    const file = path.join(dir, "c.jsonl")
    const id = "toolu_back"
    const needle = `"${id}"`
    // The needle at offsets around a 64 KiB step boundary from the end, and deep in the tail.
    for (
      const after of [0, 1, 64 * 1024 - 5, 64 * 1024 - needle.length + 3, 64 * 1024, 200 * 1024, 4 * 1024 * 1024 - 100]
    ) {
      fs.writeFileSync(file, "y".repeat(10_000) + needle + "z".repeat(after))
      assert.isTrue(await TranscriptScan.awaitCall(file, id, { polls: 0 }), `${after} bytes after it`)
    }
    fs.writeFileSync(file, needle + "z".repeat(4 * 1024 * 1024 + 10))
    assert.isFalse(await TranscriptScan.awaitCall(file, id, { polls: 0 }), "more than 4 MiB back")
  })

  it("does not wait for a transcript that does not exist, and gives up on a call that never comes", async () => {
    assert.isFalse(await TranscriptScan.awaitCall(path.join(dir, "absent.jsonl"), "toolu_x", { polls: 1_000_000 }))
    const file = path.join(dir, "b.jsonl")
    fs.writeFileSync(file, line("toolu_other"))
    assert.isFalse(await TranscriptScan.awaitCall(file, "toolu_never", { polls: 3, everyMs: 1 }))
    assert.isFalse(await TranscriptScan.awaitCall("relative.jsonl", "toolu_x"))
    assert.isFalse(await TranscriptScan.awaitCall(file, "bad id with spaces"))
  })

  it("waits in the transcript that holds the call: a sub-agent's own, beside the main one", async () => {
    const main = path.join(dir, "s1.jsonl")
    fs.writeFileSync(main, line("toolu_main"))
    const sub = path.join(dir, "s1", "subagents", "agent-a1b2.jsonl")
    assert.strictEqual(TranscriptScan.callTranscript({ transcript_path: main, agent_id: "a1b2" }), sub)
    assert.strictEqual(TranscriptScan.callTranscript({ transcript_path: main }), main)
    assert.isNull(TranscriptScan.callTranscript({ transcript_path: main, agent_id: "../x" }))
    assert.isNull(TranscriptScan.callTranscript({ transcript_path: "rel.jsonl" }))
    fs.mkdirSync(path.dirname(sub), { recursive: true })
    fs.writeFileSync(sub, line("toolu_sub0"))
    // The sub-agent's call comes in its own transcript while the door waits; the main one never holds it.
    const waited = TranscriptScan.awaitCallOf({ transcript_path: main, agent_id: "a1b2", tool_use_id: "toolu_sub1" })
    await new Promise((resolve) => setTimeout(resolve, 20))
    fs.appendFileSync(sub, line("toolu_sub1"))
    assert.isTrue(await waited)
    assert.isFalse(await TranscriptScan.awaitCall(main, "toolu_sub1", { polls: 0 }))
    assert.isFalse(
      await TranscriptScan.awaitCallOf({ transcript_path: main, agent_id: "../x", tool_use_id: "toolu_sub1" })
    )
  })
})
