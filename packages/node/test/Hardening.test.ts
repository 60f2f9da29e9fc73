/**
 * Hardening: symlinks anywhere on the path are refused and their targets left
 * alone, hostile session ids are refused before any filesystem call, foreign or
 * group-writable directories are refused, modes are exact under any umask, and
 * reads are bounded.
 */
import { Checkpoint, InvalidSessionId, JournalState, Persistence, StorageError } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Stream from "effect/Stream"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { NodePersistence } from "../src/index.ts"
import { appendChain, loadRead, run, runExit, spawnFixture, tempDir, withWriter } from "./helpers.ts"

const failureTag = (exit: Exit.Exit<unknown, unknown>): string | undefined => {
  if (Exit.isSuccess(exit)) return undefined
  const e = Exit.findErrorOption(exit)
  return e._tag === "Some" ? (e.value as { _tag: string })._tag : "defect"
}

const seedSession = async (root: string, id: string, n = 3) =>
  run({ root }, withWriter(id, (h) => appendChain(h, JournalState.empty(id), n)))

const snapshotTree = (dir: string): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const n of fs.readdirSync(dir)) {
    const p = path.join(dir, n)
    out[n] = fs.lstatSync(p).isFile() ? fs.readFileSync(p, "hex") : "dir"
  }
  return out
}

describe("symlink matrix", () => {
  it("a symlinked root is refused", async () => {
    const base = tempDir("sym-root")
    fs.mkdirSync(path.join(base, "real"), { mode: 0o700 })
    fs.symlinkSync(path.join(base, "real"), path.join(base, "root"))
    const exit = await Effect.runPromiseExit(
      Effect.scoped(Effect.flatMap(NodePersistence.make({ root: path.join(base, "root") }), () => Effect.void))
    )
    expect(failureTag(exit)).toBe("StorageError")
    expect(fs.readdirSync(path.join(base, "real"))).toEqual([])
  })

  it("a symlinked session dir, checkpoint, segment or lock is refused and the target is unchanged", async () => {
    const root = path.join(tempDir("sym"), "root")
    await seedSession(root, "victim")
    const victim = path.join(root, "victim")
    const before = snapshotTree(victim)
    // Session directory.
    fs.symlinkSync(victim, path.join(root, "dirlink"))
    for (const mode of ["read", "write"] as const) {
      const exit = await runExit(
        { root },
        Effect.scoped(Effect.flatMap(Persistence.Persistence.use((p) => p.open("dirlink", { mode })), (h) => h.load))
      )
      expect(failureTag(exit)).toBe("StorageError")
    }
    expect(
      failureTag(await runExit({ root }, Persistence.Persistence.use((p) => Stream.runCollect(p.history("dirlink")))))
    ).toBe("StorageError")
    expect(failureTag(await runExit({ root }, Persistence.Persistence.use((p) => p.delete("dirlink"))))).toBe(
      "StorageError"
    )
    // Files inside a session: each one a symlink to the victim's file.
    for (const name of ["checkpoint.json", "00000000000000000000.jsonl", "lock"]) {
      const id = `file-${name.replace(/[^a-z0-9]/g, "")}`
      await seedSession(root, id)
      const dir = path.join(root, id)
      fs.rmSync(path.join(dir, name), { force: true })
      fs.symlinkSync(path.join(victim, name === "lock" ? "checkpoint.json" : name), path.join(dir, name))
      const exit = await runExit(
        { root },
        withWriter(id, (h) =>
          Effect.gen(function*() {
            const l = yield* h.load
            yield* appendChain(h, l.state, 2)
            yield* h.checkpoint(Checkpoint.encode(l.state))
          }))
      )
      expect(failureTag(exit), name).toBe("StorageError")
    }
    expect(snapshotTree(victim)).toEqual(before)
  })

  it("a symlink planted at the temp path of a checkpoint is never written through", async () => {
    const root = path.join(tempDir("sym-temp"), "root")
    const target = path.join(path.dirname(root), "target")
    fs.writeFileSync(target, "original")
    const planting: NodePersistence.Fs = {
      ...NodePersistence.nodeFs,
      open: async (p, flags, mode) => {
        if (path.basename(p).startsWith(".tmp-")) fs.symlinkSync(target, p)
        return NodePersistence.nodeFs.open(p, flags, mode)
      }
    }
    const exit = await runExit(
      { root, fs: planting },
      withWriter("t", (h) => appendChain(h, JournalState.empty("t"), 2))
    )
    expect(failureTag(exit)).toBe("StorageError")
    expect(fs.readFileSync(target, "utf8")).toBe("original")
  })

  it("a group-writable or foreign-owned session directory is refused", async () => {
    const root = path.join(tempDir("owner"), "root")
    await seedSession(root, "gw")
    fs.chmodSync(path.join(root, "gw"), 0o770)
    expect(failureTag(await runExit({ root }, loadRead("gw")))).toBe("StorageError")
    if (process.getuid?.() === 0) {
      await seedSession(root, "foreign")
      fs.chownSync(path.join(root, "foreign"), 12345, 12345)
      expect(failureTag(await runExit({ root }, loadRead("foreign")))).toBe("StorageError")
    }
  })
})

