/**
 * `claude_code.session_store.append`: the Agent SDK's `append` of one 10-entry
 * batch (transcript-like entries of about 400 bytes, each with a uuid) through
 * `JournalSessionStore.open({ dir })`, one batch after another on one session:
 * the median latency of a batch against the same bytes (the batch's JSON lines)
 * written and fdatasynced raw, one write and one sync per batch. Goal: ratio ≤ 1.5.
 *
 * `claude_code.session_store.append.vs_journal`: the same, against
 * `SessionJournal.writeAll` of the batch's line entries on a journal of its own in
 * the same directory: what the store adds to the journal's durable append (its
 * uuid index, the metadata stored with each batch, the Promise boundary).
 *
 * `claude_code.session_store.append.history`: 100,000 uuids (20,000 with `--quick`)
 * appended in batches of 200 to one session of a fresh store (the default
 * `indexBytes`): the median latency of the last 50 appends (the last 10,000
 * uuids) against the median of the first 50, per round (windows of 50: on a
 * shared machine the median of 10 moves by 2x between rounds). Goal: ratio ≤ 2
 * (the work of an append does not grow with the history).
 *
 * `claude_code.session_store.concurrent.fs` / `.pg`: 16 sessions appended at once,
 * each one batch after another: batches per second, with the p50 and p99 latency of
 * a batch in the note; against 16 raw files written and fdatasynced the same way
 * (on PostgreSQL, no baseline: reported only).
 */
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as fs from "node:fs"
import * as fsp from "node:fs/promises"
import * as path from "node:path"
import { JournalSessionStore, Planner } from "../../packages/claude-code/src/index.ts"
import { SessionJournal } from "../../packages/core/src/index.ts"
import { NodePersistence } from "../../packages/node/src/index.ts"
import { dropPgTables, loadPostgres, pgUrl } from "../lib/adapters.ts"
import { withTempDir } from "../lib/env.ts"
import {
  durationFigure,
  type Figure,
  fmt,
  interleaveMany,
  median,
  notRun,
  type RunOptions,
  type Sample,
  type Scenario,
  throughputFigure
} from "../lib/harness.ts"

const APPEND = "claude_code.session_store.append"
const VS_JOURNAL = "claude_code.session_store.append.vs_journal"
const HISTORY = "claude_code.session_store.append.history"
const CONCURRENT_FS = "claude_code.session_store.concurrent.fs"
const CONCURRENT_PG = "claude_code.session_store.concurrent.pg"
const SESSIONS = 16
const encoder = new TextEncoder()

let uuids = 0
const batch = (): Array<JournalSessionStore.SessionStoreEntry> =>
  Array.from({ length: 10 }, (_, k) => ({
    parentUuid: null,
    isSidechain: false,
    type: k % 2 === 0 ? "user" : "assistant",
    uuid: `00000000-0000-4000-8000-${(uuids++).toString(16).padStart(12, "0")}`,
    timestamp: "2026-12-01T00:00:00.000Z",
    message: { role: "user", content: [{ type: "text", text: "x".repeat(250) }] }
  }))
const bytesOf = (entries: ReadonlyArray<unknown>): Uint8Array =>
  encoder.encode(entries.map((e) => JSON.stringify(e) + "\n").join(""))

const percentile = (xs: ReadonlyArray<number>, p: number): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor(p * s.length))]!
}

const key = (i: number) => ({ projectKey: "-bench", sessionId: `session-${i}` })

// One session, `n` batches one after another: the median latency of a batch.
const storeSequential = async (store: JournalSessionStore.Store, n: number, session: number): Promise<Sample> => {
  const latencies: Array<number> = []
  for (let i = 0; i < n; i++) {
    const b = batch()
    const t0 = performance.now()
    await store.append(key(session), b)
    latencies.push(performance.now() - t0)
  }
  return { ops: 1, ms: median(latencies) }
}

