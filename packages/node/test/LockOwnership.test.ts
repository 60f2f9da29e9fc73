/**
 * The lock as writers race for it and lose it: a lock that changes hands while it
 * is read is read again (never called a foreign file); a writer whose lock was
 * removed or taken stops with a typed error before its next write becomes
 * durable, so there is never a second chain; a lock left by a holder under
 * another host name but the same kernel and pid namespace (a restarted
 * container) is taken over once its holder is proved gone, and kept while it
 * lives; `unlock` removes only a lock whose holder is proved gone.
 */
import { Persistence, SessionLocked, StorageError, StorageReason } from "@session-journal/core"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as References from "effect/References"
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { Lock, NodePersistence } from "../src/index.ts"
import * as Base from "../src/internal/fileOps/base.ts"
import * as Process from "../src/internal/process.ts"
import { appendChain, chain, JournalState, loadRead, requestOf, run, tempDir, withWriter } from "./helpers.ts"

const made: Array<string> = []
const temp = (prefix: string) => {
  const dir = tempDir(prefix)
  made.push(dir)
  return dir
}
afterAll(() => {
  for (const d of made.splice(0)) fs.rmSync(d, { recursive: true, force: true })
})

const context = (root: string, fsImpl: Base.Fs = Base.nodeFs): Base.Context => ({
  fs: fsImpl,
  clock: Clock.Clock.defaultValue(),
  root,
  uid: typeof process.getuid === "function" ? process.getuid() : null,
  maxFileBytes: Base.MAX_FILE_BYTES,
  maxLineBytes: Base.MAX_LINE_BYTES
})

const procAvailable = Lock.processStat(process.pid) !== null
const ownBoot = (() => {
  try {
    return fs.readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim()
  } catch {
    return null
  }
})()
const ownPidns = (() => {
  try {
    return fs.readlinkSync("/proc/self/ns/pid")
  } catch {
    return null
  }
})()

const deadPid = (): number => spawnSync(process.execPath, ["-e", ""]).pid!

const recordOf = (pid: number, extra: Partial<Lock.LockRecord> = {}): Lock.LockRecord => ({
  pid,
  host: os.hostname(),
  start: Lock.processStat(pid)?.start ?? null,
  token: "someone-else",
  acquired_at: Date.now(),
  boot: ownBoot,
  pidns: ownPidns,
  ...extra
})

const writeLock = (dir: string, record: Lock.LockRecord) =>
  fs.writeFileSync(path.join(dir, Lock.LOCK_FILE), `${JSON.stringify(record)}\n`, { mode: 0o600 })

const sessionDir = (prefix: string) => {
  const root = temp(prefix)
  const dir = path.join(root, "s")
  fs.mkdirSync(dir, { mode: 0o700 })
  return { root, dir }
}

const failureOf = async <A>(effect: Effect.Effect<A, unknown>): Promise<unknown> => {
  const exit = await Effect.runPromise(Effect.exit(effect))
  if (Exit.isSuccess(exit)) return "succeeded"
  const failure = exit.cause.reasons.find((r) => r._tag === "Fail")
  return failure === undefined ? exit.cause : (failure as { readonly error: unknown }).error
}

describe("a lock that changes hands while it is read", () => {
  it("is read again: the new holder is reported as holding it, never as a foreign file", async () => {
    const { root, dir } = sessionDir("lock-swap")
    const lockPath = path.join(dir, Lock.LOCK_FILE)
    // The first holder is gone; between the loser's lstat and its open, another
    // (live: the test's parent process) writer takes the lock.
    writeLock(dir, recordOf(deadPid()))
    let swapped = false
    const swapping: Base.Fs = {
      ...Base.nodeFs,
      open: async (p, flags, mode) => {
        if (p === lockPath && !swapped) {
          swapped = true
          const next = path.join(dir, "next")
          fs.writeFileSync(next, `${JSON.stringify(recordOf(process.ppid))}\n`, { mode: 0o600 })
          fs.unlinkSync(lockPath)
          fs.linkSync(next, lockPath)
          fs.unlinkSync(next)
        }
        return Base.nodeFs.open(p, flags, mode)
      }
    }
    const error = await failureOf(Lock.acquire(context(root, swapping), dir, "s"))
    expect(swapped).toBe(true)
    expect(error).toBeInstanceOf(SessionLocked)
    expect((error as SessionLocked).message).toContain(`pid ${process.ppid}`)
    expect(String((error as Error).message)).not.toMatch(/remove it|rm /)
  })

  it("inspect reads a lock that changes hands as the lock it now is", async () => {
    const { root, dir } = sessionDir("lock-swap-inspect")
    const lockPath = path.join(dir, Lock.LOCK_FILE)
    writeLock(dir, recordOf(deadPid()))
    let swapped = false
    const swapping: Base.Fs = {
      ...Base.nodeFs,
      open: async (p, flags, mode) => {
        if (p === lockPath && !swapped) {
          swapped = true
          fs.renameSync(lockPath, `${lockPath}.old`)
          writeLock(dir, recordOf(process.ppid))
        }
        return Base.nodeFs.open(p, flags, mode)
      }
    }
    const seen = await Effect.runPromise(Lock.inspect(context(root, swapping), dir))
    expect(seen?.problem).toBeUndefined()
    expect(seen?.record?.pid).toBe(process.ppid)
    expect(seen?.alive).toBe(true)
  })
})

