/**
 * One subject of a scenario, alone, for a fixed number of operations: what to run
 * under `node --cpu-prof` when a goal is not met, so the profile shows the journal
 * and not the baseline it is compared with. Usage:
 *
 *   node --conditions=@session-journal/source bench/target.ts fs.record.sequential [count] --profile /tmp/seq.cpuprofile
 *   node bench/profile.ts /tmp/seq.cpuprofile
 *
 * With `--profile FILE` only the measured part is profiled (through the inspector),
 * not the setup (such as writing the history that `fs.replay` reads).
 *
 * Targets: memory.record, memory.record.group_commit (64 concurrent callers on one
 * session, as fs.record.group_commit), fs.record.sequential, fs.record.group_commit,
 * fs.record.many_sessions, fs.replay (verify of a written history), fs.open,
 * cli.verify (the binary runs with `--cpu-prof`; its profile goes next to FILE),
 * pg.record.sequential (one caller, 1,000 records), pg.record.group_commit (64 callers,
 * 5,120 records), each with its baseline as `….baseline` (one-row INSERTs; 64-row
 * INSERTs), claude_code.archive (count archives of the scenario's 3 MB transcript,
 * default 3; operations are lines), fs.sessions.touched (count sessions touched once
 * each, 8 at a time, default 5,000; from the sources in this process, not the built
 * packages in a child under `ulimit -n 1024` as the scenario) and
 * fs.sessions.touched.baseline (the raw loop).
 */
import * as Effect from "effect/Effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import { Session } from "node:inspector/promises"
import * as path from "node:path"
import { Archive } from "../packages/claude-code/src/index.ts"
import { Persistence } from "../packages/core/src/index.ts"
import { dropPgTables, loadCli, loadNode, loadPostgres, nodeEnv } from "./lib/adapters.ts"
import { journalRuntime, params, recordConcurrent, recordSequential, serviceOf, withTempDir } from "./lib/env.ts"
import { history } from "./lib/history.ts"
import { requireOneCore } from "./lib/oneCore.ts"
import { writeArchiveSource } from "./scenarios/claudeCode.ts"
import { createRawTable, loadPgClient, rawGroup, rawRuntime, rawSequential, rowsOf } from "./scenarios/pg.ts"
import { rawTouch } from "./scenarios/sessions.ts"

requireOneCore("bench/target.ts")

const argv = process.argv.slice(2)
const profileAt = argv.indexOf("--profile")
const profileFile = profileAt === -1 ? null : argv[profileAt + 1]!
const [target, countText] = profileAt === -1 ? argv : argv.filter((_, i) => i !== profileAt && i !== profileAt + 1)
const count = countText === undefined ? undefined : Number(countText)

const session = profileFile === null ? null : new Session()
session?.connect()
/** Starts the profiler (when asked for) just before the measured part. */
let profiling = false
const measureStart = async () => {
  if (session === null) return
  profiling = true
  await session.post("Profiler.enable")
  await session.post("Profiler.start")
}
const log = (line: string) => process.stderr.write(line + "\n")

const node = await loadNode()
const fsLayer = () => {
  if (!node.ok) throw new Error(node.why)
  return node.value
}

/** Stops the profiler and writes the profile (before any teardown such as removing temp dirs). */
const measureStop = async () => {
  if (session === null || profileFile === null || !profiling) return
  profiling = false
  const { profile } = await session.post("Profiler.stop")
  fs.writeFileSync(profileFile, JSON.stringify(profile))
  session.disconnect()
}

