/**
 * What a report page of one session shows, read from the journal: the figures
 * of its entries computed in one pass (`Summary`), the sessions it names as
 * related, the verification done for the page, the entries it does not vouch for
 * and the head (`Model`, `Overview`). The page's HTML is `Report`'s.
 *
 * @since 0.1.0
 */
import { Entry, Follow, JournalState, SessionJournal } from "@session-journal/core"
import type { CorruptJournal, SessionMeta } from "@session-journal/core"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Stream from "effect/Stream"
import { ChangedWhileRead } from "../Failure.ts"
import * as Storage from "../Storage.ts"
import * as Verify from "../Verify.ts"
import * as Conversation from "./Conversation.ts"
import * as Denials from "./Denials.ts"
import * as Stories from "./Stories.ts"

/**
 * Figures of a session computed in one pass over its entries.
 *
 * @since 0.1.0
 */
export interface Summary {
  readonly entries: number
  /** Message entries and transcript lines of the user or the assistant. */
  readonly messages: number
  readonly tools: number
  readonly others: number
  readonly denied: number
  /** The earliest and the latest time (a transcript line's: the time it states). */
  readonly firstSecs: number | null
  readonly lastSecs: number | null
  /** Calls per tool name, denied calls included (as `stats` counts them). */
  readonly toolCounts: ReadonlyMap<string, number>
  /** Denials per guard reason, where entries record one (see `deniedReasons`). */
  readonly reasons: ReadonlyMap<string, number>
  /** The denied calls with the guards that denied them (`Denials`). */
  readonly denials: Denials.Result
  /** Bytes read and written over the whole session. */
  readonly read: number
  readonly written: number
  /**
   * Bytes read and written up to and including every `stride`-th entry (each
   * entry while the session has at most `MAX_SERIES` of them), and then up to
   * the last entry: at most `MAX_SERIES` + 1 values whatever the session's length.
   */
  readonly cumulativeRead: ReadonlyArray<number>
  readonly cumulativeWritten: ReadonlyArray<number>
  readonly stride: number
}

/**
 * The most points a summary keeps of its cumulative byte series; past it every
 * other point is dropped and the stride doubles.
 *
 * @since 0.1.0
 */
export const MAX_SERIES = 800

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

/**
 * The guard reasons a payload records for denied calls: objects
 * `{"type":"execution-denied","reason":…}` (what `@session-journal/ai` returns to
 * the model for a denied call), `denied_reason` fields (as `demo --json`
 * prints them) and decision entries `{"verdict":"deny","reason":…}` (`Denials`),
 * searched a few levels deep.
 *
 * @since 0.1.0
 */
export const deniedReasons = (payload: unknown): Array<string> => {
  const out: Array<string> = []
  const visit = (v: unknown, depth: number) => {
    if (depth > 6) return
    if (Array.isArray(v)) {
      for (const x of v) visit(x, depth + 1)
    } else if (isRecord(v)) {
      if (v["type"] === "execution-denied" && typeof v["reason"] === "string") out.push(v["reason"])
      if (typeof v["denied_reason"] === "string") out.push(v["denied_reason"])
      if (v["verdict"] === "deny" && typeof v["reason"] === "string") out.push(v["reason"])
      for (const k in v) visit(v[k], depth + 1)
    }
  }
  visit(payload, 0)
  return out
}

/**
 * A summary built one entry at a time, for a history read as a stream: `add`
 * each entry in order, then `summary` (at any point, as often as wanted). It
 * keeps the counts and the two cumulative byte series (at most `MAX_SERIES`
 * points each), not the entries: its memory does not grow with the history.
 *
 * @since 0.1.0
 */
export interface Summarizer {
  readonly add: (entry: Entry.Entry) => void
  readonly summary: () => Summary
}

/**
 * A new, empty `Summarizer`.
 *
 * @since 0.1.0
 */
