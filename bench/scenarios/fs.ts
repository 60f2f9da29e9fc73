/**
 * Durable writes on the filesystem adapter. `fs.record.sequential`: one session,
 * one caller, against a raw write + fdatasync loop over the same lines.
 * `fs.record.vs_sqlite`: the same against better-sqlite3 (WAL, synchronous=FULL,
 * one insert per transaction). `fs.record.group_commit`: 64 concurrent callers on
 * one session against a raw loop that writes the same lines 64 per fdatasync (the
 * most a group commit of 64 callers can gather). All five sides run in the same
 * rounds. `fs.record.many_sessions`: 64 sessions × 4 callers against 64 raw
 * writers, each on its own file.
 */
import * as Effect from "effect/Effect"
import * as path from "node:path"
import { type FsLayer, loadNode, loadSqlite } from "../lib/adapters.ts"
import { journalRuntime, makeEntries, params, segmentLine, serviceOf, withTempDir } from "../lib/env.ts"
import {
  type Figure,
  type Goal,
  interleaveMany,
  notRun,
  type RunOptions,
  type Sample,
  type Scenario,
  throughputFigure
} from "../lib/harness.ts"
import { openSqlite, rawBatched, rawParallel, rawSequential } from "../lib/raw.ts"

const encoder = new TextEncoder()

const GOALS = {
  sequential: { op: ">=", target: 0.9 },
  sqlite: { op: ">=", target: 1.0 },
  group: { op: ">=", target: 0.7 },
  many: { op: ">=", target: 1.0 }
} as const satisfies Record<string, Goal>

const RAW = "raw write + fdatasync, same lines"
const SQLITE = "better-sqlite3 WAL, synchronous=FULL, 1 insert/txn"
const RAW_GROUP = "raw write + fdatasync, 64 lines per sync, same lines"
const PER_SYNC = 64

const recordRun = async (options: RunOptions): Promise<ReadonlyArray<Figure>> => {
  const node = await loadNode()
  if (!node.ok) {
    return [
      notRun("fs.record.sequential", "records/s", RAW, GOALS.sequential, node.why),
      notRun("fs.record.vs_sqlite", "records/s", SQLITE, GOALS.sqlite, node.why),
      notRun("fs.record.group_commit", "records/s", RAW_GROUP, GOALS.group, node.why)
    ]
  }
  const sqlite = loadSqlite(options.log)
  const n = options.quick ? 150 : 1500
  const callers = 64
  const groupN = options.quick ? 64 * 15 : 64 * 150
  const rounds = options.quick ? 3 : 7
  return withTempDir("fs-record", async (dir) => {
    const entries = makeEntries(n)
    const lines = entries.map((e) => encoder.encode(segmentLine(e)))
    const texts = entries.map(segmentLine)
    const groupLines = makeEntries(groupN).map((e) => encoder.encode(segmentLine(e)))
    const rt = journalRuntime(node.value(path.join(dir, "journal")))
    const db = sqlite.ok ? openSqlite(sqlite.value, path.join(dir, "sqlite.db")) : null
    try {
      const journal = await serviceOf(rt)
      let seqOffset = 0
      let groupOffset = 0
      const sides: Array<{ name: string; run: (round: number) => Promise<Sample> }> = [
        { name: "raw", run: async (r) => rawSequential(path.join(dir, `raw-${r + 1}.jsonl`), lines) },
        {
          name: "rawGroup",
          run: async (r) => rawBatched(path.join(dir, `raw-group-${r + 1}.jsonl`), groupLines, PER_SYNC)
        },
        {
          name: "sequential",
          run: async () => {
            const t0 = performance.now()
            await rt.runPromise(Effect.gen(function*() {
              for (let i = 0; i < n; i++) yield* journal.record("bench-seq", params(seqOffset + i))
            }))
            seqOffset += n
            return { ops: n, ms: performance.now() - t0 }
          }
        },
        {
          name: "group",
          run: async () => {
            const per = groupN / callers
            const t0 = performance.now()
            await rt.runPromise(Effect.forEach(
              Array.from({ length: callers }, (_, c) => c),
              (c) =>
                Effect.gen(function*() {
                  for (let i = 0; i < per; i++) yield* journal.record("bench-group", params(groupOffset + c * per + i))
                }),
              { concurrency: "unbounded", discard: true }
            ))
            groupOffset += groupN
            return { ops: groupN, ms: performance.now() - t0 }
          }
        }
      ]
      if (db !== null) sides.push({ name: "sqlite", run: async () => db.run(texts) })
      const s = await interleaveMany(rounds, sides, { log: options.log, label: "fs.record" })
      const size = `${rounds} rounds; ${n} records per sequential round, ${groupN} per group-commit round`
      return [
        throughputFigure(
          "fs.record.sequential",
          "records/s",
          RAW,
          { subject: s["sequential"]!, baseline: s["raw"]! },
          GOALS.sequential,
          size
        ),
        db === null
          ? notRun("fs.record.vs_sqlite", "records/s", SQLITE, GOALS.sqlite, sqlite.ok ? "" : sqlite.why)
          : throughputFigure("fs.record.vs_sqlite", "records/s", SQLITE, {
            subject: s["sequential"]!,
            baseline: s["sqlite"]!
          }, GOALS.sqlite),
        throughputFigure(
          "fs.record.group_commit",
          "records/s",
          RAW_GROUP,
          { subject: s["group"]!, baseline: s["rawGroup"]! },
          GOALS.group,
          `${callers} concurrent callers on one session`
        )
      ]
    } finally {
      db?.close()
      await rt.dispose()
    }
  })
}

