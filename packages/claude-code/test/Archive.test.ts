/**
 * Archiving realistic transcripts into journals on the filesystem adapter: the
 * journal gives back every transcript byte for byte, counts one tool entry per
 * tool_use, links a sub-agent to the parent's Task entry, extends a grown
 * transcript, records a rewrite as a divergence without losing anything,
 * records a disappearance, refuses symbolic links and survives an overlong line.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Entry, JournalState, SessionJournal } from "@session-journal/core"
import { NodePersistence } from "@session-journal/node"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/testing/TestClock"
import * as fc from "fast-check"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Archive, Hook, Planner, SessionIds } from "../src/index.ts"
import * as F from "./Fixtures.ts"

const SEED = Number(process.env["SEED"] ?? Math.floor(Math.random() * 2 ** 31))

const made: Array<string> = []
afterAll(() => {
  for (const dir of made.splice(0)) fs.rmSync(dir, { recursive: true, force: true })
})

const setup = () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sj-cc-"))
  made.push(dir)
  const source = path.join(dir, "projects")
  fs.mkdirSync(source)
  const tree = F.writeTree(source)
  const journal = path.join(dir, "journal")
  return { dir, source, tree, journal }
}

const inJournal = <A, E>(
  root: string,
  program: Effect.Effect<A, E, SessionJournal.SessionJournal>,
  options?: SessionJournal.Options
) =>
  program.pipe(
    Effect.provide(SessionJournal.layer(options).pipe(Layer.provide(NodePersistence.layer({ root })))),
    Effect.scoped
  )

const mainId = SessionIds.sessionId({ _tag: "Main", project: F.PROJECT, session: F.SESSION })
const subId = SessionIds.sessionId({
  _tag: "SubAgent",
  project: F.PROJECT,
  session: F.SESSION,
  stem: `agent-${F.AGENT}`,
  agentId: F.AGENT
})

const entriesOf = (id: string) =>
  Effect.gen(function*() {
    const journal = yield* SessionJournal.SessionJournal
    return yield* Stream.runCollect(journal.entries(id))
  })

const toolCounts = (id: string) =>
  Effect.gen(function*() {
    const journal = yield* SessionJournal.SessionJournal
    const snapshot = yield* journal.snapshot(id)
    return Object.fromEntries(Array.from(snapshot.tool_counts, ([k, v]) => [k, Number(v)]))
  })

const payloadOf = (e: Entry.Entry): unknown => (Entry.isTool(e) ? undefined : e.payload)

const restored = (id: string) => Effect.map(Archive.restore(id), (b) => Buffer.from(b))

const statuses = (report: Archive.Report) => Object.fromEntries(report.files.map((f) => [f.session, f.status]))

describe("Archive", () => {
  it.live("journals a tree byte for byte, one tool entry per tool_use, the sub-agent linked to its Task entry", () =>
    Effect.gen(function*() {
      const { source, tree, journal } = setup()
      yield* inJournal(
        journal,
        Effect.gen(function*() {
          const report = yield* Archive.archive({ source })
          assert.deepStrictEqual(statuses(report), { [mainId]: "created", [subId]: "created" })
          assert.deepStrictEqual(report.refused, [])
          assert.isTrue(Buffer.from(yield* restored(mainId)).equals(fs.readFileSync(tree.main)))
          assert.isTrue(Buffer.from(yield* restored(subId)).equals(fs.readFileSync(tree.sub)))
          assert.deepStrictEqual(yield* toolCounts(mainId), F.mainTools())
          assert.deepStrictEqual(yield* toolCounts(subId), { ...F.subTools })

          const j = yield* SessionJournal.SessionJournal
          const main = yield* entriesOf(mainId)
          const lines = main.filter((e) => e.kind === Planner.LINE_KIND)
          assert.strictEqual(lines.length, F.mainLines().length + 1) // and the line that is not UTF-8
          // Each tool entry directly follows the lines up to the one holding its result.
          const bash = main.find((e): e is Entry.ToolEntry => Entry.isTool(e) && e.tool_name === "Bash")!
          const before = main[bash.sequence - 1]!
          assert.include(JSON.stringify(payloadOf(before)), "toolu_b0")
          assert.strictEqual(bash.agent_id, "main")
          assert.strictEqual(bash.delegation_depth, 0)
          assert.strictEqual(
            bash.bytes_written,
            Buffer.byteLength(JSON.stringify({ command: "pnpm test cart", description: "Run the cart tests" }))
          )
          assert.strictEqual(
            bash.bytes_read,
            Buffer.byteLength(JSON.stringify([{ type: "text", text: "PASS src/cart.test.ts (0)" }]))
          )
          const mcp = main.find((e): e is Entry.ToolEntry =>
            Entry.isTool(e) && e.tool_name === "mcp__github__create_issue"
          )!
          assert.strictEqual(mcp.server_id, "github")
          assert.strictEqual(mcp.bytes_read, Buffer.byteLength("https://github.com/acme/shop/issues/12"))

          const sub = yield* entriesOf(subId)
          const subTool = sub.find(Entry.isTool)!
          assert.strictEqual(subTool.agent_id, F.AGENT)
          assert.strictEqual(subTool.delegation_depth, 1)

          const meta = (yield* j.state(subId)).meta!.data as Record<string, unknown>
          assert.strictEqual(meta["parent_session"], mainId)
          assert.strictEqual(meta["parent_tool_use_id"], "toolu_task")
          assert.strictEqual(meta["source"], tree.sub)
          const ref = meta["parent_entry"] as { sequence: number; entry_hash: string }
          const spawned = main[ref.sequence]!
          assert.strictEqual(spawned.entry_hash, ref.entry_hash)
          assert.include(JSON.stringify(payloadOf(spawned)), "\\\"name\\\":\\\"Task\\\"")
          const mainMeta = (yield* j.state(mainId)).meta!.data as Record<string, unknown>
          assert.deepStrictEqual(
            [mainMeta["project"], mainMeta["claude_session_id"], mainMeta["transcript"]],
            [F.PROJECT, F.SESSION, "main"]
          )
          // Both name the live hooked session of their Claude Code session, as its hooks derive it.
          const hooked = Hook.sessionId({
            session_id: F.SESSION,
            cwd: F.CWD,
            hook_event_name: "PreToolUse",
            transcript_path: path.join(source, F.PROJECT, `${F.SESSION}.jsonl`)
          })
          assert.match(hooked, /^cch-/)
          assert.strictEqual(mainMeta["hooked_session"], hooked)
          assert.strictEqual(meta["hooked_session"], hooked)
          assert.strictEqual(
            Hook.custodySessionId({ session_id: F.SESSION, cwd: F.CWD, hook_event_name: "Stop" }),
            mainId
          )
          assert.strictEqual((yield* j.verify(mainId)).entriesChecked, main.length)

          // A second run finds nothing to do.
          const again = yield* Archive.archive({ source })
          assert.deepStrictEqual(statuses(again), { [mainId]: "unchanged", [subId]: "unchanged" })
          assert.strictEqual((yield* entriesOf(mainId)).length, main.length)
        })
      )
    }))

  it.live("a grown transcript is extended; an unterminated last line waits for its newline", () =>
    Effect.gen(function*() {
      const { source, tree, journal } = setup()
      yield* inJournal(
        journal,
        Effect.gen(function*() {
          yield* Archive.archive({ source })
          const before = (yield* entriesOf(mainId)).length
          fs.appendFileSync(tree.main, F.mainTurn(7).join("\n") + "\n{\"type\":\"user\",\"mess")
          const grown = yield* Archive.archive({ source })
          const file = grown.files.find((f) => f.session === mainId)!
          assert.strictEqual(file.status, "extended")
          assert.strictEqual(file.lines, 10)
          assert.strictEqual(file.tools, 3)
          assert.strictEqual(file.pendingBytes, "{\"type\":\"user\",\"mess".length)
          assert.strictEqual((yield* entriesOf(mainId)).length, before + 13)
          fs.appendFileSync(tree.main, "age\":{}}\n")
          const done = yield* Archive.archive({ source })
          assert.strictEqual(done.files.find((f) => f.session === mainId)!.lines, 1)
          assert.isTrue((yield* restored(mainId)).equals(fs.readFileSync(tree.main)))
          const counts = yield* toolCounts(mainId)
          assert.strictEqual(counts["Bash"], 3)
        })
      )
    }))

  it.live("rewrite, compaction and truncation are divergences; every version stays on the chain", () =>
    Effect.gen(function*() {
      const { source, tree, journal } = setup()
      yield* inJournal(
        journal,
        Effect.gen(function*() {
          yield* Archive.archive({ source })
          // The file's own lines, byte for byte (latin1 maps each byte to one character).
          const original = fs.readFileSync(tree.main).toString("latin1").split("\n").slice(0, -1)
          const write = (lines: ReadonlyArray<string>) =>
            fs.writeFileSync(tree.main, Buffer.from(lines.map((l) => l + "\n").join(""), "latin1"))
          const firstCount = (yield* entriesOf(mainId)).filter((e) => e.kind === Planner.LINE_KIND).length
          assert.strictEqual(firstCount, original.length)
          // Line 4 edited: a divergence at line 4, then lines 4… again.
          const edited = [...original]
          edited[3] = edited[3]!.replace("Turn 0", "Turn zero")
          assert.notStrictEqual(edited[3], original[3])
          write(edited)
          const report = yield* Archive.archive({ source })
          const file = report.files.find((f) => f.session === mainId)!
          assert.strictEqual(file.status, "diverged")
          assert.strictEqual(file.divergedAt, 4)
          assert.strictEqual(file.lines, edited.length - 3)
          assert.isTrue((yield* restored(mainId)).equals(fs.readFileSync(tree.main)))
          // The calls of the rewritten part were recorded before: not again.
          assert.strictEqual(file.tools, 0)
          assert.deepStrictEqual(yield* toolCounts(mainId), F.mainTools())
          const entries = yield* entriesOf(mainId)
          const divergence = entries.find((e) => e.kind === Planner.DIVERGENCE_KIND)!
          assert.deepStrictEqual(payloadOf(divergence), {
            line: 4,
            journaled_lines: firstCount,
            file_lines: edited.length,
            reason: "changed"
          })
          // The old line 4 is still on the chain, before the divergence.
          const oldLine4 = entries.find((e) => e.kind === Planner.LINE_KIND && (payloadOf(e) as { n: number }).n === 4)!
          assert.strictEqual(
            (payloadOf(oldLine4) as { line: string }).line,
            Buffer.from(original[3]!, "latin1").toString("utf8")
          )
          assert.isBelow(oldLine4.sequence, divergence.sequence)

          // Truncated: a divergence naming the first line the file no longer has.
          write(edited.slice(0, 2))
          const cut = (yield* Archive.archive({ source })).files.find((f) => f.session === mainId)!
          assert.strictEqual(cut.status, "diverged")
          assert.strictEqual(cut.divergedAt, 3)
          assert.isTrue((yield* restored(mainId)).equals(fs.readFileSync(tree.main)))
          // A new call after the rewrite is recorded.
          fs.appendFileSync(tree.main, F.mainTurn(5).join("\n") + "\n")
          const grown = (yield* Archive.archive({ source })).files.find((f) => f.session === mainId)!
          assert.deepStrictEqual([grown.status, grown.tools], ["extended", 3])
          assert.strictEqual((yield* toolCounts(mainId))["Bash"], 3)
          const j = yield* SessionJournal.SessionJournal
          yield* j.verify(mainId)
        })
      )
    }))

  it.live("follow with an interval or rescan that is no duration fails with a StorageError naming it", () =>
    Effect.gen(function*() {
      const { source, journal } = setup()
      const bad: ReadonlyArray<{ readonly interval?: Duration.Input; readonly rescan?: Duration.Input }> = [
        { interval: "soon" as Duration.Input },
        { interval: -1 },
        { rescan: Number.NaN }
      ]
      for (const options of bad) {
        const error = yield* inJournal(journal, Effect.flip(Archive.follow({ source, ...options }, () => Effect.void)))
        assert.deepStrictEqual(
          error._tag === "StorageError" && error.reason._tag === "InvalidOption"
            ? [error.operation, error.reason.option]
            : error.message,
          ["configure", Object.keys(options)[0]!]
        )
      }
    }))

  it.live("follow journals new lines within a second, records a deletion, and leaves unchanged files alone", () =>
    Effect.gen(function*() {
      const { source, tree, journal } = setup()
      yield* inJournal(
        journal,
        Effect.gen(function*() {
          const passes: Array<Archive.Report> = []
          const fiber = yield* Effect.forkChild(
            Archive.follow({ source }, (r) => Effect.sync(() => void passes.push(r)))
          )
          const waitFor = (p: () => boolean) =>
            Effect.gen(function*() {
              const t0 = Date.now()
              while (!p()) {
                if (Date.now() - t0 > 5_000) return yield* Effect.die(new Error("timed out"))
                yield* Effect.sleep("10 millis")
              }
              return Date.now() - t0
            })
          yield* waitFor(() => passes.length >= 1)
          assert.deepStrictEqual(statuses(passes[0]!), { [mainId]: "created", [subId]: "created" })
          fs.appendFileSync(tree.main, F.mainTurn(3).join("\n") + "\n")
          const took = yield* waitFor(() => passes.some((r) => r.files.some((f) => f.status === "extended")))
          assert.isBelow(took, 1000)
          const extended = passes.flatMap((r) => r.files).filter((f) => f.status === "extended")
          assert.deepStrictEqual(extended.map((f) => [f.session, f.lines, f.tools]), [[mainId, 10, 3]])
          fs.rmSync(tree.sub)
          yield* waitFor(() => passes.some((r) => r.files.some((f) => f.status === "missing")))
          // A new transcript is picked up.
          const other = path.join(tree.projectDir, "0a6afc57-2f31-4cb4-8ff0-01247f50c64c.jsonl")
          fs.writeFileSync(other, F.bytesOf(F.mainTurn(0)))
          yield* waitFor(() => passes.some((r) => r.files.some((f) => f.path === other && f.status === "created")))
          yield* Fiber.interrupt(fiber)
          // Unchanged files were never reported again.
          assert.strictEqual(passes.flatMap((r) => r.files).length, 5)
          assert.isTrue((yield* restored(mainId)).equals(fs.readFileSync(tree.main)))
        })
      )
    }))

  it.live(
    "follow walks a new session's directories as they appear, and refuses a project directory swapped for a link",
    () =>
      Effect.gen(function*() {
        const { dir, source, tree, journal } = setup()
        yield* inJournal(
          journal,
          Effect.gen(function*() {
            const passes: Array<Archive.Report> = []
            const fiber = yield* Effect.forkChild(
              Archive.follow({ source }, (r) => Effect.sync(() => void passes.push(r)))
            )
            const waitFor = (p: () => boolean) =>
              Effect.gen(function*() {
                const t0 = Date.now()
                while (!p()) {
                  if (Date.now() - t0 > 10_000) return yield* Effect.die(new Error("timed out"))
                  yield* Effect.sleep("10 millis")
                }
              })
            const files = () => passes.flatMap((r) => r.files)
            yield* waitFor(() => passes.length >= 1)
            // A new project, a new session in it, then its sub-agent directory, each appearing after the last.
            const project = path.join(source, "-home-dev-other")
            const session = "0a6afc57-2f31-4cb4-8ff0-01247f50c64c"
            fs.mkdirSync(project)
            yield* Effect.sleep("300 millis")
            fs.writeFileSync(path.join(project, `${session}.jsonl`), F.bytesOf(F.mainLines()))
            yield* waitFor(() =>
              files().some((f) => f.path === path.join(project, `${session}.jsonl`) && f.status === "created")
            )
            fs.mkdirSync(path.join(project, session))
            yield* Effect.sleep("300 millis")
            fs.mkdirSync(path.join(project, session, "subagents"))
            yield* Effect.sleep("300 millis")
            const sub = path.join(project, session, "subagents", `agent-${F.AGENT}.jsonl`)
            fs.writeFileSync(sub, F.bytesOf(F.subLines()))
            yield* waitFor(() => files().some((f) => f.path === sub && f.status === "created"))
            const subSession = files().find((f) => f.path === sub)!.session
            const j = yield* SessionJournal.SessionJournal
            const meta = (yield* j.state(subSession)).meta!.data as Record<string, unknown>
            assert.notStrictEqual(meta["parent_entry"], null)
            // The first project swapped for a link to a copy of it elsewhere: refused by its path; the other goes on.
            const outside = path.join(dir, "outside")
            fs.cpSync(tree.projectDir, outside, { recursive: true })
            fs.appendFileSync(path.join(outside, `${F.SESSION}.jsonl`), "{\"type\":\"user\",\"outside\":true}\n")
            fs.renameSync(tree.projectDir, `${tree.projectDir}.real`)
            fs.symlinkSync(outside, tree.projectDir)
            fs.appendFileSync(path.join(project, `${session}.jsonl`), "{\"type\":\"system\"}\n")
            yield* waitFor(() => passes.some((r) => r.refused.some((x) => x.path === tree.projectDir)))
            yield* waitFor(() =>
              files().some((f) => f.path === path.join(project, `${session}.jsonl`) && f.status === "extended")
            )
            yield* Effect.sleep("500 millis")
            yield* Fiber.interrupt(fiber)
            const main = yield* entriesOf(mainId)
            assert.isFalse(main.some((e) => JSON.stringify(e).includes("outside")))
          })
        )
      }),
    { timeout: 30_000 }
  )

  it.live("a sub-agent whose spawning call is not journaled yet is linked by a later run", () =>
    Effect.gen(function*() {
      const { source, tree, journal } = setup()
      const full = fs.readFileSync(tree.main)
      // The parent without its last lines: the Task call is not there yet.
      const cut = full.subarray(0, full.indexOf(Buffer.from("\"toolu_task\"")))
      fs.writeFileSync(tree.main, cut.subarray(0, cut.lastIndexOf(0x0a) + 1))
      yield* inJournal(
        journal,
        Effect.gen(function*() {
          const j = yield* SessionJournal.SessionJournal
          yield* Archive.archive({ source })
          const before = (yield* j.state(subId)).meta!.data as Record<string, unknown>
          assert.deepStrictEqual([before["parent_session"], before["parent_entry"]], [mainId, null])
          fs.writeFileSync(tree.main, full)
          const report = yield* Archive.archive({ source })
          assert.deepStrictEqual(statuses(report), { [mainId]: "extended", [subId]: "unchanged" })
          const after = (yield* j.state(subId)).meta!.data as Record<string, unknown>
          const ref = after["parent_entry"] as { sequence: number; entry_hash: string }
          const main = yield* entriesOf(mainId)
          assert.strictEqual(main[ref.sequence]!.entry_hash, ref.entry_hash)
          assert.include(JSON.stringify(payloadOf(main[ref.sequence]!)), "toolu_task")
          // A run in which the parent fails (here: it is above a tiny file bound) keeps the link.
          const failing = yield* Archive.archive({ source, limits: { maxFileBytes: 10 } })
          assert.strictEqual(failing.files.find((f) => f.session === mainId)!.status, "failed")
          const kept = (yield* j.state(subId)).meta!.data as Record<string, unknown>
          assert.deepStrictEqual(kept["parent_entry"], ref)
          // Lines above a smaller line bound are compared by size and hash: not taken for a rewrite.
          const smaller = yield* Archive.archive({ source, limits: { maxLineBytes: 10 } })
          assert.deepStrictEqual(statuses(smaller), { [mainId]: "unchanged", [subId]: "unchanged" })
          for (const id of [mainId, subId]) {
            assert.isFalse((yield* entriesOf(id)).some((e) => e.kind === Planner.DIVERGENCE_KIND))
          }
        })
      )
    }))

  it.live("a transcript that disappeared is recorded once, and its return too", () =>
    Effect.gen(function*() {
      const { source, tree, journal } = setup()
      yield* inJournal(
        journal,
        Effect.gen(function*() {
          yield* Archive.archive({ source })
          const bytes = fs.readFileSync(tree.sub)
          fs.rmSync(tree.sub)
          const gone = yield* Archive.archive({ source })
          assert.strictEqual(gone.files.find((f) => f.session === subId)!.status, "missing")
          const again = yield* Archive.archive({ source })
          assert.isUndefined(again.files.find((f) => f.session === subId))
          const entries = yield* entriesOf(subId)
          assert.strictEqual(entries.filter((e) => e.kind === Planner.MISSING_KIND).length, 1)
          fs.writeFileSync(tree.sub, bytes)
          const back = yield* Archive.archive({ source })
          assert.strictEqual(back.files.find((f) => f.session === subId)!.status, "reappeared")
          assert.isTrue((yield* restored(subId)).equals(bytes))
        })
      )
    }))

  it.live("with no entries in memory (window budget 0) a disappeared transcript is read from storage: recorded once, with its line count", () =>
    Effect.gen(function*() {
      const { source, tree, journal } = setup()
      yield* inJournal(
        journal,
        Effect.gen(function*() {
          yield* Archive.archive({ source })
          const lines = (yield* entriesOf(mainId)).filter((e) => e.kind === Planner.LINE_KIND).length
          assert.deepStrictEqual(JournalState.entries(yield* (yield* SessionJournal.SessionJournal).state(mainId)), [])
          fs.rmSync(tree.main)
          const gone = yield* Archive.archive({ source })
          assert.strictEqual(gone.files.find((f) => f.session === mainId)!.status, "missing")
          const again = yield* Archive.archive({ source })
          assert.isUndefined(again.files.find((f) => f.session === mainId))
          const missing = (yield* entriesOf(mainId)).filter((e) => e.kind === Planner.MISSING_KIND)
          assert.strictEqual(missing.length, 1)
          assert.strictEqual((payloadOf(missing[0]!) as { journaled_lines: number }).journaled_lines, lines)
        }),
        { windowBytes: 0 }
      )
    }))

  it.live("symbolic links under the source are refused and reported; the rest is archived", () =>
    Effect.gen(function*() {
      const { dir, source, tree, journal } = setup()
      const outside = path.join(dir, "outside")
      fs.mkdirSync(outside)
      fs.writeFileSync(path.join(outside, "secret.jsonl"), "{\"type\":\"user\"}\n")
      fs.symlinkSync(
        path.join(outside, "secret.jsonl"),
        path.join(tree.projectDir, "11111111-1111-4111-8111-111111111111.jsonl")
      )
      fs.symlinkSync(outside, path.join(source, "-linked-project"))
      fs.symlinkSync(outside, path.join(tree.projectDir, F.SESSION, "subagents", "nested"))
      // Group-writable files (a umask of 002) are Claude Code's as well: archived.
      fs.chmodSync(tree.main, 0o664)
      fs.chmodSync(tree.projectDir, 0o775)
      yield* inJournal(
        journal,
        Effect.gen(function*() {
          const report = yield* Archive.archive({ source })
          assert.deepStrictEqual(report.refused.map((r) => path.relative(source, r.path)).sort(), [
            `${F.PROJECT}/11111111-1111-4111-8111-111111111111.jsonl`,
            `${F.PROJECT}/${F.SESSION}/subagents/nested`,
            "-linked-project"
          ])
          assert.isTrue(report.refused.every((r) => r.reason.includes("symbolic link")))
          assert.deepStrictEqual(statuses(report), { [mainId]: "created", [subId]: "created" })
          const j = yield* SessionJournal.SessionJournal
          assert.strictEqual((yield* j.list).length, 2)
        })
      )
      // A source that is itself a link is refused as a whole.
      const linkedSource = path.join(dir, "linked-source")
      fs.symlinkSync(source, linkedSource)
      const failed = yield* inJournal(journal, Effect.flip(Archive.archive({ source: linkedSource })))
      assert.strictEqual(failed._tag, "SourceError")
    }))

  it.live("--project archives only the directory of that working directory", () =>
    Effect.gen(function*() {
      const { source, journal } = setup()
      fs.mkdirSync(path.join(source, "-home-dev-other"))
      fs.writeFileSync(path.join(source, "-home-dev-other", "22222222-2222-4222-8222-222222222222.jsonl"), "{}\n")
      yield* inJournal(
        journal,
        Effect.gen(function*() {
          const report = yield* Archive.archive({ source, project: F.CWD })
          assert.deepStrictEqual(Object.keys(statuses(report)).sort(), [mainId, subId].sort())
          const other = yield* Archive.archive({ source, project: "/home/dev/other" })
          assert.strictEqual(other.files.length, 1)
        })
      )
    }))

  it.live("a line above the bound is journaled as a marker (its size and SHA-256) and custody goes on after it", () =>
    Effect.gen(function*() {
      const { source, tree, journal } = setup()
      const big = "{\"type\":\"user\",\"pad\":\"" + "y".repeat(4096) + "\"}"
      fs.appendFileSync(tree.main, big + "\n{\"type\":\"system\"}\n")
      yield* inJournal(
        journal,
        Effect.gen(function*() {
          const report = yield* Archive.archive({ source, limits: { maxLineBytes: 2048 } })
          const main = report.files.find((f) => f.session === mainId)!
          assert.strictEqual(main.status, "created")
          assert.strictEqual(main.oversized, 1)
          assert.strictEqual(report.files.find((f) => f.session === subId)!.status, "created")
          const entries = yield* entriesOf(mainId)
          const lines = entries.filter(Planner.isLineEntry)
          const n = F.mainLines().length + 2 // and the line that is not UTF-8
          assert.strictEqual(lines.length, n + 1)
          const marker = lines[n - 1]!
          assert.strictEqual(marker.kind, Planner.OVERSIZED_KIND)
          assert.deepStrictEqual(payloadOf(marker), {
            n,
            bytes: Buffer.byteLength(big),
            sha256: createHash("sha256").update(big).digest("hex")
          })
          assert.deepStrictEqual(payloadOf(lines[n]!), { n: n + 1, line: "{\"type\":\"system\"}" })
          // Custody goes on: a later line is journaled after it.
          fs.appendFileSync(tree.main, "{\"type\":\"user\"}\n")
          const grown = (yield* Archive.archive({ source, limits: { maxLineBytes: 2048 } })).files.find((f) =>
            f.session === mainId
          )!
          assert.deepStrictEqual([grown.status, grown.lines], ["extended", 1])
          // Under a larger bound the line is the same one (by size and hash): no rewrite.
          const again = (yield* Archive.archive({ source })).files.find((f) => f.session === mainId)!
          assert.strictEqual(again.status, "unchanged")
          assert.isFalse((yield* entriesOf(mainId)).some((e) => e.kind === Planner.DIVERGENCE_KIND))
          // Its bytes are not kept: the transcript cannot be given back byte for byte, and says so.
          const lost = yield* Effect.flip(Archive.restore(mainId))
          assert.strictEqual(lost._tag, "StorageError")
          assert.include(lost.message, `line ${n} was above the line bound`)
          const j = yield* SessionJournal.SessionJournal
          yield* j.verify(mainId)
        })
      )
    }))

  it.live("a 100 MiB line is a marker, not a crash, and the line after it is journaled", () =>
    Effect.gen(function*() {
      const { source, tree, journal } = setup()
      const fd = fs.openSync(tree.main, "a")
      const chunk = Buffer.alloc(1024 * 1024, 0x61)
      for (let i = 0; i < 100; i++) fs.writeSync(fd, chunk)
      fs.writeSync(fd, "\n{\"type\":\"system\"}\n")
      fs.closeSync(fd)
      yield* inJournal(
        journal,
        Effect.gen(function*() {
          const report = yield* Archive.archive({ source })
          const main = report.files.find((f) => f.session === mainId)!
          assert.strictEqual(main.status, "created")
          assert.strictEqual(main.oversized, 1)
          assert.strictEqual(report.files.find((f) => f.session === subId)!.status, "created")
          const lines = (yield* entriesOf(mainId)).filter(Planner.isLineEntry)
          assert.deepStrictEqual((payloadOf(lines[lines.length - 2]!) as { bytes: number }).bytes, 100 * 1024 * 1024)
          assert.deepStrictEqual(
            (payloadOf(lines[lines.length - 1]!) as { line: string }).line,
            "{\"type\":\"system\"}"
          )
        })
      )
    }), { timeout: 60_000 })

  let resumed = 0
  it.live(
    `resumed reads journal what one full archive of the final file does (seed ${SEED})`,
    () =>
      Effect.promise(() =>
        fc.assert(
          fc.asyncProperty(
            // Lines from realistic turns (tool uses and results), some above a small line bound, cut anywhere.
            fc.integer({ min: 1, max: 30 }),
            fc.array(fc.nat(29), { maxLength: 4 }),
            fc.array(fc.nat(40_000), { minLength: 1, maxLength: 12 }),
            async (count, long, at) => {
              const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sj-cc-resume-"))
              made.push(dir)
              const source = path.join(dir, "projects")
              const file = path.join(source, F.PROJECT, `${F.SESSION}.jsonl`)
              fs.mkdirSync(path.dirname(file), { recursive: true })
              fs.writeFileSync(file, "")
              const pool = [...F.mainTurn(1), ...F.mainTurn(2), ...F.mainTurn(3)]
              const limits = { maxLineBytes: 2_000 }
              const stream = Buffer.from(
                pool.slice(0, count).map((line, i) => (long.includes(i) ? line + "z".repeat(2_000) : line) + "\n").join(
                  ""
                )
              )
              const cuts = at.map((n) => n % (stream.length + 1)).sort((a, b) => a - b)
              const linesOf = (root: string) =>
                inJournal(
                  root,
                  Effect.gen(function*() {
                    const entries = yield* entriesOf(mainId)
                    return entries.map((e) => [e.kind, Entry.isTool(e) ? e.tool_name : JSON.stringify(e.payload)])
                  })
                )
              const cache = new Archive.Cache()
              await Effect.runPromise(inJournal(
                path.join(dir, "followed"),
                Effect.gen(function*() {
                  let at = 0
                  for (const cut of [...cuts, stream.length]) {
                    fs.appendFileSync(file, stream.subarray(at, cut))
                    at = cut
                    const report = yield* Archive.archive({ source, limits }, cache)
                    resumed += report.files.filter((f) => f.incremental === true).length
                  }
                })
              ))
              await Effect.runPromise(inJournal(path.join(dir, "whole"), Archive.archive({ source, limits })))
              const followed = await Effect.runPromise(linesOf(path.join(dir, "followed")))
              const whole = await Effect.runPromise(linesOf(path.join(dir, "whole")))
              assert.deepStrictEqual(followed, whole)
            }
          ),
          { seed: SEED, numRuns: process.env["STRESS"] === "1" ? 200 : 15 }
        ).then(() => assert.isAbove(resumed, 0))
      ),
    { timeout: 120_000 }
  )

  it.effect("with a cache, a file that failed is left alone for 5 s of the fiber's clock, then looked at again", () =>
    Effect.gen(function*() {
      const { source, journal } = setup()
      yield* inJournal(
        journal,
        Effect.gen(function*() {
          const cache = new Archive.Cache()
          // Above a tiny file bound, the transcript fails every time it is read.
          const pass = Archive.archive({ source, limits: { maxFileBytes: 10 } }, cache)
          assert.strictEqual(statuses(yield* pass)[mainId], "failed")
          assert.isUndefined(statuses(yield* pass)[mainId])
          yield* TestClock.adjust("4999 millis")
          assert.isUndefined(statuses(yield* pass)[mainId])
          yield* TestClock.adjust("1 millis")
          assert.strictEqual(statuses(yield* pass)[mainId], "failed")
          assert.isUndefined(statuses(yield* pass)[mainId])
        })
      )
    }))

  it.live("the journaled state is the chio snapshot of the session", () =>
    Effect.gen(function*() {
      const { source, journal } = setup()
      yield* inJournal(
        journal,
        Effect.gen(function*() {
          yield* Archive.archive({ source })
          const j = yield* SessionJournal.SessionJournal
          const state = yield* j.state(subId)
          const snap = JournalState.snapshot(state)
          assert.strictEqual(Number(snap.data_flow.max_delegation_depth), 1)
          assert.strictEqual(Number(snap.data_flow.total_invocations), 2)
        })
      )
    }))
})