export const summarizer = (): Summarizer => {
  let count = 0, messages = 0, tools = 0, others = 0, denied = 0, read = 0, written = 0
  let firstSecs: number | null = null
  let lastSecs: number | null = null
  const toolCounts = new Map<string, number>()
  const reasons = new Map<string, number>()
  let cumulativeRead: Array<number> = []
  let cumulativeWritten: Array<number> = []
  let stride = 1
  const halve = (xs: Array<number>) => xs.filter((_, i) => i % 2 === 1)
  const denials = Denials.tally()
  return {
    add: (e) => {
      count++
      denials.add(e)
      // A transcript line happened when the transcript says, not when it was journaled.
      const turn = e.kind === Conversation.LINE_KIND ? Conversation.ofEntry(e) : null
      const secs = turn?.timestamp == null ? e.timestamp_secs : Math.floor(turn.timestamp / 1000)
      firstSecs = firstSecs === null || secs < firstSecs ? secs : firstSecs
      lastSecs = lastSecs === null || secs > lastSecs ? secs : lastSecs
      if (Entry.isTool(e)) {
        tools++
        if (!e.allowed) denied++
        toolCounts.set(e.tool_name, (toolCounts.get(e.tool_name) ?? 0) + 1)
        read += e.bytes_read
        written += e.bytes_written
      } else {
        if (e.kind === "message" || (turn !== null && turn.role !== "note")) messages++
        else others++
        // An outcome's bytes count as `stats` counts them (docs/DESIGN.md §13).
        if (e.kind === Entry.OUTCOME_KIND) {
          const flow = Entry.outcomeBytes(e.payload)
          read += flow.read
          written += flow.written
        }
        for (const r of deniedReasons(e.payload)) reasons.set(r, (reasons.get(r) ?? 0) + 1)
      }
      if (count % stride === 0) {
        cumulativeRead.push(read)
        cumulativeWritten.push(written)
        // Every other point goes: those kept are still every `stride`-th entry's.
        if (cumulativeRead.length > MAX_SERIES) {
          cumulativeRead = halve(cumulativeRead)
          cumulativeWritten = halve(cumulativeWritten)
          stride *= 2
        }
      }
    },
    summary: () => ({
      entries: count,
      messages,
      tools,
      others,
      denied,
      firstSecs,
      lastSecs,
      toolCounts,
      reasons,
      denials: denials.result(),
      read,
      written,
      // The last entry's totals end the series, whether or not a stride ends there.
      cumulativeRead: count % stride === 0 ? [...cumulativeRead] : [...cumulativeRead, read],
      cumulativeWritten: count % stride === 0 ? [...cumulativeWritten] : [...cumulativeWritten, written],
      stride
    })
  }
}

/**
 * Computes the summary of a session's entries.
 *
 * @since 0.1.0
 */
export const summarize = (entries: ReadonlyArray<Entry.Entry>): Summary => {
  const s = summarizer()
  for (const e of entries) s.add(e)
  return s.summary()
}

const SUB_KEYS = ["sub_sessions", "subagent_sessions", "sub_agents", "subagents", "child_sessions", "children"]
const PARENT_KEYS = ["parent_session", "parent"]

const sessionRef = (v: unknown): string | null => {
  const id = isRecord(v) ? (v["id"] ?? v["session_id"]) : v
  return Entry.isSessionId(id) ? id : null
}

/**
 * Sessions the metadata names: sub-agent sessions (`data.sub_sessions`,
 * `subagent_sessions`, `sub_agents`, `subagents`, `child_sessions` or `children`:
 * a list of ids or of `{id}` objects), the parent (`data.parent_session` or
 * `data.parent`), and the two records of one Claude Code session: the live hooked
 * session (`data.hooked_session`, named by custody of its transcript) and the
 * custody of its transcript (`data.custody_session`, named by the hooked
 * session). Only valid session ids are kept.
 *
 * @since 0.1.0
 */
export const relatedSessions = (meta: SessionMeta.SessionMeta | null): {
  readonly parent: string | null
  readonly subs: ReadonlyArray<string>
  readonly hooked: string | null
  readonly custody: string | null
} => {
  const data = meta?.data
  if (!isRecord(data)) return { parent: null, subs: [], hooked: null, custody: null }
  const subs = new Set<string>()
  for (const k of SUB_KEYS) {
    const list = data[k]
    if (Array.isArray(list)) {
      for (const v of list) {
        const id = sessionRef(v)
        if (id !== null) subs.add(id)
      }
    }
  }
  let parent: string | null = null
  for (const k of PARENT_KEYS) parent ??= sessionRef(data[k])
  return {
    parent,
    subs: [...subs],
    hooked: sessionRef(data["hooked_session"]),
    custody: sessionRef(data["custody_session"])
  }
}

/**
 * Which session counts this session's tool calls: the hooked session its
 * metadata names (`data.hooked_session`) when that session exists, whose counters
 * are then authoritative (it decided the calls; the tool entries here are copies
 * of them from the transcript), else null: this session counts its own calls.
 * Summing both would count every call twice.
 *
 * @since 0.1.0
 */
export const countedIn = (meta: SessionMeta.SessionMeta | null) =>
  Effect.gen(function*() {
    const hooked = relatedSessions(meta).hooked
    return hooked !== null && (yield* exists(hooked)) ? hooked : null
  })

/**
 * Whether session `id` exists in the journal; one that exists but does not load
 * cleanly still exists.
 *
 * @since 0.1.0
 */