/** `fs.record.sequential`, `fs.record.vs_sqlite`, `fs.record.group_commit`. */
export const fsRecord: Scenario = {
  name: "fs.record",
  figures: ["fs.record.sequential", "fs.record.vs_sqlite", "fs.record.group_commit"],
  run: recordRun
}

const manyRun = async (options: RunOptions): Promise<ReadonlyArray<Figure>> => {
  const RAW_PARALLEL = "raw parallel write + fdatasync, 64 files"
  const node = await loadNode()
  if (!node.ok) return [notRun("fs.record.many_sessions", "records/s", RAW_PARALLEL, GOALS.many, node.why)]
  const sessions = 64
  const callers = 4
  const per = options.quick ? 5 : 40
  const rounds = options.quick ? 3 : 7
  return withTempDir(
    "fs-many",
    async (dir) => manyIn(dir, node.value, sessions, callers, per, rounds, options, RAW_PARALLEL)
  )
}

const manyIn = async (
  dir: string,
  layer: FsLayer,
  sessions: number,
  callers: number,
  per: number,
  rounds: number,
  options: RunOptions,
  baselineName: string
): Promise<ReadonlyArray<Figure>> => {
  const total = sessions * callers * per
  const lines = makeEntries(Math.min(total, 4096)).map((e) => encoder.encode(segmentLine(e)))
  const rt = journalRuntime(layer(path.join(dir, "journal")))
  try {
    const journal = await serviceOf(rt)
    let offset = 0
    const s = await interleaveMany(rounds, [
      {
        name: "raw",
        run: () => rawParallel(dir, sessions, lines, callers * per)
      },
      {
        name: "journal",
        run: async () => {
          const t0 = performance.now()
          await rt.runPromise(Effect.forEach(
            Array.from({ length: sessions * callers }, (_, k) => k),
            (k) =>
              Effect.gen(function*() {
                const id = `bench-many-${k % sessions}`
                for (let i = 0; i < per; i++) yield* journal.record(id, params(offset + k * per + i))
              }),
            { concurrency: "unbounded", discard: true }
          ))
          offset += total
          return { ops: total, ms: performance.now() - t0 }
        }
      }
    ], { log: options.log, label: "fs.record.many_sessions" })
    return [
      throughputFigure(
        "fs.record.many_sessions",
        "records/s",
        baselineName,
        { subject: s["journal"]!, baseline: s["raw"]! },
        GOALS.many,
        `${sessions} sessions × ${callers} callers, ${total} records per round, ${rounds} rounds`
      )
    ]
  } finally {
    await rt.dispose()
  }
}

/** `fs.record.many_sessions`. */
export const fsManySessions: Scenario = {
  name: "fs.record.many_sessions",
  figures: ["fs.record.many_sessions"],
  run: manyRun
}