// One fresh store, `total` uuids in batches of 200 on one session: the median
// latency of the first 50 appends and of the last 50.
const historyRound = async (dir: string, total: number): Promise<{ first: Sample; last: Sample }> => {
  const store = await JournalSessionStore.open({ dir })
  try {
    const latencies: Array<number> = []
    let next = 0
    for (let i = 0; i < total; i += 200) {
      const entries = Array.from({ length: 200 }, (_, k) => ({
        type: k % 2 === 0 ? "user" : "assistant",
        uuid: `00000000-0000-4000-8000-${(next++).toString(16).padStart(12, "0")}`,
        timestamp: "2026-12-01T00:00:00.000Z",
        message: { role: "user", content: "x".repeat(100) }
      }))
      const t0 = performance.now()
      await store.append({ projectKey: "-bench-history", sessionId: "history" }, entries)
      latencies.push(performance.now() - t0)
    }
    return {
      first: { ops: 1, ms: median(latencies.slice(0, 50)) },
      last: { ops: 1, ms: median(latencies.slice(-50)) }
    }
  } finally {
    await store.close()
  }
}

const rawSequential = async (file: string, n: number): Promise<Sample> => {
  const h = await fsp.open(file, "a", 0o600)
  try {
    const latencies: Array<number> = []
    for (let i = 0; i < n; i++) {
      const bytes = bytesOf(batch())
      const t0 = performance.now()
      await h.write(bytes)
      await h.datasync()
      latencies.push(performance.now() - t0)
    }
    return { ops: 1, ms: median(latencies) }
  } finally {
    await h.close()
  }
}

// The journal's own durable append of the same lines, one batch after another.
const journalSequential = async (
  rt: ManagedRuntime.ManagedRuntime<SessionJournal.SessionJournal, unknown>,
  n: number,
  session: number
): Promise<Sample> => {
  const latencies: Array<number> = []
  for (let i = 0; i < n; i++) {
    const items = batch().map((e, k) => Planner.lineItem(i * 10 + k + 1, { text: JSON.stringify(e) }))
    const t0 = performance.now()
    await rt.runPromise(SessionJournal.SessionJournal.use((j) => j.writeAll(`plain-${session}`, items)))
    latencies.push(performance.now() - t0)
  }
  return { ops: 1, ms: median(latencies) }
}

// `SESSIONS` sessions at once, `n` batches each: batches per second, and every latency.
const storeConcurrent = async (
  store: JournalSessionStore.Store,
  n: number,
  base: number,
  latencies: Array<number>
): Promise<Sample> => {
  const t0 = performance.now()
  await Promise.all(Array.from({ length: SESSIONS }, async (_, s) => {
    for (let i = 0; i < n; i++) {
      const b = batch()
      const t = performance.now()
      await store.append(key(base + s), b)
      latencies.push(performance.now() - t)
    }
  }))
  return { ops: SESSIONS * n, ms: performance.now() - t0 }
}

const rawConcurrent = async (dir: string, n: number, round: number): Promise<Sample> => {
  const handles = await Promise.all(
    Array.from({ length: SESSIONS }, (_, i) => fsp.open(path.join(dir, `raw-${round}-${i}`), "a", 0o600))
  )
  try {
    const t0 = performance.now()
    await Promise.all(handles.map(async (h) => {
      for (let i = 0; i < n; i++) {
        await h.write(bytesOf(batch()))
        await h.datasync()
      }
    }))
    return { ops: SESSIONS * n, ms: performance.now() - t0 }
  } finally {
    await Promise.all(handles.map((h) => h.close()))
  }
}

const latencyNote = (latencies: ReadonlyArray<number>) =>
  `${SESSIONS} sessions at once; latency of a batch p50 ${fmt(percentile(latencies, 0.5))} ms, p99 ${
    fmt(percentile(latencies, 0.99))
  } ms`

