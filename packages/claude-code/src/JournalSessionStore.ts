/**
 * The Claude Agent SDK's `SessionStore`, kept in a session journal. The SDK (the
 * `sessionStore` option of `query()`) mirrors every transcript line of a session
 * into `append` after Claude Code wrote it locally, and reads it back with `load`
 * to resume; here every line is a `claude-code.line` entry on the hash chain of its
 * own journal session, and every tool call a chio tool entry right after the line
 * that holds its result (as the archive writes them: `Transcript.pair`), so a
 * stored SDK session is an ordinary journal session
 * (`verify`, `stats`, `report`, `serve`, `export` work on it, an edited line is
 * detected), and `append` answers only once its batch is durable.
 *
 * The types below are structural copies of the SDK's (`sdk.d.ts` of
 * `@anthropic-ai/claude-agent-sdk` 0.3.328): this package never imports the SDK.
 * A test checks them against the SDK's own both ways.
 *
 * One journal session per `SessionKey`, its id derived from the key alone
 * (`sessionId`): `ccs-<P>-<H>`, where `<P>` is the first 8 hex digits of the
 * SHA-256 of `projectKey` and `<H>` the first 40 of the SHA-256 of the JSON text of
 * `[projectKey, sessionId, subpath]` (`subpath` null for a main transcript). No
 * character of a key reaches the id, so no key can name another's session or a
 * path. The session's metadata (`data.session_store`) holds the key, the session of
 * the main transcript for a sub-agent's (`parent_session`), the storage time of the
 * last append (`mtime`), the SDK's summary, and whether it was deleted.
 *
 * `append` is idempotent by `uuid`, exactly: the store keeps, per session it
 * writes, an index of the uuids stored (read once from the journal, then extended
 * by what it stores and by what other writers stored, read from where it left
 * off), and decides which entries are new inside the session's writer against the
 * very state the append builds on (`SessionJournal.writeFrom`): when another
 * process or host wrote first, it reads what they wrote and decides again. Entries
 * without a uuid are appended as they come, except where their place shows they
 * are already stored (see `internal/storeIndex.ts`). The index stays within
 * `indexBytes`, and the work of an append does not grow with the history: a
 * uuid that left the index's memory is looked for only in the stored lines of
 * the generation that may hold it.
 *
 * Every backend bounds a line alike (`MAX_LINE_BYTES`): a longer one is stored as
 * the oversized-line marker custody writes (its size and SHA-256), and `load`
 * leaves it out.
 *
 * @since 0.1.0
 */
import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex } from "@noble/hashes/utils.js"
import {
  CorruptJournal,
  CorruptReason,
  Entry as CoreEntry,
  JournalState,
  messageOf,
  Persistence,
  SessionJournal,
  StorageError,
  StorageReason
} from "@session-journal/core"
import type * as Entry from "@session-journal/core/Entry"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as RcMap from "effect/RcMap"
import * as Schema from "effect/Schema"
import * as Semaphore from "effect/Semaphore"
import * as Stream from "effect/Stream"
import * as StoreBackend from "./internal/storeBackend.ts"
import * as StoreIndex from "./internal/storeIndex.ts"
import * as Planner from "./Planner.ts"
import * as Transcript from "./Transcript.ts"

// ---------------------------------------------------------------------------
// The SDK's types, structurally

/**
 * A transcript in the store (the SDK's `SessionKey`): a main transcript has no
 * `subpath`; a sub-agent's is `subagents/agent-<id>`.
 *
 * @since 0.1.0
 */
export type SessionKey = {
  projectKey: string
  sessionId: string
  subpath?: string
}

/**
 * One transcript line (the SDK's `SessionStoreEntry`): JSON with a string `type`,
 * most with a `uuid`.
 *
 * @since 0.1.0
 */
export type SessionStoreEntry = {
  type: string
  uuid?: string
  timestamp?: string
  [k: string]: unknown
}

/**
 * The SDK's `SessionSummaryEntry`: `data` is the SDK's, stored verbatim.
 *
 * @since 0.1.0
 */
export type SessionSummaryEntry = {
  sessionId: string
  mtime: number
  data: Record<string, unknown>
}

/**
 * The SDK's `foldSessionSummary` (pass the SDK's own export as `foldSessionSummary`).
 *
 * @since 0.1.0
 */
export type FoldSessionSummary = (
  prev: SessionSummaryEntry | undefined,
  key: SessionKey,
  entries: SessionStoreEntry[],
  options?: { mtime?: number }
) => SessionSummaryEntry

/**
 * The SDK's `SessionStore`, the object `query({ options: { sessionStore } })` takes.
 *
 * @since 0.1.0
 */
