/**
 * The PostgreSQL adapter against PostgreSQL itself, on the same driver
 * (`@effect/sql-pg`, the adapter's client) and the same server:
 * `pg.record.sequential` (one session, one caller) against one autocommit
 * `INSERT` of an entry row per transaction, awaited one after another, and
 * `pg.record.group_commit` (64 concurrent callers on one session) against
 * 64-row `INSERT`s, one per transaction; `pg.record.many_sessions` (32 sessions
 * written at once, one caller each, on a pool of 32 connections) against one-row
 * `INSERT`s from 32 fibers at once on a pool of as many connections. The
 * baseline's table has the shape of the adapter's entries table and its rows are
 * the same entries' JSON text.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Reactivity from "effect/reactivity/Reactivity"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import { createRequire } from "node:module"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { Entry, type Persistence, type SessionJournal } from "../../packages/core/src/index.ts"
import { dropPgTables, loadPostgres, pgUrl, repoRoot } from "../lib/adapters.ts"
import { journalRuntime, makeEntries, params, serviceOf } from "../lib/env.ts"
import {
  type Figure,
  interleave,
  notRun,
  type RunOptions,
  type Sample,
  type Scenario,
  throughputFigure
} from "../lib/harness.ts"

type Journal = SessionJournal.SessionJournal["Service"]
type JournalRuntime = ManagedRuntime.ManagedRuntime<SessionJournal.SessionJournal, unknown>
/** The baseline's runtime: a bare SQL client. */
export type RawRuntime = ManagedRuntime.ManagedRuntime<SqlClient.SqlClient, unknown>

/** What the baseline uses of `@effect/sql-pg/PgClient`. */
export interface PgClientModule {
  readonly make: (options: {
    readonly url: Redacted.Redacted
    readonly applicationName?: string
    readonly maxConnections?: number | undefined
  }) => Effect.Effect<SqlClient.SqlClient, SqlError, Scope.Scope | Reactivity.Reactivity>
}

/** `@effect/sql-pg/PgClient`, resolved from the postgres package, which declares it. */
export const loadPgClient = async (): Promise<PgClientModule> => {
  const require = createRequire(path.join(repoRoot, "packages", "postgres", "package.json"))
  return await import(pathToFileURL(require.resolve("@effect/sql-pg/PgClient")).href) as PgClientModule
}

/** A row of the baseline: what the adapter stores for an entry. */
export interface Row {
  readonly sequence: string
  readonly hash: string
  readonly text: string
}

/** The baseline's rows for the first `n` entries of `makeEntries`. */
export const rowsOf = (n: number): Array<Row> =>
  makeEntries(n).map((e) => ({
    sequence: String(e.sequence),
    hash: e.entry_hash,
    text: Entry.toJsonText(Entry.encode(e))
  }))

const sequential = async (rt: JournalRuntime, journal: Journal, id: string, n: number, offset: number) => {
  const t0 = performance.now()
  await rt.runPromise(Effect.gen(function*() {
    for (let i = 0; i < n; i++) yield* journal.record(id, params(offset + i))
  }))
  return { ops: n, ms: performance.now() - t0 }
}

const concurrent = async (
  rt: JournalRuntime,
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

/** One autocommit INSERT of one row per transaction, awaited one after another. */
export const rawSequential = (rt: RawRuntime, table: string, id: string, rows: ReadonlyArray<Row>) =>
  rt.runPromise(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const t = sql(table)
    const t0 = performance.now()
    for (const r of rows) {
      yield* sql`INSERT INTO ${t} (session_id, sequence, entry_hash, entry)
        VALUES (${id}, ${r.sequence}::int8, ${r.hash}, ${r.text})`
    }
    return { ops: rows.length, ms: performance.now() - t0 }
  }))