const run = async (options: RunOptions): Promise<ReadonlyArray<Figure>> => {
  const rounds = options.quick ? 3 : 7
  const n = options.quick ? 30 : 100
  const figures: Array<Figure> = []
  await withTempDir("session-store", async (dir) => {
    const store = await JournalSessionStore.open({ dir: path.join(dir, "journal") })
    try {
      let session = 0
      let file = 0
      let plain = 0
      const rt = ManagedRuntime.make(
        SessionJournal.layer().pipe(Layer.provide(NodePersistence.layer({ root: path.join(dir, "plain") })))
      )
      const seq = await (async () => {
        try {
          return await interleaveMany(rounds, [
            { name: "store", run: () => storeSequential(store, n, session++) },
            { name: "raw", run: () => rawSequential(path.join(dir, `raw-${file++}`), n) },
            { name: "journal", run: () => journalSequential(rt, n, plain++) }
          ], { log: options.log, label: APPEND })
        } finally {
          await rt.dispose()
        }
      })()
      const sizes = `${n} batches of 10 entries (${
        bytesOf(batch()).length
      } bytes) per round, ${rounds} rounds; median latency of a batch`
      figures.push(
        durationFigure(APPEND, "the batch's JSON lines, one write + fdatasync", {
          subject: seq["store"]!,
          baseline: seq["raw"]!
        }, {
          op: "<=",
          target: 1.5
        }, sizes)
      )
      figures.push(durationFigure(
        VS_JOURNAL,
        "SessionJournal.writeAll of the batch's line entries",
        {
          subject: seq["store"]!,
          baseline: seq["journal"]!
        },
        null,
        sizes
      ))
      const latencies: Array<number> = []
      let base = 1000
      let round = 0
      const conc = await interleaveMany(rounds, [
        {
          name: "store",
          run: async (r) => {
            const out = await storeConcurrent(store, n, base, r >= 0 ? latencies : [])
            base += SESSIONS
            return out
          }
        },
        { name: "raw", run: () => rawConcurrent(dir, n, round++) }
      ], { log: options.log, label: CONCURRENT_FS })
      figures.push(
        throughputFigure(
          CONCURRENT_FS,
          "batches/s",
          `${SESSIONS} raw files, one write + fdatasync per batch`,
          {
            subject: conc["store"]!,
            baseline: conc["raw"]!
          },
          null,
          latencyNote(latencies)
        )
      )
    } finally {
      await store.close()
    }
    fs.rmSync(path.join(dir, "journal"), { recursive: true, force: true })

    const total = options.quick ? 20_000 : 100_000
    const historyRounds = options.quick ? 1 : 3
    const first: Array<Sample> = []
    const last: Array<Sample> = []
    for (let r = 0; r < historyRounds; r++) {
      const round = await historyRound(path.join(dir, `history-${r}`), total)
      first.push(round.first)
      last.push(round.last)
      fs.rmSync(path.join(dir, `history-${r}`), { recursive: true, force: true })
      options.log(
        `  ${HISTORY} round ${r + 1}/${historyRounds}: first ${fmt(round.first.ms)} ms, last ${fmt(round.last.ms)} ms`
      )
    }
    figures.push(
      durationFigure(
        HISTORY,
        "the first 50 appends of the same session",
        { subject: last, baseline: first },
        { op: "<=", target: 2 },
        `${total} uuids in batches of 200 on one session, ${historyRounds} rounds; median latency of the last 50 appends`
      )
    )
  })

  const pg = await loadPostgres()
  if (!pg.ok) {
    figures.push(notRun(CONCURRENT_PG, "batches/s", "", null, pg.why))
    return figures
  }
  const tablePrefix = `sjb_store_${Date.now().toString(36)}_`
  try {
    const store = await JournalSessionStore.open({ postgres: pgUrl, tablePrefix })
    try {
      const latencies: Array<number> = []
      const samples: Array<Sample> = []
      await storeConcurrent(store, 5, 0, []) // warm-up: tables, pool
      for (let r = 0; r < rounds; r++) {
        samples.push(await storeConcurrent(store, n, 1000 + r * SESSIONS, latencies))
        options.log(`  ${CONCURRENT_PG} round ${r + 1}/${rounds}: ${fmt(samples[r]!.ops / (samples[r]!.ms / 1000))}/s`)
      }
      const value = median(samples.map((s) => s.ops / (s.ms / 1000)))
      figures.push({
        name: CONCURRENT_PG,
        value,
        unit: "batches/s",
        baseline: "",
        baseline_value: null,
        ratio: null,
        goal: null,
        met: null,
        note: latencyNote(latencies)
      })
    } finally {
      await store.close()
    }
  } finally {
    dropPgTables(tablePrefix)
  }
  return figures
}

/** The session store's scenario. */
export const claudeCodeSessionStore: Scenario = {
  name: "claude_code.session_store",
  figures: [APPEND, VS_JOURNAL, HISTORY, CONCURRENT_FS, CONCURRENT_PG],
  run
}
