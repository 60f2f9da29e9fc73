/**
 * Custody of rollout files on a real temp-dir source and journal: created, then
 * extended by what Codex appends (read incrementally by `follow`'s cache),
 * rewritten recorded as a divergence, moved away recorded as missing (once) and
 * back as reappeared, restored byte for byte (bytes that are not
 * UTF-8 and a last line without its newline included), a sub-agent's rollout
 * naming its parent's hooked session, and a symbolic link refused.
 */
import { assert, describe, it } from "@effect/vitest"
import { Archive } from "@session-journal/claude-code"
import { SessionJournal } from "@session-journal/core"
import { NodePersistence } from "@session-journal/node"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Queue from "effect/Queue"
import * as TestClock from "effect/testing/TestClock"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Hook from "../src/Hook.ts"
import * as Rollout from "../src/Rollout.ts"

const T1 = "01a248a4-0d7d-7593-af00-61f2370f3d89"
const T2 = "01a249aa-0000-7000-8000-000000000002"

const setup = () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sj-codex-rollout-"))
  const source = path.join(dir, "sessions")
  const day = path.join(source, "2026", "12", "05")
  fs.mkdirSync(day, { recursive: true })
  const layer = SessionJournal.layer().pipe(Layer.provide(NodePersistence.layer({ root: path.join(dir, "journal") })))
  return { dir, source, day, layer }
}

const meta = (id: string, parent?: string) =>
  JSON.stringify({
    timestamp: "2026-12-05T23:57:20.000Z",
    ordinal: 0,
    type: "session_meta",
    payload: {
      id,
      cwd: "/w",
      source: parent === undefined ? "exec" : { subagent: { thread_spawn: { parent_thread_id: parent, depth: 1 } } }
    }
  })

const line = (n: number) => JSON.stringify({ timestamp: "2026-12-05T23:57:21.000Z", ordinal: n, type: "event_msg" })

