/**
 * Model-based test of the SessionJournal service on the in-memory adapter. A model
 * journal (per session: the plain list of entries, folded with `JournalState.fold`,
 * plus the metadata) and the service run the same random program of records,
 * appends (messages and unknown kinds), guarded decisions, metadata changes,
 * concurrent bursts, clock ticks, closes and reopens (a fresh service over the same
 * storage); after every step that the model can predict, both must agree on every
 * entry, the snapshot, the head, the metadata and the stored history.
 */
import * as ClockRef from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import fc from "fast-check"
import { assert, describe, it } from "vitest"
import { Entry, Guard, JournalState, Persistence, SessionJournal, SessionMeta } from "../src/index.ts"

const STRESS = process.env["STRESS"] === "1"

const IDS = ["m-a", "m-b"] as const
const TOOLS = ["read", "write", "bash", "grep"] as const

/** A clock the program moves by hand, so the model knows every timestamp. */
const manualClock = (now: { millis: number }): ClockRef.Clock => ({
  currentTimeMillisUnsafe: () => now.millis,
  currentTimeMillis: Effect.sync(() => now.millis),
  currentTimeNanosUnsafe: () => BigInt(now.millis) * 1_000_000n,
  currentTimeNanos: Effect.sync(() => BigInt(now.millis) * 1_000_000n),
  monotonicTimeNanosUnsafe: () => BigInt(now.millis) * 1_000_000n,
  monotonicTimeNanos: Effect.sync(() => BigInt(now.millis) * 1_000_000n),
  sleep: (d) =>
    Effect.sync(() => {
      now.millis += Duration.toMillis(d)
    })
})

interface ModelSession {
  readonly entries: Array<Entry.Entry>
  state: JournalState.JournalState
}

interface Model {
  readonly caps: JournalState.Caps
  /** The checkpoint policy's floor: small, so checkpoints come every few entries. */
  readonly checkpointMinBytes: number
  readonly sessions: Map<string, ModelSession>
  /** The clock, shared with the real side. */
  readonly now: { millis: number }
}

interface Real {
  readonly persistence: Persistence.Persistence["Service"]
  scope: Scope.Closeable
  journal: SessionJournal.SessionJournal["Service"]
}

const sessionOf = (m: Model, id: string): ModelSession => {
  let s = m.sessions.get(id)
  if (s === undefined) {
    s = { entries: [], state: JournalState.empty(id, m.caps) }
    m.sessions.set(id, s)
  }
  return s
}

const run = <A, E>(m: Model, effect: Effect.Effect<A, E>): Promise<Exit.Exit<A, E>> =>
  Effect.runPromiseExit(Effect.provideService(effect, ClockRef.Clock, manualClock(m.now)))

const runOk = async <A, E>(m: Model, effect: Effect.Effect<A, E>): Promise<A> => {
  const exit = await run(m, effect)
  if (Exit.isFailure(exit)) throw new Error(`unexpected failure: ${String(exit.cause)}`)
  return exit.value
}

const ts = (m: Model) => Math.floor(m.now.millis / 1000)

/** One write the model can predict, given the state it applies to. */
type Op =
  | { readonly _tag: "Record"; readonly params: Entry.ToolParams }
  | { readonly _tag: "Append"; readonly kind: string; readonly payload: unknown }
  | { readonly _tag: "Decide"; readonly params: Entry.ToolParams; readonly guard: GuardSpec }

type GuardSpec =
  | { readonly _tag: "maxInvocations"; readonly n: number }
  | { readonly _tag: "maxStreak"; readonly n: number }
  | { readonly _tag: "denyList"; readonly names: ReadonlyArray<string> }
  | { readonly _tag: "requirePredecessors"; readonly tool: string; readonly needs: ReadonlyArray<string> }

const guardOf = (g: GuardSpec): Guard.Guard => {
  switch (g._tag) {
    case "maxInvocations":
      return Guard.maxInvocations(g.n)
    case "maxStreak":
      return Guard.maxStreak(g.n)
    case "denyList":
      return Guard.denyList(g.names)
    case "requirePredecessors":
      return Guard.requirePredecessors({ [g.tool]: g.needs })
  }
}

