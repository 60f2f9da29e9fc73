/**
 * How a chat is read from and saved to the journal: the stored view of a chat is
 * loaded from its store's entries, and a save appends the difference between the
 * chat's history and that view, waiting for another process's writer lock when
 * needed and releasing the session a moment after the last save.
 */
import type { SessionJournal } from "@session-journal/core"
import { Prompt } from "effect/ai"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { Persistence } from "effect/persistence"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Semaphore from "effect/Semaphore"
import * as Stream from "effect/Stream"
import * as ChatHistory from "../ChatHistory.ts"
import type * as ChatStore from "../ChatStore.ts"
import * as Tools from "./tools.ts"

const { PersistenceError } = Persistence
type PersistenceError = Persistence.PersistenceError

const encodeMessages = Schema.encodeUnknownEffect(Schema.Array(Prompt.Message))
const toJson = (value: unknown): unknown => JSON.parse(JSON.stringify(value))

// Rounds of read-and-append again when other writers keep appending in between.
const MAX_ROUNDS = 8

/** A journal failure of one chat as the `PersistenceError` `Chat.Persistence` speaks. */
export const failure = (chatId: string, what: string) => (cause: unknown): PersistenceError =>
  new PersistenceError({ message: `Failed to ${what} chat "${chatId}" in the session journal`, cause })

// `ttl` is decoded (`JournalChat`'s `timeToLiveOf`); a zero or infinite one never expires.
const expiryOf = (nowMillis: number, ttl: Duration.Duration | undefined): number | null => {
  if (ttl === undefined) return null
  const ms = Duration.toMillis(ttl)
  return Number.isFinite(ms) && ms > 0 ? nowMillis + ms : null
}

/** What a save needs to know about the chat's tool calls. */
export type SaveContext = Tools.EntryContext & { readonly used: (used: Set<Tools.Pending>) => void }

/** Reading and saving chats of one store. */
export interface Saver {
  readonly loadView: (chatId: string, sid: string) => Effect.Effect<ChatHistory.View, PersistenceError>
  readonly store: (
    chatId: string,
    sid: string,
    view: ChatHistory.View,
    history: Effect.Effect<ReadonlyArray<Prompt.Message>>,
    ttl: Duration.Duration | undefined,
    context: SaveContext
  ) => Effect.Effect<void, PersistenceError>
}

