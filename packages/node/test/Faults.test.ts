/**
 * Fault injection on the real filesystem: the Nth filesystem call of a workload
 * fails (EIO or ENOSPC), once or from then on. The error reaches the caller as a
 * StorageError, the session never ends up corrupt, every acknowledged entry
 * survives, no descriptor leaks and no temp file is left behind. Also: two
 * processes and one session.
 */
import { SessionJournal } from "@session-journal/core"
import { toolParams } from "@session-journal/core/test/fixtures"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { NodePersistence } from "../src/index.ts"
import { acks, historyOf, loadRead, openFds, run, spawnFixture, tempDir, tempFiles } from "./helpers.ts"

interface Injector {
  fs: NodePersistence.Fs
  calls: number
  arm: (n: number, code: string, persistent: boolean) => void
  disarm: () => void
  failures: number
}

const makeInjector = (): Injector => {
  const state = { calls: 0, failAt: -1, code: "EIO", persistent: false, failures: 0 }
  const maybeFail = (what: string) => {
    state.calls++
    if (state.failAt >= 0 && (state.calls === state.failAt || (state.persistent && state.calls > state.failAt))) {
      state.failures++
      throw Object.assign(new Error(`${state.code}: injected failure of ${what}`), { code: state.code })
    }
  }
  const real = NodePersistence.nodeFs
  const wrapHandle = (h: Awaited<ReturnType<NodePersistence.Fs["open"]>>) => ({
    fd: h.fd,
    read: async (b: Uint8Array, o: number, l: number, p: number) => (maybeFail("read"), h.read(b, o, l, p)),
    write: async (b: Uint8Array, o: number, l: number, p: number) => (maybeFail("write"), h.write(b, o, l, p)),
    datasync: async () => (maybeFail("fdatasync"), h.datasync()),
    sync: async () => (maybeFail("fsync"), h.sync()),
    stat: async () => (maybeFail("fstat"), h.stat()),
    chmod: async (m: number) => (maybeFail("fchmod"), h.chmod(m)),
    truncate: async (n: number) => (maybeFail("ftruncate"), h.truncate(n)),
    // close is never failed: Linux releases the descriptor even when close errs.
    close: () => h.close()
  })
  const injected: NodePersistence.Fs = {
    open: async (p, f, m) => (maybeFail("open"), wrapHandle(await real.open(p, f, m))),
    lstat: async (p) => (maybeFail("lstat"), real.lstat(p)),
    mkdir: async (p, m) => (maybeFail("mkdir"), real.mkdir(p, m)),
    readdir: async (p) => (maybeFail("readdir"), real.readdir(p)),
    rename: async (a, b) => (maybeFail("rename"), real.rename(a, b)),
    link: async (a, b) => (maybeFail("link"), real.link(a, b)),
    unlink: async (p) => (maybeFail("unlink"), real.unlink(p)),
    rmdir: async (p) => (maybeFail("rmdir"), real.rmdir(p))
  }
  return {
    fs: injected,
    get calls() {
      return state.calls
    },
    get failures() {
      return state.failures
    },
    arm: (n, code, persistent) => {
      state.failAt = state.calls + n
      state.code = code
      state.persistent = persistent
    },
    disarm: () => {
      state.failAt = -1
    }
  }
}

const params = (i: number) => toolParams(`t${i % 3}`, { server_id: "s", agent_id: "a", bytes_read: i })

