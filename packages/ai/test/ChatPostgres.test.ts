/**
 * Two instances of the application (two journal services over one PostgreSQL
 * database) save the same chat at the same moment: the chain ends with the view
 * of the one that saved last, never with an interleaving of both, and nothing
 * stored is rewritten.
 */
import { assert, describe, it } from "@effect/vitest"
import { SessionJournal } from "@session-journal/core"
import { Chat, Prompt } from "effect/ai"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { answering, pgAvailable, postgres } from "./stores.ts"

const texts = (prompt: Prompt.Prompt | undefined) =>
  (prompt?.content ?? []).map((m) =>
    typeof m.content === "string" ? m.content : m.content.map((p) => p.type === "text" ? p.text : "").join("")
  )

describe.skipIf(!pgAvailable)("JournalChat on PostgreSQL", () => {
  it.live("concurrent saves of one chat from two instances converge to one instance's view", () =>
    Effect.gen(function*() {
      const store = yield* postgres.make()
      const a = yield* Layer.build(store.chats)
      const b = yield* Layer.build(store.journal!)
      const created = yield* Effect.flatMap(Chat.Persistence, (p) => p.getOrCreate("race")).pipe(Effect.provide(a))
      yield* created.generateText({ prompt: "start" }).pipe(Effect.provide(answering([{ type: "text", text: "ok" }])))
      const views: Array<Array<string>> = []
      const rounds = process.env["STRESS"] === "1" ? 30 : 3
      for (let round = 0; round < rounds; round++) {
        const chatA = yield* Effect.flatMap(Chat.Persistence, (p) => p.get("race")).pipe(Effect.provide(a))
        const chatB = yield* Effect.flatMap(Chat.Persistence, (p) => p.get("race")).pipe(Effect.provide(b))
        const [ha, hb] = yield* Effect.all([
          Effect.flatMap(
            chatA.generateText({ prompt: `a${round}` }).pipe(Effect.provide(answering([{ type: "text", text: "ok" }]))),
            () => chatA.export
          ),
          Effect.flatMap(
            chatB.generateText({ prompt: `b${round}` }).pipe(Effect.provide(answering([{ type: "text", text: "ok" }]))),
            () => chatB.export
          )
        ], { concurrency: 2 })
        const stored = texts(yield* store.stored("race"))
        const mine = [
          texts(Prompt.make((ha as Prompt.PromptEncoded).content as never)),
          texts(Prompt.make((hb as Prompt.PromptEncoded).content as never))
        ]
        assert.isTrue(
          mine.some((view) => JSON.stringify(view) === JSON.stringify(stored)),
          JSON.stringify({ stored, mine })
        )
        views.push(stored)
      }
      const report = yield* Effect.flatMap(SessionJournal.SessionJournal, (j) => j.verify("race")).pipe(
        Effect.provide(b)
      )
      const count = yield* Effect.flatMap(SessionJournal.SessionJournal, (j) => Stream.runCount(j.entries("race")))
        .pipe(Effect.provide(b))
      assert.strictEqual(report.entriesChecked, count)
      assert.strictEqual(views.length, rounds)
    }))
})