export type SessionStore = {
  append(key: SessionKey, entries: SessionStoreEntry[]): Promise<void>
  load(key: SessionKey): Promise<SessionStoreEntry[] | null>
  listSessions?(projectKey: string): Promise<Array<{ sessionId: string; mtime: number }>>
  listSessionSummaries?(projectKey: string): Promise<SessionSummaryEntry[]>
  delete?(key: SessionKey): Promise<void>
  listSubkeys?(key: { projectKey: string; sessionId: string }): Promise<string[]>
}

// ---------------------------------------------------------------------------
// Errors

/**
 * A `SessionKey` the store cannot take: an empty `projectKey` or `sessionId`, or
 * an empty `subpath` (the SDK omits it for a main transcript).
 *
 * @since 0.1.0
 */
export class InvalidSessionKey extends Schema.TaggedError<InvalidSessionKey>()("InvalidSessionKey", {
  field: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `session key: ${this.field} ${this.reason}`
  }
}

/**
 * An entry of a batch that has no JSON text (`JSON.stringify` threw, or gave
 * nothing): the batch is refused, nothing of it is stored.
 *
 * @since 0.1.0
 */
export class EntryNotJson extends Schema.TaggedError<EntryNotJson>()("EntryNotJson", {
  index: Schema.Number,
  reason: Schema.String
}) {
  override get message(): string {
    return `entry ${this.index} of the batch is not JSON: ${this.reason}`
  }
}

/**
 * Failures of the store's operations: its own, and the journal's.
 *
 * @since 0.1.0
 */
export type StoreError = InvalidSessionKey | EntryNotJson | SessionJournal.WriteError | SessionJournal.ReadError

// ---------------------------------------------------------------------------
// Ids

/**
 * Prefix of every session id of the store.
 *
 * @since 0.1.0
 */
export const PREFIX = "ccs-"

const hex = (text: string, digits: number): string =>
  bytesToHex(sha256(new TextEncoder().encode(text))).slice(0, digits)

/**
 * The start of the session ids of a project key's transcripts.
 *
 * @since 0.1.0
 */
export const projectPrefix = (projectKey: string): string => `${PREFIX}${hex(projectKey, 8)}-`

/**
 * The journal session id of a key (see the module header for the rule).
 *
 * @since 0.1.0
 */
export const sessionId = (key: SessionKey): string =>
  projectPrefix(key.projectKey) + hex(JSON.stringify([key.projectKey, key.sessionId, key.subpath ?? null]), 40)

/**
 * The kind of the entry `delete` records (with `allowDelete`).
 *
 * @since 0.1.0
 */
export const DELETE_KIND = StoreIndex.DELETE_KIND

const checkKey = (key: SessionKey): Effect.Effect<string, InvalidSessionKey> => {
  if (typeof key?.projectKey !== "string" || key.projectKey === "") {
    return Effect.fail(new InvalidSessionKey({ field: "projectKey", reason: "must be a non-empty string" }))
  }
  if (typeof key.sessionId !== "string" || key.sessionId === "") {
    return Effect.fail(new InvalidSessionKey({ field: "sessionId", reason: "must be a non-empty string" }))
  }
  if (key.subpath !== undefined && (typeof key.subpath !== "string" || key.subpath === "")) {
    return Effect.fail(new InvalidSessionKey({ field: "subpath", reason: "must be a non-empty string when present" }))
  }
  return Effect.succeed(sessionId(key))
}

// ---------------------------------------------------------------------------
// Lines

/**
 * The bound of a stored line, the same on every backend: 4 MiB, counted as its
 * entry holds it (the entry's JSON text written as a JSON string, in UTF-8 bytes;
 * so every line up to 2 MiB is kept, whatever it holds). Within it a line fits
 * the filesystem's 8 MiB record and PostgreSQL's 16 MiB payload with room to
 * spare. A longer line is stored as a `claude-code.oversized-line` marker, the
 * shape custody uses (`Planner.OVERSIZED_KIND`): `{ n, bytes, sha256 }`, the UTF-8
 * size and SHA-256 of its JSON text, plus the entry's `uuid` (as the index keys
 * it) when it has one, so a retry stores it once. The append succeeds and keeps
 * every other line; `load` leaves such a line out (its bytes were not kept), and
 * its tool calls are not recorded.
 *
 * @since 0.1.0
 */
export const MAX_LINE_BYTES = 4 * 1024 * 1024

const encoder = new TextEncoder()

// What a marker keeps of a line above `MAX_LINE_BYTES`, or undefined for a line
// within it. A UTF-16 unit is at most 3 UTF-8 bytes and at most doubled by
// escaping (the line is JSON text: no control characters), so short lines are
// not measured.
const oversizedOf = (line: string): Transcript.Oversized | undefined => {
  if (line.length * 6 + 2 <= MAX_LINE_BYTES) return undefined
  if (Transcript.utf8Length(JSON.stringify(line)) <= MAX_LINE_BYTES) return undefined
  const value = Transcript.oversized(encoder.encode(line))
  return Transcript.isOversized(value) ? value.oversized : undefined
}

