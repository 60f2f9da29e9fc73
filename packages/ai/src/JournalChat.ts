/**
 * `effect/ai` chats persisted in a session journal.
 *
 * `Chat.layerPersisted` stores a chat as one key-value record and rewrites the whole
 * history after every turn. Here the chat id is a session id and every prompt message
 * is one `message` entry on the session's hash chain, stored exactly as `effect/ai`
 * encodes it. After a turn only the messages the turn added are stored, together with
 * one `tool` entry per executed tool call, in one `writeAll` (one durable,
 * group-committed append). Loading a chat folds its message entries back into a
 * `Prompt`.
 *
 * A guard can be configured: each tool call is then decided by
 * `SessionJournal.decide` before its handler runs; a denied call is recorded with
 * `allowed: false`, never executed, and the model receives an `execution-denied`
 * result instead.
 *
 * @since 0.1.0
 */
import { AiError, Chat, type LanguageModel, Prompt, type Tool, type Toolkit } from "effect/ai"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import { Persistence } from "effect/persistence"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import * as Semaphore from "effect/Semaphore"
import * as Stream from "effect/Stream"
import { Entry, type Guard, SessionJournal } from "@session-journal/core"

const { PersistenceError } = Persistence
type PersistenceError = Persistence.PersistenceError

/**
 * The entry kind of a conversation message; its payload is the message as
 * `Prompt.Message` encodes it.
 *
 * @since 0.1.0
 */
export const MESSAGE_KIND = "message"

/**
 * The entry kind written when a chat's history was changed in place (for example
 * with `Prompt.setSystem` on `chat.history`) rather than extended: the payload
 * `{ keep: n }` says that only the first `n` messages before it remain; the messages
 * after it follow. The chain stays append-only; nothing stored is rewritten.
 *
 * @since 0.1.0
 */
export const REWIND_KIND = "chat.rewind"

/**
 * The `tool_name` recorded for a tool whose name breaks the journal's field rules
 * (empty, surrounding whitespace, control characters). The call still counts for
 * guards and stats, and its real name stays in the stored message; refusing the
 * entry would lose the whole turn.
 *
 * @since 0.1.0
 */
export const INVALID_TOOL_NAME = "(invalid tool name)"

/**
 * Options of the chat persistence layer.
 *
 * @since 0.1.0
 */
export interface Options {
  /** `server_id` of the tool entries (default `"effect-ai"`). */
  readonly serverId?: string | undefined
  /** `agent_id` of the tool entries (default `"chat"`). */
  readonly agentId?: string | undefined
  /** `delegation_depth` of the tool entries (default 0). */
  readonly delegationDepth?: number | undefined
  /**
   * When set, every tool call is decided by this guard before its handler runs
   * (`SessionJournal.decide`: decision and record are atomic). Such an entry is
   * written before the tool runs, so its `bytes_written` is 0; the result's size
   * stays visible in the tool message that follows.
   */
  readonly guard?: Guard.Guard | undefined
}

/**
 * The result a model receives for a tool call the guard denied: the same shape
 * `effect/ai` uses for a call the user denied in an approval flow.
 *
 * @since 0.1.0
 */
export interface DeniedResult {
  readonly type: "execution-denied"
  readonly reason: string
}

const MessagesCodec = Schema.Array(Prompt.Message)
const encodeMessages = Schema.encodeUnknownEffect(MessagesCodec)
const decodeMessages = Schema.decodeUnknownEffect(MessagesCodec)

const utf8 = new TextEncoder()

/**
 * Bytes of the UTF-8 JSON text of a value (0 for `undefined`): what a tool entry
 * records as `bytes_read` for the call's parameters and `bytes_written` for its
 * encoded result.
 *
 * @since 0.1.0
 */
export const jsonBytes = (value: unknown): number => {
  const text = JSON.stringify(value)
  return text === undefined ? 0 : utf8.encode(text).length
}

/**
 * The encoded messages of a chat, folded from its journal entries in order:
 * `message` entries append, `chat.rewind` entries truncate (a rewind whose `keep`
 * is not a non-negative integer is skipped); other entries (tool calls, kinds of
 * other writers) are skipped.
 *
 * @since 0.1.0
 */
