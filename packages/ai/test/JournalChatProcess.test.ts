/**
 * The restart of the 50-turn conversation as a real new process: a child process
 * writes the chat on the filesystem adapter and exits; this process reads it back
 * over the same directory and finds the same history, every tool entry and a
 * chain that verifies to the head the writer saw.
 */
import { assert, describe, it } from "@effect/vitest"
import { Entry, SessionJournal } from "@session-journal/core"
import { NodePersistence } from "@session-journal/node"
import type { Prompt } from "effect/ai"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { JournalChat } from "../src/index.ts"
import { chats, inProcess } from "./fixtures.ts"

/** What the writer process prints: the exported history, the session head and the handler calls. */
interface Written {
  readonly history: Prompt.PromptEncoded
  readonly head: string
  readonly lookups: number
}

const tempDir = Effect.acquireRelease(
  Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "sj-ai-proc-"))),
  (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
)

// Runs fixtures/chat50.ts with the Node running the tests and parses its one line
// of output; a non-zero exit fails the test with the child's stderr.
const runWriter = (root: string) =>
  Effect.callback<Written, Error>((resume) => {
    execFile(
      process.execPath,
      [path.join(import.meta.dirname, "fixtures", "chat50.ts"), root],
      { env: { ...process.env, NODE_COMPILE_CACHE: path.join(os.tmpdir(), "sj-node-compile-cache") } },
      (error, stdout, stderr) => {
        if (error !== null) resume(Effect.fail(new Error(`writer failed: ${error.message}\n${stderr}`)))
        else resume(Effect.sync(() => JSON.parse(stdout) as Written))
      }
    )
  })

const asJson = (value: unknown): unknown => JSON.parse(JSON.stringify(value))

describe("JournalChat across processes", () => {
  it.live(
    "a 50-turn conversation written by another process is read back identical and verifies",
    () =>
      Effect.gen(function*() {
        const root = path.join(yield* tempDir, "journal")
        const written = yield* runWriter(root)
        assert.strictEqual(written.lookups, 50)
        assert.strictEqual(written.history.content.length, 150)
        assert.match(written.head, /^[0-9a-f]{64}$/)

        const calls = { lookup: 0, wipe: 0 }
        const read = yield* inProcess(
          NodePersistence.layer({ root }),
          calls,
          Effect.gen(function*() {
            const chat = yield* (yield* chats).get("chat-50")
            const journal = yield* SessionJournal.SessionJournal
            return {
              exported: yield* chat.export,
              report: yield* journal.verify("chat-50"),
              entries: yield* Stream.runCollect(journal.entries("chat-50"))
            }
          })
        )
        assert.deepStrictEqual(asJson(read.exported), written.history)
        assert.strictEqual(read.report.head, written.head)
        assert.strictEqual(read.report.entriesChecked, 201)

        const messages = read.entries.filter((e) => e.kind === JournalChat.MESSAGE_KIND) as Array<Entry.OtherEntry>
        assert.deepStrictEqual(messages.map((e) => e.payload), asJson(written.history.content))
        const tools = read.entries.filter(Entry.isTool)
        assert.strictEqual(tools.length, 50)
        for (const [i, entry] of tools.entries()) {
          assert.strictEqual(entry.tool_name, "lookup")
          assert.strictEqual(entry.allowed, true)
          assert.strictEqual(entry.bytes_read, JournalChat.jsonBytes({ query: `q${i + 1}` }))
          assert.strictEqual(entry.bytes_written, JournalChat.jsonBytes({ answer: `answer to q${i + 1}` }))
        }
        // Reading back runs no tool.
        assert.strictEqual(calls.lookup, 0)
      }),
    30_000
  )
})