/** The entry the model expects `op` to produce on `state`, or the field it must be refused for. */
const expect = (
  state: JournalState.JournalState,
  timestampSecs: number,
  op: Op
): {
  readonly _tag: "Entry"
  readonly entry: Entry.Entry
  readonly verdict?: Guard.Verdict
  /** The decision entry `decide` writes right after the call. */
  readonly decision?: Entry.Entry
} | {
  readonly _tag: "Invalid"
  readonly field: string
} => {
  switch (op._tag) {
    case "Record": {
      const valid = Entry.validateToolParams(op.params)
      if (valid._tag === "Failure") return { _tag: "Invalid", field: valid.failure.field }
      return { _tag: "Entry", entry: JournalState.nextTool(state, timestampSecs, valid.success) }
    }
    case "Append": {
      const valid = Entry.validatePayload(op.kind, op.payload)
      if (valid._tag === "Failure") return { _tag: "Invalid", field: valid.failure.field }
      return { _tag: "Entry", entry: JournalState.nextOther(state, timestampSecs, op.kind, valid.success) }
    }
    case "Decide": {
      const valid = Entry.validateToolParams(op.params)
      if (valid._tag === "Failure") return { _tag: "Invalid", field: valid.failure.field }
      const verdict = guardOf(op.guard)(JournalState.snapshot(state), valid.success)
      const entry = JournalState.nextTool(state, timestampSecs, {
        ...valid.success,
        allowed: valid.success.allowed && Guard.isAllowed(verdict)
      })
      const decision = JournalState.nextOther(
        JournalState.fold(state, entry),
        timestampSecs,
        Guard.DECISION_KIND,
        Guard.decisionPayload(verdict, entry.sequence)
      )
      return { _tag: "Entry", entry, verdict, decision }
    }
  }
}

const perform = (j: Real["journal"], id: string, op: Op): Effect.Effect<unknown, SessionJournal.WriteError> => {
  switch (op._tag) {
    case "Record":
      return j.record(id, op.params)
    case "Append":
      return j.append(id, op.kind, op.payload)
    case "Decide":
      return j.decide(id, op.params, guardOf(op.guard))
  }
}

/** Checks the real result of `op` against the model and advances the model. */
const settle = (m: Model, id: string, op: Op, exit: Exit.Exit<unknown, SessionJournal.WriteError>) => {
  const s = sessionOf(m, id)
  const expected = expect(s.state, ts(m), op)
  if (expected._tag === "Invalid") {
    assert.isTrue(Exit.isFailure(exit), `${op._tag} must be refused`)
    const error = Exit.isFailure(exit) ? exit.cause.reasons[0] : undefined
    assert.strictEqual(error?._tag, "Fail")
    const failure = error?._tag === "Fail" ? error.error : undefined
    assert.strictEqual(failure?._tag, "InvalidRecordField")
    assert.strictEqual(failure?._tag === "InvalidRecordField" ? failure.field : "", expected.field)
    return
  }
  if (Exit.isFailure(exit)) throw new Error(`${op._tag} failed: ${String(exit.cause)}`)
  if (op._tag === "Decide") {
    const d = exit.value as SessionJournal.Decision
    assert.deepStrictEqual(d.verdict, expected.verdict)
    assert.deepStrictEqual(d.entry, expected.entry)
  } else {
    assert.deepStrictEqual(exit.value, expected.entry)
  }
  for (const e of expected.decision === undefined ? [expected.entry] : [expected.entry, expected.decision]) {
    s.entries.push(e)
    s.state = JournalState.fold(s.state, e)
  }
}

const snapshotJson = (state: JournalState.JournalState) =>
  JSON.stringify(JournalState.snapshotToJson(JournalState.snapshot(state)))

/** Service and storage agree with the model about session `id`. */
const agree = async (m: Model, r: Real, id: string) => {
  const s = m.sessions.get(id)
  const exists = s !== undefined && (s.entries.length > 0 || s.state.meta !== null)
  if (!exists) {
    const exit = await run(m, r.journal.snapshot(id))
    assert.isTrue(Exit.isFailure(exit) && String(exit.cause).includes("SessionNotFound"), `${id} must not exist`)
    return
  }
  const state = await runOk(m, r.journal.state(id))
  assert.strictEqual(snapshotJson(state), snapshotJson(s.state))
  assert.strictEqual(state.next_sequence, s.state.next_sequence)
  assert.strictEqual(state.message_count, s.state.message_count)
  assert.deepStrictEqual(state.meta, s.state.meta)
  assert.deepStrictEqual(JournalState.retainedHashes(state), JournalState.retainedHashes(s.state))
  // The window in memory is the newest of the stored entries (after a reopen from a
  // checkpoint it holds only what was replayed since).
  const window = JournalState.entries(state)
  assert.deepStrictEqual(window, s.entries.slice(s.entries.length - window.length))
  assert.strictEqual(JournalState.windowStart(state), s.state.next_sequence - window.length)
  assert.strictEqual(await runOk(m, r.journal.head(id)), JournalState.head(s.state))
  assert.strictEqual(
    snapshotJson(state),
    JSON.stringify(JournalState.snapshotToJson(await runOk(m, r.journal.snapshot(id))))
  )
  assert.deepStrictEqual(await runOk(m, Stream.runCollect(r.journal.entries(id))), s.entries)
  const report = await runOk(m, r.journal.verify(id))
  assert.strictEqual(report.entriesChecked, s.entries.length)
  assert.strictEqual(report.head, JournalState.head(s.state))
  const listed = (await runOk(m, r.journal.list)).find((x) => x.id === id)
  assert.strictEqual(listed?.entries, s.entries.length)
}