export const exists = (id: string): Effect.Effect<boolean, never, SessionJournal.SessionJournal> =>
  Effect.gen(function*() {
    const journal = yield* SessionJournal.SessionJournal
    const found = yield* Effect.result(journal.head(id))
    return found._tag === "Success" || found.failure._tag !== "SessionNotFound"
  })

/**
 * Entries read past the point where verification failed: `from` is the sequence
 * where it failed, `count` how many such entries were read, `entries` the first
 * `MAX_UNVERIFIED` of them.
 *
 * @since 0.1.0
 */
export interface Unverified {
  readonly from: number
  readonly count: number
  readonly entries: ReadonlyArray<Entry.Entry>
}

/**
 * How many entries past a failed verification a report shows (apart, marked
 * unverified); the rest are only counted.
 *
 * @since 0.1.0
 */
export const MAX_UNVERIFIED = 200

/**
 * The sequence from which a verification report does not vouch for the stored
 * entries: the entry of an integrity violation, or where corruption starts; null
 * when it verified, or when the corruption names no sequence (the history read
 * then stops at the damage by itself).
 *
 * @since 0.1.0
 */
export const unverifiedFrom = (r: Verify.Report | null): number | null =>
  r === null || r.ok ? null : r.violation?.sequence ?? r.corruption?.sequence ?? null

/**
 * Everything a report page shows.
 *
 * @since 0.1.0
 */
export interface Model {
  readonly id: string
  readonly meta: SessionMeta.SessionMeta | null
  readonly entries: ReadonlyArray<Entry.Entry>
  readonly summary: Summary
  /** The verification done for this page (null when not asked for). */
  readonly verify: Verify.Report | null
  /**
   * The stored entries from the first one that did not verify on (`from`), kept
   * apart: counted in nothing, charted nowhere, shown only as unverified. `count`
   * of them were read, the first `MAX_UNVERIFIED` are in `entries`; null when
   * everything read verified (or nothing was verified).
   */
  readonly unverified: Unverified | null
  /** The exported head of the session's state when it was read. */
  readonly head: string
  /** When the page was made, milliseconds since the epoch. */
  readonly generatedAt: number
  /** The session that counts this one's tool calls, when another does (`countedIn`). */
  readonly countedIn?: string | null | undefined
  /** The agent session this one is of, with every member of its story (`Stories.storyOf`). */
  readonly story?: Story | null | undefined
}

/**
 * The story a session is part of: its agent session and the members of it.
 *
 * @since 0.1.0
 */
export interface Story {
  readonly member: Stories.Member
  readonly members: ReadonlyArray<Stories.Member>
}

/**
 * What a page says about a session besides its entries: everything of the
 * `Model` but the entries, and the sequences of the first and last entry read
 * (null when none could be).
 *
 * @since 0.1.0
 */
export interface Overview extends Omit<Model, "entries"> {
  readonly first: number | null
  readonly last: number | null
}

/**
 * Reads a session for its report: its state, its full history as a stream
 * (each entry handed to `each` in order, and summarized) and, unless `verify`
 * is false, a verification of the whole stored history. The history read is
 * checked against what was verified (each entry's sequence, link and hash, up
 * to the state loaded after the verification); storage that changed between
 * the reads fails with `ChangedWhileRead`. Only what `each` keeps
 * of the entries stays in memory. With `summarizer`, the summary is that
 * summarizer's, which the caller may go on feeding (the viewer's live header).
 *
 * @since 0.1.0
 */
