/**
 * `Usage`: the tokens of a transcript's assistant messages, each message once
 * however many lines repeat its usage, the same however the bytes arrive; and
 * the door's reading of a session's transcripts (main and sub-agents), kept
 * between events and read on from where it stopped.
 */
import * as Random from "effect/Random"
import * as fc from "fast-check"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { Usage } from "../src/index.ts"
import * as TranscriptScan from "../src/internal/transcriptScan.ts"

const assistant = (id: string, input: number, output: number, cache = 0) =>
  JSON.stringify({
    type: "assistant",
    message: {
      id,
      role: "assistant",
      content: [{ type: "text", text: "x" }],
      usage: {
        input_tokens: input,
        output_tokens: output,
        cache_creation_input_tokens: cache,
        cache_read_input_tokens: cache,
        service_tier: "standard"
      }
    }
  })

const encode = (lines: ReadonlyArray<string>) => new TextEncoder().encode(lines.map((l) => `${l}\n`).join(""))

const seed = Number(process.env["FC_SEED"] ?? Date.now() % 2 ** 31)

describe("Usage", () => {
  it("counts a message once over the lines that repeat its usage, at its largest", () => {
    const scan = Usage.extend(
      Usage.empty,
      encode([
        assistant("msg_a", 100, 7, 5),
        assistant("msg_a", 100, 7, 5),
        JSON.stringify({ type: "user", message: { content: "usage assistant" } }),
        assistant("msg_b", 200, 1),
        assistant("msg_b", 200, 9),
        "not json \"assistant\" \"usage\""
      ])
    )
    expect(Usage.tokensOf(scan)).toBe(117n + 209n)
  })

  it("counts the same however the transcript is cut into reads (property)", () => {
    const line = fc.oneof(
      fc.tuple(fc.constantFrom("m1", "m2", "m3", "m4"), fc.nat(1000), fc.nat(1000)).map(([id, i, o]) =>
        assistant(id, i, o)
      ),
      fc.constant(JSON.stringify({ type: "attachment", attachment: { type: "date" } }))
    )
    fc.assert(
      fc.property(fc.array(line, { maxLength: 30 }), fc.array(fc.nat(), { maxLength: 10 }), (lines, cuts) => {
        const bytes = encode(lines)
        const whole = Usage.extend(Usage.empty, bytes)
        const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b)
        let scan = Usage.empty
        let from = 0
        for (const p of [...points, bytes.length]) {
          scan = Usage.extend(scan, bytes.subarray(scan.offset, Math.max(p, scan.offset)))
          from = p
        }
        expect(from).toBe(bytes.length)
        expect(scan).toEqual(whole)
        expect(Usage.isScan(JSON.parse(JSON.stringify(scan)))).toBe(true)
      }),
      { seed, verbose: true }
    )
  })
})

const made: Array<string> = []
afterAll(() => {
  for (const d of made) fs.rmSync(d, { recursive: true, force: true })
})

describe("TranscriptScan.totals", () => {
  it("adds the sub-agents' transcripts, reads on from where it stopped, and says unknown without a transcript", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sj-usage-"))
    made.push(dir)
    const transcript = path.join(dir, "sid.jsonl")
    fs.writeFileSync(transcript, encode([assistant("m1", 10, 5)]))
    const keeper = TranscriptScan.memoryKeeper()
    expect((await TranscriptScan.totals(transcript, keeper, "s")).tokens).toBe(15n)
    // A sub-agent starts, the main transcript grows: both are counted, each once.
    fs.mkdirSync(path.join(dir, "sid", "subagents"), { recursive: true })
    fs.writeFileSync(path.join(dir, "sid", "subagents", "agent-a1.jsonl"), encode([assistant("s1", 1000, 1)]))
    fs.appendFileSync(transcript, encode([assistant("m2", 1, 1)]))
    expect((await TranscriptScan.totals(transcript, keeper, "s")).tokens).toBe(15n + 1001n + 2n)
    fs.appendFileSync(path.join(dir, "sid", "subagents", "agent-a1.jsonl"), encode([assistant("s2", 3, 0)]))
    expect((await TranscriptScan.totals(transcript, keeper, "s")).tokens).toBe(15n + 1001n + 2n + 3n)
    // Kept in a file, the same.
    const files = path.join(dir, "scans")
    expect(
      (await TranscriptScan.totals(transcript, TranscriptScan.fileKeeper(files, Random.Random.defaultValue()), "s"))
        .tokens
    ).toBe(1021n)
    expect(
      (await TranscriptScan.totals(transcript, TranscriptScan.fileKeeper(files, Random.Random.defaultValue()), "s"))
        .tokens
    ).toBe(1021n)
    // A scan kept before tokens were counted claims nothing about them: the transcript is read again.
    const old = TranscriptScan.memoryKeeper()
    await old.write("v", { file: transcript, offset: fs.statSync(transcript).size, allowed: 0, recent: [] })
    expect((await TranscriptScan.totals(transcript, old, "v")).tokens).toBe(1021n)
    expect((await TranscriptScan.totals(path.join(dir, "missing.jsonl"), keeper, "t")).tokens).toBe(null)
    expect((await TranscriptScan.totals("relative.jsonl", keeper, "u")).tokens).toBe(null)
  })
})
