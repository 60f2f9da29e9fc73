/**
 * The journal-backed `Chat.Persistence`: long conversations with tool calls survive a
 * restart unchanged and verify, each turn is one append whose size does not grow
 * with the conversation, guards block denied tool calls, and any prompt written is
 * read back equal.
 */
import { assert, describe, it } from "@effect/vitest"
import { Entry, Guard, Persistence, SessionJournal, SessionLocked } from "@session-journal/core"
import { NodePersistence } from "@session-journal/node"
import { Chat, Prompt } from "effect/ai"
import * as Arbitrary from "effect/Arbitrary"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import { Persistence as KvPersistence } from "effect/persistence"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { JournalChat } from "../src/index.ts"
import { type Calls, chats, type Counter, counting, inProcess, processLayer, Tools } from "./fixtures.ts"

/** In-memory storage that outlives a "process": every layer built from it sees the same data. */
const memory = Effect.map(Persistence.makeMemory(), (m) => Layer.succeed(Persistence.Persistence, m))

/**
 * The filesystem adapter over a fresh temporary directory (removed with the test's
 * scope): each layer built from it is a new adapter instance over the same files,
 * as after a process restart.
 */
const tempDir = Effect.acquireRelease(
  Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "sj-ai-"))),
  (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
)
const filesystem = Effect.map(tempDir, (dir) => NodePersistence.layer({ root: path.join(dir, "journal") }))

const freshCalls = (): Calls => ({ lookup: 0, wipe: 0 })

const encodePrompt = Schema.encodeUnknownSync(Prompt.Prompt)
const asJson = (value: unknown): unknown => JSON.parse(JSON.stringify(value))

const journalEntries = (id: string) =>
  Effect.gen(function*() {
    const journal = yield* SessionJournal.SessionJournal
    return yield* Stream.runCollect(journal.entries(id))
  })

