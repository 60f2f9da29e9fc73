/**
 * Crash safety with real processes: a child appends through SessionJournal (group
 * commit, concurrent callers) on the filesystem adapter and prints every
 * acknowledged sequence; the test SIGKILLs it at a random moment, then checks that
 * every acknowledged entry is stored, the chain verifies, and the next child takes
 * over the dead one's stale lock and continues the same chain.
 */
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { NodePersistence } from "../src/index.ts"
import { acks, historyOf, loadRead, run, spawnFixture, tempDir, withWriter } from "./helpers.ts"

const STRESS = process.env["STRESS"] === "1"
const LANES = 2
// 10 kills in the normal suite; STRESS=1 makes 1000.
const KILLS_PER_LANE = STRESS ? 500 : 5
// A lane goes on past its kills until its session has a second segment (a loaded
// machine acknowledges fewer entries per kill), at most this many rounds.
const MAX_ROUNDS_PER_LANE = KILLS_PER_LANE * 4

const segmentCount = (dir: string) =>
  fs.existsSync(dir) ? fs.readdirSync(dir).filter((n) => /^[0-9]{20}\.jsonl$/.test(n)).length : 0

const lane = async (root: string, id: string, seed: number) => {
  let rnd = seed
  const random = () => {
    rnd = (rnd * 1103515245 + 12345) % 2147483648
    return rnd / 2147483648
  }
  const acked = new Set<number>()
  let maxAck = -1
  let kills = 0
  const env = { SJ_ROOT: root, SJ_ID: id, SJ_SEGMENT_BYTES: "2048", SJ_FIBERS: "6", SJ_WAIT: "1" }
  // The next writer loads its modules while the current one runs.
  let next = spawnFixture("appender", env)
  const more = (round: number) =>
    round < KILLS_PER_LANE || (round < MAX_ROUNDS_PER_LANE && segmentCount(path.join(root, id)) < 2)
  for (let round = 0; more(round); round++) {
    const child = next
    next = spawnFixture("appender", env)
    child.send("go")
    const ready = await child.waitFor((l) => l === "ready")
    expect(ready, child.lines.join("\n")).toBe(true)
    // Every other round waits for the first acknowledgement, so kills land in
    // appends, checkpoints and segment starts as well as in opening and takeover.
    if (round % 2 === 1) await child.waitFor((l) => l.startsWith("ack "))
    // Kill at a random moment: opening, taking over the lock, loading, appending,
    // checkpointing or starting a segment.
    await new Promise((resolve) => setTimeout(resolve, random() * 30))
    await child.kill()
    kills++
    expect(child.lines.filter((l) => l.startsWith("error") || l.startsWith("locked") || l.startsWith("stderr")))
      .toEqual([])
    for (const n of acks(child.lines)) {
      acked.add(n)
      maxAck = Math.max(maxAck, n)
    }
    const loaded = await run({ root }, loadRead(id))
    expect(loaded.recovery.stopped).toBeNull()
    expect(loaded.state.next_sequence).toBeGreaterThan(maxAck)
    if (!loaded.exists) {
      expect(acked.size).toBe(0)
      continue
    }
    const stored = await run({ root }, historyOf(id))
    const sequences = stored.map((e) => e.sequence)
    expect(sequences).toEqual(Array.from({ length: loaded.state.next_sequence }, (_, i) => i))
    for (const n of acked) expect(sequences[n]).toBe(n)
  }
  // The spare writer never got "go": it has not opened the session.
  await next.kill()
  return { kills, acked: acked.size, maxAck }
}

describe("crash loop", () => {
  it(`survives at least ${LANES * KILLS_PER_LANE} SIGKILLs of a group-committing writer`, async () => {
    const root = path.join(tempDir("crash"), "journal")
    const results = await Promise.all(Array.from({ length: LANES }, (_, i) => lane(root, `lane-${i}`, 7919 * (i + 1))))
    const kills = results.reduce((n, r) => n + r.kills, 0)
    expect(kills).toBeGreaterThanOrEqual(LANES * KILLS_PER_LANE)
    for (let i = 0; i < LANES; i++) {
      // Writers made progress across the kills, and the whole history verifies.
      expect(results[i]!.maxAck).toBeGreaterThan(0)
      const report = await Effect.runPromise(NodePersistence.inspect({ root }, `lane-${i}`))
      expect(report.ok, JSON.stringify(report.segments.filter((s) => s.status !== "ok"))).toBe(true)
      expect(report.segments.length).toBeGreaterThan(1)
      // The last kill may have landed in a checkpoint's write and left its temp file;
      // readers leave it, the next writer to take the session over removes it.
      await run({ root }, withWriter(`lane-${i}`, (h) => h.load))
      expect(fs.readdirSync(path.join(root, `lane-${i}`)).filter((n) => n.startsWith(".tmp-"))).toEqual([])
    }
    const total = results.reduce((n, r) => n + r.acked, 0)
    console.log(`crash loop: ${kills} kills, ${total} acknowledged entries, all present`)
    // Starting a Node process per kill dominates its time: 80 kills took 335 s with
    // other work sharing a 2-core machine; the bound only catches a hang.
  }, STRESS ? 1_800_000 : 600_000)
})
