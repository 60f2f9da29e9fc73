/**
 * Interrupting the adapter in the middle of a file operation: a load interrupted
 * while a segment read is pending, an append interrupted while its writer loads,
 * while its durable write is pending (segments are written with O_DSYNC), or while a segment is being opened. No
 * descriptor leaks (/proc/self/fd counts before and after), the lock is released,
 * and the session loads afterwards with every acknowledged or completed write.
 */
import { Persistence } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { NodePersistence } from "../src/index.ts"
import {
  adapter,
  appendChain,
  JournalState,
  loadRead,
  openFds,
  run,
  tempDir,
  withWriter,
  wrapHandle
} from "./helpers.ts"

type Op = "open" | "read" | "write"

/**
 * The real filesystem, except that the first `op` on a segment file after `arm()`
 * waits until `release()`: `hit` resolves when it starts waiting.
 */
const gated = (op: Op) => {
  let armed = false
  let entered!: () => void
  const hit = new Promise<void>((resolve) => (entered = resolve))
  let release!: () => void
  const gate = new Promise<void>((resolve) => (release = resolve))
  const stop = async (p: string, what: Op) => {
    if (!armed || what !== op || !p.endsWith(".jsonl")) return
    armed = false
    entered()
    await gate
  }
  const real = NodePersistence.nodeFs
  const fsImpl: NodePersistence.Fs = {
    ...real,
    open: async (p, flags, mode) => {
      const h = await real.open(p, flags, mode)
      // The descriptor is open while the caller waits: an interruption now must not lose it.
      await stop(p, "open")
      return wrapHandle(h, {
        read: async (b, o, l, pos) => {
          await stop(p, "read")
          return h.read(b, o, l, pos)
        },
        write: async (b, o, l, pos) => {
          await stop(p, "write")
          return h.write(b, o, l, pos)
        }
      })
    }
  }
  return { fs: fsImpl, hit, release: () => release(), arm: () => (armed = true) }
}

const ID = "intr"

const seeded = async (prefix: string, entries: number) => {
  const root = tempDir(prefix)
  const c = await run({ root }, withWriter(ID, (h) => appendChain(h, JournalState.empty(ID), entries)))
  return { root, state: c.state }
}

// Runs `program` on the gated filesystem, interrupts it once the gated call is
// waiting, then lets that call go on; resolves to the exit.
const interrupted = async <A, E>(
  root: string,
  g: ReturnType<typeof gated>,
  program: Effect.Effect<A, E, Persistence.Persistence>
) => {
  const fiber = Effect.runFork(Effect.provide(program, adapter({ root, fs: g.fs })))
  await g.hit
  const interrupting = Effect.runPromise(Fiber.interrupt(fiber))
  // An uninterruptible step (an open, a durable write) finishes first.
  setTimeout(g.release, 20)
  await interrupting
  return await Effect.runPromise(Fiber.await(fiber))
}

describe.runIf(fs.existsSync("/proc/self/fd"))("interruption during file operations", () => {
  it("a load interrupted while a segment read is pending closes the segment", async () => {
    const { root, state } = await seeded("intr-load", 20)
    const g = gated("read")
    const before = openFds()
    const exit = await interrupted(
      root,
      g,
      Effect.gen(function*() {
        yield* Effect.sync(g.arm)
        return yield* loadRead(ID)
      })
    )
    expect(Exit.hasInterrupts(exit)).toBe(true)
    expect(openFds()).toBe(before)
    expect((await run({ root }, loadRead(ID))).state.next_sequence).toBe(state.next_sequence)
  })

  it("an append interrupted while its writer loads closes the segment and releases the lock", async () => {
    const { root, state } = await seeded("intr-writer-load", 20)
    const g = gated("read")
    const before = openFds()
    const exit = await interrupted(
      root,
      g,
      withWriter(ID, (h) =>
        Effect.gen(function*() {
          yield* Effect.sync(g.arm)
          return yield* appendChain(h, state, 3)
        }))
    )
    expect(Exit.hasInterrupts(exit)).toBe(true)
    expect(openFds()).toBe(before)
    expect(fs.existsSync(path.join(root, ID, "lock"))).toBe(false)
    expect((await run({ root }, loadRead(ID))).state.next_sequence).toBe(state.next_sequence)
  })

  it("an append interrupted while its durable write is pending completes, then closes everything", async () => {
    const { root, state } = await seeded("intr-sync", 20)
    const g = gated("write")
    const before = openFds()
    const exit = await interrupted(
      root,
      g,
      withWriter(ID, (h) =>
        Effect.gen(function*() {
          yield* h.load
          yield* Effect.sync(g.arm)
          yield* appendChain(h, state, 3)
          // Never reached: the interruption takes effect once the write is done.
          return yield* Effect.never
        }))
    )
    expect(Exit.hasInterrupts(exit)).toBe(true)
    expect(openFds()).toBe(before)
    expect(fs.existsSync(path.join(root, ID, "lock"))).toBe(false)
    const loaded = await run({ root }, loadRead(ID))
    expect(loaded.state.next_sequence).toBe(state.next_sequence + 3)
    expect(loaded.recovery.stopped).toBeNull()
  })

  it("an append interrupted while the active segment is being opened closes it", async () => {
    const { root, state } = await seeded("intr-open", 20)
    const g = gated("open")
    const before = openFds()
    const exit = await interrupted(
      root,
      g,
      withWriter(ID, (h) =>
        Effect.gen(function*() {
          yield* h.load
          yield* Effect.sync(g.arm)
          yield* appendChain(h, state, 3)
          return yield* Effect.never
        }))
    )
    expect(Exit.hasInterrupts(exit)).toBe(true)
    expect(openFds()).toBe(before)
    expect(fs.existsSync(path.join(root, ID, "lock"))).toBe(false)
    const verified = await run(
      { root },
      Effect.scoped(Effect.gen(function*() {
        const p = yield* Persistence.Persistence
        const h = yield* p.open(ID, { mode: "read" })
        return yield* h.verify
      }))
    )
    expect(verified.recovery.stopped).toBeNull()
    expect(verified.state.next_sequence).toBe(state.next_sequence + 3)
  })
})
