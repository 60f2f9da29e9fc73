/**
 * A `Persistence` wrapper for service tests: it counts the calls the service makes
 * (per session) and injects the failures a real backend can produce, on top of a
 * real adapter. A fault is planned for the n-th `append` of a session: fail before
 * anything is stored, store and then fail (the sync may or may not have reached
 * the disk), or let another writer store entries first so the append loses the
 * race for its sequence.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { Entry, JournalState, Persistence, StorageError, StorageReason } from "../src/index.ts"

/** What happens to one planned `append`. */
export type Fault =
  | { readonly _tag: "FailBefore" }
  | { readonly _tag: "FailAfter" }
  | { readonly _tag: "Sneak"; readonly count: number }

/** Counters and planned faults, per session id. */
export interface Probe {
  readonly appends: Map<string, number>
  readonly loads: Map<string, number>
  readonly entriesPerAppend: Map<string, Array<number>>
  readonly faults: Map<string, Map<number, Fault>>
  /** Entries stored by the simulated other writer, per session. */
  readonly sneaked: Map<string, Array<Entry.Entry>>
  /** Sessions whose appends and history reads suspend for a while first, as real I/O does. */
  readonly slow: Set<string>
}

/** A probe with nothing counted and nothing planned. */
export const makeProbe = (): Probe => ({
  appends: new Map(),
  loads: new Map(),
  entriesPerAppend: new Map(),
  faults: new Map(),
  sneaked: new Map(),
  slow: new Set()
})

/** Plans `fault` for the `n`-th append (0-based) of session `id`. */
export const plan = (probe: Probe, id: string, n: number, fault: Fault): void => {
  let m = probe.faults.get(id)
  if (m === undefined) {
    m = new Map()
    probe.faults.set(id, m)
  }
  m.set(n, fault)
}

/** Number of `append` calls on session `id` so far. */
export const appendsOf = (probe: Probe, id: string): number => probe.appends.get(id) ?? 0

/** Number of `load` calls on session `id` so far. */
export const loadsOf = (probe: Probe, id: string): number => probe.loads.get(id) ?? 0

const range = (n: number) => Array.from({ length: n }, (_, i) => i)

const bump = (m: Map<string, number>, id: string): number => {
  const n = m.get(id) ?? 0
  m.set(id, n + 1)
  return n
}

/**
 * Builds `count` entries continuing `state` the way an independent writer would:
 * its own timestamps, tool names and messages.
 */
export const foreignEntries = (state: JournalState.JournalState, count: number) => {
  let s = state
  const out: Array<Entry.Entry> = []
  for (let i = 0; i < count; i++) {
    const e = i % 2 === 0
      ? JournalState.nextTool(s, 1_700_000_000 + s.next_sequence, {
        tool_name: "intruder",
        server_id: "other-instance",
        agent_id: "other-agent",
        bytes_read: 1,
        bytes_written: 2,
        delegation_depth: 0,
        allowed: true
      })
      : JournalState.nextOther(s, 1_700_000_000 + s.next_sequence, "message", { from: "other", n: s.next_sequence })
    out.push(e)
    s = JournalState.fold(s, e)
  }
  return { entries: out, state: s }
}

const countLoads = (probe: Probe, handle: Persistence.ReadHandle): Persistence.ReadHandle => ({
  id: handle.id,
  load: Effect.suspend(() => {
    bump(probe.loads, handle.id)
    return handle.load
  }),
  verify: handle.verify
})

const wrapHandle = (probe: Probe, handle: Persistence.WriteHandle): Persistence.WriteHandle => ({
  ...countLoads(probe, handle),
  checkpoint: handle.checkpoint,
  maxRecordBytes: handle.maxRecordBytes,
  append: (request) =>
    Effect.suspend(() => {
      const n = bump(probe.appends, handle.id)
      const sizes = probe.entriesPerAppend.get(handle.id) ?? []
      sizes.push(request.entries.length)
      probe.entriesPerAppend.set(handle.id, sizes)
      const fault = probe.faults.get(handle.id)?.get(n)
      if (fault === undefined) {
        return probe.slow.has(handle.id)
          ? Effect.andThen(Effect.forEach(range(16), () => Effect.yieldNow, { discard: true }), handle.append(request))
          : handle.append(request)
      }
      const injected = new StorageError({
        operation: "append",
        reason: new StorageReason.Io({ message: `injected failure of append #${n}` })
      })
      switch (fault._tag) {
        case "FailBefore":
          return Effect.fail(injected)
        case "FailAfter":
          return Effect.andThen(handle.append(request), Effect.fail(injected))
        case "Sneak":
          // Another writer stores its entries through the same storage, past the
          // single-writer guarantee, then the service's append goes ahead (and
          // loses the compare-and-append).
          return Effect.gen(function*() {
            const loaded = yield* Effect.orDie(handle.load)
            const foreign = foreignEntries(loaded.state, fault.count)
            yield* Effect.orDie(handle.append({
              after: Persistence.tipOf(loaded.state),
              entries: foreign.entries,
              head: () => JournalState.head(foreign.state)
            }))
            const list = probe.sneaked.get(handle.id) ?? []
            list.push(...foreign.entries)
            probe.sneaked.set(handle.id, list)
            return yield* handle.append(request)
          })
      }
    })
})

/** Wraps an adapter so that every handle it opens is counted and can fail as planned. */
export const instrument = (
  probe: Probe,
  inner: Persistence.Persistence["Service"]
): Persistence.Persistence["Service"] =>
  Persistence.Persistence.of({
    ...inner,
    open: Persistence.makeOpen({
      read: (id, caps) => Effect.map(inner.open(id, { mode: "read", caps }), (h) => countLoads(probe, h)),
      write: (id, caps) => Effect.map(inner.open(id, { mode: "write", caps }), (h) => wrapHandle(probe, h))
    }),
    history: (id, options) =>
      probe.slow.has(id)
        ? Stream.unwrap(
          Effect.as(Effect.forEach(range(16), () => Effect.yieldNow, { discard: true }), inner.history(id, options))
        )
        : inner.history(id, options)
  })

/** The memory adapter, instrumented. */
export const layerMemory = (probe: Probe, options?: Persistence.MemoryOptions): Layer.Layer<Persistence.Persistence> =>
  Layer.effect(Persistence.Persistence, Effect.map(Persistence.makeMemory(options), (p) => instrument(probe, p)))

/**
 * Wraps an adapter so that every write handle of a session is one shared handle,
 * opened once in `scope`: two services over it both write, as two instances would
 * if the single-writer guarantee were broken, and only the storage's sequence
 * check keeps the chain in one piece.
 */
export const shareWriters = (
  inner: Persistence.Persistence["Service"],
  scope: Scope.Scope
): Persistence.Persistence["Service"] => {
  const shared = new Map<string, Persistence.WriteHandle>()
  return Persistence.Persistence.of({
    ...inner,
    open: Persistence.makeOpen({
      read: (id, caps) => inner.open(id, { mode: "read", caps }),
      write: (id, caps) =>
        Effect.suspend(() => {
          const existing = shared.get(id)
          if (existing !== undefined) return Effect.succeed(existing)
          return Effect.tap(
            Scope.provide(scope)(inner.open(id, { mode: "write", caps })),
            (h) => Effect.sync(() => shared.set(id, h))
          )
        })
    })
  })
}