type Cmd = fc.AsyncCommand<Model, Real>

class Write implements Cmd {
  readonly id: string
  readonly op: Op
  constructor(id: string, op: Op) {
    this.id = id
    this.op = op
  }
  check = () => true
  async run(m: Model, r: Real) {
    settle(m, this.id, this.op, await run(m, perform(r.journal, this.id, this.op)))
  }
  toString = () => `Write(${this.id}, ${JSON.stringify(this.op, (_, v) => typeof v === "bigint" ? `${v}n` : v)})`
}

class Burst implements Cmd {
  readonly id: string
  readonly ops: ReadonlyArray<Op>
  constructor(id: string, ops: ReadonlyArray<Op>) {
    this.id = id
    this.ops = ops
  }
  check = () => true
  async run(m: Model, r: Real) {
    const exits = await runOk(
      m,
      Effect.forEach(this.ops, (op) => Effect.exit(perform(r.journal, this.id, op)), { concurrency: "unbounded" })
    )
    // The service picked some order; replay the model in the order of the returned
    // sequences, refused writes (which never took a sequence) first.
    const sequenceOf = (exit: Exit.Exit<unknown, unknown>) => {
      if (Exit.isFailure(exit)) return -1
      const v = exit.value as Entry.Entry | SessionJournal.Decision
      return "verdict" in v ? v.entry.sequence : v.sequence
    }
    const order = this.ops.map((_, i) => i).sort((a, b) => sequenceOf(exits[a]!) - sequenceOf(exits[b]!))
    for (const i of order) settle(m, this.id, this.ops[i]!, exits[i]!)
  }
  toString = () => `Burst(${this.id}, ${this.ops.length} ops: ${this.ops.map((o) => o._tag).join(",")})`
}

class SetMeta implements Cmd {
  readonly id: string
  readonly patch: SessionMeta.MetaPatch
  constructor(id: string, patch: SessionMeta.MetaPatch) {
    this.id = id
    this.patch = patch
  }
  check = () => true
  async run(m: Model, r: Real) {
    const got = await runOk(m, r.journal.setMeta(this.id, this.patch))
    const s = sessionOf(m, this.id)
    const meta = SessionMeta.patch(s.state.meta, this.patch, m.now.millis)
    assert.deepStrictEqual(got, meta)
    s.state = JournalState.applyMeta(s.state, meta)
  }
  toString = () => `SetMeta(${this.id}, ${JSON.stringify(this.patch)})`
}

class Tick implements Cmd {
  readonly millis: number
  constructor(millis: number) {
    this.millis = millis
  }
  check = () => true
  async run(m: Model) {
    m.now.millis += this.millis
  }
  toString = () => `Tick(${this.millis})`
}

class Check implements Cmd {
  readonly id: string
  constructor(id: string) {
    this.id = id
  }
  check = () => true
  async run(m: Model, r: Real) {
    await agree(m, r, this.id)
  }
  toString = () => `Check(${this.id})`
}

class Close implements Cmd {
  readonly id: string
  constructor(id: string) {
    this.id = id
  }
  check = () => true
  async run(m: Model, r: Real) {
    await runOk(m, r.journal.close(this.id))
  }
  toString = () => `Close(${this.id})`
}

/** Drops the whole service and builds a new one over the same storage. */
class Reopen implements Cmd {
  check = () => true
  async run(m: Model, r: Real) {
    await runOk(m, Scope.close(r.scope, Exit.void))
    const fresh = await open(m, r.persistence)
    r.scope = fresh.scope
    r.journal = fresh.journal
  }
  toString = () => "Reopen"
}