/** One autocommit INSERT of `batch` rows per transaction, awaited one after another. */
export const rawGroup = (rt: RawRuntime, table: string, id: string, rows: ReadonlyArray<Row>, batch: number) =>
  rt.runPromise(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const t = sql(table)
    const t0 = performance.now()
    for (let i = 0; i < rows.length; i += batch) {
      const b = rows.slice(i, i + batch)
      yield* sql`INSERT INTO ${t} (session_id, sequence, entry_hash, entry)
        SELECT ${id}, r.s, r.h, r.e FROM unnest(${b.map((r) => r.sequence)}::int8[], ${b.map((r) => r.hash)}::text[], ${
        b.map((r) => r.text)
      }::text[]) AS r(s, h, e)`
    }
    return { ops: rows.length, ms: performance.now() - t0 }
  }))

/** The baseline's runtime: one `PgClient` on the same server, without the adapter. */
export const rawRuntime = (PgClient: PgClientModule, maxConnections?: number): RawRuntime =>
  ManagedRuntime.make(
    Layer.effect(
      SqlClient.SqlClient,
      PgClient.make({ url: Redacted.make(pgUrl), applicationName: "bench-raw", maxConnections })
    ).pipe(Layer.provide(Reactivity.layer))
  )

/** Creates the baseline's table, shaped as the adapter's entries table. */
export const createRawTable = (rt: RawRuntime, table: string) =>
  rt.runPromise(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`CREATE TABLE ${sql(table)} (
        session_id text NOT NULL,
        sequence bigint NOT NULL CHECK (sequence >= 0),
        entry_hash text NOT NULL,
        entry text NOT NULL,
        PRIMARY KEY (session_id, sequence)
      )`
  }))

const run = async (options: RunOptions): Promise<ReadonlyArray<Figure>> => {
  const SEQ = "one INSERT per transaction, same driver and server, same rows"
  const GROUP = "64 rows per INSERT and transaction, same driver and server, same rows"
  const seqGoal = { op: ">=", target: 0.8 } as const
  const groupGoal = { op: ">=", target: 0.6 } as const
  const pg = await loadPostgres()
  if (!pg.ok) {
    return [
      notRun("pg.record.sequential", "records/s", SEQ, seqGoal, pg.why),
      notRun("pg.record.group_commit", "records/s", GROUP, groupGoal, pg.why)
    ]
  }
  const n = options.quick ? 60 : 1000
  const callers = 64
  const per = options.quick ? 10 : 80
  const rounds = options.quick ? 3 : 5
  const prefix = `bench_${process.pid}_`
  const rawTable = `${prefix}raw`
  const PgClient = await loadPgClient()
  const pgRt: JournalRuntime = journalRuntime(pg.value(prefix))
  const rawRt = rawRuntime(PgClient)
  try {
    const journal = await serviceOf(pgRt)
    await createRawTable(rawRt, rawTable)
    const seqRows = rowsOf(n)
    const groupRows = rowsOf(callers * per)
    let round = 0
    const offsets = { seq: 0, group: 0 }
    const seq = await interleave(
      rounds,
      () => sequential(pgRt, journal, "bench-seq", n, (offsets.seq += n) - n),
      () => rawSequential(rawRt, rawTable, `seq-${round++}`, seqRows),
      { log: options.log, label: "pg.record.sequential" }
    )
    const group = await interleave(
      rounds,
      () => concurrent(pgRt, journal, "bench-group", callers, per, (offsets.group += callers * per) - callers * per),
      () => rawGroup(rawRt, rawTable, `group-${round++}`, groupRows, callers),
      { log: options.log, label: "pg.record.group_commit" }
    )
    return [
      throughputFigure(
        "pg.record.sequential",
        "records/s",
        SEQ,
        seq,
        seqGoal,
        `${rounds} rounds × ${n} records, PostgreSQL on 127.0.0.1 (same machine)`
      ),
      throughputFigure(
        "pg.record.group_commit",
        "records/s",
        GROUP,
        group,
        groupGoal,
        `${callers} callers × ${per} records per round; baseline ${per} INSERTs of ${callers} rows`
      )
    ]
  } finally {
    await pgRt.dispose()
    await rawRt.dispose()
    dropPgTables(prefix)
  }
}