export const encodedHistory = (entries: Iterable<Entry.Entry>): Array<unknown> => {
  const messages: Array<unknown> = []
  for (const entry of entries) {
    if (entry.kind === MESSAGE_KIND) {
      messages.push((entry as Entry.OtherEntry).payload)
    } else if (entry.kind === REWIND_KIND) {
      const keep = ((entry as Entry.OtherEntry).payload as { readonly keep?: unknown } | null)?.keep
      // Any writer can append this kind: a keep that is not a whole count is ignored
      // like a missing one (assigning it to `length` would throw).
      if (typeof keep === "number" && Number.isSafeInteger(keep) && keep >= 0) messages.length = Math.min(messages.length, keep)
    }
  }
  return messages
}

// A JSON round trip is what a JSON store makes of an encoded message anyway; it
// drops `undefined` members, which have no JSON form and cannot be hashed.
const toJson = (value: unknown): unknown => JSON.parse(JSON.stringify(value))

interface Turn {
  readonly items: Array<SessionJournal.WriteItem>
  readonly resultIds: ReadonlyArray<string>
}

const toolCallsOf = (messages: ReadonlyArray<Prompt.Message>, into: Map<string, Prompt.ToolCallPart>) => {
  for (const message of messages) {
    if (message.role !== "assistant") continue
    for (const part of message.content) if (part.type === "tool-call") into.set(part.id, part)
  }
}

const resultsOf = (message: Prompt.Message): Array<Prompt.ToolResultPart> => {
  const out: Array<Prompt.ToolResultPart> = []
  if (message.role === "assistant" || message.role === "tool") {
    for (const part of message.content) if (part.type === "tool-result") out.push(part)
  }
  return out
}

const isToolName = (name: string): boolean => Entry.isIdentity(name)

const journalFailure = (chatId: string, what: string) => (cause: unknown): PersistenceError =>
  new PersistenceError({ message: `Failed to ${what} chat "${chatId}" in the session journal`, cause })

const turnFailure = (method: string) => (cause: PersistenceError): AiError.AiError =>
  AiError.make({
    module: "JournalChat",
    method,
    reason: new AiError.UnknownError({ description: `${cause.message}: ${String(cause.cause)}` })
  })

/**
 * Builds the `Chat.Persistence` service on the `SessionJournal`.
 *
 * `get` fails with `ChatNotFoundError` when the session does not exist;
 * `getOrCreate` creates it (metadata only, no chain entry). An id that is not a
 * valid session id, and any journal failure, is a `PersistenceError` whose `cause`
 * is the journal's typed error (`InvalidSessionId`, `StorageError`, …). A failure to
 * store a turn fails that turn's `generateText` / `generateObject` / `streamText`
 * with an `AiError`; the unsaved messages stay in the chat and are stored by the
 * next successful save. `timeToLive` is ignored: journals do not expire.
 *
 * @since 0.1.0
 */