describe("fault injection", () => {
  it(
    "the Nth filesystem call fails (EIO, ENOSPC; once, persistently): typed error, no corruption, no leaks",
    async () => {
      const root = path.join(tempDir("faults", true), "root")
      // How many calls does the workload make? Count once without failures.
      const probe = makeInjector()
      const workload = (inj: Injector, id: string, arm: () => void) =>
        Effect.gen(function*() {
          const j = yield* SessionJournal.SessionJournal
          for (let i = 0; i < 3; i++) yield* j.record(id, params(i))
          arm()
          const acked: Array<number> = []
          let errors = 0
          for (let i = 0; i < 12; i++) {
            const r = yield* Effect.exit(
              Effect.all([j.record(id, params(i)), j.record(id, params(i + 1))], { concurrency: 2 })
            )
            if (Exit.isSuccess(r)) acked.push(...r.value.map((e) => e.sequence))
            else {
              errors++
              const e = Exit.findErrorOption(r)
              expect(e._tag === "Some" ? (e.value as { _tag: string })._tag : "defect").toBe("StorageError")
            }
          }
          inj.disarm()
          return { acked, errors }
        })
      const layerFor = (inj: Injector) =>
        SessionJournal.layer({ checkpointMinBytes: 1024 }).pipe(
          Layer.provideMerge(NodePersistence.layer({ root }).pipe(Layer.provide(NodePersistence.layerFs(inj.fs))))
        )
      let start = 0
      await Effect.runPromise(Effect.provide(
        workload(probe, "probe", () => {
          start = probe.calls
        }),
        layerFor(probe)
      ))
      const span = probe.calls - start
      expect(span).toBeGreaterThan(100)
      const fdsBefore = openFds()
      let scenarios = 0
      let failedScenarios = 0
      const step = Math.max(1, Math.floor(span / 60))
      for (const code of ["EIO", "ENOSPC"]) {
        for (const persistent of [false, true]) {
          for (let n = 1; n <= span; n += step) {
            const id = `f-${code}-${persistent ? "p" : "o"}-${n}`
            const inj = makeInjector()
            const result = await Effect.runPromise(
              Effect.provide(workload(inj, id, () => inj.arm(n, code, persistent)), layerFor(inj))
            )
            if (result.errors > 0) failedScenarios++
            if (!persistent) expect(tempFiles(path.join(root, id))).toEqual([])
            // Reopen with the real filesystem: valid, nothing acknowledged lost.
            const loaded = await run({ root }, loadRead(id))
            expect(loaded.recovery.stopped, id).toBeNull()
            const stored = new Set((await run({ root }, historyOf(id))).map((e) => e.sequence))
            for (const s of result.acked) expect(stored.has(s), `${id} lost ${s}`).toBe(true)
            const report = await Effect.runPromise(NodePersistence.inspect({ root }, id))
            expect(report.ok, id).toBe(true)
            // A writer after the fault continues the chain and clears temp files.
            await run(
              { root },
              Effect.provide(
                SessionJournal.SessionJournal.use((j) => j.record(id, params(99))),
                SessionJournal.layer()
              )
            )
            expect(tempFiles(path.join(root, id))).toEqual([])
            scenarios++
          }
        }
      }
      expect(failedScenarios).toBeGreaterThan(scenarios / 2)
      expect(openFds()).toBeLessThanOrEqual(fdsBefore)
    },
    150_000
  )
})

describe("two processes, one session", () => {
  it(
    "the second writer gets SessionLocked; after the holder dies it takes over and the chain never forks",
    async () => {
      const root = path.join(tempDir("two"), "root")
      const id = "shared"
      const holder = spawnFixture("appender", { SJ_ROOT: root, SJ_ID: id, SJ_FIBERS: "2" })
      expect(await holder.waitFor((l) => l.startsWith("ack "))).toBe(true)
      const second = spawnFixture("appender", { SJ_ROOT: root, SJ_ID: id, SJ_COUNT: "5" })
      expect((await second.exited).code).toBe(3)
      expect(second.lines).toContain("locked")
      await holder.kill()
      const held = acks(holder.lines)
      // Two successors race for the dead holder's stale lock.
      const a = spawnFixture("appender", { SJ_ROOT: root, SJ_ID: id, SJ_COUNT: "50" })
      const b = spawnFixture("appender", { SJ_ROOT: root, SJ_ID: id, SJ_COUNT: "50" })
      const [ea, eb] = await Promise.all([a.exited, b.exited])
      const codes = [ea.code, eb.code].sort()
      // One takes over; the other is refused, or runs after the first has finished.
      expect(codes[0]).toBe(0)
      expect([0, 3]).toContain(codes[1])
      const all = await run({ root }, historyOf(id))
      expect(all.map((e) => e.sequence)).toEqual(Array.from({ length: all.length }, (_, i) => i))
      for (const s of [...held, ...acks(a.lines), ...acks(b.lines)]) expect(all[s]?.sequence).toBe(s)
      const report = await Effect.runPromise(NodePersistence.inspect({ root }, id))
      expect(report.ok).toBe(true)
      expect(fs.existsSync(path.join(root, id, "lock"))).toBe(false)
    },
    60_000
  )
})
