/**
 * `effect/ai` chats persisted in a session journal.
 *
 * `Chat.layerPersisted` stores a chat as one key-value record and rewrites the whole
 * history at every save. Here a chat is a session (its id mapped by
 * `ChatStore.sessionIdOf`) and every prompt message is one entry on the session's
 * hash chain, stored exactly as `effect/ai` encodes it. A save appends only the
 * difference between the chat's history and what the store holds: the new
 * messages, a `chat.rewind` first when the stored history is not a prefix of the
 * chat's, one `tool` entry per tool result, and a `chat.save` entry when the chat
 * has a time to live, all in one durable append. Nothing on the chain is rewritten.
 *
 * The behaviour follows `Chat.layerPersisted`: new messages get the `messageId`
 * stamp, `timeToLive` expires a chat (history stays on the chain), each save stores
 * that chat's view (the last writer wins), a failed save after a turn is a defect
 * holding the `PersistenceError`, and `get` of an unknown chat is
 * `ChatNotFoundError`. Concurrent turns of one chat run one after another, each
 * with its save, and the stamps stored are the ones the chat holds.
 *
 * @since 0.1.0
 */
import { Entry, Guard, JournalState, SessionJournal, type StorageError } from "@session-journal/core"
import * as JournalPersistence from "@session-journal/core/Persistence"
import { Chat, IdGenerator, type LanguageModel, Prompt, type Tool } from "effect/ai"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { Persistence } from "effect/persistence"
import * as Ref from "effect/Ref"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as Semaphore from "effect/Semaphore"
import * as Stream from "effect/Stream"
import * as ChatHistory from "./ChatHistory.ts"
import * as ChatStore from "./ChatStore.ts"
import * as Save from "./internal/save.ts"
import * as Tools from "./internal/tools.ts"

const { PersistenceError } = Persistence
type PersistenceError = Persistence.PersistenceError

/**
 * The entry kind of a conversation message of a chat without a store id.
 *
 * @since 0.1.0
 */
export const MESSAGE_KIND = ChatStore.kindsOf().message

/**
 * The entry kind written when a chat's history was changed rather than extended:
 * `{ keep: n }` says only the first `n` messages before it remain.
 *
 * @since 0.1.0
 */
export const REWIND_KIND = ChatStore.kindsOf().rewind

/**
 * The entry kind that marks a chat as saved: `{ expires_at: millis | null }`.
 *
 * @since 0.1.0
 */
export const SAVE_KIND = ChatStore.kindsOf().save

/**
 * The `tool_name` recorded for a tool whose name breaks the journal's field rules.
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
  /** Namespaces chats as `Chat.layerPersisted`'s `storeId` does (default: none). */
  readonly storeId?: string | undefined
  /** `server_id` of the tool entries (default `"effect-ai"`). */
  readonly serverId?: string | undefined
  /** `agent_id` of the tool entries (default `"chat"`). */
  readonly agentId?: string | undefined
  /** `delegation_depth` of the tool entries (default 0). */
  readonly delegationDepth?: number | undefined
  /**
   * When set, every tool call is decided by this guard before its handler runs,
   * on the session's state plus the calls decided but not stored yet; a denied
   * call never runs and the model receives an `execution-denied` result.
   */
  readonly guard?: Guard.Guard | undefined
  /**
   * How long after a save that wrote, with no further save of the chat's session
   * in this layer, the session is closed (`SessionJournal.close`), so that another
   * process can continue the chat; on the filesystem this frees the writer lock
   * (default 500 millis). A conversation that saves more often keeps its session
   * open instead of loading it again at every turn.
   */
  readonly releaseAfter?: Duration.Input | undefined
  /**
   * How long a save waits for another process to release the chat's session
   * (`SessionLocked`) before it fails (default 5 seconds).
   */
  readonly lockWait?: Duration.Input | undefined
}

/**
 * The result a model receives for a tool call the guard denied.
 *
 * @since 0.1.0
 */
export type DeniedResult = Tools.Denied

/**
 * Bytes of the UTF-8 JSON text of a value (0 for `undefined`): what a tool entry
 * records as `bytes_read` for the call's encoded parameters and `bytes_written`
 * for its encoded result.
 *
 * @since 0.1.0
 */
export const jsonBytes: (value: unknown) => number = Tools.jsonBytes

/**
 * The encoded messages of a chat (without a store id) folded from its entries.
 *
 * @since 0.1.0
 */
export const encodedHistory = (entries: Iterable<Entry.Entry>): Array<unknown> => ChatHistory.encodedHistory(entries)

// A `timeToLive` that is no duration, or a negative one, fails the call with a
// `PersistenceError` whose cause (a `StorageError`) names the option, instead of
// a chat that silently never expires.
const timeToLiveOf = (
  chatId: string,
  ttl: Duration.Input | undefined
): Effect.Effect<Duration.Duration | undefined, Persistence.PersistenceError> =>
  ttl === undefined
    ? Effect.succeed(undefined)
    : Effect.mapError(JournalPersistence.decodeInterval("timeToLive", ttl, 0), Save.failure(chatId, "configure"))