const open = async (m: Model, persistence: Persistence.Persistence["Service"]) => {
  const checkpointMinBytes = m.checkpointMinBytes
  const scope = await runOk(m, Scope.make())
  const journal = await runOk(
    m,
    SessionJournal.make({ caps: m.caps, idleTimeToLive: Duration.infinity, checkpointMinBytes }).pipe(
      Scope.provide(scope),
      Effect.provideService(Persistence.Persistence, persistence)
    )
  )
  return { scope, journal }
}

const idArb = fc.constantFrom(...IDS)
const toolParamsArb: fc.Arbitrary<Entry.ToolParams> = fc.record({
  tool_name: fc.oneof({ weight: 20, arbitrary: fc.constantFrom(...TOOLS) }, {
    weight: 1,
    arbitrary: fc.constantFrom(" bash", "", "a\u0000")
  }),
  server_id: fc.constantFrom("srv-1", "srv-2"),
  agent_id: fc.constantFrom("agent-1", "agent-2"),
  bytes_read: fc.oneof({ weight: 20, arbitrary: fc.nat(10_000) }, { weight: 1, arbitrary: fc.constantFrom(-1, 0.5) }),
  bytes_written: fc.nat(10_000),
  delegation_depth: fc.nat(4),
  allowed: fc.option(fc.boolean(), { nil: undefined })
})
const guardArb: fc.Arbitrary<GuardSpec> = fc.oneof(
  fc.record({ _tag: fc.constant("maxInvocations" as const), n: fc.nat(12) }),
  fc.record({ _tag: fc.constant("maxStreak" as const), n: fc.integer({ min: 1, max: 4 }) }),
  fc.record({ _tag: fc.constant("denyList" as const), names: fc.subarray([...TOOLS]) }),
  fc.record({
    _tag: fc.constant("requirePredecessors" as const),
    tool: fc.constantFrom(...TOOLS),
    needs: fc.subarray([...TOOLS], { maxLength: 2 })
  })
)
const payloadArb = fc.oneof(
  { weight: 10, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 1, arbitrary: fc.constantFrom<unknown>(Number.NaN, { f: 1n }, undefined, "\ud800") }
)
const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ _tag: fc.constant("Record" as const), params: toolParamsArb }),
  fc.record({
    _tag: fc.constant("Append" as const),
    kind: fc.oneof({ weight: 6, arbitrary: fc.constant("message") }, {
      weight: 3,
      arbitrary: fc.constantFrom("x-vendor.note:v2", "tool_result")
    }, {
      weight: 1,
      arbitrary: fc.constantFrom("tool", "bad kind")
    }),
    payload: payloadArb
  }),
  fc.record({ _tag: fc.constant("Decide" as const), params: toolParamsArb, guard: guardArb })
)

const commands = [
  fc.tuple(idArb, opArb).map(([id, op]) => new Write(id, op)),
  fc.tuple(idArb, fc.array(opArb, { minLength: 2, maxLength: 24 })).map(([id, ops]) => new Burst(id, ops)),
  fc.tuple(
    idArb,
    fc.record(
      {
        title: fc.string({ maxLength: 8 }),
        labels: fc.array(fc.constantFrom("x", "y", "z"), { maxLength: 2 }),
        data: fc.jsonValue({ maxDepth: 2 })
      },
      { requiredKeys: [] }
    )
  ).map(([id, patch]) => new SetMeta(id, patch as SessionMeta.MetaPatch)),
  fc.integer({ min: 1, max: 5_000 }).map((ms) => new Tick(ms)),
  idArb.map((id) => new Check(id)),
  idArb.map((id) => new Close(id)),
  fc.constant(new Reopen())
]

describe("SessionJournal against a model journal", () => {
  it("agrees after random interleavings of writes, metadata, closes and reopens", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({ entry_cap: fc.nat(5), tool_counts_cap: fc.nat(3) }),
        fc.integer({ min: 1, max: 9 }),
        fc.commands(commands, { maxCommands: STRESS ? 200 : 40 }),
        async (caps, checkpointEvery, cmds) => {
          const model: Model = {
            caps,
            checkpointMinBytes: checkpointEvery * 300,
            sessions: new Map(),
            now: { millis: 1_764_400_000_000 }
          }
          const persistence = await runOk(model, Persistence.makeMemory())
          const real: Real = { persistence, ...(await open(model, persistence)) }
          try {
            await fc.asyncModelRun(() => ({ model, real }), cmds)
            // Whatever the program did last, a fresh service over the same storage agrees.
            await new Reopen().run(model, real)
            for (const id of IDS) await agree(model, real, id)
          } finally {
            await runOk(model, Scope.close(real.scope, Exit.void))
          }
        }
      ),
      { numRuns: STRESS ? 1000 : 100 }
    )
  }, 120_000)
})
