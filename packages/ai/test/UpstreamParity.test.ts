/**
 * The persistence scenarios of effect's own `Chat` tests, written again here and
 * run on `Chat.layerPersisted` and on `JournalChat` over each adapter: the same
 * inputs, the same expected histories and errors.
 */
import { assert, describe, it } from "@effect/vitest"
import { Chat, Prompt } from "effect/ai"
import * as Effect from "effect/Effect"
import * as Ref from "effect/Ref"
import { TestClock } from "effect/testing"
import {
  answering,
  constantIds,
  filesystem,
  memory,
  pgAvailable,
  postgres,
  type StoreKind,
  upstream
} from "./stores.ts"

const kinds: ReadonlyArray<StoreKind> = [upstream, memory, filesystem, ...(pgAvailable ? [postgres] : [])]

const stamp = (messageId: string) => ({ [Chat.Persistence.key]: { messageId } })

for (const kind of kinds) {
  describe(`Chat persistence on ${kind.name}`, () => {
    it.effect("a turn is stored with the generated message id on both of its messages", () =>
      Effect.gen(function*() {
        const store = yield* kind.make()
        const history = yield* Effect.gen(function*() {
          const chat = yield* (yield* Chat.Persistence).getOrCreate("1")
          yield* chat.generateText({ prompt: "hello there" }).pipe(
            Effect.provide(answering([{ type: "text", text: "general kenobi" }]))
          )
          return yield* Ref.get(chat.history)
        }).pipe(Effect.provide(store.chats))
        const options = stamp("msg_fixed_1")
        const expected = Prompt.make([
          { role: "user", content: [{ type: "text", text: "hello there" }], options },
          { role: "assistant", content: [{ type: "text", text: "general kenobi" }], options }
        ])
        assert.deepStrictEqual(history, expected)
        assert.deepStrictEqual(yield* store.stored("1"), history)
      }).pipe(Effect.provide(constantIds("msg_fixed_1"))), 30_000)

    it.effect("a chat saved with a time to live is gone once it has passed", () =>
      Effect.gen(function*() {
        const store = yield* kind.make()
        yield* Effect.gen(function*() {
          const chat = yield* (yield* Chat.Persistence).getOrCreate("1", { timeToLive: "30 days" })
          yield* chat.generateText({ prompt: "hello there" }).pipe(
            Effect.provide(answering([{ type: "text", text: "general kenobi" }]))
          )
        }).pipe(Effect.provide(store.chats))
        const options = stamp("msg_fixed_1")
        assert.deepStrictEqual(
          yield* store.stored("1"),
          Prompt.make([
            { role: "user", content: [{ type: "text", text: "hello there" }], options },
            { role: "assistant", content: [{ type: "text", text: "general kenobi" }], options }
          ])
        )
        yield* TestClock.adjust("30 days")
        assert.isUndefined(yield* store.stored("1"))
      }).pipe(Effect.provide(constantIds("msg_fixed_1"))), 30_000)

    it.effect("new messages take the message id of the latest assistant message", () =>
      Effect.gen(function*() {
        const store = yield* kind.make()
        const options = stamp("msg_earlier")
        const earlier = Prompt.make([
          { role: "user", content: "first question", options },
          { role: "assistant", content: "first answer", options }
        ])
        yield* Effect.gen(function*() {
          const chat = yield* (yield* Chat.Persistence).getOrCreate("2")
          yield* Ref.set(chat.history, earlier)
          yield* chat.save
          yield* chat.generateText({ prompt: "second question" }).pipe(
            Effect.provide(answering([{ type: "text", text: "second answer" }]))
          )
        }).pipe(Effect.provide(store.chats))
        assert.deepStrictEqual(
          yield* store.stored("2"),
          Prompt.concat(earlier, [
            { role: "user", content: "second question", options },
            { role: "assistant", content: "second answer", options }
          ])
        )
      }).pipe(Effect.provide(constantIds("msg_generated"))), 30_000)

    it.effect("get of a chat never stored is ChatNotFoundError naming it", () =>
      Effect.gen(function*() {
        const store = yield* kind.make()
        const error = yield* Effect.flip(Effect.flatMap(Chat.Persistence, (p) => p.get("chat-321"))).pipe(
          Effect.provide(store.chats)
        )
        assert.instanceOf(error, Chat.ChatNotFoundError)
        assert.strictEqual(error._tag === "ChatNotFoundError" ? error.chatId : undefined, "chat-321")
      }), 30_000)
  })
}
