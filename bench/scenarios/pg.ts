/**
 * The PostgreSQL adapter against the filesystem adapter, same service, same
 * records, same rounds: `pg.record.sequential` (one session, one caller) and
 * `pg.record.group_commit` (64 concurrent callers on one session). No goal: the
 * figures say what sharing sessions across machines costs.
 */
import * as Effect from "effect/Effect"
import type * as ManagedRuntime from "effect/ManagedRuntime"
import * as path from "node:path"
import type { SessionJournal } from "../../packages/core/src/index.ts"
import { dropPgTables, loadNode, loadPostgres } from "../lib/adapters.ts"
import { journalRuntime, params, serviceOf, withTempDir } from "../lib/env.ts"
import {
  type Figure,
  interleaveMany,
  notRun,
  type RunOptions,
  type Sample,
  type Scenario,
  throughputFigure
} from "../lib/harness.ts"

type Journal = SessionJournal.SessionJournal["Service"]

const sequential = async (
  rt: ManagedRuntime.ManagedRuntime<SessionJournal.SessionJournal, unknown>,
  journal: Journal,
  id: string,
  n: number,
  offset: number
): Promise<Sample> => {
  const t0 = performance.now()
  await rt.runPromise(Effect.gen(function*() {
    for (let i = 0; i < n; i++) yield* journal.record(id, params(offset + i))
  }))
  return { ops: n, ms: performance.now() - t0 }
}

const concurrent = async (
  rt: ManagedRuntime.ManagedRuntime<SessionJournal.SessionJournal, unknown>,
  journal: Journal,
  id: string,
  callers: number,
  per: number,
  offset: number
): Promise<Sample> => {
  const t0 = performance.now()
  await rt.runPromise(Effect.forEach(
    Array.from({ length: callers }, (_, c) => c),
    (c) =>
      Effect.gen(function*() {
        for (let i = 0; i < per; i++) yield* journal.record(id, params(offset + c * per + i))
      }),
    { concurrency: "unbounded", discard: true }
  ))
  return { ops: callers * per, ms: performance.now() - t0 }
}

const run = async (options: RunOptions): Promise<ReadonlyArray<Figure>> => {
  const SEQ = "fs.record.sequential (filesystem adapter)"
  const GROUP = "fs.record.group_commit (filesystem adapter)"
  const pg = await loadPostgres()
  const node = await loadNode()
  const why = !pg.ok ? pg.why : !node.ok ? `baseline unavailable: ${node.why}` : null
  if (why !== null || !pg.ok || !node.ok) {
    return [
      notRun("pg.record.sequential", "records/s", SEQ, null, why ?? ""),
      notRun("pg.record.group_commit", "records/s", GROUP, null, why ?? "")
    ]
  }
  const n = options.quick ? 60 : 1000
  const callers = 64
  const per = options.quick ? 10 : 80
  const rounds = options.quick ? 3 : 5
  const prefix = `bench_${process.pid}_`
  return withTempDir("pg-baseline", async (dir) => {
    const pgRt = journalRuntime(pg.value(prefix))
    const fsRt = journalRuntime(node.value(path.join(dir, "journal")))
    try {
      const pgJournal = await serviceOf(pgRt)
      const fsJournal = await serviceOf(fsRt)
      const offsets = { pgSeq: 0, fsSeq: 0, pgGroup: 0, fsGroup: 0 }
      const s = await interleaveMany(rounds, [
        { name: "pg-seq", run: () => sequential(pgRt, pgJournal, "bench-seq", n, (offsets.pgSeq += n) - n) },
        { name: "fs-seq", run: () => sequential(fsRt, fsJournal, "bench-seq", n, (offsets.fsSeq += n) - n) },
        {
          name: "pg-group",
          run: () =>
            concurrent(pgRt, pgJournal, "bench-group", callers, per, (offsets.pgGroup += callers * per) - callers * per)
        },
        {
          name: "fs-group",
          run: () =>
            concurrent(fsRt, fsJournal, "bench-group", callers, per, (offsets.fsGroup += callers * per) - callers * per)
        }
      ], { log: options.log, label: "pg.record" })
      return [
        throughputFigure(
          "pg.record.sequential",
          "records/s",
          SEQ,
          { subject: s["pg-seq"]!, baseline: s["fs-seq"]! },
          null,
          `${rounds} rounds × ${n} records, PostgreSQL on 127.0.0.1 (same machine)`
        ),
        throughputFigure(
          "pg.record.group_commit",
          "records/s",
          GROUP,
          { subject: s["pg-group"]!, baseline: s["fs-group"]! },
          null,
          `${callers} callers × ${per} records per round`
        )
      ]
    } finally {
      await pgRt.dispose()
      await fsRt.dispose()
      dropPgTables(prefix)
    }
  })
}

/** `pg.record.sequential` and `pg.record.group_commit`. */
export const pgRecord: Scenario = {
  name: "pg.record",
  figures: ["pg.record.sequential", "pg.record.group_commit"],
  run
}
