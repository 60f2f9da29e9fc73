/**
 * Where `JournalChat` used to differ from `Chat.layerPersisted`, one test each:
 * the message id stamp, time to live, chat ids of any form, errors and retries, a
 * second process continuing a chat, two chat objects for one id, lone
 * surrogates, store ids, repeated tool-call ids, and guarded turns.
 */
import { assert, describe, it } from "@effect/vitest"
import { Entry, Guard, SessionJournal } from "@session-journal/core"
import { Chat, LanguageModel, Prompt, type Response, Tool, Toolkit } from "effect/ai"
import * as Cause from "effect/Cause"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import { Persistence as KvPersistence } from "effect/persistence"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { TestClock } from "effect/testing"
import { ChatStore, JournalChat } from "../src/index.ts"
import { type Counter, counting } from "./fixtures.ts"
import { answering, constantIds, filesystem, memory, type Store } from "./stores.ts"

const hello = answering([{ type: "text", text: "hi" }])

const entriesOf = (store: Store, chatId: string) =>
  Effect.gen(function*() {
    const journal = yield* SessionJournal.SessionJournal
    return yield* Stream.runCollect(journal.entries(ChatStore.sessionIdOf(chatId)))
  }).pipe(Effect.provide(store.journal!, { local: true }))

const textsOf = (prompt: Prompt.Prompt | undefined) =>
  (prompt?.content ?? []).map((m) =>
    typeof m.content === "string" ? m.content : m.content.map((p) => p.type === "text" ? p.text : p.type).join("")
  )

const failureOf = <A, E>(exit: Exit.Exit<A, E>): unknown => {
  if (Exit.isSuccess(exit)) return undefined
  const reason = exit.cause.reasons[0]
  return reason?._tag === "Fail" ? reason.error : reason?._tag === "Die" ? reason.defect : undefined
}