const MessagesCodec = Schema.Array(Prompt.Message)
const decodeMessages = Schema.decodeUnknownEffect(MessagesCodec)

/**
 * Builds the `Chat.Persistence` service on the `SessionJournal`.
 *
 * @since 0.1.0
 */
export const make = Effect.fnUntraced(function*(options?: Options) {
  const journal = yield* SessionJournal.SessionJournal
  const kinds = ChatStore.kindsOf(options?.storeId)
  const serverId = options?.serverId ?? "effect-ai"
  const agentId = options?.agentId ?? "chat"
  const delegationDepth = options?.delegationDepth ?? 0
  const guard = options?.guard
  const saver = yield* Save.make(journal, kinds, {
    releaseAfter: yield* JournalPersistence.decodeInterval("releaseAfter", options?.releaseAfter, "500 millis"),
    lockWait: yield* JournalPersistence.decodeInterval("lockWait", options?.lockWait, "5 seconds")
  })
  const { loadView, store } = saver

  const toolParams = (name: string, params: unknown, result: unknown, allowed: boolean): Entry.ToolParams => ({
    tool_name: Tools.isToolName(name) ? name : INVALID_TOOL_NAME,
    server_id: serverId,
    agent_id: agentId,
    bytes_read: jsonBytes(params),
    bytes_written: jsonBytes(result),
    delegation_depth: delegationDepth,
    allowed
  })

  const toPersisted = Effect.fnUntraced(function*(
    chatId: string,
    sid: string,
    view: ChatHistory.View,
    loaded: ReadonlyArray<Prompt.Message>,
    ttl: Duration.Duration | undefined
  ) {
    const idGenerator = yield* Effect.serviceOption(IdGenerator.IdGenerator).pipe(
      Effect.map(Option.getOrElse(() => IdGenerator.defaultIdGenerator))
    )
    const chat = yield* Chat.fromPrompt(Prompt.fromMessages(loaded))
    const history = yield* Ref.get(chat.history)
    for (let i = 0; i < history.content.length; i++) view.objects[i] = history.content[i]
    const recorded = new WeakSet<object>()
    for (const message of history.content) {
      if (message.role === "assistant" || message.role === "tool") {
        for (const part of message.content) if (part.type === "tool-result") recorded.add(part)
      }
    }
    let pending: Array<Tools.Pending> = []
    const decisions = Semaphore.makeUnsafe(1)
    const context = {
      params: toolParams,
      recorded,
      get pending() {
        return pending
      },
      used: (used: Set<Tools.Pending>) => {
        pending = pending.filter((p) => !used.has(p))
      }
    }

    // Turns of this chat take turns, each with its save (the chat's own turns already
    // run one at a time): the messages after the history a turn started from are the
    // running turn's, and every save stamps them before it stores them.
    const turns = Semaphore.makeUnsafe(1)
    let running: { readonly prev: Prompt.Prompt; messageId: string | undefined } | undefined = undefined

    // As `Chat.layerPersisted`: the messages a turn adds get the message id of the
    // last assistant message before them, or a new one. Read under the save's lock,
    // so the stamps a save stores are the ones the chat holds, once and for all.
    const stamped = Effect.gen(function*() {
      const current = (yield* Ref.get(chat.history)).content
      const turn = running
      if (turn === undefined) return current
      for (let i = turn.prev.content.length; i < current.length; i++) {
        if (turn.messageId === undefined) {
          const last = turn.prev.content[turn.prev.content.length - 1]
          if (last !== undefined && last.role === "assistant") {
            const stamp = last.options[Chat.Persistence.key] as { readonly messageId?: string } | undefined
            turn.messageId = stamp?.messageId
          }
          if (turn.messageId === undefined) turn.messageId = yield* idGenerator.generateId()
        }
        const options = current[i]!.options as Record<string, unknown>
        const stamp = options[Chat.Persistence.key] as { readonly messageId?: string } | undefined
        if (stamp?.messageId !== turn.messageId) options[Chat.Persistence.key] = { messageId: turn.messageId }
      }
      return current
    })
    const saveChat = store(chatId, sid, view, stamped, ttl, context)
    const endTurn = Effect.orDie(saveChat).pipe(Effect.ensuring(Effect.sync(() => {
      running = undefined
    })))
    const startTurn = Effect.map(Ref.get(chat.history), (prev) => {
      running = { prev, messageId: undefined }
    })

    const decide = (name: string, params: unknown, toolCallId: string | undefined) =>
      decisions.withPermits(1)(Effect.gen(function*() {
        const proposed = toolParams(name, params, undefined, true)
        const valid = Entry.validateToolParams(proposed)
        // A chat not stored yet has an empty state; a state that cannot be read
        // denies the call (fail closed) rather than letting it run unchecked.
        const state = yield* journal.state(sid).pipe(
          Effect.map(Result.succeed),
          Effect.catchTag("SessionNotFound", () => Effect.succeed(Result.succeed(JournalState.empty(sid)))),
          Effect.catch((e) => Effect.succeed(Result.fail(e)))
        )
        // Parameters the journal would refuse fail the save anyway; the guard still decides.
        const checked: Entry.ValidToolParams = valid._tag === "Success" ? valid.success : { ...proposed, allowed: true }
        const verdict = Result.isSuccess(state)
          ? guard!(JournalState.snapshot(Tools.withPending(state.success, pending)), checked)
          : Guard.deny(`the session's state cannot be read: ${state.failure.message}`, "readableState")
        const entry: Tools.Pending = { id: toolCallId, params: { ...checked, allowed: verdict._tag === "Allow" } }
        pending = [...pending, entry]
        return { verdict, pending: entry }
      }))

    const withGuard = <O extends { readonly toolkit?: unknown }>(o: O): O =>
      guard === undefined || o.toolkit === undefined
        ? o
        : {
          ...o,
          toolkit: Tools.guardToolkit(o.toolkit as LanguageModel.ToolkitInput<Record<string, Tool.Any>>, decide)
        }

    type Run = (o: unknown) => Effect.Effect<unknown, unknown, unknown>
    const turn = (run: Run) => (o: { readonly toolkit?: unknown }) =>
      turns.withPermits(1)(Effect.andThen(startTurn, Effect.ensuring(run(withGuard(o)), endTurn)))
    const persisted: Chat.Persisted = {
      ...chat,
      id: chatId,
      save: saveChat,
      generateText: turn(chat.generateText as Run) as Chat.Chat["generateText"],
      generateObject: turn(chat.generateObject as Run) as Chat.Chat["generateObject"],
      streamText: ((o: { readonly toolkit?: unknown }) =>
        Stream.unwrap(Effect.gen(function*() {
          // Held until the stream and its save are done, as the chat holds its own turn.
          yield* turns.takeScoped(1)
          yield* startTurn
          return (chat.streamText as (o: unknown) => Stream.Stream<unknown, unknown, unknown>)(withGuard(o)).pipe(
            Stream.ensuring(endTurn)
          )
        }))) as Chat.Chat["streamText"]
    }
    return persisted
  })

  const getChat = Effect.fnUntraced(function*(chatId: string, ttl: Duration.Duration | undefined) {
    const sid = ChatStore.sessionIdOf(chatId)
    const view = yield* loadView(chatId, sid)
    const now = yield* Clock.currentTimeMillis
    if (!view.exists || ChatHistory.isExpired(view, now)) return yield* new Chat.ChatNotFoundError({ chatId })
    const loaded = yield* Effect.mapError(
      decodeMessages(view.payloads),
      (cause) => new PersistenceError({ message: `Failed to decode persisted history for chat "${chatId}"`, cause })
    )
    return yield* toPersisted(chatId, sid, view, loaded, ttl)
  })

  const createChat = Effect.fnUntraced(function*(chatId: string, ttl: Duration.Duration | undefined) {
    const sid = ChatStore.sessionIdOf(chatId)
    const view = yield* loadView(chatId, sid)
    // An expired chat starts empty: a rewind to nothing, written with its new save
    // entry, records the expiry on the chain; the old history stays there.
    view.exists = false
    const context = { params: toolParams, recorded: new WeakSet<object>(), pending: [], used: () => {} }
    yield* store(chatId, sid, view, Effect.succeed([]), ttl, context)
    if (ChatStore.isMapped(chatId)) {
      // Metadata is JSON on the journal's terms: an id with a lone surrogate is kept
      // as its JSON text, which escapes it.
      const data = !/\p{Cs}/u.test(chatId) ? { chat_id: chatId } : { chat_id_json: JSON.stringify(chatId) }
      yield* journal.setMeta(sid, { title: chatId, data }).pipe(Effect.mapError(Save.failure(chatId, "create")))
    }
    return yield* toPersisted(chatId, sid, view, [], ttl)
  })

  const get = Effect.fn("JournalChat.get")(function*(chatId: string, options?: {
    readonly timeToLive?: Duration.Input | undefined
  }) {
    return yield* getChat(chatId, yield* timeToLiveOf(chatId, options?.timeToLive))
  })

  const getOrCreate = Effect.fn("JournalChat.getOrCreate")(function*(chatId: string, options?: {
    readonly timeToLive?: Duration.Input | undefined
  }) {
    const ttl = yield* timeToLiveOf(chatId, options?.timeToLive)
    return yield* getChat(chatId, ttl).pipe(
      Effect.catchTag("ChatNotFoundError", () => createChat(chatId, ttl))
    )
  })

  return Chat.Persistence.of({ get, getOrCreate })
})

/**
 * `Chat.Persistence` backed by the `SessionJournal`, in place of
 * `Chat.layerPersisted`: saves append only what changed, on the session's hash
 * chain. See the package README for what is proven equal and what differs.
 *
 * @since 0.1.0
 */
export const layer = (
  options?: Options
): Layer.Layer<Chat.Persistence, StorageError, SessionJournal.SessionJournal> =>
  Layer.effect(Chat.Persistence, make(options))