describe("hostile session ids", () => {
  it("are refused before any filesystem call", async () => {
    const root = path.join(tempDir("ids"), "root")
    let calls = 0
    const counting: NodePersistence.Fs = Object.fromEntries(
      Object.entries(NodePersistence.nodeFs).map(([k, f]) => [k, (...args: Array<unknown>) => {
        calls++
        return (f as (...a: Array<unknown>) => unknown)(...args)
      }])
    ) as unknown as NodePersistence.Fs
    const hostile = [
      "..",
      ".",
      "",
      "a/b",
      "../x",
      "/etc/passwd",
      "a\0b",
      "x".repeat(300),
      "CON",
      "nul",
      "Lpt1",
      "a b",
      "a\\b",
      "é"
    ]
    await run(
      { root, fs: counting },
      Effect.gen(function*() {
        const p = yield* Persistence.Persistence
        const before = calls
        for (const id of hostile) {
          for (
            const attempt of [
              Effect.scoped(Effect.flatMap(p.open(id, { mode: "write" }), (h) => h.load)),
              Effect.scoped(Effect.flatMap(p.open(id, { mode: "read" }), (h) => h.load)),
              Stream.runCollect(p.history(id)),
              Stream.runCollect(p.follow(id, 0)),
              p.delete(id)
            ]
          ) {
            const exit = yield* Effect.exit(attempt as Effect.Effect<unknown, { _tag: string; cause?: unknown }>)
            expect(failureTag(exit)).toBe("StorageError")
            expectCarriesInvalidId(exit, id)
          }
        }
        expect(calls).toBe(before)
      })
    )
    expect(fs.readdirSync(root)).toEqual([])
  })

  it("a maintenance call refuses one with a StorageError whose reason is the InvalidSessionId", async () => {
    const root = path.join(tempDir("ids-maintenance"), "root")
    fs.mkdirSync(root, { mode: 0o700 })
    for (const id of ["a/b", "CON", ""]) {
      for (
        const call of [
          NodePersistence.inspect({ root }, id),
          NodePersistence.repair({ root }, id),
          NodePersistence.unlock({ root }, id)
        ]
      ) {
        const exit = await Effect.runPromiseExit(call as Effect.Effect<unknown, unknown>)
        expect(failureTag(exit)).toBe("StorageError")
        expectCarriesInvalidId(exit, id)
      }
    }
    expect(fs.readdirSync(root)).toEqual([])
  })
})

// The failure is a StorageError whose reason (and cause) is the InvalidSessionId
// of `id`, matched by its tag and field, and whose message ends with that error's.
const expectCarriesInvalidId = (exit: Exit.Exit<unknown, unknown>, id: string): void => {
  const found = Exit.findErrorOption(exit)
  if (found._tag !== "Some" || !(found.value instanceof StorageError)) {
    expect.fail(`not a StorageError: ${String(exit)}`)
    return
  }
  const { reason } = found.value
  expect(reason._tag).toBe("InvalidSessionId")
  if (reason._tag === "InvalidSessionId") {
    expect(reason.id).toBe(id)
    expect(found.value.cause).toBe(reason)
    expect(found.value.message).toBe(`storage ${found.value.operation} failed: ${new InvalidSessionId({ id }).message}`)
  }
}

describe("modes under any umask", () => {
  for (const umask of ["000", "077"]) {
    it(`umask ${umask}: dirs 0700, files 0600`, async () => {
      const root = path.join(tempDir(`umask${umask}`), "root")
      const child = spawnFixture("modes", { SJ_ROOT: root, SJ_UMASK: umask })
      const { code } = await child.exited
      expect(code, child.lines.join("\n")).toBe(0)
      const modes = JSON.parse(child.lines.find((l) => l.startsWith("{"))!) as Record<string, string>
      expect(Object.keys(modes).length).toBeGreaterThan(4)
      expect(Object.values(modes).some((m) => m.startsWith("f"))).toBe(true)
      for (const [p, m] of Object.entries(modes)) expect(m, p).toBe(m.startsWith("d") ? "d700" : "f600")
    }, 60_000)
  }
})

// The load runs in a child process of its own (see fixtures/bounded.ts) that
// reports how much its peak RSS grew: that is this load's memory alone, whatever
// else runs on the machine or in the test runner.
const boundedLoad = async (root: string, id: string) => {
  const child = spawnFixture("bounded", {
    SJ_ROOT: root,
    SJ_ID: id,
    SJ_WARM: "warm",
    NODE_OPTIONS: `${process.env["NODE_OPTIONS"] ?? ""} --expose-gc`
  })
  const { code } = await child.exited
  expect(code, child.lines.join("\n")).toBe(0)
  return JSON.parse(child.lines.find((l) => l.startsWith("{"))!) as {
    tag: string | null
    cause: string
    peakGrowthBytes: number
  }
}

describe("bounded reads", () => {
  it("a 2 GiB sparse segment is refused by its size, without reading it", async () => {
    const root = path.join(tempDir("sparse"), "root")
    await seedSession(root, "warm")
    await seedSession(root, "big")
    const seg = path.join(root, "big", "00000000000000000000.jsonl")
    fs.truncateSync(seg, 2 * 1024 * 1024 * 1024 + 17)
    const r = await boundedLoad(root, "big")
    expect(r.tag).toBe("StorageError")
    expect(r.cause).toContain("read bound")
    expect(r.peakGrowthBytes).toBeLessThan(64 * 1024 * 1024)
  }, 60_000)

  it("a 100 MiB single line is refused at the line bound with little memory", async () => {
    const root = path.join(tempDir("line"), "root")
    await seedSession(root, "warm")
    await seedSession(root, "long")
    const seg = path.join(root, "long", "00000000000000000000.jsonl")
    fs.appendFileSync(seg, "x")
    fs.truncateSync(seg, fs.statSync(seg).size + 100 * 1024 * 1024)
    const r = await boundedLoad(root, "long")
    expect(r.tag).toBe("CorruptJournal")
    expect(r.peakGrowthBytes).toBeLessThan(50 * 1024 * 1024)
  }, 60_000)
})
