/**
 * The in-memory adapter of the `Persistence` port: full history, checkpoints (a
 * document as given, or the service's state kept as a value and encoded when a load
 * reads it, so the codec is exercised on every load), metadata, the session list, a
 * writer flag per session, and `follow` through a `PubSub`. Recovery is core's, as
 * for every adapter.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as HashMap from "effect/HashMap"
import * as PubSub from "effect/PubSub"
import * as Stream from "effect/Stream"
import * as Checkpoint from "../Checkpoint.ts"
import * as Entry from "../Entry.ts"
import { SequenceConflict, SessionLocked, SessionNotFound, StorageError } from "../Errors.ts"
import * as JournalState from "../JournalState.ts"
import type * as Persistence from "../Persistence.ts"
import * as Recovery from "../Recovery.ts"
import type { SessionMeta } from "../SessionMeta.ts"
import * as StorageReason from "../StorageReason.ts"
import * as RecordBytes from "./recordBytes.ts"
import * as Ring from "./ring.ts"
import * as TakenEntry from "./takenEntry.ts"
import { tipMatches } from "./tip.ts"

// A stored checkpoint: a document, or a state kept as it is (states are immutable).
type Stored =
  | { readonly _tag: "Document"; readonly document: Checkpoint.CheckpointJson }
  | { readonly _tag: "State"; readonly state: JournalState.JournalState }

const nextOf = (stored: Stored): number =>
  stored._tag === "Document" ? stored.document.next_sequence : stored.state.next_sequence

// The entry a checkpoint ends with: its sequence and hash.
const lastOf = (stored: Stored): { readonly sequence: number; readonly entry_hash: string } | undefined =>
  stored._tag === "Document"
    ? Checkpoint.lastOf(stored.document)
    : Ring.size(stored.state.hashes) === 0
    ? undefined
    : { sequence: stored.state.next_sequence - 1, entry_hash: Ring.last(stored.state.hashes)! }

const documentOf = (stored: Stored): Checkpoint.CheckpointJson =>
  stored._tag === "Document" ? stored.document : Checkpoint.encode(stored.state)

interface MemorySession {
  readonly entries: Array<Entry.Entry>
  checkpoint: Stored | null
  checkpointBytes: number
  /** Bytes appended since the checkpoint, counted as the lines a segment would hold. */
  sinceCheckpointBytes: number
  meta: SessionMeta | null
  /** Caps the session was first written with; a checkpoint's caps take precedence. */
  caps: JournalState.Caps | null
  writer: boolean
  updatedAt: number
}

// The size of an entry as a segment line would store it, estimated: the adapter
// keeps objects, and writing each one out only to count its bytes would cost more
// than the rest of an append. Tool entries are counted from their fields (their
// keys and numbers have a fixed size up to a few digits); other entries write
// their payload out. The checkpoint policy needs sizes of the right order, not
// exact ones.
const TOOL_LINE = 330
const OTHER_LINE = 200
const lineBytes = (entry: Entry.Entry): number =>
  Entry.isTool(entry)
    ? TOOL_LINE + entry.tool_name.length + entry.server_id.length + entry.agent_id.length
    : OTHER_LINE + entry.kind.length + (TakenEntry.payloadText(entry, true) ?? JSON.stringify(entry.payload)).length

// A checkpoint's size, estimated the same way: its retained entries (or their
// hashes) and counters.
const HASH_BYTES = 67
const documentBytes = (document: Checkpoint.CheckpointJson): number => {
  let bytes = 512 + JSON.stringify(document.meta ?? null).length
  if (document.v === 1) { for (const entry of document.entries) bytes += lineBytes(entry as Entry.Entry) }
  else bytes += HASH_BYTES * document.hashes.length
  for (const name of document.tool_sequence) bytes += name.length + 3
  for (const [name] of document.tool_counts) bytes += name.length + 24
  return bytes
}

const stateBytes = (state: JournalState.JournalState): number => {
  let bytes = 512 + JSON.stringify(state.meta ?? null).length
  bytes += HASH_BYTES * Ring.size(state.hashes)
  const names = state.tool_sequence
  for (let i = names.start; i < names.end; i++) bytes += names.buf[i]!.length + 3
  for (const name of HashMap.keys(state.tool_counts)) bytes += name.length + 24
  return bytes
}

const exists = (s: MemorySession | undefined): s is MemorySession =>
  s !== undefined && (s.entries.length > 0 || s.checkpoint !== null || s.meta !== null)

