/**
 * Shared pieces of the adapter's tests: temp roots, running an effect against a
 * layer, building chained entries, and spawning the fixture processes.
 */
import { Checkpoint, Entry, JournalState, Persistence } from "@session-journal/core"
import { appendChain, chain, requestOf, withWriter } from "@session-journal/core/test/PersistenceContract"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { NodePersistence } from "../src/index.ts"
import type { FileHandle } from "../src/internal/fileOps/base.ts"

/**
 * A file handle that forwards every call to `h`, except those `over` replaces:
 * how tests observe or fail one call of a real file.
 */
export const wrapHandle = (
  h: FileHandle,
  over: Partial<Omit<FileHandle, "fd">> = {}
): FileHandle => ({
  fd: h.fd,
  read: over.read ?? ((b, o, l, pos) => h.read(b, o, l, pos)),
  write: over.write ?? ((b, o, l, pos) => h.write(b, o, l, pos)),
  datasync: over.datasync ?? (() => h.datasync()),
  sync: over.sync ?? (() => h.sync()),
  stat: over.stat ?? (() => h.stat()),
  chmod: over.chmod ?? ((m) => h.chmod(m)),
  truncate: over.truncate ?? ((l) => h.truncate(l)),
  close: over.close ?? (() => h.close())
})

/**
 * A fresh private temp directory (0700). `memory` puts it on /dev/shm when there
 * is one: a real filesystem whose fsync costs nothing, for sweeps of many cases
 * whose point is not durability.
 */
export const tempDir = (prefix: string, memory = false): string => {
  const base = memory && fs.existsSync("/dev/shm") ? "/dev/shm" : os.tmpdir()
  const dir = fs.mkdtempSync(path.join(base, `sj-${prefix}-`))
  fs.chmodSync(dir, 0o700)
  return dir
}

/** The adapter's options, and the filesystem calls to inject (`NodePersistence.layerFs`). */
export type Options = NodePersistence.Options & { readonly fs?: NodePersistence.Fs | undefined }

/** The adapter as a layer, on `options.fs` when given. */
export const adapter = ({ fs, ...options }: Options) =>
  fs === undefined
    ? NodePersistence.layer(options)
    : NodePersistence.layer(options).pipe(Layer.provide(NodePersistence.layerFs(fs)))

/** Runs an effect that needs `Persistence` on the filesystem adapter at `root`. */
export const run = <A, E>(
  options: Options,
  effect: Effect.Effect<A, E, Persistence.Persistence>
): Promise<A> =>
  Effect.runPromise(
    Effect.provide(effect, adapter(options) as Layer.Layer<Persistence.Persistence, unknown>) as Effect.Effect<
      A,
      unknown
    >
  )

/** Like `run`, but resolves to the exit's failure or success. */
export const runExit = <A, E>(options: Options, effect: Effect.Effect<A, E, Persistence.Persistence>) =>
  Effect.runPromise(Effect.exit(Effect.provide(effect, adapter(options))))

/** Opens `id` for writing, loads it and appends one chained entry; succeeds with what the load found. */
export const loadAndAppendOne = (id: string) =>
  withWriter(id, (h) =>
    Effect.gen(function*() {
      const loaded = yield* h.load
      yield* appendChain(h, loaded.state, 1)
      return loaded
    }))

/** Loads `id` read-only. */
export const loadRead = (id: string) =>
  Effect.scoped(Effect.gen(function*() {
    const p = yield* Persistence.Persistence
    const h = yield* p.open(id, { mode: "read" })
    return yield* h.load
  }))

/**
 * The service's checkpoint policy for tests that drive a handle themselves: each
 * call appends `count` chained entries in one batch and stores a checkpoint when
 * `Checkpoint.due` says so with `minBytes` (as `SessionJournal` with
 * `checkpointMinBytes: minBytes` would). Segments roll at those checkpoints.
 */
export const checkpointing = (minBytes: number) => {
  let since = 0
  let size = 0
  return (h: Persistence.WriteHandle, state: JournalState.JournalState, count: number) =>
    Effect.gen(function*() {
      const c = chain(state, count)
      since += (yield* h.append(requestOf(state, c.entries))).bytes
      if (Checkpoint.due(since, size, minBytes)) {
        size = yield* h.checkpoint(Checkpoint.encode(c.state))
        since = 0
      }
      return c
    })
}

/** All stored entries of `id`. */
export const historyOf = (id: string) => Persistence.Persistence.use((p) => Stream.runCollect(p.history(id)))

export { appendChain, chain, Entry, JournalState, requestOf, withWriter }

/** Files of a session directory whose names mark them as temp files. */
export const tempFiles = (dir: string): Array<string> =>
  fs.existsSync(dir) ? fs.readdirSync(dir).filter((n) => n.startsWith(".tmp-") || n.includes(".tmp-")) : []

