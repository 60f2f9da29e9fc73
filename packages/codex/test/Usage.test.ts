/**
 * The tokens of a Codex session from its rollouts (`Usage`,
 * `internal/rolloutTokens.ts`): each response counted once by its id however the
 * bytes arrive (property, seed printed on failure), the sub-agents a
 * `spawn_agent` call started followed into their own rollouts, the scans kept
 * between events so each reads only new lines, and the total unknown (null)
 * wherever a rollout that counts cannot be read. The line shapes are those Codex
 * 0.169.0 wrote in `packages/cli/test/RealCodex.test.ts`.
 */
import * as TranscriptScan from "@session-journal/claude-code/TranscriptScan"
import * as fc from "fast-check"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, assert, describe, it } from "vitest"
import * as RolloutTokens from "../src/internal/rolloutTokens.ts"
import * as Usage from "../src/Usage.ts"

const seed = Number(process.env["FC_SEED"] ?? Date.now() % 2 ** 31)

const record = (response: string, total: number): string =>
  JSON.stringify({
    timestamp: "2026-12-06T08:57:31.680Z",
    ordinal: 10,
    type: "token_usage_record",
    payload: {
      thread_id: "t",
      turn_id: "u",
      response_id: response,
      usage: {
        input_tokens: Math.max(total - 10, 0),
        cached_input_tokens: 0,
        cache_write_input_tokens: 0,
        output_tokens: Math.min(total, 10),
        reasoning_output_tokens: 0,
        total_tokens: total
      },
      thread_token_usage: { total_tokens: 999_999 }
    }
  })
const tokenCount = JSON.stringify({
  type: "event_msg",
  payload: { type: "token_count", info: { total_token_usage: { total_tokens: 5_000 } } }
})
const call = (name: string, id: string): string =>
  JSON.stringify({ type: "response_item", payload: { type: "function_call", name, call_id: id, arguments: "{}" } })
const output = (id: string, text: string): string =>
  JSON.stringify({ type: "response_item", payload: { type: "function_call_output", call_id: id, output: text } })

const bytesOf = (lines: ReadonlyArray<string>): Uint8Array =>
  new TextEncoder().encode(lines.map((l) => l + "\n").join(""))

// The scan of `bytes` fed in pieces cut at `cuts`, each piece after what was counted.
const fed = (bytes: Uint8Array, cuts: ReadonlyArray<number>): Usage.Scan => {
  let scan = Usage.empty
  for (const cut of [...cuts.map((c) => c % (bytes.length + 1)).sort((a, b) => a - b), bytes.length]) {
    if (cut > scan.offset) scan = Usage.extend(scan, bytes.subarray(scan.offset, cut))
  }
  return scan
}

describe("Usage (property)", () => {
  it("counts each response once, at its largest, however the bytes arrive; other lines count nothing", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.tuple(fc.constantFrom("r1", "r2", "r3", "r4"), fc.nat(5000)).map(([id, n]) => ({ id, n })),
            fc.constant(null)
          ),
          { maxLength: 12 }
        ),
        fc.array(fc.nat(), { maxLength: 6 }),
        (items, cuts) => {
          const lines = items.map((i) => i === null ? tokenCount : record(i.id, i.n))
          const largest = new Map<string, number>()
          for (const i of items) if (i !== null) largest.set(i.id, Math.max(largest.get(i.id) ?? 0, i.n))
          const want = [...largest.values()].reduce((a, b) => a + b, 0)
          const bytes = bytesOf(lines)
          const scan = fed(bytes, cuts)
          assert.strictEqual(scan.offset, bytes.length)
          assert.strictEqual(Usage.tokensOf(scan), BigInt(want))
          assert.isTrue(Usage.isScan(JSON.parse(JSON.stringify(scan))))
        }
      ),
      { seed, verbose: true, numRuns: Number(process.env["FC_RUNS"] ?? 200) }
    )
  })
})