// The marker of line `n`, above the bound.
const markerItem = (n: number, o: Transcript.Oversized, uuid: string | undefined): SessionJournal.WriteItem => ({
  _tag: "Other",
  kind: Planner.OVERSIZED_KIND,
  payload: { n, bytes: o.bytes, sha256: o.sha256, ...(uuid !== undefined ? { uuid } : {}) }
})

// ---------------------------------------------------------------------------
// Metadata

/**
 * What the session's metadata (`data.session_store`) says of a stored transcript.
 *
 * @since 0.1.0
 */
export interface StoredMeta {
  readonly project_key: string
  readonly session_id: string
  readonly subpath?: string
  /** The journal session of the main transcript (sub-agent transcripts only). */
  readonly parent_session?: string
  /** Storage time of the last append, integer milliseconds since the epoch, strictly increasing. */
  readonly mtime: number
  readonly deleted: boolean
  readonly summary?: SessionSummaryEntry
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

/**
 * The store's metadata of a session, or undefined when it has none.
 *
 * @since 0.1.0
 */
export const storedMeta = (state: JournalState.JournalState): StoredMeta | undefined => {
  const data = state.meta?.data
  const m = isRecord(data) ? data["session_store"] : undefined
  if (!isRecord(m) || typeof m["project_key"] !== "string" || typeof m["session_id"] !== "string") return undefined
  const summary = m["summary"]
  return {
    project_key: m["project_key"],
    session_id: m["session_id"],
    ...(typeof m["subpath"] === "string" ? { subpath: m["subpath"] } : {}),
    ...(typeof m["parent_session"] === "string" ? { parent_session: m["parent_session"] } : {}),
    mtime: typeof m["mtime"] === "number" ? m["mtime"] : 0,
    deleted: m["deleted"] === true,
    ...(isRecord(summary) && typeof summary["sessionId"] === "string" && typeof summary["mtime"] === "number" &&
        isRecord(summary["data"])
      ? { summary: { sessionId: summary["sessionId"], mtime: summary["mtime"], data: summary["data"] } }
      : {})
  }
}

// The metadata data of a session after an append or a deletion at `nowMillis`.
const nextData = (
  state: JournalState.JournalState,
  key: SessionKey,
  nowMillis: number,
  change: {
    readonly deleted: boolean
    readonly summary: (prev: SessionSummaryEntry | undefined, mtime: number) => SessionSummaryEntry | undefined
  }
): Schema.Json => {
  const data = state.meta?.data
  const prev = storedMeta(state)
  const mtime = Math.max(nowMillis, (prev?.mtime ?? 0) + 1)
  const summary = change.summary(prev?.deleted === true ? undefined : prev?.summary, mtime)
  const meta = {
    project_key: key.projectKey,
    session_id: key.sessionId,
    ...(key.subpath !== undefined
      ? { subpath: key.subpath, parent_session: sessionId({ projectKey: key.projectKey, sessionId: key.sessionId }) }
      : {}),
    mtime,
    deleted: change.deleted,
    ...(summary !== undefined ? { summary } : {})
  }
  return { ...(isRecord(data) ? data : {}), session_store: meta } as Schema.Json
}

// ---------------------------------------------------------------------------
// The service

/**
 * Options of the store.
 *
 * @since 0.1.0
 */
export interface Options {
  /**
   * The SDK's `foldSessionSummary` (`import { foldSessionSummary } from
   * "@anthropic-ai/claude-agent-sdk"`): with it, each append folds its new entries
   * into the session's summary (stored with them, in the same durable append) and
   * the store has `listSessionSummaries`; without it, the SDK lists sessions by
   * `listSessions` and `load`.
   */
  readonly foldSessionSummary?: FoldSessionSummary | undefined
  /**
   * With `true`, `delete` records a deletion on the session's chain and hides the
   * session (and, for a main transcript, its sub-agents') from `load` and the
   * lists; nothing is erased. Default false: the store has no `delete`, which the
   * SDK treats as a no-op.
   */
  readonly allowDelete?: boolean | undefined
  /**
   * How long an append waits for a session another process holds (the filesystem
   * allows one writer process per session, released when idle) before it fails
   * with `SessionLocked` (default 10 seconds, well inside the SDK's 60 s timeout).
   * An interval option that is no duration, or a negative one, fails `make` and
   * `layer` with a `StorageError` whose reason is `InvalidOption` naming it.
   */
  readonly lockWait?: Duration.Input | undefined
  /** How long the uuid index of a session no one appends to stays in memory (default 5 minutes). */
  readonly indexIdleTimeToLive?: Duration.Input | undefined
  /**
   * The budget, in estimated heap bytes, of the uuids a session's index keeps in
   * memory (default 1 MiB): half for the newest uuids, each with its line, half
   * for Bloom filters over the older ones in generations of consecutive lines (at
   * 32 bits a uuid: with the default, about 130,000 uuids besides the newest
   * 3,800). A uuid a generation may hold is looked for in that generation's
   * stored lines only, so an append stays exactly idempotent and its cost does not
   * grow with the history. Past what the budget holds, the oldest generations are
   * merged: the index stays within its bytes, and lookups of new uuids read
   * stored lines more often. A number below 0 or not finite fails `make` and
   * `layer` with a `StorageError` whose reason is `InvalidOption` naming it.
   */
  readonly indexBytes?: number | undefined
}

/**
 * The store's operations as effects, and the SDK's Promise object over them.
 *
 * @since 0.1.0
 */
export interface Operations {
  /** Stores the entries not stored yet, in order; completes once they are durable. */
  readonly append: (key: SessionKey, entries: ReadonlyArray<SessionStoreEntry>) => Effect.Effect<void, StoreError>
  /** Every stored entry of the key, in order (after its last deletion); null when none. */
  readonly load: (key: SessionKey) => Effect.Effect<Array<SessionStoreEntry> | null, StoreError>
  /** The main transcripts of a project key, with the storage time of their last append. */
  readonly listSessions: (
    projectKey: string
  ) => Effect.Effect<Array<{ sessionId: string; mtime: number }>, StorageError>
  /**
   * The SDK's summaries of a project key's sessions: only with
   * `foldSessionSummary`, the one way the store can answer (the SDK treats the
   * method as optional and lists sessions by `listSessions` and `load` without it).
   */
  readonly listSessionSummaries?:
    | ((projectKey: string) => Effect.Effect<Array<SessionSummaryEntry>, StorageError>)
    | undefined
  /** The subpaths stored under a session (its sub-agents' transcripts). */
  readonly listSubkeys: (key: { projectKey: string; sessionId: string }) => Effect.Effect<Array<string>, StorageError>
  /** With `allowDelete`, records the deletion (see `Options.allowDelete`); otherwise does nothing. */
  readonly delete: (key: SessionKey) => Effect.Effect<void, StoreError>
  /** The SDK's `SessionStore` over these operations. */
  readonly sessionStore: SessionStore
}

/**
 * The store as a service, for Effect programs.
 *
 * @since 0.1.0
 */
export class Service
  extends Context.Service<Service, Operations>()("@session-journal/claude-code/JournalSessionStore")
{}

interface Pending {
  readonly key: SessionKey
  readonly items: ReadonlyArray<StoreIndex.Item & { readonly entry: SessionStoreEntry }>
  readonly deferred: Deferred.Deferred<void, StoreError>
}

interface Session {
  readonly index: StoreIndex.Index
  /** The stored line of the last entry of this store's previous append (see `StoreIndex.plan`). */
  cursor: number | undefined
  readonly lock: Semaphore.Semaphore
  readonly pending: Array<Pending>
}

// Whose tool calls a transcript's are: `main` (depth 0), or the sub-agent's id of a
// `subagents/agent-<id>` subpath (depth 1; another subpath names no agent: `subagent`).
const agentOf = (key: SessionKey): { readonly id: string; readonly depth: number } => {
  if (key.subpath === undefined) return { id: "main", depth: 0 }
  const m = /^subagents\/agent-(.+)$/.exec(key.subpath)
  return { id: m !== null && CoreEntry.isIdentity(m[1]!) ? m[1]! : "subagent", depth: 1 }
}

// Rounds of "another writer stored first: read it, decide again" before giving up.
const MAX_ROUNDS = 1000

/**
 * Builds the store on the `SessionJournal` service.
 *
 * @since 0.1.0
 */
export const make = Effect.fnUntraced(function*(options?: Options) {
  const journal = yield* SessionJournal.SessionJournal
  const fold = options?.foldSessionSummary
  const allowDelete = options?.allowDelete === true
  const lockWait = Duration.toMillis(yield* Persistence.decodeInterval("lockWait", options?.lockWait, "10 seconds"))
  const indexIdleTimeToLive = yield* Persistence.decodeInterval(
    "indexIdleTimeToLive",
    options?.indexIdleTimeToLive,
    "5 minutes"
  )
  const indexBytes = options?.indexBytes ?? StoreIndex.DEFAULT_BUDGET
  if (!Number.isFinite(indexBytes) || indexBytes < 0) {
    return yield* new StorageError({
      operation: "configure",
      reason: new StorageReason.InvalidOption({
        option: "indexBytes",
        message: `invalid indexBytes ${indexBytes}: not a number of bytes (0 or more)`
      })
    })
  }
  const sessions = yield* RcMap.make({
    lookup: (_id: string) =>
      Effect.sync((): Session => ({
        index: StoreIndex.empty(indexBytes),
        cursor: undefined,
        lock: Semaphore.makeUnsafe(1),
        pending: []
      })),
    idleTimeToLive: indexIdleTimeToLive
  })

  // Another process holding the session (filesystem): wait for it, within bounds.
  // The wait is measured on Effect's Clock, as its sleeps are.
  const patiently = <A, E extends { readonly _tag: string }>(effect: Effect.Effect<A, E>): Effect.Effect<A, E> =>
    Effect.flatMap(Clock.currentTimeMillis, (start) => {
      const deadline = start + lockWait
      const attempt = (delay: number): Effect.Effect<A, E> =>
        Effect.catchIf(
          effect,
          (e) => e._tag === "SessionLocked",
          (e) =>
            Effect.flatMap(Clock.currentTimeMillis, (now) =>
              now + delay < deadline
                ? Effect.andThen(Effect.sleep(delay), attempt(Math.min(delay * 2, 250)))
                : Effect.fail(e))
        )
      return attempt(10)
    })

  // Folds what storage holds past the index; starts over once when storage does
  // not continue what was read.
  const catchUp = (id: string, index: StoreIndex.Index) => {
    const read = (first: boolean): Effect.Effect<void, StoreError> =>
      Effect.suspend(() => {
        let broken = false
        return Effect.andThen(
          Stream.runForEach(journal.entries(id, { from: index.covered }), (e) =>
            Effect.sync(() => {
              if (!broken && !StoreIndex.fold(index, e)) broken = true
            })),
          Effect.suspend(() => {
            if (!broken) return Effect.void
            if (!first) {
              // Read from its start, the session still does not read as one chain.
              return Effect.fail(
                new CorruptJournal({
                  segment: id,
                  offset: index.covered,
                  reason: new CorruptReason.BrokenChain()
                })
              )
            }
            StoreIndex.reset(index)
            return read(false)
          })
        )
      })
    return Effect.catchTag(read(true), "SessionNotFound", () => Effect.void)
  }

  // The stored lines the probes compare with (by line number), read in contiguous ranges.
  const readProbes = (id: string, index: StoreIndex.Index, probes: ReadonlyArray<StoreIndex.Probe>) =>
    Effect.gen(function*() {
      const found = new Map<number, Entry.Entry>()
      const ranges = probes
        .map((p) => [index.sequenceOf[Math.min(...p.lines) - 1]!, index.sequenceOf[Math.max(...p.lines) - 1]!] as const)
        .sort((a, b) => a[0] - b[0])
      const merged: Array<[number, number]> = []
      for (const [lo, hi] of ranges) {
        const last = merged[merged.length - 1]
        if (last !== undefined && lo <= last[1] + 256) last[1] = Math.max(last[1], hi)
        else merged.push([lo, hi])
      }
      for (const [lo, hi] of merged) {
        yield* Stream.runForEach(
          journal.entries(id, { from: lo, limit: hi - lo + 1 }),
          (e) => Effect.sync(() => void found.set(e.sequence, e))
        )
      }
      return (n: number): Entry.Entry | undefined => {
        const sequence = index.sequenceOf[n - 1]
        return sequence === undefined ? undefined : found.get(sequence)
      }
    })

  // Adds to `found` a line from `from` through `through` of each uuid of
  // `keys` it lacks, reading those stored lines until every one is found.
  const scanUuids = (
    id: string,
    index: StoreIndex.Index,
    keys: ReadonlySet<string>,
    range: StoreIndex.Range,
    found: Map<string, number>
  ): Effect.Effect<void, StoreError> =>
    Effect.suspend(() => {
      if (range.from > range.through || found.size === keys.size) return Effect.void
      const first = index.sequenceOf[range.from - 1]!
      const last = index.sequenceOf[range.through - 1]!
      let n = range.from
      return Stream.runForEach(
        journal.entries(id, { from: first, limit: last - first + 1 }).pipe(
          Stream.takeWhile(() => found.size < keys.size)
        ),
        (e) =>
          Effect.sync(() => {
            if (!Planner.isLineEntry(e)) return
            const uuid = StoreIndex.uuidOfEntry(e)
            if (uuid !== undefined && keys.has(uuid) && !found.has(uuid)) found.set(uuid, n)
            n++
          })
      )
    })

  // The lines of the uuids the index cannot place alone (`StoreIndex.unresolved`):
  // only the lines of the generations that may hold them. A replay goes forward,
  // so in the range holding the line of this store's previous append, the lines
  // after it are read first, then those before it.
  const findUuids = (
    id: string,
    index: StoreIndex.Index,
    cursor: number | undefined,
    wanted: NonNullable<ReturnType<typeof StoreIndex.unresolved>>
  ) =>
    Effect.suspend(() => {
      const found = new Map<string, number>()
      const ranges: Array<StoreIndex.Range> = []
      for (const r of wanted.ranges) {
        if (cursor !== undefined && cursor > r.from && cursor <= r.through) {
          ranges.unshift({ from: cursor, through: r.through }, { from: r.from, through: cursor - 1 })
        } else {
          ranges.push(r)
        }
      }
      return Effect.as(
        Effect.forEach(ranges, (r) => scanUuids(id, index, wanted.keys, r, found), { discard: true }),
        found
      )
    })

  // Stores the new entries of `items` for `key`; the caller holds the session's lock.
  const store = (id: string, key: SessionKey, session: Session, items: Pending["items"]) =>
    Effect.gen(function*() {
      const index = session.index
      const agent = agentOf(key)
      for (let round = 0;; round++) {
        // The index is read further only when the plan finds it behind the session
        // (another writer appended, or this store has not read the session yet): an
        // append of this store's own, the usual case, reads nothing.
        if (round > 0) yield* catchUp(id, index)
        // Uuids that left the index's memory are looked for in the lines they may be on.
        const wanted = StoreIndex.unresolved(index, items)
        const resolved = wanted === undefined ? undefined : yield* findUuids(id, index, session.cursor, wanted)
        const { fresh, known, probes } = StoreIndex.plan(index, items, session.cursor, resolved)
        if (probes.length > 0) StoreIndex.settle(fresh, known, items, probes, yield* readProbes(id, index, probes))
        const chosen = items.filter((_, i) => fresh[i])
        // Everything is stored already (and was durable when it was read or acknowledged).
        if (chosen.length === 0) {
          session.cursor = known[items.length - 1]
          return
        }
        const expected = index.covered
        const expectedHash = index.lastHash
        const firstLine = index.lines + 1
        // Each line, then the tool calls it completes (chio tool entries, as the
        // archive writes them), paired on top of the index's pairing.
        const pairing = StoreIndex.overlay(index.pairing)
        const writes: Array<SessionJournal.WriteItem> = []
        chosen.forEach((c, k) => {
          if (c.oversized !== undefined) {
            // Its size and hash stand for it, with its uuid so that the append stays idempotent.
            writes.push(markerItem(firstLine + k, c.oversized, c.uuid))
            return
          }
          writes.push(Planner.lineItem(firstLine + k, { text: c.line }))
          for (const params of Transcript.pair(pairing, Transcript.parse(c.line), agent.id, agent.depth)) {
            writes.push({ _tag: "Tool", params })
          }
        })
        const planned = yield* patiently(journal.writeFrom(id, (state, nowMillis) => {
          const tipHash = JournalState.entryCount(state) > 0 ? JournalState.lastHash(state) : null
          // The index must describe exactly what this append builds on.
          if (
            state.next_sequence !== expected || (tipHash !== null && expectedHash !== null && tipHash !== expectedHash)
          ) {
            return { items: [], result: false }
          }
          const data = nextData(state, key, nowMillis, {
            deleted: false,
            summary: (prev, mtime) =>
              fold !== undefined && key.subpath === undefined
                ? fold(prev, key, chosen.map((c) => c.entry), { mtime })
                : prev
          })
          return { items: writes, meta: { data }, result: true }
        }))
        if (planned.result) {
          for (const e of planned.entries) StoreIndex.fold(index, e)
          session.cursor = fresh[items.length - 1] ? firstLine + chosen.length - 1 : known[items.length - 1]
          return
        }
        if (round >= MAX_ROUNDS) {
          return yield* Effect.die(new Error(`session ${id}: ${MAX_ROUNDS} rounds lost to other writers`))
        }
      }
    })

  // Takes every queued append of the session (group commit) and stores them as one.
  const drain = (id: string, session: Session) =>
    Effect.suspend(() => {
      const batch = session.pending.splice(0)
      if (batch.length === 0) return Effect.void
      const items = batch.length === 1 ? batch[0]!.items : batch.flatMap((r) => r.items)
      return Effect.flatMap(Effect.exit(store(id, batch[0]!.key, session, items)), (exit) =>
        Effect.sync(() => {
          for (const r of batch) Deferred.doneUnsafe(r.deferred, exit)
        }))
    })

  const append = (key: SessionKey, entries: ReadonlyArray<SessionStoreEntry>): Effect.Effect<void, StoreError> =>
    Effect.gen(function*() {
      const id = yield* checkKey(key)
      // The text is taken now: the caller may change its objects once the call returns.
      const summarize = fold !== undefined && key.subpath === undefined
      const items: Array<Pending["items"][number]> = []
      for (let i = 0; i < entries.length; i++) {
        const entry = entries[i]!
        let line: string | undefined
        try {
          line = JSON.stringify(entry)
        } catch (e) {
          return yield* new EntryNotJson({ index: i, reason: messageOf(e) })
        }
        if (typeof line !== "string" || !isRecord(entry)) {
          return yield* new EntryNotJson({ index: i, reason: "not a JSON object" })
        }
        // The summary folds a copy (the caller's object may change meanwhile).
        items.push({
          line,
          uuid: StoreIndex.uuidOf(entry),
          oversized: oversizedOf(line),
          entry: summarize ? JSON.parse(line) as SessionStoreEntry : entry
        })
      }
      if (items.length === 0) return
      const deferred = Deferred.makeUnsafe<void, StoreError>()
      const copy: SessionKey = key.subpath !== undefined
        ? { projectKey: key.projectKey, sessionId: key.sessionId, subpath: key.subpath }
        : { projectKey: key.projectKey, sessionId: key.sessionId }
      yield* Effect.scoped(Effect.gen(function*() {
        const session = yield* RcMap.get(sessions, id)
        session.pending.push({ key: copy, items, deferred })
        yield* session.lock.withPermit(drain(id, session))
      }))
      return yield* Deferred.await(deferred)
    })

  const load = (key: SessionKey): Effect.Effect<Array<SessionStoreEntry> | null, StoreError> =>
    Effect.gen(function*() {
      const id = yield* checkKey(key)
      let lines: Array<string> = []
      let exists = false
      const read = Stream.runForEach(journal.entries(id), (e) =>
        Effect.sync(() => {
          if (e.kind === Planner.LINE_KIND) {
            const value = Planner.lineOf(e.payload)
            if (value !== undefined && "text" in value) {
              lines.push(value.text)
              exists = true
            }
          } else if (e.kind === Planner.OVERSIZED_KIND) {
            // Its bytes were not kept: the line is left out (see `MAX_LINE_BYTES`).
            exists = true
          } else if (e.kind === DELETE_KIND) {
            lines = []
            exists = false
          }
        }))
      const found = yield* read.pipe(Effect.as(true), Effect.catchTag("SessionNotFound", () => Effect.succeed(false)))
      if (!found || !exists) return null
      return lines.map((l) => JSON.parse(l) as SessionStoreEntry)
    })

  // The store's sessions of a project key, with their metadata. A session that
  // cannot be read is left out of the lists (`verify` names it).
  const sessionsOf = (projectKey: string) =>
    Effect.gen(function*() {
      const prefix = projectPrefix(projectKey)
      const out: Array<{ readonly id: string; readonly meta: StoredMeta }> = []
      for (const info of yield* journal.list) {
        if (!info.id.startsWith(prefix)) continue
        const state = yield* Effect.option(journal.state(info.id))
        if (state._tag === "None") continue
        const meta = storedMeta(state.value)
        if (meta !== undefined && meta.project_key === projectKey && !meta.deleted) out.push({ id: info.id, meta })
      }
      return out
    })

  const listSessions = (projectKey: string) =>
    Effect.map(
      sessionsOf(projectKey),
      (all) =>
        all.filter((s) => s.meta.subpath === undefined).map((s) => ({
          sessionId: s.meta.session_id,
          mtime: Math.floor(s.meta.mtime)
        }))
    )

  const listSessionSummaries = (projectKey: string) =>
    Effect.map(sessionsOf(projectKey), (all) => {
      const out: Array<SessionSummaryEntry> = []
      for (const s of all) if (s.meta.subpath === undefined && s.meta.summary !== undefined) out.push(s.meta.summary)
      return out
    })

  const listSubkeys = (key: { projectKey: string; sessionId: string }) =>
    Effect.map(sessionsOf(key.projectKey), (all) => {
      const out: Array<string> = []
      for (const s of all) {
        if (s.meta.session_id === key.sessionId && s.meta.subpath !== undefined) out.push(s.meta.subpath)
      }
      return out
    })

  // One key's deletion: an entry on its chain, the metadata marked, under the
  // session's lock so its index follows.
  const deleteOne = (key: SessionKey) =>
    Effect.gen(function*() {
      const id = yield* checkKey(key)
      yield* Effect.scoped(Effect.gen(function*() {
        const session = yield* RcMap.get(sessions, id)
        yield* session.lock.withPermit(Effect.gen(function*() {
          yield* patiently(journal.writeFrom(id, (state, nowMillis) => {
            const meta = storedMeta(state)
            if (state.next_sequence === 0 || meta === undefined || meta.deleted) return { items: [], result: undefined }
            return {
              items: [{ _tag: "Other", kind: DELETE_KIND, payload: { key: { ...key } } }],
              meta: { data: nextData(state, key, nowMillis, { deleted: true, summary: () => undefined }) },
              result: undefined
            }
          }))
          yield* catchUp(id, session.index)
        }))
      }))
    })

  const remove = (key: SessionKey): Effect.Effect<void, StoreError> =>
    !allowDelete ? Effect.void : Effect.gen(function*() {
      yield* deleteOne(key)
      if (key.subpath !== undefined) return
      for (const subpath of yield* listSubkeys(key)) {
        yield* deleteOne({ projectKey: key.projectKey, sessionId: key.sessionId, subpath })
      }
    })

  const services = yield* Effect.context<never>()
  const run = Effect.runPromiseWith(services)
  const sessionStore: SessionStore = {
    append: (key, entries) => run(append(key, entries)),
    load: (key) => run(load(key)),
    listSessions: (projectKey) => run(listSessions(projectKey)),
    listSubkeys: (key) => run(listSubkeys(key)),
    ...(fold !== undefined
      ? { listSessionSummaries: (projectKey: string) => run(listSessionSummaries(projectKey)) }
      : {}),
    ...(allowDelete ? { delete: (key: SessionKey) => run(remove(key)) } : {})
  }

  return Service.of({
    append,
    load,
    listSessions,
    ...(fold !== undefined ? { listSessionSummaries } : {}),
    listSubkeys,
    delete: remove,
    sessionStore
  })
})

/**
 * The store as a layer over the `SessionJournal` service.
 *
 * @since 0.1.0
 */
export const layer = (options?: Options): Layer.Layer<Service, StorageError, SessionJournal.SessionJournal> =>
  Layer.effect(Service, make(options))

// ---------------------------------------------------------------------------
// Promise API

/**
 * Options of `open`: where the journal is (a directory, or a PostgreSQL URL), and
 * the store's options.
 *
 * @since 0.1.0
 */
export type OpenOptions =
  & Options
  & {
    /**
     * How long a session with nothing to write stays open in the journal service.
     * On the filesystem (one writer process per session) the default is 1 second,
     * so that another process can take the session soon after; on PostgreSQL
     * (writers of every host share sessions) the service's own default, 30 seconds.
     */
    readonly idleTimeToLive?: Duration.Input | undefined
  }
  & (
    | { readonly dir: string; readonly postgres?: undefined }
    | {
      readonly postgres: string
      /** Table prefix (default `session_journal_`); every host sharing sessions uses the same. */
      readonly tablePrefix?: string | undefined
      readonly dir?: undefined
    }
  )

/**
 * What `open` gives: the SDK's `SessionStore`, and `close`.
 *
 * @since 0.1.0
 */
export type Store = SessionStore & {
  /** Finishes what is queued, releases every session and closes the journal. */
  readonly close: () => Promise<void>
}

/**
 * What `open` gives with `foldSessionSummary`: a store that has `listSessionSummaries`.
 *
 * @since 0.1.0
 */
export type StoreWithSummaries = Store & {
  listSessionSummaries(projectKey: string): Promise<Array<SessionSummaryEntry>>
}

/**
 * What `open` gives without `foldSessionSummary`: a store that has no
 * `listSessionSummaries` (it could not answer), so the SDK lists sessions by
 * `listSessions` and `load`.
 *
 * @since 0.1.0
 */
export type StoreWithoutSummaries = Store & { readonly listSessionSummaries?: undefined }

/**
 * Opens a store for the SDK: a journal in `dir` (the filesystem) or at `postgres`
 * (a URL; several hosts may share sessions), with its own `SessionJournal`.
 *
 * ```ts
 * const store = await JournalSessionStore.open({ dir: "./.session-journal" })
 * for await (const m of query({ prompt, options: { sessionStore: store } })) console.log(m)
 * await store.close()
 * ```
 *
 * The type of the store says whether it has `listSessionSummaries`: it has with
 * `foldSessionSummary` (`StoreWithSummaries`), and has not without it
 * (`StoreWithoutSummaries`).
 *
 * @since 0.1.0
 */
export function open(
  options: OpenOptions & { readonly foldSessionSummary: FoldSessionSummary }
): Promise<StoreWithSummaries>
export function open(options: OpenOptions & { readonly foldSessionSummary?: undefined }): Promise<StoreWithoutSummaries>
export function open(options: OpenOptions): Promise<Store>
export async function open(options: OpenOptions): Promise<Store> {
  const live = layer(options).pipe(
    Layer.provide(SessionJournal.layer({
      idleTimeToLive: options.idleTimeToLive ?? (options.postgres === undefined ? "1 second" : undefined)
    })),
    Layer.provide(StoreBackend.persistence(options))
  )
  const runtime = ManagedRuntime.make(live)
  const exit = await runtime.runPromiseExit(Effect.gen(function*() {
    return yield* Service
  }))
  if (Exit.isFailure(exit)) {
    await runtime.dispose()
    throw Cause.squash(exit.cause)
  }
  return { ...exit.value.sessionStore, close: () => runtime.dispose() }
}
