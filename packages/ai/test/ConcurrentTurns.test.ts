/**
 * Concurrent turns and saves on one `Chat.Persisted`: whatever the interleaving of
 * `generateText`, `streamText` (with or without a toolkit) and `save`, the history
 * a fresh process reads back equals the one the chat holds, options included, so
 * the `messageId` stamps of the chat are the stamps stored.
 */
import { assert, describe, it } from "@effect/vitest"
import { Persistence } from "@session-journal/core"
import { Chat, LanguageModel, Prompt, type Response } from "effect/ai"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import fc from "fast-check"
import { aroundAppend, streamPartsOf, Tools, toolsLayer } from "./fixtures.ts"
import { filesystem, journalStore, memory, pgAvailable, postgres, type StoreKind, upstream } from "./stores.ts"

const STRESS = process.env["STRESS"] === "1"

/** One operation on the chat: a turn (`yields` before the model answers) or a save. */
type Op =
  | { readonly _tag: "generate" | "stream"; readonly tools: boolean; readonly yields: number }
  | { readonly _tag: "save"; readonly yields: number }

const yields = fc.nat({ max: 12 })
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ _tag: fc.constantFrom("generate" as const, "stream" as const), tools: fc.boolean(), yields }),
  fc.record({ _tag: fc.constant("save" as const), yields })
)
const scenario = fc.record({
  // Turns taken one after the other before the concurrent ones (the history they start from).
  before: fc.array(fc.boolean(), { maxLength: 2 }),
  // Whether the concurrent operations run on the chat read back in a new process.
  reopen: fc.boolean(),
  // With a time to live every save writes (a `chat.save` entry), so saves hold their lock longer.
  ttl: fc.boolean(),
  // Yields before each durable append (taken in turn), so turns go on while a save writes.
  pace: fc.array(fc.nat({ max: 40 }), { minLength: 1, maxLength: 4 }),
  ops: fc.array(op, { minLength: 2, maxLength: 6 })
})
type Scenario = typeof scenario extends fc.Arbitrary<infer S> ? S : never

/** The report's case: six turns at once with the toolkit, `generateText` and `streamText` taking turns (18 messages). */
const sixTurns: Scenario = {
  before: [],
  reopen: false,
  ttl: false,
  pace: [0],
  ops: Array.from({ length: 6 }, (_, i) => ({ _tag: i % 2 === 0 ? "generate" : "stream", tools: true, yields: i % 3 }))
}

const lastUserText = (prompt: Prompt.Prompt): string => {
  const last = prompt.content[prompt.content.length - 1]
  const part = last?.role === "user" ? last.content[0] : undefined
  return part?.type === "text" ? part.text : ""
}

/**
 * The model: `"tool N Y"` → a text and a `lookup` call, `"text N Y"` → a text,
 * after `Y` yields; a tool result → a text naming the number of messages seen.
 */
const answer = (prompt: Prompt.Prompt): { readonly parts: Array<Response.PartEncoded>; readonly yields: number } => {
  const m = lastUserText(prompt).match(/^(tool|text) (\d+) (\d+)$/)
  if (m === null) {
    return { parts: [{ type: "text", text: `I have seen ${prompt.content.length} messages.` }], yields: 0 }
  }
  const parts: Array<Response.PartEncoded> = [{ type: "text", text: `Answer ${m[2]}.` }]
  if (m[1] === "tool") {
    parts.push({ type: "tool-call", id: `call-${m[2]}`, name: "lookup", params: { query: `q${m[2]}` } })
  }
  return { parts, yields: Number(m[3]) }
}

const yieldTimes = (n: number) => Effect.repeat(Effect.yieldNow, { times: n })

const Model = Layer.effect(
  LanguageModel.LanguageModel,
  LanguageModel.make({
    generateText: (options) => {
      const { parts, yields } = answer(options.prompt)
      return Effect.as(yieldTimes(yields), parts)
    },
    streamText: (options) => {
      const { parts, yields } = answer(options.prompt)
      return Stream.unwrap(Effect.as(
        yieldTimes(yields),
        Stream.fromIterable(parts.flatMap(streamPartsOf))
      ))
    }
  })
)

const Services = Layer.merge(Model, toolsLayer({ lookup: 0, wipe: 0 }))

/** The storage of a journal store with `pace()` yields before every durable append. */
const paced = (storage: Layer.Layer<Persistence.Persistence, unknown>, pace: () => number) =>
  aroundAppend(storage, (_, append) => Effect.andThen(yieldTimes(pace()), append))

const encodePrompt = Schema.encodeUnknownEffect(Prompt.Prompt)
const asJson = (prompt: Prompt.Prompt) =>
  Effect.map(encodePrompt(prompt), (e) => JSON.parse(JSON.stringify(e)) as unknown)

