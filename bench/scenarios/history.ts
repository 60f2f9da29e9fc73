/**
 * Reading long histories. `fs.open.checkpointed`: time to open a session of
 * 1,000,000 entries (checkpoint plus the tail after it) against the time to replay
 * and verify all of it (`SessionJournal.verify`). `fs.replay`: entries per second of
 * that replay against `JSON.parse` + SHA-256 of the same segment lines. All three
 * sides run in the same rounds, each open and verify on a fresh service (nothing
 * cached in memory but the OS page cache, warm for every side alike).
 * `cli.verify`: the real `session-journal verify` binary on the same session
 * against reading the same lines, `JSON.parse` of each and the two SHA-256 every
 * entry of a full ring costs (its own hash and the eviction fold), on one core.
 */
import { sha256 } from "@noble/hashes/sha2.js"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import { loadCli, loadNode, nodeEnv } from "../lib/adapters.ts"
import { journalRuntime, serviceOf } from "../lib/env.ts"
import {
  durationFigure,
  type Figure,
  interleaveMany,
  notRun,
  type RunOptions,
  type Scenario,
  throughputFigure
} from "../lib/harness.ts"
import { history } from "../lib/history.ts"
import { parseAndHashTwice } from "../lib/rawVerify.ts"

const sizeOf = (options: RunOptions) => options.quick ? 20_000 : 1_000_000

const OPEN_GOAL = { op: "<=", target: 0.05 } as const
const REPLAY_GOAL = { op: ">=", target: 0.5 } as const
const CLI_GOAL = { op: ">=", target: 0.7 } as const

const encoder = new TextEncoder()

const historyRun = async (options: RunOptions): Promise<ReadonlyArray<Figure>> => {
  const VERIFY = "replay + verify all (SessionJournal.verify)"
  const PARSE = "JSON.parse + SHA-256 of the same lines"
  const node = await loadNode()
  if (!node.ok) {
    return [
      notRun("fs.open.checkpointed", "ms", VERIFY, OPEN_GOAL, node.why),
      notRun("fs.replay", "entries/s", PARSE, REPLAY_GOAL, node.why)
    ]
  }
  const n = sizeOf(options)
  const h = await history(node.value, n, options.log)
  const rounds = 3
  let sink = 0
  const s = await interleaveMany(rounds, [
    {
      name: "open",
      run: async () => {
        const t0 = performance.now()
        const rt = journalRuntime(node.value(h.root))
        try {
          const journal = await serviceOf(rt)
          const state = await rt.runPromise(journal.state(h.id))
          if (state.next_sequence !== n) throw new Error(`opened at ${state.next_sequence}, expected ${n}`)
          return { ops: 1, ms: performance.now() - t0 }
        } finally {
          await rt.dispose()
        }
      }
    },
    {
      name: "verify",
      run: async () => {
        const t0 = performance.now()
        const rt = journalRuntime(node.value(h.root))
        try {
          const journal = await serviceOf(rt)
          const report = await rt.runPromise(journal.verify(h.id))
          if (report.entriesChecked !== n) throw new Error(`verified ${report.entriesChecked} entries, expected ${n}`)
          return { ops: n, ms: performance.now() - t0 }
        } finally {
          await rt.dispose()
        }
      }
    },
    {
      name: "parse",
      run: async () => {
        const t0 = performance.now()
        let count = 0
        for (const file of h.segments) {
          const text = fs.readFileSync(file, "utf8")
          let start = 0
          for (let end = text.indexOf("\n"); end !== -1; start = end + 1, end = text.indexOf("\n", start)) {
            const line = text.slice(start, end)
            const record = JSON.parse(line) as { k: string }
            if (record.k !== "entry") continue
            sink ^= sha256(encoder.encode(line))[0]!
            count++
          }
        }
        if (count !== n) throw new Error(`parsed ${count} entry lines, expected ${n}`)
        return { ops: count, ms: performance.now() - t0 }
      }
    }
  ], { log: options.log, label: "fs.open/fs.replay", warmup: false })
  if (sink === -1) options.log("unreachable")
  const where = `${n.toLocaleString("en-US")} entries, ${h.segments.length} segments, ${
    (h.bytes / 2 ** 20).toFixed(0)
  } MiB; ${rounds} rounds`
  return [
    durationFigure("fs.open.checkpointed", VERIFY, { subject: s["open"]!, baseline: s["verify"]! }, OPEN_GOAL, where),
    throughputFigure(
      "fs.replay",
      "entries/s",
      PARSE,
      { subject: s["verify"]!, baseline: s["parse"]! },
      REPLAY_GOAL,
      where
    )
  ]
}

/** `fs.open.checkpointed` and `fs.replay`. */
export const fsHistory: Scenario = {
  name: "fs.history",
  figures: ["fs.open.checkpointed", "fs.replay"],
  run: historyRun
}

const cliRun = async (options: RunOptions): Promise<ReadonlyArray<Figure>> => {
  const RAW = "JSON.parse + 2 SHA-256 (node:crypto) per entry, same lines"
  const node = await loadNode()
  if (!node.ok) return [notRun("cli.verify", "entries/s", RAW, CLI_GOAL, node.why)]
  const cli = loadCli()
  if (!cli.ok) return [notRun("cli.verify", "entries/s", RAW, CLI_GOAL, cli.why)]
  const { NodeSha256 } = await import("../../packages/node/src/index.ts")
  const n = sizeOf(options)
  const h = await history(node.value, n, options.log)
  let sink = 0
  const rounds = options.quick ? 2 : 3
  const s = await interleaveMany(rounds, [
    {
      name: "cli",
      run: async () => {
        const t0 = performance.now()
        const out = spawnSync(cli.value, ["verify", h.id, "--json"], {
          encoding: "utf8",
          env: nodeEnv({ SESSION_JOURNAL_DIR: h.root }),
          maxBuffer: 64 * 2 ** 20
        })
        const ms = performance.now() - t0
        if (out.status !== 0) {
          throw new Error(`session-journal verify exited ${out.status}: ${(out.stderr || out.stdout).slice(0, 400)}`)
        }
        const checked = (JSON.parse(out.stdout) as { sessions: Array<{ entries_checked: number }> }).sessions[0]
          ?.entries_checked
        if (checked !== n) throw new Error(`session-journal verify checked ${checked} entries, expected ${n}`)
        return { ops: n, ms }
      }
    },
    {
      name: "parse+2sha",
      run: async () => {
        const t0 = performance.now()
        const { count, fold } = parseAndHashTwice(h.segments, NodeSha256.digest)
        if (count !== n) throw new Error(`parsed ${count} entry lines, expected ${n}`)
        sink ^= fold.charCodeAt(0)
        return { ops: count, ms: performance.now() - t0 }
      }
    }
  ], { log: options.log, label: "cli.verify", warmup: false })
  if (sink === -1) options.log("unreachable")
  return [
    throughputFigure(
      "cli.verify",
      "entries/s",
      RAW,
      { subject: s["cli"]!, baseline: s["parse+2sha"]! },
      CLI_GOAL,
      `${n.toLocaleString("en-US")}-entry session; the CLI's time includes starting Node; the baseline runs on one core`
    )
  ]
}

/** `cli.verify`. */
export const cliVerify: Scenario = { name: "cli.verify", figures: ["cli.verify"], run: cliRun }