/** The Node 22 binary running these tests. */
export const nodeBin = process.execPath

// Fixture processes load the same modules hundreds of times: let V8 cache them.
const compileCache = path.join(os.tmpdir(), "sj-node-compile-cache")

/** A running fixture process with its collected stdout lines. */
export interface Child {
  readonly pid: number
  readonly lines: Array<string>
  readonly exited: Promise<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>
  readonly waitFor: (predicate: (line: string) => boolean) => Promise<boolean>
  readonly kill: () => Promise<void>
  /** Writes a line to the child's stdin. */
  readonly send: (line: string) => void
}

/** Spawns a fixture script (packages/node/test/fixtures/<name>.ts) with extra env. */
export const spawnFixture = (name: string, env: Record<string, string>): Child => {
  const child = spawn(nodeBin, [path.join(import.meta.dirname, "fixtures", `${name}.ts`)], {
    env: { ...process.env, NODE_COMPILE_CACHE: compileCache, ...env },
    stdio: ["pipe", "pipe", "pipe"]
  })
  child.stdin.on("error", () => undefined)
  const lines: Array<string> = []
  const waiters: Array<{ predicate: (l: string) => boolean; resolve: (ok: boolean) => void }> = []
  let buffer = ""
  child.stdout.setEncoding("utf8")
  child.stdout.on("data", (chunk: string) => {
    buffer += chunk
    let nl: number
    while ((nl = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, nl)
      buffer = buffer.slice(nl + 1)
      lines.push(line)
      for (let i = waiters.length - 1; i >= 0; i--) {
        if (waiters[i]!.predicate(line)) {
          waiters[i]!.resolve(true)
          waiters.splice(i, 1)
        }
      }
    }
  })
  let stderr = ""
  child.stderr.setEncoding("utf8")
  child.stderr.on("data", (c: string) => {
    stderr += c
  })
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    // "close" fires after stdout is drained, so every line the child wrote is in.
    child.on("close", (code, signal) => {
      if (stderr.length > 0 && signal === null && code !== 0) lines.push(`stderr ${stderr}`)
      for (const w of waiters.splice(0)) w.resolve(false)
      resolve({ code, signal })
    })
  })
  return {
    pid: child.pid!,
    lines,
    exited,
    waitFor: (predicate) => {
      if (lines.some(predicate)) return Promise.resolve(true)
      if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(false)
      return new Promise((resolve) => waiters.push({ predicate, resolve }))
    },
    send: (line) => {
      child.stdin.write(`${line}\n`)
    },
    kill: async () => {
      child.kill("SIGKILL")
      await exited
    }
  }
}

/** Sequences acknowledged by a fixture (`ack <n>` lines). */
export const acks = (lines: ReadonlyArray<string>): Array<number> =>
  lines.filter((l) => l.startsWith("ack ")).map((l) => Number(l.slice(4)))

/** Number of open file descriptors of this process. */
export const openFds = (): number => fs.readdirSync("/proc/self/fd").length

const PREALLOCATED_OPEN = /^\{"k":"open","v":1,"base":([0-9]+),"prealloc":true\}\n/

/**
 * Rewrites every segment of a session directory as releases before preallocation
 * wrote it: the open record without `prealloc`, no zero tail. Tests of the rules
 * for such segments (a zero-filled tail is a torn tail) build them with it.
 */
export const asUnpreallocated = (dir: string): void => {
  for (const name of fs.readdirSync(dir).filter((n) => /^[0-9]{20}\.jsonl$/.test(n))) {
    const file = path.join(dir, name)
    let bytes = fs.readFileSync(file)
    let end = bytes.length
    while (end > 0 && bytes[end - 1] === 0) end--
    bytes = bytes.subarray(0, end)
    const text = bytes.subarray(0, Math.min(bytes.length, 128)).toString("latin1")
    const m = PREALLOCATED_OPEN.exec(text)
    if (m !== null) {
      bytes = Buffer.concat([Buffer.from(`{"k":"open","v":1,"base":${m[1]}}\n`), bytes.subarray(m[0].length)])
    }
    fs.writeFileSync(file, bytes, { mode: 0o600 })
  }
}

/** Where the data of a segment file ends: its size without the trailing zero bytes. */
export const dataEnd = (file: string): number => {
  const bytes = fs.readFileSync(file)
  let end = bytes.length
  while (end > 0 && bytes[end - 1] === 0) end--
  return end
}

/** The context the lock functions take: `root` on the file system `fsImpl`, the default clock and bounds. */
export const lockContext = (root: string, fsImpl: NodePersistence.Fs) => ({
  fs: fsImpl,
  clock: Clock.Clock.defaultValue(),
  root,
  uid: typeof process.getuid === "function" ? process.getuid() : null,
  maxFileBytes: NodePersistence.MAX_FILE_BYTES,
  maxLineBytes: NodePersistence.MAX_LINE_BYTES
})