const run = (chat: Chat.Persisted, o: Op, n: number) => {
  if (o._tag === "save") return Effect.andThen(yieldTimes(o.yields), chat.save)
  const prompt = `${o.tools ? "tool" : "text"} ${n} ${o.yields}`
  if (o._tag === "generate") {
    return o.tools
      ? Effect.asVoid(chat.generateText({ prompt, toolkit: Tools }))
      : Effect.asVoid(chat.generateText({ prompt }))
  }
  return o.tools
    ? Stream.runDrain(chat.streamText({ prompt, toolkit: Tools }))
    : Stream.runDrain(chat.streamText({ prompt }))
}

const messageIdOf = (message: Prompt.Message): string | undefined =>
  (message.options[Chat.Persistence.key] as { readonly messageId?: string } | undefined)?.messageId

/**
 * The stamps as `Chat.layerPersisted` gives them to turns taken one after another:
 * every message of a turn has its turn's id, which is the id of the assistant
 * message before the turn, or else one not used before.
 */
const assertStampedAsSequential = (history: Prompt.Prompt) => {
  const seen = new Set<string>()
  let id: string | undefined = undefined
  for (const [i, message] of history.content.entries()) {
    const messageId = messageIdOf(message)
    assert.isDefined(messageId, `message ${i} has no message id`)
    if (message.role === "user") {
      const before = history.content[i - 1]
      if (before?.role === "assistant") assert.strictEqual(messageId, id, `message ${i} continues the id before it`)
      else assert.isFalse(seen.has(messageId!), `message ${i} starts a new id`)
      id = messageId
      seen.add(id!)
    } else {
      assert.strictEqual(messageId, id, `message ${i} has its turn's id`)
    }
  }
}

const kinds: ReadonlyArray<StoreKind> = [upstream, memory, filesystem, ...(pgAvailable ? [postgres] : [])]
const runs: Record<string, number> = {
  [upstream.name]: STRESS ? 500 : 40,
  [memory.name]: STRESS ? 500 : 40,
  [filesystem.name]: STRESS ? 300 : 30,
  [postgres.name]: STRESS ? 200 : 10
}

describe("JournalChat under concurrent turns", () => {
  for (const kind of kinds) {
    it(`a fresh process reads back the history the chat holds, message ids included (${kind.name})`, async () => {
      const scope = Effect.runSync(Scope.make())
      try {
        // One storage per adapter (tables and directories are costly to make); a chat per run.
        const base = await Effect.runPromise(Scope.provide(kind.make(), scope))
        let count = 0
        await fc.assert(
          fc.asyncProperty(scenario, (s) =>
            Effect.runPromise(Effect.gen(function*() {
              const chatId = `chat-${count++}`
              const ttl = s.ttl ? { timeToLive: "1 hour" as const } : undefined
              let appends = 0
              const chats = base.storage === undefined
                ? base.chats
                : journalStore(paced(base.storage, () => s.pace[appends++ % s.pace.length]!)).chats
              let turn = 0
              const prepared = yield* Effect.gen(function*() {
                const chat = yield* (yield* Chat.Persistence).getOrCreate(chatId, ttl)
                for (const tools of s.before) yield* run(chat, { _tag: "generate", tools, yields: 0 }, turn++)
                if (s.reopen) return undefined
                yield* Effect.all(s.ops.map((o) => run(chat, o, turn++)), { concurrency: "unbounded" })
                return yield* Ref.get(chat.history)
              }).pipe(Effect.provide(Layer.merge(chats, Services), { local: true }))
              const held = prepared ?? (yield* Effect.gen(function*() {
                const chat = yield* (yield* Chat.Persistence).get(chatId, ttl)
                yield* Effect.all(s.ops.map((o) => run(chat, o, turn++)), { concurrency: "unbounded" })
                return yield* Ref.get(chat.history)
              }).pipe(Effect.provide(Layer.merge(chats, Services), { local: true })))
              const stored = yield* base.stored(chatId)
              assert.isDefined(stored)
              // Every turn is in the history once: user, assistant (and tool) messages.
              const size = (tools: boolean) => tools ? 3 : 2
              const expected = s.before.reduce((n, tools) => n + size(tools), 0) +
                s.ops.reduce((n, o) => n + (o._tag === "save" ? 0 : size(o.tools)), 0)
              assert.strictEqual(held.content.length, expected)
              assert.deepStrictEqual(yield* asJson(stored!), yield* asJson(held))
              // Upstream's save after a turn stamps every message added since the turn was
              // called, so turns called together end with the last save's id (held and stored
              // alike); here the stamps are those of the turns taken one after another.
              if (kind !== upstream) assertStampedAsSequential(held)
            }))),
          { numRuns: runs[kind.name] ?? 10, examples: [[sixTurns]] }
        )
      } finally {
        await Effect.runPromise(Scope.close(scope, Exit.void))
      }
    }, STRESS ? 600_000 : 60_000)
  }
})