describe("JournalChat as Chat.layerPersisted", () => {
  it.effect("1. new messages carry the message id stamp", () =>
    Effect.gen(function*() {
      const store = yield* memory.make()
      const history = yield* Effect.gen(function*() {
        const chat = yield* (yield* Chat.Persistence).getOrCreate("stamped")
        yield* chat.generateText({ prompt: "hello" }).pipe(Effect.provide(hello))
        return yield* Ref.get(chat.history)
      }).pipe(Effect.provide(store.chats), Effect.provide(constantIds("msg_1")))
      for (const message of history.content) {
        assert.deepStrictEqual(message.options[Chat.Persistence.key], { messageId: "msg_1" })
      }
      assert.deepStrictEqual(yield* store.stored("stamped"), history)
    }))

  it.effect("2. time to live: expiry is ChatNotFoundError, a save restarts it, the chain keeps everything", () =>
    Effect.gen(function*() {
      const store = yield* filesystem.make()
      const use = <A, E>(effect: Effect.Effect<A, E, Chat.Persistence>) => Effect.provide(effect, store.chats)
      yield* use(Effect.gen(function*() {
        const chat = yield* (yield* Chat.Persistence).getOrCreate("ttl", { timeToLive: "10 days" })
        yield* chat.generateText({ prompt: "first" }).pipe(Effect.provide(hello))
      }))
      yield* TestClock.adjust("6 days")
      yield* use(Effect.gen(function*() {
        const chat = yield* (yield* Chat.Persistence).get("ttl", { timeToLive: "10 days" })
        yield* chat.generateText({ prompt: "second" }).pipe(Effect.provide(hello))
      }))
      // 12 days after the first save, 6 after the last one: still there.
      yield* TestClock.adjust("6 days")
      assert.deepStrictEqual(textsOf(yield* store.stored("ttl")), ["first", "hi", "second", "hi"])
      yield* TestClock.adjust("4 days")
      const gone = yield* use(Effect.flip(Effect.flatMap(Chat.Persistence, (p) => p.get("ttl"))))
      assert.instanceOf(gone, Chat.ChatNotFoundError)
      // getOrCreate starts an empty chat; the expired history stays on the chain.
      const fresh = yield* use(
        Effect.flatMap(Effect.flatMap(Chat.Persistence, (p) => p.getOrCreate("ttl")), (c) => Ref.get(c.history))
      )
      assert.strictEqual(fresh.content.length, 0)
      const entries = yield* entriesOf(store, "ttl")
      const kinds = ChatStore.kindsOf("chat")
      assert.strictEqual(entries.filter((e) => e.kind === kinds.message).length, 4)
      const rewinds = entries.filter((e) => e.kind === kinds.rewind) as Array<Entry.OtherEntry>
      assert.deepStrictEqual(rewinds.map((e) => e.payload), [{ keep: 0 }])
      assert.deepStrictEqual(textsOf(yield* store.stored("ttl")), [])
      // Without a time to live the chat no longer expires.
      yield* TestClock.adjust("100 days")
      assert.isDefined(yield* store.stored("ttl"))
    }))

  it.effect("3. any string is a chat id, mapped to its own valid session id", () =>
    Effect.gen(function*() {
      const store = yield* filesystem.make()
      const ids = ["user:42/chat", "a.b", "ünï", "x".repeat(200), "plain-id", "\uD800", "\uFFFD"]
      yield* Effect.gen(function*() {
        const chats = yield* Chat.Persistence
        for (const id of ids) {
          const chat = yield* chats.getOrCreate(id)
          yield* chat.generateText({ prompt: `for ${id}` }).pipe(Effect.provide(hello))
        }
        const missing = yield* Effect.flip(chats.get("no/such chat"))
        assert.instanceOf(missing, Chat.ChatNotFoundError)
      }).pipe(Effect.provide(store.chats))
      for (const id of ids) assert.deepStrictEqual(textsOf(yield* store.stored(id)), [`for ${id}`, "hi"])
      const sessions = ids.map(ChatStore.sessionIdOf)
      assert.strictEqual(new Set(sessions).size, ids.length)
      for (const sid of sessions) assert.isTrue(Entry.isSessionId(sid))
      assert.strictEqual(ChatStore.sessionIdOf("plain-id"), "plain-id")
      // A literal id of the mapped form is mapped as well, so it cannot take a mapped chat's place.
      assert.notStrictEqual(ChatStore.sessionIdOf(sessions[0]!), sessions[0])
      const meta = yield* Effect.flatMap(SessionJournal.SessionJournal, (j) => j.state(sessions[0]!)).pipe(
        Effect.provide(store.journal!, { local: true })
      )
      assert.strictEqual(meta.meta?.title, "user:42/chat")
    }))

  it.live("4. a failed save after a turn dies with the PersistenceError; its typed cause is inspectable; no duplicate on retry", () =>
    Effect.gen(function*() {
      // A save waits this long for the session's writer lock before it fails.
      const store = yield* filesystem.make({ lockWait: "100 millis" })
      let modelCalls = 0
      const counted = Layer.effect(
        LanguageModel.LanguageModel,
        LanguageModel.make({
          generateText: () => Effect.sync(() => (modelCalls++, [{ type: "text", text: "hi" } as const])),
          streamText: () => Stream.empty
        })
      )
      yield* Effect.gen(function*() {
        yield* (yield* Chat.Persistence).getOrCreate("held")
      }).pipe(Effect.provide(store.chats))
      // Another process writes to the session and keeps it open (its writer lock held).
      const holderScope = yield* Scope.make()
      const holder = yield* Layer.buildWithScope(store.journal!, holderScope)
      yield* Effect.flatMap(SessionJournal.SessionJournal, (j) => j.append("held", "other.kind", {})).pipe(
        Effect.provide(holder)
      )

      const result = yield* Effect.gen(function*() {
        const chat = yield* (yield* Chat.Persistence).get("held")
        const turn = yield* Effect.exit(Effect.retry(chat.generateText({ prompt: "hello" }), { times: 3 }))
        const saved = yield* Effect.exit(chat.save)
        yield* Scope.close(holderScope, Exit.void)
        yield* chat.save
        return { turn, saved }
      }).pipe(Effect.provide(store.chats), Effect.provide(counted))

      assert.isTrue(Exit.isFailure(result.turn) && Cause.hasDies(result.turn.cause))
      const defect = failureOf(result.turn)
      assert.instanceOf(defect, KvPersistence.PersistenceError)
      assert.strictEqual((defect as KvPersistence.PersistenceError).cause instanceof Error, true)
      assert.strictEqual(
        ((defect as KvPersistence.PersistenceError).cause as { readonly _tag?: string })._tag,
        "SessionLocked"
      )
      const failed = failureOf(result.saved)
      assert.instanceOf(failed, KvPersistence.PersistenceError)
      assert.strictEqual(
        ((failed as KvPersistence.PersistenceError).cause as { readonly _tag?: string })._tag,
        "SessionLocked"
      )
      assert.strictEqual(modelCalls, 1)
      assert.deepStrictEqual(textsOf(yield* store.stored("held")), ["hello", "hi"])
    }))

  it.live("5. a second process continues a chat while the first one is still running", () =>
    Effect.gen(function*() {
      const store = yield* filesystem.make()
      const first = yield* Layer.build(store.chats)
      const second = yield* Layer.build(store.journal!)
      const turn = (text: string) => (chat: Chat.Persisted) =>
        chat.generateText({ prompt: text }).pipe(Effect.provide(hello))
      const a = yield* Effect.flatMap(Chat.Persistence, (p) => p.getOrCreate("shared")).pipe(Effect.provide(first))
      yield* turn("from a")(a)
      const b = yield* Effect.flatMap(Chat.Persistence, (p) => p.get("shared")).pipe(Effect.provide(second))
      yield* turn("from b")(b)
      const c = yield* Effect.flatMap(Chat.Persistence, (p) => p.get("shared")).pipe(Effect.provide(first))
      yield* turn("from a again")(c)
      assert.deepStrictEqual(textsOf(yield* store.stored("shared")), [
        "from a",
        "hi",
        "from b",
        "hi",
        "from a again",
        "hi"
      ])
    }))

  it.effect("6. two chat objects for one id: the last save stores its own view, appended, nothing rewritten", () =>
    Effect.gen(function*() {
      const store = yield* memory.make()
      const entries = yield* Effect.gen(function*() {
        const chats = yield* Chat.Persistence
        const one = yield* chats.getOrCreate("twice")
        const two = yield* chats.get("twice")
        yield* one.generateText({ prompt: "one" }).pipe(Effect.provide(hello))
        yield* two.generateText({ prompt: "two" }).pipe(Effect.provide(hello))
        assert.deepStrictEqual(textsOf(yield* store.stored("twice")), ["two", "hi"])
        yield* one.generateText({ prompt: "three" }).pipe(Effect.provide(hello))
        assert.deepStrictEqual(textsOf(yield* store.stored("twice")), ["one", "hi", "three", "hi"])
        const journal = yield* SessionJournal.SessionJournal
        const report = yield* journal.verify("twice")
        return { report, entries: yield* Stream.runCollect(journal.entries("twice")) }
      }).pipe(Effect.provide(store.journal!))
      const kinds = ChatStore.kindsOf("chat")
      assert.deepStrictEqual(entries.entries.map((e) => e.kind), [
        kinds.save,
        kinds.message,
        kinds.message,
        kinds.rewind,
        kinds.message,
        kinds.message,
        kinds.rewind,
        kinds.message,
        kinds.message,
        kinds.message,
        kinds.message
      ])
      assert.strictEqual(entries.report.entriesChecked, 11)
    }))

  it.effect("7. a lone surrogate is stored and read back as it was", () =>
    Effect.gen(function*() {
      const store = yield* filesystem.make()
      const odd = "half \uD83D of a pair, \uDE00 the other"
      yield* Effect.gen(function*() {
        const chat = yield* (yield* Chat.Persistence).getOrCreate("surrogates")
        yield* chat.generateText({ prompt: odd }).pipe(Effect.provide(hello))
      }).pipe(Effect.provide(store.chats))
      assert.deepStrictEqual(textsOf(yield* store.stored("surrogates")), [odd, "hi"])
    }))

  it.effect("8. store ids namespace chats; other writers' entries cannot break a chat; a session never saved as a chat is not found", () =>
    Effect.gen(function*() {
      const store = yield* memory.make()
      const other = yield* Effect.map(
        Effect.succeed(store.storage!),
        (storage) =>
          JournalChat.layer({ storeId: "other store" }).pipe(
            Layer.provide(SessionJournal.layer().pipe(Layer.provide(storage)))
          )
      )
      yield* Effect.gen(function*() {
        const chat = yield* (yield* Chat.Persistence).getOrCreate("ns")
        yield* chat.generateText({ prompt: "in chat" }).pipe(Effect.provide(hello))
        const journal = yield* SessionJournal.SessionJournal
        // What `session-journal append ns --payload …` writes, and tool calls of someone else.
        yield* journal.append("ns", "message", { not: "a prompt message" })
        yield* journal.record("tool-only", {
          tool_name: "t",
          server_id: "s",
          agent_id: "a",
          bytes_read: 1,
          bytes_written: 1,
          delegation_depth: 0,
          allowed: true
        })
        yield* journal.append("plain", "message", { role: "user", content: "hello" })
      }).pipe(Effect.provide(store.journal!))
      const elsewhere = yield* Effect.gen(function*() {
        const chats = yield* Chat.Persistence
        const missing = yield* Effect.flip(chats.get("ns"))
        const chat = yield* chats.getOrCreate("ns")
        yield* chat.generateText({ prompt: "in other" }).pipe(Effect.provide(hello))
        return missing
      }).pipe(Effect.provide(other))
      assert.instanceOf(elsewhere, Chat.ChatNotFoundError)
      assert.deepStrictEqual(textsOf(yield* store.stored("ns")), ["in chat", "hi"])
      assert.isUndefined(yield* store.stored("tool-only"))
      assert.isUndefined(yield* store.stored("plain"))
    }))

  const Echo = Tool.make("echo", { parameters: Schema.Struct({ text: Schema.String }), success: Schema.String })
  const EchoKit = Toolkit.make(Echo)
  const echoHandlers = EchoKit.toLayer({ echo: ({ text }) => Effect.succeed(`echo: ${text}`) })
  // A provider that numbers its tool calls per response: every turn calls `call_0`.
  const reusingIds = Layer.effect(
    LanguageModel.LanguageModel,
    LanguageModel.make({
      generateText: ({ prompt }) =>
        Effect.succeed(
          prompt.content[prompt.content.length - 1]?.role === "user"
            ? [{ type: "tool-call", id: "call_0", name: "echo", params: { text: `t${prompt.content.length}` } }]
            : [{ type: "text", text: "done" }] satisfies Array<Response.PartEncoded>
        ),
      streamText: () => Stream.empty
    })
  )

  it.effect("9. a provider reusing tool-call ids still gets one tool entry per call", () =>
    Effect.gen(function*() {
      const store = yield* memory.make()
      yield* Effect.gen(function*() {
        const chat = yield* (yield* Chat.Persistence).getOrCreate("reuse")
        for (let i = 0; i < 3; i++) yield* chat.generateText({ prompt: `turn ${i}`, toolkit: EchoKit })
      }).pipe(Effect.provide(store.chats), Effect.provide(reusingIds), Effect.provide(echoHandlers))
      const tools = (yield* entriesOf(store, "reuse")).filter(Entry.isTool)
      assert.deepStrictEqual(
        tools.map((e) => e.bytes_read),
        [1, 4, 7].map((n) => JournalChat.jsonBytes({ text: `t${n}` }))
      )
    }))

  it.effect("10. a guarded turn: sizes from the encoded params and result, the entry after its message, at most two appends", () =>
    Effect.gen(function*() {
      const store = yield* memory.make()
      const counter: Counter = { bytes: 0, appends: 0 }
      const result = JournalChat.jsonBytes("echo: t1")
      const chats = JournalChat.layer({ guard: Guard.maxBytesWritten(result - 1) }).pipe(
        Layer.provideMerge(SessionJournal.layer().pipe(Layer.provide(counting(store.storage!, counter))))
      )
      const appends: Array<number> = []
      const entries = yield* Effect.gen(function*() {
        const chat = yield* (yield* Chat.Persistence).getOrCreate("guarded")
        for (let i = 0; i < 2; i++) {
          const before = counter.appends
          yield* chat.generateText({ prompt: `turn ${i}`, toolkit: EchoKit })
          appends.push(counter.appends - before)
        }
        return yield* Stream.runCollect((yield* SessionJournal.SessionJournal).entries("guarded"))
      }).pipe(Effect.provide(chats), Effect.provide(reusingIds), Effect.provide(echoHandlers))
      for (const n of appends) assert.isAtMost(n, 2)
      // A message entry is shown by its role, a tool entry as "tool entry".
      const shape = entries.map((e) =>
        Entry.isTool(e)
          ? "tool entry"
          : e.kind === JournalChat.MESSAGE_KIND
          ? (e.payload as { readonly role: string }).role
          : e.kind
      )
      assert.deepStrictEqual(shape, [
        JournalChat.SAVE_KIND,
        "user",
        "assistant",
        "tool",
        "tool entry",
        "user",
        "assistant",
        "tool",
        "tool entry"
      ])
      const tools = entries.filter(Entry.isTool)
      assert.deepStrictEqual(tools.map((e) => [e.allowed, e.bytes_read, e.bytes_written]), [
        [true, JournalChat.jsonBytes({ text: "t1" }), result],
        // The first call used up the budget: maxBytesWritten denies the next one.
        [false, JournalChat.jsonBytes({ text: "t4" }), 0]
      ])
    }))
})