// `sessions` sessions written at once, one caller each recording `per` tool calls
// one after another: every append is one entry, on a connection of its own.
const manySessions = async (
  rt: JournalRuntime,
  journal: Journal,
  ids: ReadonlyArray<string>,
  per: number,
  offset: number
): Promise<Sample> => {
  const t0 = performance.now()
  await rt.runPromise(Effect.forEach(
    ids,
    (id) =>
      Effect.gen(function*() {
        for (let i = 0; i < per; i++) yield* journal.record(id, params(offset + i))
      }),
    { concurrency: "unbounded", discard: true }
  ))
  return { ops: ids.length * per, ms: performance.now() - t0 }
}

/** As many fibers as `ids`, each inserting its rows one autocommit `INSERT` after another, all at once. */
export const rawManySessions = (rt: RawRuntime, table: string, ids: ReadonlyArray<string>, rows: ReadonlyArray<Row>) =>
  rt.runPromise(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const t = sql(table)
    const t0 = performance.now()
    yield* Effect.forEach(
      ids,
      (id) =>
        Effect.gen(function*() {
          for (const r of rows) {
            yield* sql`INSERT INTO ${t} (session_id, sequence, entry_hash, entry)
              VALUES (${id}, ${r.sequence}::int8, ${r.hash}, ${r.text})`
          }
        }),
      { concurrency: "unbounded", discard: true }
    )
    return { ops: ids.length * rows.length, ms: performance.now() - t0 }
  }))

/** What the figure uses of `@session-journal/postgres`: the layer with its own pool. */
type PgLayerFromUrl = (
  url: string,
  options: { readonly tablePrefix: string; readonly maxConnections: number }
) => Layer.Layer<Persistence.Persistence, unknown>

const runManySessions = async (options: RunOptions): Promise<ReadonlyArray<Figure>> => {
  const MANY = "one-row INSERTs from as many fibers at once, each on a connection of a pool of as many, same rows"
  const pg = await loadPostgres()
  if (!pg.ok) return [notRun("pg.record.many_sessions", "records/s", MANY, null, pg.why)]
  const mod = await import("../../packages/postgres/src/index.ts")
  const layerFromUrl = mod.PgPersistence.layerFromUrl as PgLayerFromUrl
  const sessions = options.quick ? 16 : 32
  const per = options.quick ? 10 : 40
  const rounds = options.quick ? 3 : 5
  const prefix = `bench_${process.pid}_many_`
  const rawTable = `${prefix}raw`
  const PgClient = await loadPgClient()
  const pgRt: JournalRuntime = journalRuntime(layerFromUrl(pgUrl, { tablePrefix: prefix, maxConnections: sessions }))
  const rawRt = rawRuntime(PgClient, sessions)
  try {
    const journal = await serviceOf(pgRt)
    await createRawTable(rawRt, rawTable)
    const rows = rowsOf(per)
    const ids = Array.from({ length: sessions }, (_, i) => `many-${i}`)
    let round = 0
    let offset = 0
    const samples = await interleave(
      rounds,
      () => manySessions(pgRt, journal, ids, per, (offset += per) - per),
      () => rawManySessions(rawRt, rawTable, ids.map((id) => `${id}-${round}`), rows).finally(() => round++),
      { log: options.log, label: "pg.record.many_sessions" }
    )
    return [
      throughputFigure(
        "pg.record.many_sessions",
        "records/s",
        MANY,
        samples,
        null,
        `${sessions} sessions × ${per} records per round, one caller each, pools of ${sessions} connections`
      )
    ]
  } finally {
    await pgRt.dispose()
    await rawRt.dispose()
    dropPgTables(prefix)
  }
}

/** `pg.record.many_sessions`. */
export const pgManySessions: Scenario = {
  name: "pg.record.many_sessions",
  figures: ["pg.record.many_sessions"],
  run: runManySessions
}

/** `pg.record.sequential` and `pg.record.group_commit`. */
export const pgRecord: Scenario = {
  name: "pg.record",
  figures: ["pg.record.sequential", "pg.record.group_commit"],
  run
}