// ---------------------------------------------------------------------------
// A writer re-checks its lock before each batch.

const lostCause = (error: unknown): StorageReason.LockLost | null =>
  error instanceof StorageError && error.reason._tag === "LockLost" ? error.reason : null

describe("a writer whose lock is removed or taken", () => {
  it("stops at its next append with LockLost; nothing unacknowledged is stored and the session verifies", async () => {
    const root = temp("lock-lost")
    const lockPath = path.join(root, "s", Lock.LOCK_FILE)
    const outcome = await run(
      { root },
      withWriter("s", (h) =>
        Effect.gen(function*() {
          const first = yield* appendChain(h, JournalState.empty("s"), 3)
          // Removed from outside (as `rm lock` would).
          fs.unlinkSync(lockPath)
          const next = chain(first.state, 2)
          const failed = yield* Effect.flip(h.append(requestOf(first.state, next.entries)))
          // A second attempt fails the same way: the writer never writes again.
          const again = yield* Effect.flip(h.append(requestOf(first.state, next.entries)))
          return { failed, again }
        }))
    )
    expect(lostCause(outcome.failed)?.found).toContain("removed")
    expect(lostCause(outcome.again)).not.toBeNull()
    expect(outcome.failed.message).toContain("no longer this writer's")
    const loaded = await run({ root }, loadRead("s"))
    expect(loaded.state.next_sequence).toBe(3)
    const report = await Effect.runPromise(NodePersistence.inspect({ root }, "s"))
    expect(report.ok).toBe(true)
  })

  it("a lock taken by another writer after it was removed: the old writer stops, the new one's chain verifies", async () => {
    const root = temp("lock-stolen")
    const lockPath = path.join(root, "s", Lock.LOCK_FILE)
    const layer = NodePersistence.layer({ root })
    const result = await Effect.runPromise(
      Effect.scoped(Effect.gen(function*() {
        const p = yield* Persistence.Persistence
        const a = yield* p.open("s", { mode: "write" })
        const first = yield* appendChain(a, JournalState.empty("s"), 4)
        fs.unlinkSync(lockPath)
        // B takes the now free lock (in this process: a scope of its own) and writes.
        const bDone = yield* Effect.scoped(Effect.gen(function*() {
          const b = yield* p.open("s", { mode: "write" })
          const loaded = yield* b.load
          yield* appendChain(b, loaded.state, 2)
          // A, still running, tries to write its next batch while B holds the lock.
          const aFailed = yield* Effect.flip(a.append(requestOf(first.state, chain(first.state, 1).entries)))
          return aFailed
        }))
        return bDone
      })).pipe(Effect.provide(layer as Layer.Layer<Persistence.Persistence>))
    )
    expect(lostCause(result)?.found).toMatch(/replaced by the lock of pid \d+|removed/)
    const loaded = await run({ root }, loadRead("s"))
    expect(loaded.state.next_sequence).toBe(6)
    const report = await Effect.runPromise(NodePersistence.inspect({ root }, "s"))
    expect(report.ok).toBe(true)
  })

  it("a checkpoint is refused the same way", async () => {
    const root = temp("lock-lost-checkpoint")
    const lockPath = path.join(root, "s", Lock.LOCK_FILE)
    const failed = await run(
      { root },
      withWriter("s", (h) =>
        Effect.gen(function*() {
          yield* appendChain(h, JournalState.empty("s"), 2)
          const loaded = yield* h.load
          fs.unlinkSync(lockPath)
          return yield* Effect.flip(h.checkpointState!(loaded.state))
        }))
    )
    expect(lostCause(failed)).not.toBeNull()
  })
})

// ---------------------------------------------------------------------------
// Holders under another host name (a restarted container).