describe("Usage (examples)", () => {
  it("notes the sub-agents spawn_agent calls started, not other calls' outputs", () => {
    const scan = Usage.extend(
      Usage.empty,
      bytesOf([
        call("spawn_agent", "c1"),
        call("exec_command", "c2"),
        output("c2", "{\"agent_id\":\"forged-by-a-command\"}"),
        output("c1", "{\"agent_id\":\"019a-agent\",\"nickname\":\"Ada\"}"),
        call("multi_agent_v1.spawn_agent", "c3"),
        output("c3", "not json")
      ])
    )
    assert.deepStrictEqual(scan.agents, ["019a-agent"])
    assert.deepStrictEqual(scan.spawning, [])
  })

  it("leaves a last line without its newline for later", () => {
    const bytes = new TextEncoder().encode(record("r1", 7) + "\n" + record("r2", 9))
    const scan = Usage.extend(Usage.empty, bytes)
    assert.strictEqual(Usage.tokensOf(scan), 7n)
    assert.strictEqual(scan.offset, record("r1", 7).length + 1)
  })
})

const made: Array<string> = []
afterAll(() => {
  for (const d of made.splice(0)) fs.rmSync(d, { recursive: true, force: true })
})

const day = () => {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "sj-codex-usage-")))
  made.push(dir)
  return dir
}
const write = (file: string, lines: ReadonlyArray<string>) => fs.writeFileSync(file, bytesOf(lines))
const append = (file: string, lines: ReadonlyArray<string>) => fs.appendFileSync(file, bytesOf(lines))

describe("the tokens of a session's rollouts", () => {
  const session = "019a24a9-98e2-7aa2-b83d-5c740cbe0e36"
  const agent = "019a24aa-0000-7000-8000-000000000001"

  it("adds the sub-agents' rollouts, read on from where the last event left them", async () => {
    const dir = day()
    const main = path.join(dir, `rollout-2026-12-06T08-57-31-${session}.jsonl`)
    const sub = path.join(dir, `rollout-2026-12-06T08-57-40-${agent}.jsonl`)
    write(main, [record("r1", 100), call("spawn_agent", "c1"), output("c1", JSON.stringify({ agent_id: agent }))])
    write(sub, [record("s1", 40)])
    const kept: Array<unknown> = []
    const keeper: TranscriptScan.Keeper = {
      read: async () => kept.at(-1),
      write: async (_s, k) => void kept.push(JSON.parse(JSON.stringify(k)))
    }
    const id = `codex-${session}`
    assert.strictEqual(await RolloutTokens.totals({ session_id: session, transcript_path: main }, keeper, id), 140n)
    append(main, [record("r2", 5)])
    append(sub, [record("s2", 6)])
    // A sub-agent's event names its own rollout; the main one is the kept one.
    assert.strictEqual(
      await RolloutTokens.totals({ session_id: session, transcript_path: sub, agent_id: agent }, keeper, id),
      151n
    )
    const last = kept.at(-1) as { rollouts: Record<string, Usage.Scan> }
    assert.strictEqual(last.rollouts[main]!.offset, fs.statSync(main).size)
    assert.strictEqual(last.rollouts[sub]!.offset, fs.statSync(sub).size)
    // Without a kept scan, a sub-agent's event finds the main rollout by the session's id.
    assert.strictEqual(
      await RolloutTokens.totals(
        { session_id: session, transcript_path: sub, agent_id: agent },
        TranscriptScan.noKeeper,
        id
      ),
      151n
    )
  })

  it("is unknown without a rollout, with a sub-agent's rollout missing, or with one that cannot be read", async () => {
    const dir = day()
    const main = path.join(dir, `rollout-2026-12-06T08-57-31-${session}.jsonl`)
    const none = TranscriptScan.noKeeper
    const id = `codex-${session}`
    assert.strictEqual(await RolloutTokens.totals({ session_id: session, transcript_path: null }, none, id), null)
    assert.strictEqual(await RolloutTokens.totals({ session_id: session, transcript_path: main }, none, id), null)
    write(main, [record("r1", 100), call("spawn_agent", "c1"), output("c1", JSON.stringify({ agent_id: agent }))])
    assert.strictEqual(await RolloutTokens.totals({ session_id: session, transcript_path: main }, none, id), null)
    write(path.join(dir, `rollout-2026-12-06T08-57-40-${agent}.jsonl`), [])
    assert.strictEqual(await RolloutTokens.totals({ session_id: session, transcript_path: main }, none, id), 100n)
    assert.strictEqual(
      await RolloutTokens.totals({ session_id: "another", transcript_path: "relative.jsonl" }, none, id),
      null
    )
  })
})