describe("JournalChat interval options", () => {
  const invalidOption = (e: unknown): unknown => {
    const cause = e instanceof KvPersistence.PersistenceError ? e.cause : e
    return typeof cause === "object" && cause !== null && "_tag" in cause && cause._tag === "StorageError" &&
        "reason" in cause && typeof cause.reason === "object" && cause.reason !== null && "option" in cause.reason
      ? cause.reason.option
      : String(e)
  }

  it.effect("a bad releaseAfter or lockWait fails the layer with a StorageError naming it", () =>
    Effect.gen(function*() {
      for (const options of [{ releaseAfter: "soon" as const }, { lockWait: -1 }] as const) {
        const store = yield* memory.make(options as JournalChat.Options)
        const exit = yield* Effect.exit(Effect.scoped(Layer.build(store.chats)))
        assert.strictEqual(invalidOption(failureOf(exit)), Object.keys(options)[0])
      }
    }))

  it.effect("a bad timeToLive fails get and getOrCreate with a PersistenceError naming it, not a chat that never expires", () =>
    Effect.gen(function*() {
      const store = yield* memory.make()
      for (const timeToLive of ["a while", -1, Number.NaN] as const) {
        const ttl = { timeToLive: timeToLive as Duration.Input }
        const created = yield* Effect.exit(
          Effect.flatMap(Chat.Persistence, (p) => p.getOrCreate("ttl-bad", ttl)).pipe(Effect.provide(store.chats))
        )
        assert.strictEqual(invalidOption(failureOf(created)), "timeToLive", String(timeToLive))
        const got = yield* Effect.exit(
          Effect.flatMap(Chat.Persistence, (p) => p.get("ttl-bad", ttl)).pipe(Effect.provide(store.chats))
        )
        assert.strictEqual(invalidOption(failureOf(got)), "timeToLive", String(timeToLive))
      }
    }))
})