const startSleeper = async (): Promise<{ pid: number; stop: () => Promise<void> }> => {
  const child = spawn("sleep", ["600"], { stdio: "ignore" })
  await new Promise<void>((resolve, reject) => {
    child.once("spawn", () => resolve())
    child.once("error", reject)
  })
  const exited = new Promise<void>((resolve) => child.once("close", () => resolve()))
  return {
    pid: child.pid!,
    stop: async () => {
      child.kill("SIGKILL")
      await exited
    }
  }
}

const takes = async (root: string, dir: string) => {
  const result = await Effect.runPromise(Effect.result(Lock.acquire(context(root), dir, "s")))
  if (result._tag === "Failure") return result.failure
  await Effect.runPromise(result.success.release)
  return result.success.tookOver
}

describe.runIf(procAvailable && ownBoot !== null && ownPidns !== null)("a holder under another host name", () => {
  it("same boot and pid namespace, its pid dead: taken over, and what proved it gone is said", async () => {
    const { root, dir } = sessionDir("container-dead")
    writeLock(dir, recordOf(deadPid(), { host: "container-1", start: "12345" }))
    const took = await takes(root, dir)
    expect(took).not.toBeInstanceOf(Error)
    const over = took as Lock.TakenOver
    expect(over.record?.host).toBe("container-1")
    expect(over.verdict.state).toBe("gone")
    expect(over.verdict.reason).toContain("same kernel boot and pid namespace")
  })

  it("same boot and pid namespace, its pid reused by a process that started at another time: taken over", async () => {
    const { root, dir } = sessionDir("container-reused")
    const sleeper = await startSleeper()
    try {
      writeLock(dir, recordOf(sleeper.pid, { host: "container-1", start: "1" }))
      const took = (await takes(root, dir)) as Lock.TakenOver
      expect(took.verdict.state).toBe("gone")
      expect(took.verdict.reason).toContain("pid was reused")
    } finally {
      await sleeper.stop()
    }
  })

  it("same boot and pid namespace, holder alive: refused", async () => {
    const { root, dir } = sessionDir("container-live")
    const sleeper = await startSleeper()
    try {
      writeLock(dir, recordOf(sleeper.pid, { host: "container-1" }))
      expect(await takes(root, dir)).toBeInstanceOf(SessionLocked)
    } finally {
      await sleeper.stop()
    }
  })

  // The writer itself (`NodePersistence`, open for writing), not only `Lock.acquire`:
  // it takes such a lock over, and its debug log says what proved the holder gone.
  const writerTakes = async (root: string) => {
    const logs: Array<string> = []
    const capture = Logger.make(({ message }) => {
      logs.push(Array.isArray(message) ? message.map(String).join(" ") : String(message))
    })
    const result = await Effect.runPromise(
      Effect.result(Effect.scoped(Effect.gen(function*() {
        const p = yield* Persistence.Persistence
        const h = yield* p.open("s", { mode: "write" })
        const loaded = yield* h.load
        yield* appendChain(h, loaded.state, 1)
      }))).pipe(
        Effect.provide(NodePersistence.layer({ root }) as Layer.Layer<Persistence.Persistence>),
        Effect.provide(Logger.layer([capture])),
        Effect.provideService(References.MinimumLogLevel, "Debug")
      )
    )
    return { failure: result._tag === "Failure" ? result.failure : null, logs }
  }

  it("a writer takes over the lock of a dead or reused pid under another host name and logs what proved it", async () => {
    const dead = sessionDir("writer-container-dead")
    const pid = deadPid()
    writeLock(dead.dir, recordOf(pid, { host: "container-1", start: "12345" }))
    const first = await writerTakes(dead.root)
    expect(first.failure).toBeNull()
    expect(first.logs.join("\n")).toContain(
      `took over the lock of session s left by pid ${pid} on container-1: no live process ${pid} runs under the same kernel boot and pid namespace`
    )
    expect(fs.existsSync(path.join(dead.dir, Lock.LOCK_FILE))).toBe(false)

    const reused = sessionDir("writer-container-reused")
    const sleeper = await startSleeper()
    try {
      writeLock(reused.dir, recordOf(sleeper.pid, { host: "container-1", start: "1" }))
      const second = await writerTakes(reused.root)
      expect(second.failure).toBeNull()
      expect(second.logs.join("\n")).toMatch(
        new RegExp(
          `left by pid ${sleeper.pid} on container-1: process ${sleeper.pid} under the same kernel boot .* the pid was reused`
        )
      )
      // A live holder with the start time its record names keeps the lock.
      const live = sessionDir("writer-container-live")
      writeLock(live.dir, recordOf(sleeper.pid, { host: "container-1" }))
      const third = await writerTakes(live.root)
      expect(third.failure).toBeInstanceOf(SessionLocked)
      expect(third.logs.join("\n")).not.toContain("took over")
      expect(fs.existsSync(path.join(live.dir, Lock.LOCK_FILE))).toBe(true)
    } finally {
      await sleeper.stop()
    }
  })

  it("another boot id under another host name, or an old record without boot and namespace: refused (not provable)", async () => {
    const { root, dir } = sessionDir("other-kernel")
    writeLock(dir, recordOf(deadPid(), { host: "elsewhere", boot: "00000000-0000-0000-0000-000000000000" }))
    const error = await takes(root, dir)
    expect(error).toBeInstanceOf(SessionLocked)
    expect((error as SessionLocked).message).toContain("another kernel")
    const { boot: _b, pidns: _p, ...old } = recordOf(deadPid(), { host: "elsewhere" })
    fs.writeFileSync(path.join(dir, Lock.LOCK_FILE), JSON.stringify(old), { mode: 0o600 })
    expect(await takes(root, dir)).toBeInstanceOf(SessionLocked)
  })

  it("an old record of this host without the new fields is still judged by /proc", async () => {
    const { root, dir } = sessionDir("old-record")
    const { boot: _b, pidns: _p, ...old } = recordOf(deadPid())
    fs.writeFileSync(path.join(dir, Lock.LOCK_FILE), JSON.stringify(old), { mode: 0o600 })
    const took = (await takes(root, dir)) as Lock.TakenOver
    expect(took.verdict.state).toBe("gone")
  })
})

