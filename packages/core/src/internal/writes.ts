/**
 * The write operations of the service (`record`, `append`, `writeAll`, `decide`,
 * `setMeta`): each validates its input before anything touches storage, then
 * submits a request that builds its entries against the state the session's
 * writer holds when it gets there.
 */
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Entry from "../Entry.ts"
import { InvalidRecordField } from "../Errors.ts"
import * as Guard from "../Guard.ts"
import * as JournalState from "../JournalState.ts"
import type * as Pattern from "../Pattern.ts"
import * as RecordFieldReason from "../RecordFieldReason.ts"
import * as SessionMeta from "../SessionMeta.ts"
import type { Owned } from "./jcs.ts"
import type * as Sessions from "./sessions.ts"
import * as TakenEntry from "./takenEntry.ts"
import { takePayload } from "./validate.ts"

/** One item of `writeAll`: a tool call or a non-tool entry. */
export type WriteItem =
  | { readonly _tag: "Tool"; readonly params: Entry.ToolParams }
  | { readonly _tag: "Other"; readonly kind: string; readonly payload: unknown }

/** The result of `decide`: the verdict, the entry recorded for it and the entries written beside it. */
export interface Decision {
  readonly verdict: Guard.Verdict
  readonly entry: Entry.ToolEntry
  /**
   * The entries `beside` asked for, right after `entry`, in order ([] without
   * `beside`); core's own decision entry, written when none of them records the
   * decision, comes after them and is not listed here.
   */
  readonly beside: ReadonlyArray<Entry.OtherEntry>
  /** The entry that records the decision: one of `beside`, or core's own `Guard.DECISION_KIND` entry. */
  readonly record: Entry.OtherEntry
}

/**
 * What `decide` writes right after the tool entry, in the same durable append: a
 * function of the verdict and the entry (e.g. a record of the verdict's guard and
 * reason, which chio's tool entry has no field for). An entry whose payload holds
 * `Guard.decisionPayload`'s fields for this call (`Guard.recordsDecision`) is the
 * decision's record; without one, `decide` writes a `Guard.DECISION_KIND` entry
 * too.
 */
export type Beside = (
  verdict: Guard.Verdict,
  entry: Entry.ToolEntry
) => ReadonlyArray<{ readonly kind: string; readonly payload: unknown }>

/**
 * What a door knows of a decided call besides its parameters (docs/DESIGN.md §16):
 * the call as the agent sent it, where relative paths are anchored, the tokens the
 * agent used so far, and whether a person can be asked (default false: an `Ask`
 * then denies). `decide` adds the time and the policy's state.
 */
export interface DecideOptions {
  readonly call?: Pattern.Call | null | undefined
  readonly where?: Partial<Pattern.Context> | undefined
  readonly tokens?: bigint | null | undefined
  readonly canAsk?: boolean | undefined
}

/**
 * What a plan of `writeFrom` stores: items, a metadata patch (stored with them in
 * the same durable append), and its caller's result. No items and no patch: nothing
 * is stored and the caller is answered at once.
 */
export interface Plan<A> {
  readonly items: ReadonlyArray<WriteItem>
  readonly meta?: SessionMeta.MetaPatch | undefined
  readonly result: A
}

/** What `writeFrom` gives back: the plan's result and the entries stored for it. */
export interface Planned<A> {
  readonly result: A
  readonly entries: ReadonlyArray<Entry.Entry>
}

/** How the write operations queue a request (see `Sessions.make`). */
export interface Submit {
  /** Queues when run. */
  readonly submit: <A>(id: string, build: Sessions.Build<A>) => Effect.Effect<A, Sessions.WriteError>
  /** Queues now, from inside an effect's body; the result waits for the answer. */
  readonly submitNow: <A>(id: string, build: Sessions.Build<A>) => Effect.Effect<A, Sessions.WriteError>
}

// The first field of a metadata patch that cannot be stored, if any.
const patchProblem = (patch: SessionMeta.MetaPatch): InvalidRecordField | undefined => {
  if (patch.title !== undefined && typeof patch.title !== "string") {
    return new InvalidRecordField({ field: "title", reason: new RecordFieldReason.NotString() })
  }
  if (
    patch.labels !== undefined && !(Array.isArray(patch.labels) && patch.labels.every((l) => typeof l === "string"))
  ) {
    return new InvalidRecordField({ field: "labels", reason: new RecordFieldReason.NotStringArray() })
  }
  if (patch.data !== undefined) {
    const checked = Entry.validatePayload("meta", patch.data)
    if (Result.isFailure(checked)) return new InvalidRecordField({ field: "data", reason: checked.failure.reason })
  }
  return undefined
}