describe("JournalChat", () => {
  it.live("a 50-turn conversation with tool calls survives a restart", () =>
    Effect.gen(function*() {
      const root = path.join(yield* tempDir, "journal")
      const store = NodePersistence.layer({ root })
      const counter: Counter = { bytes: 0, appends: 0 }
      const calls = freshCalls()
      const turnBytes: Array<number> = []
      const turnAppends: Array<number> = []

      const written = yield* inProcess(
        counting(store, counter),
        calls,
        Effect.gen(function*() {
          const chat = yield* (yield* chats).getOrCreate("chat-50")
          for (let i = 1; i <= 50; i++) {
            const bytes = counter.bytes
            const appends = counter.appends
            const response = yield* chat.generateText({ prompt: `turn ${i}`, toolkit: Tools })
            assert.strictEqual(response.toolResults.length, 1)
            turnBytes.push(counter.bytes - bytes)
            turnAppends.push(counter.appends - appends)
          }
          return yield* chat.export
        })
      )
      assert.strictEqual(calls.lookup, 50)
      // The conversation is on disk, as segment files of the session's directory.
      assert.isTrue(fs.readdirSync(path.join(root, "chat-50")).some((name) => name.endsWith(".jsonl")))
      // One durable append per turn, and its size does not depend on the turn number.
      assert.deepStrictEqual(turnAppends, Array.from({ length: 50 }, () => 1))
      assert.isAbove(turnBytes[1]!, 0)
      assert.isAtMost(turnBytes[49]!, 2 * turnBytes[1]!)

      // A new process over the same storage.
      const restartCalls = freshCalls()
      const after = yield* inProcess(
        store,
        restartCalls,
        Effect.gen(function*() {
          const chat = yield* (yield* chats).get("chat-50")
          const exported = yield* chat.export
          const journal = yield* SessionJournal.SessionJournal
          const report = yield* journal.verify("chat-50")
          const snapshot = yield* journal.snapshot("chat-50")
          const entries = yield* journalEntries("chat-50")
          const next = yield* chat.generateText({ prompt: "how many?" })
          return { exported, report, snapshot, entries, next }
        })
      )
      assert.deepStrictEqual(after.exported, written)
      const history = (written as Prompt.PromptEncoded).content
      assert.strictEqual(history.length, 150)
      assert.deepStrictEqual(history.slice(0, 3).map((m) => m.role), ["user", "assistant", "tool"])

      // Messages are stored verbatim, in order; one tool entry per call.
      const messages = after.entries.filter((e) => e.kind === JournalChat.MESSAGE_KIND) as Array<Entry.OtherEntry>
      assert.deepStrictEqual(messages.map((e) => e.payload), asJson(history))
      const tools = after.entries.filter(Entry.isTool)
      assert.strictEqual(tools.length, 50)
      for (const [i, entry] of tools.entries()) {
        assert.strictEqual(entry.tool_name, "lookup")
        assert.strictEqual(entry.server_id, "effect-ai")
        assert.strictEqual(entry.agent_id, "chat")
        assert.strictEqual(entry.allowed, true)
        assert.strictEqual(entry.bytes_read, JournalChat.jsonBytes({ query: `q${i + 1}` }))
        assert.strictEqual(entry.bytes_written, JournalChat.jsonBytes({ answer: `answer to q${i + 1}` }))
      }
      // 150 messages, 50 tool entries and the save entry that created the chat.
      assert.strictEqual(after.report.entriesChecked, 201)
      assert.strictEqual(after.snapshot.data_flow.total_invocations, 50n)
      assert.strictEqual(after.snapshot.tool_counts.get("lookup"), 50n)
      // The model saw the whole restored history plus the new question.
      assert.strictEqual(after.next.text, "I have seen 151 messages.")
      assert.strictEqual(restartCalls.lookup, 0)
    }))

  it.live("a denied tool call is recorded with allowed: false and not executed", () =>
    Effect.gen(function*() {
      const store = yield* filesystem
      const calls = freshCalls()
      const options = { guard: Guard.denyList(["wipe"]), agentId: "agent-7" }
      const result = yield* inProcess(
        store,
        calls,
        Effect.gen(function*() {
          const chat = yield* (yield* chats).getOrCreate("guarded")
          const denied = yield* chat.generateText({ prompt: "wipe /", toolkit: Tools })
          const allowed = yield* chat.generateText({ prompt: "turn 1", toolkit: Tools })
          const entries = yield* journalEntries("guarded")
          return { denied, allowed, entries }
        }),
        options
      )
      assert.strictEqual(calls.wipe, 0)
      assert.strictEqual(calls.lookup, 1)
      const [deniedResult] = result.denied.toolResults
      assert.strictEqual(deniedResult?.isFailure, true)
      assert.deepStrictEqual(deniedResult?.result, { type: "execution-denied", reason: "wipe is on the deny list" })
      assert.strictEqual(result.allowed.toolResults[0]?.isFailure, false)

      const tools = result.entries.filter(Entry.isTool)
      assert.deepStrictEqual(
        tools.map((e) => [e.tool_name, e.allowed, e.agent_id, e.bytes_read]),
        [
          ["wipe", false, "agent-7", JournalChat.jsonBytes({ path: "/" })],
          ["lookup", true, "agent-7", JournalChat.jsonBytes({ query: "q1" })]
        ]
      )

      // The model's view after a restart includes the denial.
      const history = yield* inProcess(
        store,
        freshCalls(),
        Effect.gen(function*() {
          const chat = yield* (yield* chats).get("guarded")
          return yield* Ref.get(chat.history)
        })
      )
      const toolMessage = history.content[2]
      assert.strictEqual(toolMessage?.role, "tool")
      const part = toolMessage?.role === "tool" ? toolMessage.content[0] : undefined
      assert.deepStrictEqual(part?.type === "tool-result" ? part.result : undefined, {
        type: "execution-denied",
        reason: "wipe is on the deny list"
      })
    }))

  it.live("guards see the calls before them (max invocations)", () =>
    Effect.gen(function*() {
      const store = yield* filesystem
      const calls = freshCalls()
      const entries = yield* inProcess(
        store,
        calls,
        Effect.gen(function*() {
          const chat = yield* (yield* chats).getOrCreate("limited")
          yield* chat.generateText({ prompt: "turn 1", toolkit: Tools })
          yield* chat.generateText({ prompt: "turn 2", toolkit: Tools })
          return yield* journalEntries("limited")
        }),
        { guard: Guard.maxInvocations(1) }
      )
      assert.strictEqual(calls.lookup, 1)
      assert.deepStrictEqual(entries.filter(Entry.isTool).map((e) => e.allowed), [true, false])
    }))

  it.live("streamText and generateObject turns are stored and read back", () =>
    Effect.gen(function*() {
      const store = yield* filesystem
      const calls = freshCalls()
      const written = yield* inProcess(
        store,
        calls,
        Effect.gen(function*() {
          const chat = yield* (yield* chats).getOrCreate("mixed")
          yield* chat.streamText({ prompt: "turn 1", toolkit: Tools }).pipe(Stream.runDrain)
          yield* chat.streamText({ prompt: "hello" }).pipe(Stream.runDrain)
          yield* chat.generateObject({
            prompt: "describe",
            schema: Schema.Struct({ text: Schema.String })
          }).pipe(Effect.exit)
          return yield* chat.export
        })
      )
      assert.strictEqual(calls.lookup, 1)
      const read = yield* inProcess(
        store,
        freshCalls(),
        Effect.gen(function*() {
          const chat = yield* (yield* chats).get("mixed")
          return { exported: yield* chat.export, tools: (yield* journalEntries("mixed")).filter(Entry.isTool) }
        })
      )
      assert.deepStrictEqual(read.exported, written)
      assert.strictEqual((written as Prompt.PromptEncoded).content[4]?.role, "assistant")
      assert.deepStrictEqual(read.tools.map((e) => e.tool_name), ["lookup"])
    }))

  it.live("a history changed in place is stored with a rewind, not rewritten", () =>
    Effect.gen(function*() {
      const store = yield* filesystem
      const written = yield* inProcess(
        store,
        freshCalls(),
        Effect.gen(function*() {
          const chat = yield* (yield* chats).getOrCreate("rewound")
          yield* chat.generateText({ prompt: "first" })
          yield* Ref.update(chat.history, (p) => Prompt.setSystem(p, "Be brief."))
          yield* chat.generateText({ prompt: "second" })
          return { exported: yield* chat.export, entries: yield* journalEntries("rewound") }
        })
      )
      assert.deepStrictEqual(written.entries.map((e) => e.kind), [
        JournalChat.SAVE_KIND,
        JournalChat.MESSAGE_KIND,
        JournalChat.MESSAGE_KIND,
        JournalChat.REWIND_KIND,
        JournalChat.MESSAGE_KIND,
        JournalChat.MESSAGE_KIND,
        JournalChat.MESSAGE_KIND,
        JournalChat.MESSAGE_KIND,
        JournalChat.MESSAGE_KIND
      ])
      const read = yield* inProcess(
        store,
        freshCalls(),
        Effect.flatMap(Effect.flatMap(chats, (c) => c.get("rewound")), (chat) => chat.export)
      )
      assert.deepStrictEqual(read, written.exported)
      assert.strictEqual((read as Prompt.PromptEncoded).content[0]?.role, "system")
    }))

  it.live("a turn that cannot be stored dies with the PersistenceError; the next save stores it", () =>
    Effect.gen(function*() {
      const store = yield* filesystem
      // Another process holds the session's writer guarantee.
      const holderScope = yield* Scope.make()
      const holder = yield* Layer.buildWithScope(processLayer(store, freshCalls()), holderScope)
      yield* Effect.provide(Effect.flatMap(chats, (c) => c.getOrCreate("held")), holder)
      // A write that is not a chat save keeps the session open, its lock held.
      yield* Effect.provide(Effect.flatMap(SessionJournal.SessionJournal, (j) => j.append("held", "note", {})), holder)

      const result = yield* inProcess(
        store,
        freshCalls(),
        Effect.gen(function*() {
          const chat = yield* (yield* chats).get("held")
          const failed = yield* Effect.exit(chat.generateText({ prompt: "hello" }))
          const kept = (yield* Ref.get(chat.history)).content.length
          yield* Scope.close(holderScope, Exit.void)
          yield* chat.save
          return { failed, kept, entries: yield* journalEntries("held") }
        }),
        { lockWait: "100 millis" }
      )
      assert.isTrue(Exit.isFailure(result.failed))
      const reason = Exit.isFailure(result.failed) ? result.failed.cause.reasons[0] : undefined
      const defect = reason !== undefined && reason._tag === "Die" ? reason.defect : undefined
      assert.instanceOf(defect, KvPersistence.PersistenceError)
      assert.strictEqual((defect as KvPersistence.PersistenceError).cause instanceof SessionLocked, true)
      assert.strictEqual(result.kept, 2)
      assert.deepStrictEqual(result.entries.map((e) => e.kind), [
        JournalChat.SAVE_KIND,
        "note",
        JournalChat.MESSAGE_KIND,
        JournalChat.MESSAGE_KIND
      ])
    }))

  it.live("a tool name the journal refuses is counted under a placeholder", () =>
    Effect.gen(function*() {
      const store = yield* memory
      const entries = yield* inProcess(
        store,
        freshCalls(),
        Effect.gen(function*() {
          const chat = yield* (yield* chats).getOrCreate("odd-name")
          yield* Ref.set(
            chat.history,
            Prompt.make([
              { role: "assistant", content: [{ type: "tool-call", id: "c1", name: " spaced ", params: { a: 1 } }] },
              {
                role: "tool",
                content: [{ type: "tool-result", id: "c1", name: " spaced ", isFailure: false, result: "ok" }]
              }
            ])
          )
          yield* chat.save
          return yield* journalEntries("odd-name")
        })
      )
      const tools = entries.filter(Entry.isTool)
      assert.deepStrictEqual(
        tools.map((e) => [e.tool_name, e.bytes_read, e.bytes_written]),
        [[JournalChat.INVALID_TOOL_NAME, JournalChat.jsonBytes({ a: 1 }), JournalChat.jsonBytes("ok")]]
      )
    }))

  it("a rewind whose keep is not a whole count, written by another writer, is skipped", () => {
    const at = (sequence: number, kind: string, payload: Schema.Json): Entry.Entry => ({
      sequence,
      prev_hash: Entry.ZERO_HASH,
      entry_hash: Entry.ZERO_HASH,
      timestamp_secs: 0,
      kind,
      payload
    })
    const messages = [{ role: "user", content: "a" }, { role: "user", content: "b" }, { role: "user", content: "c" }]
    const entries = [
      ...messages.map((m, i) => at(i, JournalChat.MESSAGE_KIND, m)),
      at(3, "message", { role: "user", content: "another writer's" }),
      at(4, JournalChat.REWIND_KIND, { keep: 1.5 }),
      at(5, JournalChat.REWIND_KIND, { keep: "1" }),
      at(6, JournalChat.REWIND_KIND, { keep: -1 }),
      at(7, JournalChat.REWIND_KIND, { keep: 1e300 })
    ]
    assert.deepStrictEqual(JournalChat.encodedHistory(entries), messages)
    assert.deepStrictEqual(
      JournalChat.encodedHistory([...entries, at(8, JournalChat.REWIND_KIND, { keep: 2 })]),
      messages.slice(0, 2)
    )
  })

  it.live("any string is a chat id; a missing chat is ChatNotFoundError", () =>
    Effect.gen(function*() {
      const store = yield* memory
      const { created, missing } = yield* inProcess(
        store,
        freshCalls(),
        Effect.gen(function*() {
          const service = yield* chats
          return {
            created: yield* Effect.exit(service.getOrCreate("not a session id")),
            missing: yield* Effect.exit(service.get("absent"))
          }
        })
      )
      assert.isTrue(Exit.isSuccess(created))
      assert.isTrue(Exit.isFailure(missing))
      const missed = Exit.isFailure(missing) ? missing.cause.reasons[0] : undefined
      assert.instanceOf(
        missed !== undefined && missed._tag === "Fail" ? missed.error : undefined,
        Chat.ChatNotFoundError
      )
    }))
})