// ---------------------------------------------------------------------------
// Waiting for the lock.

describe("lockWait", () => {
  it("a writer waits for the lock while another holds it, and gets it when it is released", async () => {
    const root = temp("lock-wait")
    const holding = NodePersistence.layer({ root })
    const waiting = NodePersistence.layer({ root, lockWait: "20 seconds" })
    let releasedAt = 0
    const a = Effect.runPromise(
      Effect.scoped(Effect.gen(function*() {
        const p = yield* Persistence.Persistence
        const h = yield* p.open("s", { mode: "write" })
        yield* appendChain(h, JournalState.empty("s"), 1)
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 300)))
        releasedAt = Date.now()
      })).pipe(Effect.provide(holding as Layer.Layer<Persistence.Persistence>))
    )
    while (!fs.existsSync(path.join(root, "s", Lock.LOCK_FILE))) await new Promise((resolve) => setTimeout(resolve, 5))
    const b = await Effect.runPromise(
      Effect.scoped(Effect.gen(function*() {
        const p = yield* Persistence.Persistence
        const h = yield* p.open("s", { mode: "write" })
        const loaded = yield* h.load
        yield* appendChain(h, loaded.state, 1)
        return Date.now()
      })).pipe(Effect.provide(waiting as Layer.Layer<Persistence.Persistence>))
    )
    await a
    expect(b).toBeGreaterThanOrEqual(releasedAt)
    const loaded = await run({ root }, loadRead("s"))
    expect(loaded.state.next_sequence).toBe(2)
  })

  it("past the bound it fails with SessionLocked saying how long it waited; without lockWait at once", async () => {
    const root = temp("lock-wait-bound")
    const outcome = await run(
      { root },
      withWriter("s", () =>
        Effect.gen(function*() {
          const waited = yield* Effect.flip(
            Effect.scoped(Effect.flatMap(
              Persistence.Persistence,
              (p) => p.open("s", { mode: "write" })
            )).pipe(
              Effect.provide(NodePersistence.layer({ root, lockWait: 200 }) as Layer.Layer<Persistence.Persistence>)
            )
          )
          const started = Date.now()
          const atOnce = yield* Effect.flip(
            Effect.scoped(Effect.flatMap(
              Persistence.Persistence,
              (p) => p.open("s", { mode: "write" })
            )).pipe(Effect.provide(NodePersistence.layer({ root }) as Layer.Layer<Persistence.Persistence>))
          )
          return { waited, atOnce, atOnceMillis: Date.now() - started }
        }))
    )
    expect(outcome.waited).toBeInstanceOf(SessionLocked)
    expect(outcome.waited.message).toMatch(/gave up after waiting 0\.[2-9]\d s|gave up after waiting [1-9]/)
    expect(outcome.atOnce).toBeInstanceOf(SessionLocked)
    expect(outcome.atOnce.message).not.toContain("waiting")
  })
})