describe("Rollout", () => {
  it("names the thread of a rollout file, nothing else", () => {
    assert.strictEqual(Rollout.threadOf(`rollout-2026-12-05T23-57-20-${T1}.jsonl`), T1)
    assert.isNull(Rollout.threadOf(`rollout-2026-12-05T23-57-20-${T1}.json`))
    assert.isNull(Rollout.threadOf("notes.jsonl"))
  })

  it.live("archives, extends incrementally, records a rewrite, restores byte for byte", () => {
    const { day, dir, layer, source } = setup()
    const file = path.join(day, `rollout-2026-12-05T23-57-20-${T1}.jsonl`)
    const sub = path.join(day, `rollout-2026-12-05T23-58-00-${T2}.jsonl`)
    fs.writeFileSync(file, `${meta(T1)}\n${line(1)}\n`)
    fs.writeFileSync(sub, `${meta(T2, T1)}\n`)
    return Effect.gen(function*() {
      const first = yield* Rollout.archive({ source })
      assert.deepStrictEqual(first.files.map((f) => f.status), ["created", "created"])
      const session = Hook.rolloutSessionId(T1)
      const journal = yield* SessionJournal.SessionJournal
      const data = (yield* journal.state(session)).meta?.data as Record<string, unknown>
      assert.strictEqual(data["hooked_session"], Hook.sessionId(T1))
      const subData = (yield* journal.state(Hook.rolloutSessionId(T2))).meta?.data as Record<string, unknown>
      assert.strictEqual(subData["hooked_session"], Hook.sessionId(T1))
      assert.strictEqual(subData["parent_thread"], T1)

      // Codex appends; a pass with the cache reads only the new bytes.
      const cache = new Rollout.Cache()
      const limits = { maxFileBytes: 1 << 20, maxLineBytes: 1 << 16 }
      const loc = { root: source, parts: ["2026", "12", "05", path.basename(file)] }
      const a = yield* Rollout.syncRollout(loc, T1, limits, cache.resumes.get(file))
      assert.strictEqual(a.report.status, "unchanged")
      fs.appendFileSync(
        file,
        Buffer.concat([Buffer.from(`${line(2)}\n`), Buffer.from([0xff, 0xfe, 0x0a]), Buffer.from("tail")])
      )
      const b = yield* Rollout.syncRollout(loc, T1, limits, a.resume)
      assert.strictEqual(b.report.status, "extended")
      assert.strictEqual(b.report.incremental, true)
      assert.strictEqual(b.report.lines, 2)
      assert.strictEqual(b.report.pendingBytes, 4)
      fs.appendFileSync(file, "\n")
      const c = yield* Rollout.syncRollout(loc, T1, limits, b.resume)
      assert.strictEqual(c.report.lines, 1)
      assert.isTrue(Buffer.from(yield* Archive.restore(session)).equals(fs.readFileSync(file)))

      // Rewritten in place: a divergence, then the new content; restore gives the new file.
      fs.writeFileSync(file, `${meta(T1)}\n${line(9)}\n`)
      const d = yield* Rollout.syncRollout(loc, T1, limits, c.resume)
      assert.strictEqual(d.report.status, "diverged")
      assert.strictEqual(d.report.divergedAt, 2)
      assert.isTrue(Buffer.from(yield* Archive.restore(session)).equals(fs.readFileSync(file)))
    }).pipe(
      Effect.provide(layer),
      Effect.ensuring(Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true })))
    )
  })

  it.effect("follow reports only what changed, each pass after its interval, reading what was appended", () => {
    const { day, dir, layer, source } = setup()
    const file = path.join(day, `rollout-2026-12-05T23-57-20-${T1}.jsonl`)
    fs.writeFileSync(file, `${meta(T1)}\n`)
    return Effect.gen(function*() {
      const reports = yield* Queue.unbounded<Rollout.Report>()
      const fiber = yield* Effect.forkChild(Rollout.follow({ source }, (r) => Queue.offer(reports, r)))
      const first = yield* Queue.take(reports)
      assert.deepStrictEqual(first.files.map((f) => [f.status, f.lines]), [["created", 1]])
      fs.appendFileSync(file, `${line(1)}\n${line(2)}\n`)
      yield* TestClock.adjust("1 second")
      const second = yield* Queue.take(reports)
      assert.deepStrictEqual(second.files.map((f) => [f.status, f.lines, f.incremental]), [["extended", 2, true]])
      // A pass over an unchanged tree reports nothing.
      yield* TestClock.adjust("1 second")
      fs.appendFileSync(file, `${line(3)}\n`)
      yield* TestClock.adjust("1 second")
      const third = yield* Queue.take(reports)
      assert.deepStrictEqual(third.files.map((f) => [f.status, f.lines]), [["extended", 1]])
      yield* Fiber.interrupt(fiber)
      assert.isTrue(Buffer.from(yield* Archive.restore(Hook.rolloutSessionId(T1))).equals(fs.readFileSync(file)))
    }).pipe(
      Effect.provide(layer),
      Effect.ensuring(Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true })))
    )
  })

  it.live("records a rollout Codex moved away as missing, once, and as reappeared when it is back", () => {
    const { day, dir, layer, source } = setup()
    const file = path.join(day, `rollout-2026-12-05T23-57-20-${T1}.jsonl`)
    const away = path.join(dir, "archived.jsonl")
    fs.writeFileSync(file, `${meta(T1)}\n${line(1)}\n`)
    return Effect.gen(function*() {
      assert.deepStrictEqual((yield* Rollout.archive({ source })).files.map((f) => f.status), ["created"])
      fs.renameSync(file, away)
      const gone = yield* Rollout.archive({ source })
      assert.deepStrictEqual(gone.files.map((f) => [f.status, f.session]), [["missing", Hook.rolloutSessionId(T1)]])
      assert.deepStrictEqual((yield* Rollout.archive({ source })).files, [])
      fs.renameSync(away, file)
      assert.deepStrictEqual((yield* Rollout.archive({ source })).files.map((f) => f.status), ["reappeared"])
      assert.isTrue(Buffer.from(yield* Archive.restore(Hook.rolloutSessionId(T1))).equals(fs.readFileSync(file)))
    }).pipe(
      Effect.provide(layer),
      Effect.ensuring(Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true })))
    )
  })

  it.live("refuses a rollout that is a symbolic link", () => {
    const { day, dir, layer, source } = setup()
    const outside = path.join(dir, "secret.jsonl")
    fs.writeFileSync(outside, `${meta(T1)}\n`)
    fs.symlinkSync(outside, path.join(day, `rollout-2026-12-05T23-57-20-${T1}.jsonl`))
    return Effect.gen(function*() {
      const report = yield* Rollout.archive({ source })
      assert.deepStrictEqual(report.files, [])
      assert.strictEqual(report.refused.length, 1)
      assert.include(report.refused[0]!.reason, "symbolic link")
    }).pipe(
      Effect.provide(layer),
      Effect.ensuring(Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true })))
    )
  })
})