/** Builds the saver of one layer; delayed releases run in the layer's scope. */
export const make = (
  journal: SessionJournal.SessionJournal["Service"],
  kinds: ChatStore.Kinds,
  options: { readonly releaseAfter: Duration.Duration; readonly lockWait: Duration.Duration }
): Effect.Effect<Saver, never, Scope.Scope> =>
  Effect.gen(function*() {
    const { lockWait, releaseAfter } = options
    const layerScope = yield* Effect.scope
    // The save generation of each session: a delayed release closes the session only
    // when no save came after the one that scheduled it.
    const generations = new Map<string, number>()
    const scheduleRelease = (sid: string) =>
      Effect.suspend(() => {
        const generation = (generations.get(sid) ?? 0) + 1
        generations.set(sid, generation)
        return Effect.forkIn(
          Effect.andThen(
            Effect.sleep(releaseAfter),
            Effect.suspend(() => generations.get(sid) === generation ? journal.close(sid) : Effect.void)
          ),
          layerScope
        )
      })
    const lockRetry = Schedule.spaced("25 millis").pipe(Schedule.upTo({ duration: lockWait }))
    // Saves of one session in this layer take turns, and each knows the sequence the
    // last of them left, so a chat object behind another one re-reads before it plans.
    const locks = new Map<string, Semaphore.Semaphore>()
    const lockOf = (sid: string) => {
      let lock = locks.get(sid)
      if (lock === undefined) locks.set(sid, lock = Semaphore.makeUnsafe(1))
      return lock
    }
    const lastNext = new Map<string, number>()

    const readInto = (view: ChatHistory.View, sid: string) =>
      journal.entries(sid, { from: view.next }).pipe(
        Stream.runForEach((entry) => Effect.sync(() => ChatHistory.apply(view, [entry], kinds))),
        Effect.catchTag("SessionNotFound", () => Effect.void)
      )

    const loadView = (chatId: string, sid: string) =>
      Effect.gen(function*() {
        const view = ChatHistory.empty()
        yield* readInto(view, sid)
        return view
      }).pipe(Effect.mapError(failure(chatId, "load")))

    // The difference between `current` and the view, as entries: a rewind when the
    // view is not a prefix, the new messages each followed by its tool entries, and
    // a save entry when the expiry changes or the chat is new.
    const plan = Effect.fnUntraced(function*(
      view: ChatHistory.View,
      current: ReadonlyArray<Prompt.Message>,
      expiresAt: number | null,
      context: Tools.EntryContext
    ) {
      let keep = 0
      const n = Math.min(view.texts.length, current.length)
      while (keep < n && view.objects[keep] === current[keep]) keep++
      if (keep < n) {
        // Other objects may hold the same messages (a history another writer stored,
        // or one rebuilt from an export): compare encodings before rewinding.
        const start = keep
        const rest = yield* encodeMessages(current.slice(start, n))
        while (keep < n && ChatHistory.canonical(toJson(rest[keep - start])) === view.texts[keep]) keep++
      }
      const fresh = current.slice(keep)
      const encoded = fresh.length === 0 ? [] : (yield* encodeMessages(fresh)).map(toJson)
      const tools = Tools.toolEntries(current, keep, context)
      const items: Array<SessionJournal.WriteItem> = []
      if (keep < view.texts.length) items.push({ _tag: "Other", kind: kinds.rewind, payload: { keep } })
      for (let i = 0; i < fresh.length; i++) {
        items.push({ _tag: "Other", kind: kinds.message, payload: ChatHistory.toPayload(encoded[i]) })
        for (const params of tools.after[i]!) items.push({ _tag: "Tool", params })
      }
      if (!view.exists || expiresAt !== view.expiresAt) {
        items.push({ _tag: "Other", kind: kinds.save, payload: { expires_at: expiresAt } })
      }
      return { items, keep, encoded, tools }
    })

    // Stores the chat's history, read by `history` under the session's lock (so what
    // it stamps on the messages is what is stored), as the chat's view. When another
    // writer appended between the read and the write, the view is read again and the
    // difference stored again: the last save's view is what the chain ends with.
    const store: Saver["store"] = (chatId, sid, view, history, ttl, context) =>
      lockOf(sid).withPermits(1)(
        Effect.gen(function*() {
          const current = yield* history
          const now = yield* Clock.currentTimeMillis
          const expiresAt = expiryOf(now, ttl)
          const known = lastNext.get(sid)
          if (known !== undefined && known !== view.next) {
            if (known < view.next) yield* Effect.sync(() => Object.assign(view, ChatHistory.empty()))
            yield* readInto(view, sid)
          }
          let wrote = false
          let stored = false
          for (let round = 0; round < MAX_ROUNDS && !stored; round++) {
            const planned = yield* plan(view, current, expiresAt, context)
            if (planned.items.length === 0) {
              stored = true
              break
            }
            const written = yield* journal.writeAll(sid, planned.items).pipe(
              Effect.retry({ schedule: lockRetry, while: (e) => e._tag === "SessionLocked" })
            )
            wrote = true
            context.used(planned.tools.used)
            for (const part of planned.tools.parts) context.recorded.add(part)
            const clean = written[0]!.sequence === view.next
            if (clean) {
              ChatHistory.truncate(view, planned.keep)
              ChatHistory.apply(view, written, kinds)
              for (let i = planned.keep; i < current.length; i++) view.objects[i] = current[i]
            } else {
              yield* readInto(view, sid)
            }
            lastNext.set(sid, view.next)
            stored = clean
          }
          if (wrote) yield* scheduleRelease(sid)
          if (!stored) {
            return yield* Effect.fail(
              new Error(`other writers appended to the session during ${MAX_ROUNDS} attempts to store the chat`)
            )
          }
        }).pipe(Effect.mapError(failure(chatId, "save")))
      )

    return { loadView, store } satisfies Saver
  })