describe("unlock", () => {
  it("removes a lock whose holder is proved gone and says why; refuses a live one; a session without a lock is left as it is", async () => {
    const root = temp("unlock")
    await run({ root }, withWriter("s", (h) => appendChain(h, JournalState.empty("s"), 1)))
    const dir = path.join(root, "s")
    expect(await Effect.runPromise(NodePersistence.unlock({ root }, "s"))).toMatchObject({ removed: false })
    const dead = deadPid()
    writeLock(dir, recordOf(dead))
    const report = await Effect.runPromise(NodePersistence.unlock({ root }, "s"))
    expect(report).toMatchObject({ removed: true, forced: false })
    expect(report.holder?.pid).toBe(dead)
    expect(fs.existsSync(path.join(dir, Lock.LOCK_FILE))).toBe(false)
    writeLock(dir, recordOf(process.ppid))
    const refused = await failureOf(NodePersistence.unlock({ root }, "s", { force: true }))
    expect(refused).toBeInstanceOf(SessionLocked)
    expect((refused as SessionLocked).message).toContain("the holder is alive")
    expect(fs.existsSync(path.join(dir, Lock.LOCK_FILE))).toBe(true)
  })
})

// The scan needs root in the initial pid namespace with every /proc entry readable
// (in some sandboxes even root may not read /proc/1/ns/pid: then nothing is proved).
const scanWorks = ownPidns !== null && Process.pidnsInhabited(ownPidns) === true
const canUnshare = ownBoot !== null && ownPidns !== null &&
  spawnSync("unshare", ["--pid", "--fork", "true"]).status === 0
// A skipped case says why, so a run that cannot prove these is seen as one.
if (!scanWorks) {
  console.warn("skipping the pid-namespace scan case: this process cannot read every /proc/<pid>/ns/pid")
}
if (!canUnshare) console.warn("skipping the new-pid-namespace case: `unshare --pid --fork` is not permitted here")

describe("unlock of a holder in another pid namespace of this kernel", () => {
  it.runIf(scanWorks)(
    "a namespace with no process left proves the holder gone to unlock (not to a writer)",
    async () => {
      const root = temp("unlock-pidns")
      await run({ root }, withWriter("s", (h) => appendChain(h, JournalState.empty("s"), 1)))
      const dir = path.join(root, "s")
      // A writer cannot prove it (it looks only at its own namespace)...
      writeLock(dir, recordOf(1, { host: "container-1", start: "77", pidns: "pid:[1]" }))
      expect(await takes(root, dir)).toBeInstanceOf(SessionLocked)
      // ...unlock can: no process of this kernel is in that namespace.
      const report = await Effect.runPromise(NodePersistence.unlock({ root }, "s"))
      expect(report).toMatchObject({ removed: true, forced: false })
      expect(report.proof).toContain("no process of this kernel")
    }
  )

  it.runIf(canUnshare)(
    "a live process in a new pid namespace keeps its lock; force removes it and says so",
    async () => {
      const root = temp("unlock-pidns-live")
      await run({ root }, withWriter("s", (h) => appendChain(h, JournalState.empty("s"), 1)))
      const dir = path.join(root, "s")
      // A real process in a new pid namespace holds the lock as its pid 1.
      const child = spawn("unshare", [
        "--pid",
        "--fork",
        "--kill-child",
        "sh",
        "-c",
        "readlink /proc/self/ns/pid; exec sleep 600"
      ], {
        stdio: ["ignore", "pipe", "ignore"]
      })
      const exited = new Promise<void>((resolve) => child.once("close", () => resolve()))
      try {
        const pidns = await new Promise<string>((resolve, reject) => {
          child.stdout.once("data", (b: Buffer) => resolve(b.toString().trim()))
          child.once("error", reject)
        })
        expect(pidns).not.toBe(ownPidns)
        writeLock(dir, recordOf(1, { host: "container-2", start: "77", pidns }))
        expect(await takes(root, dir)).toBeInstanceOf(SessionLocked)
        const refused = await failureOf(NodePersistence.unlock({ root }, "s"))
        expect(refused).toBeInstanceOf(SessionLocked)
        expect((refused as SessionLocked).message).toContain("cannot be proved gone")
        if (scanWorks) expect((refused as SessionLocked).message).toContain("still running")
        expect(fs.existsSync(path.join(dir, Lock.LOCK_FILE))).toBe(true)
        const forced = await Effect.runPromise(NodePersistence.unlock({ root }, "s", { force: true }))
        expect(forced).toMatchObject({ removed: true, forced: true })
      } finally {
        child.kill("SIGKILL")
        await exited
      }
    }
  )
})