/** Builds the in-memory adapter. */
export const make = Effect.fnUntraced(function*(maxRecordBytes?: number | undefined) {
  const sessions = new Map<string, MemorySession>()
  const appended = yield* PubSub.unbounded<{ readonly id: string; readonly entries: ReadonlyArray<Entry.Entry> }>()
  // Subscriptions of `follow` to `appended` open now.
  let followers = 0

  const sessionFor = (id: string): MemorySession => {
    let s = sessions.get(id)
    if (s === undefined) {
      s = {
        entries: [],
        checkpoint: null,
        checkpointBytes: 0,
        sinceCheckpointBytes: 0,
        meta: null,
        caps: null,
        writer: false,
        updatedAt: 0
      }
      sessions.set(id, s)
    }
    return s
  }

  const load = (
    id: string,
    caps: JournalState.Caps | undefined,
    mode: Recovery.Options["mode"]
  ): Effect.Effect<Persistence.Loaded> =>
    Effect.sync((): Persistence.Loaded => {
      const s = sessions.get(id)
      if (!exists(s)) {
        return {
          state: JournalState.empty(id, caps),
          exists: false,
          recovery: { checkpoint: "none", replayed: 0, skipped: 0, tornTail: null, stopped: null }
        }
      }
      const location = `memory:${id}`
      // Load mode reads from the entry the checkpoint ends with, so it can check it.
      const from = mode === "verify" || s.checkpoint === null
        ? 0
        : Math.min(Math.max(0, nextOf(s.checkpoint) - 1), s.entries.length)
      const outcome = Recovery.run(
        {
          id,
          mode,
          // A session keeps the caps it was created with, also before its first
          // checkpoint: replaying under other caps would evict differently.
          caps: s.caps ?? caps,
          checkpoint: s.checkpoint === null
            ? null
            : { _tag: "Document", document: documentOf(s.checkpoint), location: `${location}/checkpoint` },
          location
        },
        Recovery.rows(location, from, s.entries.slice(from))
      )
      const state = s.meta === null ? outcome.state : JournalState.applyMeta(outcome.state, s.meta)
      return {
        state,
        exists: true,
        recovery: outcome.report,
        sinceCheckpointBytes: s.sinceCheckpointBytes,
        checkpointBytes: s.checkpointBytes
      }
    })

  const append = (
    id: string,
    caps: JournalState.Caps | undefined,
    request: Persistence.AppendRequest
  ): Effect.Effect<Persistence.Appended, StorageError | SequenceConflict> =>
    // The time a session was last written is the fiber's `Clock`'s (a test clock's
    // under `TestClock`), never the process's.
    Clock.clockWith((clock): Effect.Effect<Persistence.Appended, StorageError | SequenceConflict> => {
      const s = sessionFor(id)
      const tipHash = s.entries[s.entries.length - 1]?.entry_hash ?? Entry.ZERO_HASH
      if (!tipMatches(request.after, s.entries.length, tipHash)) {
        return Effect.fail(new SequenceConflict({ id, sequence: request.after.sequence }))
      }
      if (maxRecordBytes !== undefined) {
        for (const entry of request.entries) {
          const size = RecordBytes.over(entry, maxRecordBytes)
          if (size !== undefined) {
            return Effect.fail(
              new StorageError({
                operation: "append",
                path: `memory:${id}`,
                reason: new StorageReason.RecordTooLarge({ bytes: size, limit: maxRecordBytes })
              })
            )
          }
        }
      }
      let bytes = 0
      for (const entry of request.entries) {
        s.entries.push(entry)
        bytes += lineBytes(entry)
      }
      if (s.caps === null) {
        const initial = JournalState.empty(id, caps)
        s.caps = { entry_cap: initial.entry_cap, tool_counts_cap: initial.tool_counts_cap }
      }
      if (request.meta !== undefined && (s.meta === null || request.meta.updated_at >= s.meta.updated_at)) {
        s.meta = request.meta
        bytes += 64 + JSON.stringify(request.meta.data ?? null).length
      }
      s.updatedAt = clock.currentTimeMillisUnsafe()
      s.sinceCheckpointBytes += bytes
      const result: Persistence.Appended = { bytes }
      // Only a `follow` that is subscribed needs the entries; one that subscribes
      // later reads them from the session's entries.
      return request.entries.length === 0 || followers === 0
        ? Effect.succeed(result)
        : Effect.as(PubSub.publish(appended, { id, entries: request.entries }), result)
    })

  const checkpoint = (id: string, stored: Stored): Effect.Effect<number, StorageError> =>
    Effect.suspend(() => {
      const s = sessionFor(id)
      const refuse = (why: string) =>
        Effect.fail(
          new StorageError({
            operation: "checkpoint",
            path: `memory:${id}/checkpoint`,
            reason: new StorageReason.CheckpointRefused({ why })
          })
        )
      const next = nextOf(stored)
      if (next > s.entries.length) {
        return refuse(`checkpoint (next ${next}) is ahead of storage (${s.entries.length} entries)`)
      }
      if (s.checkpoint !== null && next < nextOf(s.checkpoint)) {
        return refuse(`checkpoint (next ${next}) is older than the stored one (next ${nextOf(s.checkpoint)})`)
      }
      const last = lastOf(stored)
      if (last !== undefined && s.entries[last.sequence]?.entry_hash !== last.entry_hash) {
        return refuse(`checkpoint ends with entry ${last.sequence}, which storage holds with another hash`)
      }
      const bytes = stored._tag === "Document" ? documentBytes(stored.document) : stateBytes(stored.state)
      s.checkpoint = stored
      s.checkpointBytes = bytes
      s.sinceCheckpointBytes = 0
      return Effect.succeed(bytes)
    })

  const history = (id: string, options?: Persistence.HistoryOptions) =>
    Stream.suspend(() => {
      const s = sessions.get(id)
      if (s === undefined) return Stream.fail(new SessionNotFound({ id }))
      const from = Math.max(0, options?.from ?? 0)
      const to = options?.limit === undefined ? s.entries.length : Math.min(s.entries.length, from + options.limit)
      return Stream.fromIterable(s.entries.slice(from, to))
    })

  const follow = (id: string, from: number) =>
    Stream.unwrap(Effect.gen(function*() {
      // Subscribe before reading the catch-up, then drop what the catch-up covered:
      // nothing appended in between is lost.
      yield* Effect.acquireRelease(
        Effect.sync(() => {
          followers++
        }),
        () =>
          Effect.sync(() => {
            followers--
          })
      )
      const sub = yield* PubSub.subscribe(appended)
      const s = sessions.get(id)
      if (s === undefined) return Stream.fail(new SessionNotFound({ id }))
      const catchUp = s.entries.slice(Math.max(0, from))
      let next = Math.max(from, s.entries.length)
      const live = Stream.fromSubscription(sub).pipe(
        Stream.filter((m) => m.id === id),
        Stream.flatMap((m) => Stream.fromIterable(m.entries)),
        Stream.filter((e) => {
          if (e.sequence < next) return false
          next = e.sequence + 1
          return true
        })
      )
      return Stream.concat(Stream.fromIterable(catchUp), live)
    }))

  const readHandle = (id: string, caps: JournalState.Caps | undefined): Persistence.ReadHandle => ({
    id,
    load: load(id, caps, "load"),
    // A full replay is long work: let other fibers (writers) run first.
    verify: Effect.andThen(Effect.yieldNow, load(id, caps, "verify"))
  })

  const openWrite = (id: string, caps: JournalState.Caps | undefined) =>
    Effect.as(
      Effect.acquireRelease(
        Effect.suspend(() => {
          const s = sessionFor(id)
          if (s.writer) return Effect.fail(new SessionLocked({ id, holder: "another writer in this process" }))
          s.writer = true
          return Effect.void
        }),
        () =>
          Effect.sync(() => {
            const s = sessions.get(id)
            if (s !== undefined) s.writer = false
          })
      ),
      {
        ...readHandle(id, caps),
        append: (request: Persistence.AppendRequest) => append(id, caps, request),
        checkpoint: (document: Checkpoint.CheckpointJson) => checkpoint(id, { _tag: "Document", document }),
        checkpointState: (state: JournalState.JournalState) => checkpoint(id, { _tag: "State", state }),
        maxRecordBytes
      } satisfies Persistence.WriteHandle
    )

  // The exported head depends on the session's caps and evictions, so it is taken
  // from a load rather than kept beside the entries: a load always agrees with them.
  const list = Effect.suspend(() =>
    Effect.forEach(
      Array.from(sessions.entries())
        .filter(([, s]) => exists(s))
        .sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0),
      ([id, s]) =>
        Effect.map(load(id, undefined, "load"), (loaded): Persistence.SessionInfo => ({
          id,
          entries: loaded.state.next_sequence,
          head: JournalState.head(loaded.state),
          lastHash: s.entries[s.entries.length - 1]?.entry_hash ?? Entry.ZERO_HASH,
          problem: loaded.recovery.stopped === null
            ? null
            : `${loaded.recovery.stopped.reason}: ${loaded.recovery.stopped.detail}`,
          updatedAt: s.updatedAt,
          bytes: null
        }))
    )
  )

  const remove = (id: string) =>
    Effect.suspend((): Effect.Effect<void, SessionLocked | SessionNotFound> => {
      const s = sessions.get(id)
      if (s === undefined) return Effect.fail(new SessionNotFound({ id }))
      if (s.writer) return Effect.fail(new SessionLocked({ id, holder: "a writer in this process" }))
      sessions.delete(id)
      return Effect.void
    })

  return {
    read: (id: string, caps: JournalState.Caps | undefined) => Effect.succeed(readHandle(id, caps)),
    write: openWrite,
    history,
    follow,
    list,
    delete: remove
  }
})
