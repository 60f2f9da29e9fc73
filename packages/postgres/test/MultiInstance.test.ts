/**
 * Several application instances, each a separate process with its own pool, on one
 * PostgreSQL: two write the same session concurrently, a third follows it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Entry, SessionJournal } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { type ChildProcess, spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { afterAll } from "vitest"
import { PgPersistence } from "../src/index.ts"
import { adminLayer, freshPrefix, skipReason, url } from "./pg.ts"

const prefix = freshPrefix("multi")
const stress = process.env["STRESS"] === "1"
const perWriter = stress ? 5000 : 200

interface Child {
  readonly proc: ChildProcess
  readonly lines: Array<string>
  readonly stderr: Array<string>
  readonly exited: Promise<number | null>
  readonly waitFor: (text: string) => Promise<void>
}

const fixture = (name: string) => fileURLToPath(new URL(`./fixtures/${name}.ts`, import.meta.url))

const start = (name: string, args: ReadonlyArray<string>): Child => {
  const proc = spawn(process.execPath, [fixture(name), ...args], { stdio: ["pipe", "pipe", "pipe"] })
  const lines: Array<string> = []
  const stderr: Array<string> = []
  const waiting: Array<{ readonly text: string; readonly resolve: () => void }> = []
  let buffer = ""
  proc.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
    buffer += chunk
    let nl: number
    while ((nl = buffer.indexOf("\n")) >= 0) {
      const text = buffer.slice(0, nl)
      buffer = buffer.slice(nl + 1)
      lines.push(text)
      for (const w of waiting.filter((w) => w.text === text)) w.resolve()
    }
  })
  proc.stderr!.setEncoding("utf8").on("data", (chunk: string) => stderr.push(chunk))
  const exited = new Promise<number | null>((resolve) => proc.on("exit", (code) => resolve(code)))
  const waitFor = (text: string) =>
    lines.includes(text)
      ? Promise.resolve()
      : Promise.race([
        new Promise<void>((resolve) => waiting.push({ text, resolve })),
        exited.then((code) => {
          throw new Error(`${name} exited with ${code} before "${text}": ${stderr.join("")}`)
        })
      ])
  return { proc, lines, stderr, exited, waitFor }
}

const Live = SessionJournal.layer().pipe(
  Layer.provideMerge(PgPersistence.layerFromUrl(url, { tablePrefix: prefix, applicationName: "sj-test-parent" }))
)

describe.skipIf(skipReason !== null)("postgres: many instances", () => {
  afterAll(() => Effect.runPromise(PgPersistence.dropTables(prefix).pipe(Effect.provide(adminLayer()))))

  it.live(
    `two writer processes, ${perWriter} records each, interleave into one chain; a third process follows it`,
    () =>
      Effect.gen(function*() {
        const id = `multi-${Date.now().toString(36)}`
        const journal = yield* SessionJournal.SessionJournal
        // The session exists (with metadata only) before anyone follows it.
        yield* journal.setMeta(id, { title: "shared by two instances" })
        yield* journal.close(id)

        const follower = start("follower", [url, prefix, id, String(2 * perWriter)])
        const writers = ["a", "b"].map((label) =>
          start("writer", [url, prefix, id, label, String(perWriter), "16", "8"])
        )
        yield* Effect.promise(() => Promise.all([follower, ...writers].map((c) => c.waitFor("ready"))))
        for (const w of writers) w.proc.stdin!.write("go\n")
        // Both write their first halves, and only then their second halves, so the
        // chain switches between them at least once in each half whatever the
        // scheduling: neither half can be one writer's alone.
        yield* Effect.promise(() => Promise.all(writers.map((c) => c.waitFor("half"))))
        for (const w of writers) w.proc.stdin!.write("go\n")
        const codes = yield* Effect.promise(() => Promise.all([...writers, follower].map((c) => c.exited)))
        assert.deepStrictEqual(codes, [0, 0, 0], [...writers, follower].map((c) => c.stderr.join("")).join("\n"))

        const stored = yield* journal.entries(id).pipe(Stream.runCollect)
        const tools = stored.filter(Entry.isTool)
        assert.strictEqual(tools.length, stored.length)
        assert.strictEqual(stored.length, 2 * perWriter)
        assert.deepStrictEqual(stored.map((e) => e.sequence), Array.from({ length: 2 * perWriter }, (_, i) => i))
        const hashAt = new Map(stored.map((e) => [e.sequence, e.entry_hash]))

        // No caller was told "ok" for an entry that is not stored.
        for (const [i, w] of writers.entries()) {
          const acks = w.lines.filter((l) => l.startsWith("ack ")).map((l) => l.split(" "))
          assert.strictEqual(acks.length, perWriter)
          for (const [, seq, hash] of acks) {
            assert.strictEqual(hashAt.get(Number(seq)), hash, `ack ${seq} of writer ${i}`)
          }
          const label = ["a", "b"][i]!
          const mine = tools.filter((e) => e.agent_id === label)
          assert.strictEqual(mine.length, perWriter)
          assert.deepStrictEqual(
            mine.map((e) => e.bytes_read).sort((x, y) => x - y),
            Array.from({ length: perWriter }, (_, n) => n)
          )
        }
        // The two instances interleaved: each half of the chain holds records of both.
        const runs = tools.reduce((n, e, i) => (i > 0 && e.agent_id !== tools[i - 1]!.agent_id ? n + 1 : n), 0)
        assert.isAtLeast(runs, 2)
        const firstHalf = tools.slice(0, 2 * Math.floor(perWriter / 2))
        assert.deepStrictEqual(new Set(firstHalf.map((e) => e.agent_id)), new Set(["a", "b"]))

        const report = yield* journal.verify(id)
        assert.strictEqual(report.entriesChecked, 2 * perWriter)
        assert.strictEqual(report.nextSequence, 2 * perWriter)

        const got = follower.lines.filter((l) => l.startsWith("got ")).map((l) => l.split(" "))
        assert.deepStrictEqual(got.map(([, seq]) => Number(seq)), stored.map((e) => e.sequence))
        assert.deepStrictEqual(got.map(([, , hash]) => hash), stored.map((e) => e.entry_hash))

        // With the service's default of 8 retries, no caller saw a lost race: the
        // loser keeps the row lock while it reloads, so its retry cannot lose again.
        const failed = writers.map((w) => w.lines.filter((l) => l.startsWith("err ")))
        assert.deepStrictEqual(failed, [[], []])
        console.log(`multi-instance: ${2 * perWriter} entries, ${runs} switches between writers`)
      }).pipe(Effect.provide(Live)),
    { timeout: stress ? 600_000 : 120_000 }
  )
})