// The next non-tool entry of a payload taken over (`takePayload`): hashed over the
// text the walk made, its JSON text kept for the storage that writes it.
const nextOther = (state: JournalState.JournalState, ts: number, kind: string, taken: Owned): Entry.OtherEntry =>
  TakenEntry.makeTaken(JournalState.nextLink(state, ts), kind, taken)

/** The write operations over a session registry's `submit`. */
export const make = ({ submit, submitNow }: Submit) => {
  const validId = (id: string) => Effect.fromResult(Entry.validateSessionId(id))

  // The write paths run once per entry: plain functions over the validation results
  // (no generator, no span); a span or a generator per call is a measurable share of
  // a call's cost (pnpm bench, memory.record).
  const record = (id: string, params: Entry.ToolParams): Effect.Effect<Entry.ToolEntry, Sessions.WriteError> =>
    Effect.suspend(() => {
      const checkedId = Entry.validateSessionId(id)
      if (Result.isFailure(checkedId)) return Effect.fail(checkedId.failure)
      const checked = Entry.validateToolParams(params)
      if (Result.isFailure(checked)) return Effect.fail(checked.failure)
      const valid = checked.success
      return submitNow(id, (state, ts) => {
        const entry = JournalState.nextTool(state, ts, valid)
        return { entries: [entry], meta: null, result: entry }
      })
    })

  const append = (id: string, kind: string, payload: unknown): Effect.Effect<Entry.OtherEntry, Sessions.WriteError> =>
    Effect.suspend(() => {
      const checkedId = Entry.validateSessionId(id)
      if (Result.isFailure(checkedId)) return Effect.fail(checkedId.failure)
      const checked = takePayload(kind, payload)
      if (Result.isFailure(checked)) return Effect.fail(checked.failure)
      const taken = checked.success
      return submitNow(id, (state, ts) => {
        const entry = nextOther(state, ts, kind, taken)
        return { entries: [entry], meta: null, result: entry }
      })
    })

  const writeAll = Effect.fnUntraced(function*(id: string, items: ReadonlyArray<WriteItem>) {
    yield* validId(id)
    const valid: Array<
      { readonly _tag: "Tool"; readonly params: Entry.ValidToolParams } | {
        readonly _tag: "Other"
        readonly kind: string
        readonly payload: Owned
      }
    > = []
    for (const item of items) {
      valid.push(
        item._tag === "Tool"
          ? { _tag: "Tool", params: yield* Effect.fromResult(Entry.validateToolParams(item.params)) }
          : {
            _tag: "Other",
            kind: item.kind,
            payload: yield* Effect.fromResult(takePayload(item.kind, item.payload))
          }
      )
    }
    if (valid.length === 0) return []
    // One request for the whole list keeps it contiguous and all-or-nothing.
    return yield* submit(id, (state, ts) => {
      let s = state
      const out: Array<Entry.Entry> = []
      for (const v of valid) {
        const e = v._tag === "Tool"
          ? JournalState.nextTool(s, ts, v.params)
          : nextOther(s, ts, v.kind, v.payload)
        out.push(e)
        s = JournalState.fold(s, e)
      }
      // The caller gets its own array: the writer may hand `entries` itself to storage.
      return { entries: out, meta: null, result: out.slice() }
    })
  })

  const decide = (
    id: string,
    params: Entry.ToolParams,
    guard: Guard.Guard,
    beside?: Beside,
    options?: DecideOptions
  ): Effect.Effect<Decision, Sessions.WriteError> =>
    Effect.suspend(() => {
      const checkedId = Entry.validateSessionId(id)
      if (Result.isFailure(checkedId)) return Effect.fail(checkedId.failure)
      const checked = Entry.validateToolParams(params)
      if (Result.isFailure(checked)) return Effect.fail(checked.failure)
      const valid = checked.success
      // The entries beside depend on the verdict, so they are validated where it is
      // known; an invalid one fails the call with nothing written. When none of them
      // records the decision, its guard and reason go on the chain in a decision
      // entry of core's own (`Guard.DECISION_KIND`): every decision is on the chain.
      return Effect.flatMap(
        submitNow(id, (state, ts, nowMillis): Sessions.Built<Result.Result<Decision, InvalidRecordField>> => {
          const canAsk = options?.canAsk === true
          const tokens = options?.tokens ?? null
          const decided = guard(JournalState.snapshot(state), valid, {
            call: options?.call ?? null,
            where: options?.where ?? {},
            nowMillis,
            tokens,
            canAsk,
            state: state.guard_state
          })
          const verdict = canAsk ? decided : Guard.unanswered(decided)
          // An ask is recorded as allowed: the person may approve it, and the
          // outcome that follows shows whether it ran (docs/DESIGN.md §16).
          const entry = JournalState.nextTool(state, ts, {
            ...valid,
            allowed: verdict._tag !== "Deny" && valid.allowed
          })
          let s = JournalState.fold(state, entry)
          const more: Array<Entry.OtherEntry> = []
          let recorded: Entry.OtherEntry | undefined
          for (const item of beside === undefined ? [] : beside(verdict, entry)) {
            const payload = takePayload(item.kind, item.payload)
            if (Result.isFailure(payload)) return { entries: [], meta: null, result: Result.fail(payload.failure) }
            const other = nextOther(s, ts, item.kind, payload.success)
            if (recorded === undefined && Guard.recordsDecision(other.payload, verdict, entry.sequence)) {
              recorded = other
            }
            more.push(other)
            s = JournalState.fold(s, other)
          }
          const own = recorded === undefined
            ? [
              JournalState.nextOther(s, ts, Guard.DECISION_KIND, Guard.decisionPayload(verdict, entry.sequence, tokens))
            ]
            : []
          // The policy's next state, when the guard gives one (a guard gives it only
          // when it changed): a guard without state writes what it wrote before.
          const kept: Array<Entry.OtherEntry> = []
          if (verdict.state !== undefined && verdict.state !== state.guard_state) {
            // Taken over frozen: the next state the guard makes from this one shares
            // most of it, and only what is new is walked again.
            const payload = takePayload(Guard.STATE_KIND, verdict.state, true)
            if (Result.isFailure(payload)) return { entries: [], meta: null, result: Result.fail(payload.failure) }
            for (const o of own) s = JournalState.fold(s, o)
            kept.push(nextOther(s, ts, Guard.STATE_KIND, payload.success))
          }
          return {
            entries: [entry, ...more, ...own, ...kept],
            meta: null,
            result: Result.succeed({ verdict, entry, beside: more.slice(), record: recorded ?? own[0]! })
          }
        }),
        Effect.fromResult
      )
    })

  const setMeta = Effect.fn("SessionJournal.setMeta")(function*(id: string, patch: SessionMeta.MetaPatch) {
    yield* validId(id)
    const bad = patchProblem(patch)
    if (bad !== undefined) return yield* bad
    return yield* submit(id, (state, _ts, nowMillis) => {
      const meta = SessionMeta.patch(state.meta, patch, nowMillis)
      return { entries: [], meta, result: meta }
    })
  })

  // The plan runs in the writer, against the state the append builds on (after a
  // conflict with another instance, against the reloaded state, again): what it
  // decides from that state holds for what is stored. Its items are checked there;
  // a failing one fails the caller, storing nothing.
  const writeFrom = <A>(
    id: string,
    plan: (state: JournalState.JournalState, nowMillis: number) => Plan<A>
  ): Effect.Effect<Planned<A>, Sessions.WriteError> =>
    Effect.suspend(() => {
      const checkedId = Entry.validateSessionId(id)
      if (Result.isFailure(checkedId)) return Effect.fail(checkedId.failure)
      return Effect.flatMap(
        submitNow(id, (state, ts, nowMillis): Sessions.Built<Result.Result<Planned<A>, InvalidRecordField>> => {
          const planned = plan(state, nowMillis)
          const out: Array<Entry.Entry> = []
          let s = state
          for (const item of planned.items) {
            let e: Entry.Entry
            if (item._tag === "Tool") {
              const checked = Entry.validateToolParams(item.params)
              if (Result.isFailure(checked)) return { entries: [], meta: null, result: Result.fail(checked.failure) }
              e = JournalState.nextTool(s, ts, checked.success)
            } else {
              const checked = takePayload(item.kind, item.payload)
              if (Result.isFailure(checked)) return { entries: [], meta: null, result: Result.fail(checked.failure) }
              e = nextOther(s, ts, item.kind, checked.success)
            }
            out.push(e)
            s = JournalState.fold(s, e)
          }
          let meta: SessionMeta.SessionMeta | null = null
          if (planned.meta !== undefined) {
            const bad = patchProblem(planned.meta)
            if (bad !== undefined) return { entries: [], meta: null, result: Result.fail(bad) }
            meta = SessionMeta.patch(state.meta, planned.meta, nowMillis)
          }
          // The caller gets its own array: the writer may hand `entries` itself to storage.
          return { entries: out, meta, result: Result.succeed({ result: planned.result, entries: out.slice() }) }
        }),
        Effect.fromResult
      )
    })

  return { record, append, writeAll, decide, setMeta, writeFrom }
}
