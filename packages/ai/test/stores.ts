/**
 * The stores the upstream-equivalent tests run on: `Chat.layerPersisted` itself
 * over an in-memory `BackingPersistence`, and `JournalChat` over the memory, the
 * filesystem and the PostgreSQL adapters. Each store gives a chat layer (one
 * "process") and a way to read what it holds for a chat id from outside: the
 * backing record for upstream, a fresh journal and chat layer over the same
 * storage for the journal (`undefined` when the chat is not found).
 *
 * Also a test language model that answers every call with fixed parts.
 */
import { Persistence, SessionJournal } from "@session-journal/core"
import { NodePersistence } from "@session-journal/node"
import { PgPersistence } from "@session-journal/postgres"
import * as Pg from "@session-journal/postgres/test/pg"
import { Chat, IdGenerator, LanguageModel, Prompt, type Response } from "effect/ai"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { Persistence as KvPersistence } from "effect/persistence"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { JournalChat } from "../src/index.ts"

/** One storage under test. */
export interface Store {
  /** Chat persistence over the storage: a "process". */
  readonly chats: Layer.Layer<Chat.Persistence, unknown>
  /** The journal of that process (journal stores only). */
  readonly journal?: Layer.Layer<SessionJournal.SessionJournal | Chat.Persistence, unknown>
  /** What the storage holds for a chat id, read from outside the process. */
  readonly stored: (chatId: string) => Effect.Effect<Prompt.Prompt | undefined, unknown>
  /** The storage itself, for journal stores (to build more processes). */
  readonly storage?: Layer.Layer<Persistence.Persistence, unknown>
}

/** How a store is made for one test (in the test's scope). */
export interface StoreKind {
  readonly name: string
  readonly make: (options?: JournalChat.Options) => Effect.Effect<Store, unknown, Scope.Scope>
}

const decodePrompt = Schema.decodeUnknownEffect(Prompt.Prompt)

/** `Chat.layerPersisted({ storeId: "chat" })` over `layerBackingMemory`. */
export const upstream: StoreKind = {
  name: "Chat.layerPersisted",
  make: () =>
    Effect.gen(function*() {
      const backing = yield* Layer.build(KvPersistence.layerBackingMemory)
      const backingLayer = Layer.succeedContext(backing)
      const chats = Chat.layerPersisted({ storeId: "chat" }).pipe(Layer.provide(backingLayer))
      const stored = (chatId: string) =>
        Effect.gen(function*() {
          const store = yield* (yield* KvPersistence.BackingPersistence).make("chat")
          const encoded = yield* store.get(chatId)
          return encoded === undefined ? undefined : yield* decodePrompt(encoded)
        }).pipe(Effect.scoped, Effect.provide(backingLayer))
      return { chats, stored }
    })
}

/** A journal store over a storage layer whose data outlives each process built on it. */
export const journalStore = (
  storage: Layer.Layer<Persistence.Persistence, unknown>,
  options?: JournalChat.Options
): Store => {
  const process = () =>
    JournalChat.layer({ storeId: "chat", ...options }).pipe(
      Layer.provideMerge(SessionJournal.layer().pipe(Layer.provide(storage)))
    )
  const stored = (chatId: string) =>
    Effect.gen(function*() {
      const chat = yield* (yield* Chat.Persistence).get(chatId)
      return yield* Ref.get(chat.history)
    }).pipe(
      Effect.catchTag("ChatNotFoundError", () => Effect.succeed(undefined)),
      Effect.provide(process(), { local: true })
    )
  return { chats: process(), journal: process(), stored, storage }
}

/** `JournalChat` over the in-memory adapter. */
export const memory: StoreKind = {
  name: "JournalChat (memory)",
  make: (options) =>
    Effect.map(Persistence.makeMemory(), (m) => journalStore(Layer.succeed(Persistence.Persistence, m), options))
}

/** A temporary directory removed with the scope. */
export const tempDir = Effect.acquireRelease(
  Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "sj-ai-"))),
  (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
)

/** `JournalChat` over the filesystem adapter in a temporary directory. */
export const filesystem: StoreKind = {
  name: "JournalChat (filesystem)",
  make: (options) =>
    Effect.map(tempDir, (dir) => journalStore(NodePersistence.layer({ root: path.join(dir, "journal") }), options))
}

/** Whether the PostgreSQL variants run (see the PostgreSQL package's test setup). */
export const pgAvailable: boolean = Pg.skipReason === null
let pgTables = 0
const pgPrefix = Pg.freshPrefix("ai")

/**
 * `JournalChat` over PostgreSQL, with tables of their own per test (dropped with
 * the scope). Each process built on it has its own adapter and connection pool,
 * as separate application instances would.
 */
export const postgres: StoreKind = {
  name: "JournalChat (postgres)",
  make: (options) =>
    Effect.gen(function*() {
      const prefix = `${pgPrefix}${pgTables++}_`
      yield* Effect.addFinalizer(() =>
        Effect.ignore(
          PgPersistence.dropTables(prefix).pipe(
            Effect.provide(Pg.adminLayer("sj-ai-test-admin"))
          )
        )
      )
      return journalStore(
        PgPersistence.layerFromUrl(Pg.url, { tablePrefix: prefix, pollInterval: "200 millis" }),
        options
      )
    })
}

/** A language model answering every call with `parts` (streamed as their stream parts). */
export const answering = (parts: ReadonlyArray<Response.PartEncoded>) =>
  Layer.effect(
    LanguageModel.LanguageModel,
    LanguageModel.make({
      generateText: () => Effect.succeed([...parts]),
      streamText: () =>
        Stream.fromIterable(parts.flatMap((part): Array<Response.StreamPartEncoded> =>
          part.type === "text"
            ? [{ type: "text-start", id: "t" }, { type: "text-delta", id: "t", delta: part.text }, {
              type: "text-end",
              id: "t"
            }]
            : part.type === "tool-call"
            ? [{ type: "tool-call", id: part.id, name: part.name, params: part.params }]
            : []
        ))
    })
  )

/** An id generator that always gives `id`. */
export const constantIds = (id: string) =>
  Layer.succeed(IdGenerator.IdGenerator, { generateId: () => Effect.succeed(id) })