export const overview = (
  id: string,
  storage: Storage.Options,
  options?: {
    readonly verify?: boolean
    readonly each?: (entry: Entry.Entry) => void
    /** The summarizer to add the verified entries to (a new one by default), for a caller who goes on adding. */
    readonly summarizer?: Summarizer
  }
) =>
  Effect.gen(function*() {
    yield* Effect.fromResult(Entry.validateSessionId(id))
    const journal = yield* SessionJournal.SessionJournal
    const isDamage = (e: { readonly _tag: string }) => e._tag === "CorruptJournal" || e._tag === "IntegrityViolation"
    const summary = options?.summarizer ?? summarizer()
    const each = options?.each
    let first: number | null = null
    let last: number | null = null
    // The verification comes first: it says from which entry on the stored history
    // is not vouched for, and those entries are kept apart, out of every count and
    // chart. A read that meets damage keeps the valid prefix; that is allowed only
    // when the verification found the damage too.
    let damage: CorruptJournal | undefined
    const report = options?.verify === false ? null : yield* Verify.session(id, storage)
    const from = unverifiedFrom(report)
    const apart: Array<Entry.Entry> = []
    let apartCount = 0
    // Past a gap (entries missing, the first violation being at or before it) the
    // entries stored after it are read on, for the part apart: never hidden, never
    // vouched for.
    const readFrom = (start: number): ReturnType<typeof journal.entries> =>
      journal.entries(id, { from: start }).pipe(
        Stream.catch((e) => {
          if (e._tag !== "CorruptJournal") return Stream.fail(e)
          damage ??= e
          const reason = e.reason
          const after = reason._tag === "OutOfSequence" && reason.found > reason.expected
            ? reason.found
            : reason._tag === "SegmentGap" && reason.base > reason.expected
            ? reason.base
            : null
          return from !== null && after !== null && after > start && from <= after ? readFrom(after) : Stream.empty
        })
      )
    const damaged = report !== null && !report.ok
    const loaded = yield* journal.state(id).pipe(
      Effect.catch((e) => (damaged && isDamage(e) ? Effect.succeed(null) : Effect.fail(e)))
    )
    const state = loaded === null
      ? { meta: null, head: report?.head ?? "" }
      : { meta: loaded.meta, head: JournalState.head(loaded) }
    // What is read must be what was verified: each entry counted is checked as a
    // follower checks it (its sequence, its link to the one before, its own hash),
    // from the start of the chain to the last entry of the state loaded after the
    // verification. Storage changed between the reads fails the page, never shows
    // entries the verification did not see as verified.
    // With retention, history starts at the oldest segment kept, whose first entry
    // links to one removed (the verification takes its link as the boundary): the
    // check starts at the first entry read.
    const verified = report === null ? null : loaded
    const startsLater = Storage.isFilesystem(storage) && storage.removeCheckpointedSegments === true
    let cursor: Follow.Cursor | null = null
    const checked = (e: Entry.Entry): ChangedWhileRead | null => {
      if (verified === null) return null
      cursor ??= Follow.start(verified, startsLater ? e.sequence : 0)
      const r = Follow.check(cursor, e)
      if (Result.isSuccess(r)) {
        cursor = r.success
        return null
      }
      const b = r.failure
      return new ChangedWhileRead({ id, sequence: b.sequence, what: b.what, expected: b.expected, actual: b.actual })
    }
    yield* Stream.runForEachArray(
      readFrom(0),
      (chunk) =>
        Effect.suspend(() => {
          for (const e of chunk) {
            if (from !== null && e.sequence >= from) {
              apartCount++
              if (apart.length < MAX_UNVERIFIED) apart.push(e)
              continue
            }
            const changed = checked(e)
            if (changed !== null) return Effect.fail(changed)
            first ??= e.sequence
            last = e.sequence
            summary.add(e)
            each?.(e)
          }
          return Effect.void
        })
    )
    if (damage !== undefined && !damaged) return yield* Effect.fail(damage)
    // Storage that ends before the entry the state ended with was cut while read
    // (whether or not the state retains that entry's hash: entries that do not
    // link, `entry_cap` 0, retain none).
    const reached = verified === null || report?.ok !== true ? null : cursor ?? Follow.start(verified, 0)
    if (verified !== null && reached !== null && reached.next < verified.next_sequence) {
      const lastSequence = verified.next_sequence - 1
      return yield* new ChangedWhileRead({
        id,
        sequence: lastSequence,
        what: reached.confirm === null ? "sequence" : "confirmed",
        expected: reached.confirm?.hash ?? String(lastSequence),
        actual: "no entry"
      })
    }
    const counted = yield* countedIn(state.meta)
    const story: Story | null = yield* Stories.storyOf(id, state.meta)
    const result: Overview = {
      id,
      meta: state.meta,
      countedIn: counted,
      story,
      summary: summary.summary(),
      verify: report,
      unverified: from === null || apartCount === 0 ? null : { from, count: apartCount, entries: apart },
      head: report?.head ?? state.head,
      generatedAt: yield* Clock.currentTimeMillis,
      first,
      last
    }
    return result
  })

/**
 * Reads a session for its report: its state, its full history and (unless
 * `verify` is false) a verification of the whole stored history.
 *
 * @since 0.1.0
 */
export const collect = (id: string, storage: Storage.Options, options?: { readonly verify?: boolean }) =>
  Effect.suspend(() => {
    const entries: Array<Entry.Entry> = []
    return Effect.map(overview(id, storage, { ...options, each: (e) => entries.push(e) }), (o): Model => ({
      id: o.id,
      meta: o.meta,
      entries,
      summary: o.summary,
      verify: o.verify,
      unverified: o.unverified,
      head: o.head,
      generatedAt: o.generatedAt,
      countedIn: o.countedIn,
      story: o.story
    }))
  })