const t0 = performance.now()
const cpu0 = process.cpuUsage()
let ops = 0
switch (target) {
  case "memory.record":
  case "memory.record.group_commit": {
    const n = count ?? 100_000
    const rt = journalRuntime(Persistence.layerMemory())
    const journal = await serviceOf(rt)
    await measureStart()
    if (target === "memory.record") await rt.runPromise(recordSequential(journal, "target", n))
    else await rt.runPromise(recordConcurrent(journal, "target", n, 64))
    await rt.dispose()
    ops = n
    break
  }
  case "fs.record.sequential":
  case "fs.record.group_commit":
    await withTempDir("target", async (dir) => {
      const rt = journalRuntime(fsLayer()(path.join(dir, "journal")))
      const journal = await serviceOf(rt)
      const n = count ?? (target === "fs.record.sequential" ? 5_000 : 50_000)
      await measureStart()
      if (target === "fs.record.sequential") await rt.runPromise(recordSequential(journal, "target", n))
      else await rt.runPromise(recordConcurrent(journal, "target", n, 64))
      await measureStop()
      await rt.dispose()
      ops = n
    })
    break
  case "fs.record.many_sessions":
    await withTempDir("target", async (dir) => {
      const rt = journalRuntime(fsLayer()(path.join(dir, "journal")))
      const journal = await serviceOf(rt)
      const per = count === undefined ? 100 : Math.ceil(count / 256)
      await measureStart()
      await rt.runPromise(Effect.forEach(
        Array.from({ length: 256 }, (_, k) => k),
        (k) =>
          Effect.gen(function*() {
            for (let i = 0; i < per; i++) yield* journal.record(`target-${k % 64}`, params(k * per + i))
          }),
        { concurrency: "unbounded", discard: true }
      ))
      await measureStop()
      await rt.dispose()
      ops = per * 256
    })
    break
  case "fs.replay":
  case "fs.open": {
    const n = count ?? 200_000
    const h = await history(fsLayer(), n, log)
    await measureStart()
    const t1 = performance.now()
    const rt = journalRuntime(fsLayer()(h.root))
    const journal = await serviceOf(rt)
    if (target === "fs.replay") await rt.runPromise(journal.verify(h.id))
    else for (let i = 0; i < 20; i++) await rt.runPromise(journal.state(h.id))
    await rt.dispose()
    log(`  (history built before the measured part; measured ${(performance.now() - t1).toFixed(0)} ms)`)
    ops = target === "fs.replay" ? n : 20
    break
  }
  case "cli.verify": {
    const cli = loadCli()
    if (!cli.ok) throw new Error(cli.why)
    const n = count ?? 200_000
    const h = await history(fsLayer(), n, log)
    const profileDir = profileFile === null ? null : path.dirname(profileFile)
    const out = spawnSync(cli.value, ["verify", h.id], {
      encoding: "utf8",
      env: nodeEnv({
        SESSION_JOURNAL_DIR: h.root,
        ...(profileDir === null
          ? {}
          : { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${profileDir} --cpu-prof-name=cli.verify.cpuprofile` })
      })
    })
    if (out.status !== 0) throw new Error(`verify exited ${out.status}: ${out.stderr}`)
    ops = n
    break
  }
  case "pg.record.sequential":
  case "pg.record.group_commit": {
    const pg = await loadPostgres()
    if (!pg.ok) throw new Error(pg.why)
    const prefix = `target_${process.pid}_`
    const rt = journalRuntime(pg.value(prefix))
    try {
      const journal = await serviceOf(rt)
      const n = count ?? (target === "pg.record.sequential" ? 1_000 : 5_120)
      await measureStart()
      if (target === "pg.record.sequential") await rt.runPromise(recordSequential(journal, "target", n))
      else ops = (await rt.runPromise(recordConcurrent(journal, "target", n, 64))).ops
      await measureStop()
      if (ops === 0) ops = n
    } finally {
      await rt.dispose()
      dropPgTables(prefix)
    }
    break
  }
  case "pg.record.sequential.baseline":
  case "pg.record.group_commit.baseline": {
    const sequential = target === "pg.record.sequential.baseline"
    const n = count ?? (sequential ? 1_000 : 5_120)
    const prefix = `target_${process.pid}_`
    const rt = rawRuntime(await loadPgClient())
    try {
      await createRawTable(rt, `${prefix}raw`)
      const rows = rowsOf(n)
      await measureStart()
      if (sequential) await rawSequential(rt, `${prefix}raw`, "target", rows)
      else await rawGroup(rt, `${prefix}raw`, "target", rows, 64)
      await measureStop()
      ops = n
    } finally {
      await rt.dispose()
      dropPgTables(prefix)
    }
    break
  }
  case "claude_code.archive":
    await withTempDir("target", async (dir) => {
      const archives = count ?? 3
      const { source } = writeArchiveSource(dir)
      await measureStart()
      for (let i = 0; i < archives; i++) {
        const rt = journalRuntime(fsLayer()(path.join(dir, `journal-${i}`)))
        try {
          const report = await rt.runPromise(Archive.archive({ source }))
          ops += report.files[0]?.lines ?? 0
        } finally {
          await rt.dispose()
        }
      }
      await measureStop()
    })
    break
  case "fs.sessions.touched":
    await withTempDir("target", async (dir) => {
      const n = count ?? 5_000
      const rt = journalRuntime(fsLayer()(path.join(dir, "journal")))
      const journal = await serviceOf(rt)
      await measureStart()
      await rt.runPromise(Effect.forEach(
        Array.from({ length: n }, (_, i) => i),
        (i) => journal.record(`s-${i}`, params(i)),
        { concurrency: 8, discard: true }
      ))
      await measureStop()
      await rt.dispose()
      ops = n
    })
    break
  case "fs.sessions.touched.baseline":
    await withTempDir("target", async (dir) => {
      const n = count ?? 5_000
      await measureStart()
      await rawTouch(dir, n)
      await measureStop()
      ops = n
    })
    break
  default:
    log(`unknown target ${target}`)
    process.exit(2)
}
await measureStop()
const ms = performance.now() - t0
const cpu = process.cpuUsage(cpu0)
log(
  `${target}: ${ops} operations in ${ms.toFixed(0)} ms (${(ops / (ms / 1000)).toFixed(0)}/s); ` +
    `process CPU ${((cpu.user + cpu.system) / ops).toFixed(1)} µs per operation (user ${
      (cpu.user / ops).toFixed(1)
    }, system ${(cpu.system / ops).toFixed(1)})`
)
