/**
 * Test fixtures: a scripted language model (no network), two tools, storage layers
 * (the real adapter, optionally wrapped to count the bytes of every appended entry)
 * and a way to run a "process" — a fresh journal and chat layer over given storage.
 */
import { Entry, Persistence, type SequenceConflict, SessionJournal, type StorageError } from "@session-journal/core"
import { Chat, LanguageModel, type Prompt, type Response, Tool, Toolkit } from "effect/ai"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { JournalChat } from "../src/index.ts"

/** Looks something up; always allowed in the tests. */
export const Lookup = Tool.make("lookup", {
  parameters: Schema.Struct({ query: Schema.String }),
  success: Schema.Struct({ answer: Schema.String })
})

/** A destructive tool the guard tests deny. */
export const Wipe = Tool.make("wipe", {
  parameters: Schema.Struct({ path: Schema.String }),
  success: Schema.String
})

/** Both tools. */
export const Tools = Toolkit.make(Lookup, Wipe)

/** Handler calls, so a test can tell whether a handler ran. */
export interface Calls {
  lookup: number
  wipe: number
}

/** Handlers for `Tools` that count their calls. */
export const toolsLayer = (calls: Calls) =>
  Tools.toLayer({
    lookup: ({ query }) =>
      Effect.sync(() => {
        calls.lookup++
        return { answer: `answer to ${query}` }
      }),
    wipe: ({ path }) =>
      Effect.sync(() => {
        calls.wipe++
        return `wiped ${path}`
      })
  })

const lastUserText = (prompt: Prompt.Prompt): string | undefined => {
  const last = prompt.content[prompt.content.length - 1]
  if (last === undefined || last.role !== "user") return undefined
  const part = last.content[0]
  return part?.type === "text" ? part.text : undefined
}

/**
 * The script: "turn N" → a short text and a `lookup` call; "wipe P" → a `wipe`
 * call; anything else (a tool result, other text) → a text answer naming the
 * number of messages the model saw, so a lost or duplicated message changes it.
 */
export const script = (prompt: Prompt.Prompt): Array<Response.PartEncoded> => {
  const text = lastUserText(prompt)
  const turn = text?.match(/^turn (\d+)$/)
  if (turn) {
    return [
      { type: "text", text: `Looking up ${turn[1]}.` },
      { type: "tool-call", id: `call-${turn[1]}`, name: "lookup", params: { query: `q${turn[1]}` } }
    ]
  }
  const wipe = text?.match(/^wipe (.+)$/)
  if (wipe) return [{ type: "tool-call", id: `wipe-${prompt.content.length}`, name: "wipe", params: { path: wipe[1] } }]
  return [{ type: "text", text: `I have seen ${prompt.content.length} messages.` }]
}

/** The stream parts a model streams for one part of its answer: text as start, delta and end; a tool call as is. */
export const streamPartsOf = (part: Response.PartEncoded): Array<Response.StreamPartEncoded> =>
  part.type === "text"
    ? [
      { type: "text-start", id: "t" },
      { type: "text-delta", id: "t", delta: part.text },
      { type: "text-end", id: "t" }
    ]
    : part.type === "tool-call"
    ? [{ type: "tool-call", id: part.id, name: part.name, params: part.params }]
    : []

/** The scripted model as a layer. */
export const ScriptedModel = Layer.effect(
  LanguageModel.LanguageModel,
  LanguageModel.make({
    generateText: (options) => Effect.succeed(script(options.prompt)),
    streamText: (options) => Stream.fromIterable(script(options.prompt).flatMap(streamPartsOf))
  })
)

/** Bytes of the JSON text of every entry appended through a wrapped storage. */
export interface Counter {
  bytes: number
  appends: number
}

/** Wraps a storage layer so that every durable append of a write handle goes through `around`. */
export const aroundAppend = (
  storage: Layer.Layer<Persistence.Persistence, unknown>,
  around: (
    request: Persistence.AppendRequest,
    append: Effect.Effect<Persistence.Appended, StorageError | SequenceConflict>
  ) => Effect.Effect<Persistence.Appended, StorageError | SequenceConflict>
): Layer.Layer<Persistence.Persistence, unknown> =>
  Layer.effect(
    Persistence.Persistence,
    Effect.gen(function*() {
      const inner = yield* Persistence.Persistence
      return Persistence.Persistence.of({
        ...inner,
        open: Persistence.makeOpen({
          read: (id, caps) => inner.open(id, { mode: "read", caps }),
          write: (id, caps) =>
            Effect.map(inner.open(id, { mode: "write", caps }), (handle) => ({
              ...handle,
              append: (request: Persistence.AppendRequest) => around(request, handle.append(request))
            }))
        })
      })
    })
  ).pipe(Layer.provide(storage))

/** Wraps a storage layer so that every durable append adds its entries' JSON bytes to `counter`. */
export const counting = (
  storage: Layer.Layer<Persistence.Persistence, unknown>,
  counter: Counter
): Layer.Layer<Persistence.Persistence, unknown> =>
  aroundAppend(storage, (request, append) =>
    Effect.tap(append, () =>
      Effect.sync(() => {
        counter.appends++
        for (const e of request.entries) counter.bytes += JournalChat.jsonBytes(Entry.encode(e))
      })))

/** A "process": the journal and the chat persistence over `storage`, with the model and tool handlers. */
export const processLayer = (
  storage: Layer.Layer<Persistence.Persistence, unknown>,
  calls: Calls,
  options?: JournalChat.Options
) =>
  JournalChat.layer(options).pipe(
    Layer.provideMerge(SessionJournal.layer().pipe(Layer.provide(storage))),
    Layer.merge(ScriptedModel),
    Layer.merge(toolsLayer(calls))
  )

/** Runs `effect` in a fresh process over `storage` and closes the process afterwards. */
export const inProcess = <A, E>(
  storage: Layer.Layer<Persistence.Persistence, unknown>,
  calls: Calls,
  effect: Effect.Effect<
    A,
    E,
    | Chat.Persistence
    | SessionJournal.SessionJournal
    | LanguageModel.LanguageModel
    | Tool.HandlersFor<typeof Tools.tools>
  >,
  options?: JournalChat.Options
) => Effect.provide(effect, processLayer(storage, calls, options), { local: true })

/** The chat persistence service. */
export const chats = Effect.gen(function*() {
  return yield* Chat.Persistence
})