export const make = Effect.fnUntraced(function*(options?: Options) {
  const journal = yield* SessionJournal.SessionJournal
  const serverId = options?.serverId ?? "effect-ai"
  const agentId = options?.agentId ?? "chat"
  const delegationDepth = options?.delegationDepth ?? 0
  const guard = options?.guard

  const toolParams = (name: string, params: unknown, result: unknown, allowed: boolean): Entry.ToolParams => ({
    tool_name: isToolName(name) ? name : INVALID_TOOL_NAME,
    server_id: serverId,
    agent_id: agentId,
    bytes_read: jsonBytes(params),
    bytes_written: jsonBytes(result),
    delegation_depth: delegationDepth,
    allowed
  })

  const validId = (chatId: string) =>
    Effect.mapError(
      Effect.fromResult(Entry.validateSessionId(chatId)),
      (cause) => new PersistenceError({ message: `Invalid chat id "${chatId}": ${cause.message}`, cause })
    )

  const load = (chatId: string): Effect.Effect<ReadonlyArray<Prompt.Message>, Chat.ChatNotFoundError | PersistenceError> =>
    Effect.gen(function*() {
      yield* journal.state(chatId).pipe(
        Effect.catchTag("SessionNotFound", () => Effect.fail(new Chat.ChatNotFoundError({ chatId }))),
        Effect.mapError((e) => e._tag === "ChatNotFoundError" ? e : journalFailure(chatId, "load")(e))
      )
      const entries = yield* journal.entries(chatId).pipe(
        Stream.runCollect,
        // A session with metadata but no entries may have no history to read.
        Effect.catchTag("SessionNotFound", () => Effect.succeed([])),
        Effect.mapError(journalFailure(chatId, "load"))
      )
      return yield* Effect.mapError(decodeMessages(encodedHistory(entries)), journalFailure(chatId, "decode"))
    })

  const toPersisted = (chatId: string, loaded: ReadonlyArray<Prompt.Message>) =>
    Effect.gen(function*() {
      const chat = yield* Chat.fromPrompt(Prompt.fromMessages(loaded))
      const lock = yield* Semaphore.make(1)
      // What the journal holds, by identity: a turn extends the history with new
      // message objects and keeps the old ones, so the delta is found without
      // encoding anything that is already stored.
      let stored: ReadonlyArray<Prompt.Message> = loaded
      // Tool results that already have their tool entry (loaded, or recorded by
      // the guard), so a rewind that re-stores messages never counts a call twice.
      const recorded = new Set<string>()
      for (const message of loaded) for (const part of resultsOf(message)) recorded.add(part.id)

      const sameEncoded = (a: Prompt.Message, b: Prompt.Message) =>
        Effect.map(
          encodeMessages([a, b]),
          ([x, y]) => JSON.stringify(toJson(x)) === JSON.stringify(toJson(y))
        )

      const planTurn = (current: ReadonlyArray<Prompt.Message>) =>
        Effect.gen(function*() {
          let keep = 0
          while (keep < stored.length && keep < current.length && current[keep] === stored[keep]) keep++
          // Different objects may still hold the same message (a history rebuilt
          // from an export): compare encodings before rewinding.
          while (keep < stored.length && keep < current.length && (yield* sameEncoded(current[keep]!, stored[keep]!))) {
            keep++
          }
          const fresh = current.slice(keep)
          const items: Array<SessionJournal.WriteItem> = []
          const resultIds: Array<string> = []
          if (keep < stored.length) items.push({ _tag: "Other", kind: REWIND_KIND, payload: { keep } })
          if (fresh.length === 0) return { items, resultIds } satisfies Turn
          const encoded = yield* encodeMessages(fresh)
          // A result's call is normally in the same turn; one answered in a later turn
          // (an approval) is looked up in the older history only then.
          const calls = new Map<string, Prompt.ToolCallPart>()
          toolCallsOf(fresh, calls)
          let scannedOlder = false
          const callOf = (id: string) => {
            if (!calls.has(id) && !scannedOlder) {
              scannedOlder = true
              toolCallsOf(current.slice(0, keep), calls)
            }
            return calls.get(id)
          }
          for (let i = 0; i < fresh.length; i++) {
            items.push({ _tag: "Other", kind: MESSAGE_KIND, payload: toJson(encoded[i]) })
            for (const part of resultsOf(fresh[i]!)) {
              if (recorded.has(part.id)) continue
              const call = callOf(part.id)
              items.push({ _tag: "Tool", params: toolParams(part.name, call?.params, part.result, true) })
              resultIds.push(part.id)
            }
          }
          return { items, resultIds } satisfies Turn
        })

      const save: Effect.Effect<void, PersistenceError> = lock.withPermits(1)(
        Effect.gen(function*() {
          const current = (yield* Ref.get(chat.history)).content
          const turn = yield* Effect.mapError(planTurn(current), journalFailure(chatId, "encode"))
          if (turn.items.length === 0) return
          yield* Effect.mapError(journal.writeAll(chatId, turn.items), journalFailure(chatId, "save"))
          stored = current
          for (const id of turn.resultIds) recorded.add(id)
        })
      )

      const guardToolkit = (input: LanguageModel.ToolkitInput<Record<string, Tool.Any>>) => {
        const wrap = (toolkit: Toolkit.WithHandler<Record<string, Tool.Any>>): Toolkit.WithHandler<Record<string, Tool.Any>> => ({
          tools: toolkit.tools,
          handle: ((name: string, params: unknown, toolCallId?: string, parseOptions?: unknown) =>
            Effect.gen(function*() {
              const decision = yield* journal.decide(chatId, toolParams(name, params, undefined, true), guard!).pipe(
                Effect.mapError((e) => turnFailure(`${name}.guard`)(journalFailure(chatId, "record a tool call of")(e)))
              )
              if (toolCallId !== undefined) recorded.add(toolCallId)
              if (decision.verdict._tag === "Deny") {
                const denied: DeniedResult = { type: "execution-denied", reason: decision.verdict.reason }
                return Stream.succeed({
                  result: denied,
                  encodedResult: denied,
                  isFailure: true,
                  failureOrigin: "handler" as const,
                  preliminary: false
                })
              }
              return yield* (toolkit.handle as (...args: Array<unknown>) => Effect.Effect<unknown, unknown, unknown>)(
                name,
                params,
                toolCallId,
                parseOptions
              )
            })) as unknown as Toolkit.WithHandler<Record<string, Tool.Any>>["handle"]
        })
        return Effect.isEffect(input) ? Effect.map(input, wrap) : wrap(input as Toolkit.WithHandler<Record<string, Tool.Any>>)
      }

      const withGuard = <O extends { readonly toolkit?: unknown }>(o: O): O =>
        guard === undefined || o.toolkit === undefined
          ? o
          : { ...o, toolkit: guardToolkit(o.toolkit as LanguageModel.ToolkitInput<Record<string, Tool.Any>>) }

      // Runs a turn, then stores what it added, also when the turn failed or was
      // interrupted (the chat may have changed before that). A storage failure fails
      // an otherwise successful turn: the caller must know it was not saved.
      const turn = <A, E, R>(method: string, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | AiError.AiError, R> =>
        Effect.uninterruptibleMask((restore) =>
          Effect.gen(function*() {
            const exit = yield* Effect.exit(restore(effect))
            const saved = yield* Effect.exit(save)
            if (Exit.isFailure(exit)) return yield* exit
            if (Exit.isFailure(saved)) return yield* Effect.failCause(saved.cause).pipe(Effect.mapError(turnFailure(method)))
            return exit.value
          })
        )

      const persisted: Chat.Persisted = {
        ...chat,
        id: chatId,
        save,
        generateText: ((o: LanguageModel.GenerateTextOptions<Record<string, Tool.Any>>) =>
          turn("generateText", (chat.generateText as (o: unknown) => Effect.Effect<unknown, unknown, unknown>)(withGuard(o)))) as Chat.Chat["generateText"],
        generateObject: ((o: { readonly toolkit?: unknown }) =>
          turn("generateObject", (chat.generateObject as (o: unknown) => Effect.Effect<unknown, unknown, unknown>)(withGuard(o)))) as Chat.Chat["generateObject"],
        streamText: ((o: LanguageModel.GenerateTextOptions<Record<string, Tool.Any>>) =>
          (chat.streamText as (o: unknown) => Stream.Stream<unknown, unknown, unknown>)(withGuard(o)).pipe(
            // On normal completion a failed save fails the stream; the finalizer
            // covers failure and interruption (and is a no-op after a good save).
            Stream.concat(Stream.drain(Stream.fromEffect(Effect.mapError(save, turnFailure("streamText"))))),
            Stream.ensuring(Effect.ignore(save))
          )) as Chat.Chat["streamText"]
      }
      return persisted
    })

  const get = Effect.fn("JournalChat.get")(function*(chatId: string) {
    yield* validId(chatId)
    const loaded = yield* load(chatId)
    return yield* toPersisted(chatId, loaded)
  })

  const getOrCreate = Effect.fn("JournalChat.getOrCreate")(function*(chatId: string) {
    yield* validId(chatId)
    const loaded = yield* load(chatId).pipe(
      Effect.catchTag("ChatNotFoundError", () =>
        // Metadata makes the session exist without putting anything on the chain.
        Effect.as(Effect.mapError(journal.setMeta(chatId, {}), journalFailure(chatId, "create")), []))
    )
    return yield* toPersisted(chatId, loaded)
  })

  return Chat.Persistence.of({ get, getOrCreate })
})

/**
 * `Chat.Persistence` backed by the `SessionJournal`: a drop-in replacement for
 * `Chat.layerPersisted` whose saves append only the turn's new messages and tool
 * calls, on the session's hash chain.
 *
 * @since 0.1.0
 */
export const layer = (options?: Options): Layer.Layer<Chat.Persistence, never, SessionJournal.SessionJournal> =>
  Layer.effect(Chat.Persistence, make(options))