// Strings with lone surrogates have no UTF-8 form, so the hash chain cannot store
// them; everything else a message can hold is JSON after encoding.
const wellFormed = (value: unknown): unknown =>
  typeof value === "string"
    ? value.replace(/\p{Cs}/gu, "?")
    : Array.isArray(value)
    ? value.map(wellFormed)
    : value !== null && typeof value === "object"
    ? Object.fromEntries(Object.entries(value).map(([k, v]) => [wellFormed(k) as string, wellFormed(v)]))
    : value

const decodeMessages = Schema.decodeUnknownSync(Schema.Array(Prompt.Message))
const encodeMessages = Schema.encodeUnknownSync(Schema.Array(Prompt.Message))

const Messages = Arbitrary.array(Arbitrary.schema(Prompt.Message), { maxLength: 6 }).pipe(
  Arbitrary.map((messages) => decodeMessages(wellFormed(asJson(encodeMessages(messages)))))
)

describe("JournalChat round trip", () => {
  let n = 0
  it.live.prop(
    "any prompt written is read back equal",
    { messages: Messages },
    ({ messages }) =>
      Effect.gen(function*() {
        const store = yield* memory
        const id = `prop-${n++}`
        const prompt = Prompt.fromMessages(messages)
        yield* inProcess(
          store,
          freshCalls(),
          Effect.gen(function*() {
            const chat = yield* (yield* chats).getOrCreate(id)
            yield* Ref.set(chat.history, prompt)
            yield* chat.save
          })
        )
        const read = yield* inProcess(
          store,
          freshCalls(),
          Effect.flatMap(Effect.flatMap(chats, (c) => c.get(id)), (chat) => Ref.get(chat.history))
        )
        assert.deepStrictEqual(encodePrompt(read), asJson(encodePrompt(prompt)))
      }),
    { arbitrary: { runs: 100 } }
  )
})
