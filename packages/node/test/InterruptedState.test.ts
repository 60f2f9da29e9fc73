/**
 * What an interruption must not leave behind in the adapter's own state: a session
 * directory whose creation was never made durable (an interrupted open), a writer
 * whose view of the stored tip is stale (an interrupted append), and a lock
 * takeover that waits on the fiber's clock (it runs uninterruptibly, so under a
 * test clock it would never end).
 */
import { Persistence } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as TestClock from "effect/testing/TestClock"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { Files, Lock, NodePersistence } from "../src/index.ts"
import { adapter, appendChain, chain, JournalState, requestOf, tempDir } from "./helpers.ts"

type FileHandle = Awaited<ReturnType<NodePersistence.Fs["open"]>>

/** A promise to wait on and its resolver. */
const signal = () => {
  let fire!: () => void
  const fired = new Promise<void>((resolve) => (fire = resolve))
  return { fire, fired }
}

/** A handle whose calls go to `h`, with `sync` or `write` replaced. */
const wrapHandle = (
  h: FileHandle,
  over: {
    readonly sync?: () => Promise<void>
    readonly write?: FileHandle["write"]
  }
): FileHandle => ({
  fd: h.fd,
  read: (b, o, l, p) => h.read(b, o, l, p),
  write: over.write ?? ((b, o, l, p) => h.write(b, o, l, p)),
  datasync: () => h.datasync(),
  sync: over.sync ?? (() => h.sync()),
  stat: () => h.stat(),
  chmod: (m) => h.chmod(m),
  truncate: (l) => h.truncate(l),
  close: () => h.close()
})

describe("interruptions leave consistent state", () => {
  it("an open interrupted right after creating the session directory still makes it durable", async () => {
    const root = tempDir("interrupt-mkdir")
    const id = "mk"
    const sessionDir = path.join(root, id)
    const entered = signal()
    const gate = signal()
    let armed = true
    let created = false
    const rootSyncsAfterCreate: Array<string> = []
    const real = NodePersistence.nodeFs
    const fsImpl: NodePersistence.Fs = {
      ...real,
      mkdir: async (p, mode) => {
        await real.mkdir(p, mode)
        if (p !== sessionDir) return
        created = true
        if (armed) {
          armed = false
          entered.fire()
          await gate.fired
        }
      },
      open: async (p, flags, mode) => {
        const h = await real.open(p, flags, mode)
        return wrapHandle(h, {
          sync: async () => {
            if (p === root && created) rootSyncsAfterCreate.push(p)
            return h.sync()
          }
        })
      }
    }
    const program = Effect.gen(function*() {
      const p = yield* Persistence.Persistence
      const fiber = yield* Effect.forkChild(Effect.scoped(p.open(id, { mode: "write" })))
      yield* Effect.promise(() => entered.fired)
      setTimeout(gate.fire, 20)
      yield* Fiber.interrupt(fiber)
      expect(fs.existsSync(sessionDir)).toBe(true)
      expect(rootSyncsAfterCreate.length).toBeGreaterThanOrEqual(1)
    })
    await Effect.runPromise(Effect.provide(program, adapter({ root, fs: fsImpl })))
  })

  it("after an append interrupted during its durable write (O_DSYNC), the same handle appends after the stored tip", async () => {
    const root = tempDir("interrupt-tip")
    const id = "tip"
    const entered = signal()
    const gate = signal()
    let armed = false
    const real = NodePersistence.nodeFs
    const fsImpl: NodePersistence.Fs = {
      ...real,
      open: async (p, flags, mode) => {
        const h = await real.open(p, flags, mode)
        return wrapHandle(h, {
          write: async (b, o, l, pos) => {
            if (armed && p.endsWith(".jsonl")) {
              armed = false
              entered.fire()
              await gate.fired
            }
            return h.write(b, o, l, pos)
          }
        })
      }
    }
    const program = Effect.scoped(Effect.gen(function*() {
      const p = yield* Persistence.Persistence
      const h = yield* p.open(id, { mode: "write" })
      const first = yield* appendChain(h, JournalState.empty(id), 5)
      const second = chain(first.state, 3)
      armed = true
      const fiber = yield* Effect.forkChild(h.append(requestOf(first.state, second.entries)))
      yield* Effect.promise(() => entered.fired)
      setTimeout(gate.fire, 20)
      yield* Fiber.interrupt(fiber)
      const stored = yield* Effect.scoped(Effect.flatMap(p.open(id, { mode: "read" }), (r) => r.load))
      const next = yield* Effect.exit(appendChain(h, stored.state, 1))
      expect(Exit.isSuccess(next)).toBe(true)
      const stale = yield* Effect.exit(appendChain(h, first.state, 1))
      expect(Exit.isFailure(stale)).toBe(true)
    }))
    await Effect.runPromise(Effect.provide(program, adapter({ root, fs: fsImpl })))
  })

  it("a lock takeover that waits for a live claimant ends under a test clock", async () => {
    const root = tempDir("interrupt-lock")
    const dir = path.join(root, "s")
    fs.mkdirSync(dir, { mode: 0o700 })
    const child = spawn("sleep", ["30"])
    try {
      await new Promise((resolve) => setTimeout(resolve, 100))
      const record = (pid: number, start: string | null) =>
        JSON.stringify({ pid, host: os.hostname(), start, token: `t${pid}`, acquired_at: 1 })
      // A stale lock of a dead process, and a live process's claim to take it over.
      fs.writeFileSync(path.join(dir, Lock.LOCK_FILE), record(2 ** 22 - 7, null), { mode: 0o600 })
      fs.writeFileSync(
        path.join(dir, Lock.CLAIM_FILE),
        record(child.pid!, Lock.processStat(child.pid!)?.start ?? null),
        {
          mode: 0o600
        }
      )
      const attempt = Effect.exit(Lock.acquire(Files.context(root), dir, "s")).pipe(Effect.provide(TestClock.layer()))
      const exit = await Promise.race([
        Effect.runPromise(attempt),
        new Promise<"still waiting">((resolve) => setTimeout(() => resolve("still waiting"), 10_000))
      ])
      expect(exit).not.toBe("still waiting")
      if (exit !== "still waiting") expect(Exit.isFailure(exit)).toBe(true)
    } finally {
      child.kill()
    }
  }, 20_000)
})
