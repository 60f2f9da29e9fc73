/**
 * A directory of the tree swapped for a symbolic link to somewhere else, at any
 * level (the source itself, a project directory, a session's `subagents`): no
 * file outside the source is ever journaled, the swapped directory is refused
 * by its path, and custody of the other transcripts goes on. Once with the swap
 * made between the walk and the read, once with a process swapping back and
 * forth (two renames each way, as `mv` does) while archive runs.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import { SessionJournal } from "@session-journal/core"
import { NodePersistence } from "@session-journal/node"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Archive, SessionIds, Sync } from "../src/index.ts"
import * as Source from "../src/internal/source.ts"
import * as F from "./Fixtures.ts"

const made: Array<string> = []
afterAll(() => {
  for (const dir of made.splice(0)) fs.rmSync(dir, { recursive: true, force: true })
})

const SECRET = "OUTSIDE-SECRET"

const setup = () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sj-cc-swap-"))
  made.push(dir)
  const source = path.join(dir, "projects")
  fs.mkdirSync(source)
  const tree = F.writeTree(source)
  // The same names outside the source, with other content.
  const outside = path.join(dir, "outside")
  const secretLines = F.bytesOf([JSON.stringify({ type: "user", message: { role: "user", content: SECRET } })])
  fs.mkdirSync(path.join(outside, F.PROJECT, F.SESSION, "subagents"), { recursive: true })
  fs.writeFileSync(path.join(outside, F.PROJECT, `${F.SESSION}.jsonl`), secretLines)
  fs.writeFileSync(path.join(outside, F.PROJECT, F.SESSION, "subagents", `agent-${F.AGENT}.jsonl`), secretLines)
  return { dir, source, tree, outside, journal: path.join(dir, "journal") }
}

const inJournal = <A, E>(root: string, program: Effect.Effect<A, E, SessionJournal.SessionJournal>) =>
  program.pipe(
    Effect.provide(SessionJournal.layer().pipe(Layer.provide(NodePersistence.layer({ root })))),
    Effect.scoped
  )

const main: SessionIds.Transcript = { _tag: "Main", project: F.PROJECT, session: F.SESSION }
const sub: SessionIds.Transcript = {
  _tag: "SubAgent",
  project: F.PROJECT,
  session: F.SESSION,
  stem: `agent-${F.AGENT}`,
  agentId: F.AGENT
}

// Whether any entry of any session holds the outside content.
const leaked = Effect.gen(function*() {
  const journal = yield* SessionJournal.SessionJournal
  for (const info of yield* journal.list) {
    const entries = yield* Stream.runCollect(journal.entries(info.id))
    if (entries.some((e) => JSON.stringify(e).includes(SECRET))) return true
  }
  return false
})

// Moves `real` away and puts a link to `target` in its place, and back (two renames each way).
const swap = (real: string, target: string) => {
  const aside = `${real}.real`
  const link = `${real}.link`
  fs.symlinkSync(target, link)
  return {
    swap: () => {
      fs.renameSync(real, aside)
      fs.renameSync(link, real)
    },
    back: () => {
      fs.renameSync(real, link)
      fs.renameSync(aside, real)
    }
  }
}

describe("a swapped directory", () => {
  for (const procfs of [true, false]) {
    it.live(`swapped between the walk and the read, at each level, is refused by its path; nothing outside is read (${procfs ? "/proc/self/fd" : "by path, checked"})`, () =>
      Effect.gen(function*() {
        if (!procfs) Source.useProcfs(false)
        yield* Effect.addFinalizer(() => Effect.sync(() => Source.useProcfs(undefined)))
        const { source, tree, outside, journal } = setup()
        yield* inJournal(
          journal,
          Effect.gen(function*() {
            const limits = Sync.DEFAULT_LIMITS
            // The project directory.
            const project = swap(tree.projectDir, path.join(outside, F.PROJECT))
            project.swap()
            const r1 = yield* Sync.syncFile(main, source, limits, undefined)
            assert.strictEqual(r1.report.status, "failed")
            assert.strictEqual(r1.report.reason, `${tree.projectDir}: refused: a symbolic link`)
            project.back()
            // The sub-agents directory of a session.
            const subagents = path.join(tree.projectDir, F.SESSION, "subagents")
            const nested = swap(subagents, path.join(outside, F.PROJECT, F.SESSION, "subagents"))
            nested.swap()
            const r2 = yield* Sync.syncFile(sub, source, limits, undefined)
            assert.strictEqual(r2.report.reason, `${subagents}: refused: a symbolic link`)
            // The main transcript beside it is still archived.
            const r3 = yield* Sync.syncFile(main, source, limits, undefined)
            assert.strictEqual(r3.report.status, "created")
            nested.back()
            // The source itself.
            const top = swap(source, outside)
            top.swap()
            const r4 = yield* Sync.syncFile(sub, source, limits, undefined)
            assert.strictEqual(r4.report.reason, `${source}: refused: a symbolic link`)
            top.back()
            assert.isFalse(yield* leaked)
            const r5 = yield* Sync.syncFile(sub, source, limits, undefined)
            assert.strictEqual(r5.report.status, "created")
          })
        )
      }))
  }

  it.live(
    "swapped back and forth by another process while archive runs: nothing outside is ever journaled",
    () =>
      Effect.gen(function*() {
        const { dir, source, tree, outside, journal } = setup()
        const levels: Array<[string, string]> = [[tree.projectDir, path.join(outside, F.PROJECT)], [source, outside]]
        for (const [real, target] of levels) {
          fs.rmSync(journal, { recursive: true, force: true })
          fs.symlinkSync(target, `${real}.link`)
          // Swaps as fast as it can until the stop file exists (at most 60 s), then leaves
          // the real directory in place.
          const stop = path.join(dir, "stop")
          const script = `
          const fs = require("node:fs")
          const [real, aside, link, stop] = process.argv.slice(1)
          const end = Date.now() + 60000
          while (Date.now() < end && !fs.existsSync(stop)) {
            fs.renameSync(real, aside); fs.renameSync(link, real)
            fs.renameSync(real, link); fs.renameSync(aside, real)
          }`
          const child = spawn(process.execPath, ["-e", script, real, `${real}.real`, `${real}.link`, stop], {
            stdio: "ignore"
          })
          const exited = new Promise<number | null>((resolve) => child.on("exit", resolve))
          const runs = yield* inJournal(
            journal,
            Effect.gen(function*() {
              let runs = 0
              let open = true
              void exited.then(() => {
                open = false
              })
              // At least 1.5 s and six archive runs against the swapping, however slow the
              // machine is (the swapper's own 60 s bound ends the loop if it is far too slow).
              const until = Date.now() + 1500
              while (open && (runs < 6 || Date.now() < until)) {
                // Mid-swap the source may be missing: that run fails as a whole.
                yield* Effect.ignore(Archive.archive({ source }))
                runs++
              }
              fs.writeFileSync(stop, "")
              assert.isFalse(yield* leaked, `a file outside the source was journaled (swapping ${real})`)
              return runs
            })
          )
          assert.strictEqual(yield* Effect.promise(() => exited), 0)
          assert.isAtLeast(runs, 6)
          fs.rmSync(stop)
          fs.rmSync(`${real}.link`)
        }
      }),
    { timeout: 150_000 }
  )
})
