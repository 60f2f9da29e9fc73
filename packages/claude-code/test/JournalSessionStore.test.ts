/**
 * `JournalSessionStore` against the SDK's `SessionStore` contract, on the
 * filesystem and on PostgreSQL, through the Promise API SDK users call: `load`
 * gives back exactly what was appended (deep-equal, the same JSON text), a retried
 * batch, a replay in other batch sizes, a second store and a restart store nothing
 * twice, concurrent appends from two stores on one key store each entry once, in
 * order; host processes killed with SIGKILL lose no batch whose `append` resolved;
 * two host processes share a key on one journal directory (taking turns) and on
 * one PostgreSQL. With storage failing, `append`
 * rejects (and a retry stores the batch once, whether the failed append landed or
 * not).
 */
import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex } from "@noble/hashes/utils.js"
import { SessionJournal, type StorageError } from "@session-journal/core"
import * as IP from "@session-journal/core/test/InstrumentedPersistence"
import { NodePersistence } from "@session-journal/node"
import { PgPersistence } from "@session-journal/postgres"
import * as Pg from "@session-journal/postgres/test/pg"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Stream from "effect/Stream"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, assert, describe, it } from "vitest"
import { JournalSessionStore, Planner } from "../src/index.ts"

type Entry = JournalSessionStore.SessionStoreEntry

const made: Array<string> = []
const tempDir = (): string => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sj-store-"))
  made.push(dir)
  return dir
}
const pgPrefix = Pg.freshPrefix("ccstore")
let pgTables = 0
const prefixes: Array<string> = []

afterAll(async () => {
  for (const dir of made.splice(0)) fs.rmSync(dir, { recursive: true, force: true })
  for (const prefix of prefixes.splice(0)) {
    await Effect.runPromise(
      Effect.ignore(PgPersistence.dropTables(prefix).pipe(Effect.provide(Pg.adminLayer("sj-ccstore-admin"))))
    )
  }
})

interface Backend {
  readonly name: string
  readonly skip: string | null
  /** Options of a fresh journal; every call of the returned function opens the same journal. */
  readonly fresh: () => JournalSessionStore.OpenOptions
}

const filesystem: Backend = {
  name: "filesystem",
  skip: null,
  fresh: () => ({ dir: path.join(tempDir(), "journal") })
}

const postgres: Backend = {
  name: "postgres",
  skip: Pg.skipReason,
  fresh: () => {
    const tablePrefix = `${pgPrefix}${pgTables++}_`
    prefixes.push(tablePrefix)
    return { postgres: Pg.url, tablePrefix }
  }
}

// The journal under a store's options, for looking at what it holds.
const journalOf = <A, E>(
  options: JournalSessionStore.OpenOptions,
  f: (j: SessionJournal.SessionJournal["Service"]) => Effect.Effect<A, E>
): Effect.Effect<A, E | StorageError> =>
  Effect.scoped(SessionJournal.SessionJournal.use(f)).pipe(
    Effect.provide(
      SessionJournal.layer().pipe(Layer.provide(
        options.postgres !== undefined
          ? PgPersistence.layerFromUrl(options.postgres, { tablePrefix: options.tablePrefix })
          : NodePersistence.layer({ root: options.dir })
      ))
    )
  )

const key = { projectKey: "-tmp-work-project", sessionId: "5f8c2a4e-0000-4000-8000-000000000001" }
const subKey = { ...key, subpath: "subagents/agent-a1b2c3d4e5f60718" }

// A transcript-like sequence: uuid-less lines at the start, between and at the end,
// two equal mode lines in a row, unicode, numbers, nested objects, key order kept.
const transcript = (tag: string, n: number): Array<Entry> => {
  const out: Array<Entry> = [
    { type: "queue-operation", operation: "enqueue", content: `prompt ${tag}`, timestamp: "2026-12-01T00:00:00.000Z" },
    { type: "queue-operation", operation: "dequeue", timestamp: "2026-12-01T00:00:00.001Z" }
  ]
  for (let i = 0; i < n; i++) {
    out.push({
      uuid: `${tag}-${i}`,
      type: i % 2 === 0 ? "user" : "assistant",
      parentUuid: i === 0 ? null : `${tag}-${i - 1}`,
      message: {
        role: "user",
        content: [{ type: "text", text: `ünï 😀 漢 ${i}\n"quoted"` }],
        z: 1,
        a: [1.5, -0.25, 1e21, 0]
      },
      timestamp: `2026-12-01T00:00:0${i % 10}.000Z`
    })
    if (i % 3 === 2) out.push({ type: "mode", mode: "default" }, { type: "mode", mode: "default" })
  }
  out.push({ type: "last-prompt", lastPrompt: `prompt ${tag}` }, { type: "cost-state", total: 0 })
  return out
}

const chunks = <A>(all: ReadonlyArray<A>, size: number): Array<Array<A>> => {
  const out: Array<Array<A>> = []
  for (let i = 0; i < all.length; i += size) out.push(all.slice(i, i + size))
  return out
}

const sameText = (a: ReadonlyArray<Entry> | null, b: ReadonlyArray<Entry>) =>
  assert.deepStrictEqual(a?.map((e) => JSON.stringify(e)), b.map((e) => JSON.stringify(e)))

for (const backend of [filesystem, postgres]) {
  describe.skipIf(backend.skip !== null)(`JournalSessionStore (${backend.name})`, () => {
    it("load gives back exactly what was appended, in order, as the same JSON text; null for a key never written", async () => {
      const store = await JournalSessionStore.open(backend.fresh())
      try {
        assert.isNull(await store.load(key))
        const all = transcript("t", 12)
        for (const batch of chunks(all, 5)) await store.append(key, batch)
        const sub = transcript("s", 3)
        await store.append(subKey, sub)
        const loaded = await store.load(key)
        assert.deepStrictEqual(loaded, all)
        sameText(loaded, all)
        assert.deepStrictEqual(await store.load(subKey), sub)
        assert.isNull(await store.load({ ...key, sessionId: "other" }))
        const listed = await store.listSessions!(key.projectKey)
        assert.deepStrictEqual(listed.map((s) => s.sessionId), [key.sessionId])
        assert.isTrue(Number.isInteger(listed[0]!.mtime) && listed[0]!.mtime > 0)
        assert.deepStrictEqual(await store.listSubkeys!(key), [subKey.subpath])
        assert.deepStrictEqual(await store.listSessions!("another-project"), [])
        // The SDK's no-op delete: without allowDelete there is none.
        assert.isUndefined(store.delete)
      } finally {
        await store.close()
      }
    })

    it("a retried batch, a replay in other batch sizes and a restart in between store nothing twice", async () => {
      const options = backend.fresh()
      const all = transcript("r", 20)
      let store = await JournalSessionStore.open(options)
      try {
        const first = all.slice(0, 17)
        await store.append(key, first)
        await store.append(key, first) // the SDK's retry of a batch that landed
        sameText(await store.load(key), first)
        await store.close()
        store = await JournalSessionStore.open(options) // a restart: the index is read again
        await store.append(key, all) // the retry plus what follows
        sameText(await store.load(key), all)
        // Replays, as importSessionToStore makes them (batches of 500 by default); every
        // first batch holds a uuid, so the lines before it are placed by it.
        for (const size of [3, 4, 7, 500]) for (const batch of chunks(all, size)) await store.append(key, batch)
        sameText(await store.load(key), all)
        // Equal uuid-less lines appended on their own are new lines: as they come.
        await store.append(key, [{ type: "mode", mode: "default" }])
        await store.append(key, [{ type: "mode", mode: "default" }, { type: "user", uuid: "late" }])
        sameText(await store.load(key), [...all, { type: "mode", mode: "default" }, { type: "mode", mode: "default" }, {
          type: "user",
          uuid: "late"
        }])
      } finally {
        await store.close()
      }
    })

    it("concurrent appends of the same entries from two stores on one key store each once, in order", async () => {
      const options = backend.fresh()
      // On the filesystem the stores take turns holding the session (one writer
      // process at a time), so each lets go of it soon.
      const idleTimeToLive = options.postgres === undefined ? "20 millis" : undefined
      const [a, b] = await Promise.all([
        JournalSessionStore.open({ ...options, idleTimeToLive }),
        JournalSessionStore.open({ ...options, idleTimeToLive })
      ])
      try {
        const all = Array.from({ length: 30 }, (_, i) => ({ type: "user", uuid: `c-${i}`, n: i }))
        await Promise.all([
          (async () => {
            for (const batch of chunks(all, 2)) await a.append(key, batch)
          })(),
          (async () => {
            for (const batch of chunks(all, 3)) await b.append(key, batch)
          })(),
          // Concurrent calls on one store are committed together.
          Promise.all(chunks(all, 5).map((batch) => a.append(subKey, batch)))
        ])
        sameText(await a.load(key), all)
        sameText(await b.load(key), all)
        const sub = await b.load(subKey)
        assert.deepStrictEqual([...(sub ?? [])].map((e) => e.uuid).sort(), all.map((e) => e.uuid).sort())
      } finally {
        await Promise.all([a.close(), b.close()])
      }
    })

    it("allowDelete records the deletion on the chain and hides the session and its sub-agents; appending again starts afresh", async () => {
      const options = backend.fresh()
      const store = await JournalSessionStore.open({ ...options, allowDelete: true })
      try {
        await store.append(key, transcript("d", 3))
        await store.append(subKey, transcript("e", 2))
        await store.delete!(key)
        assert.isNull(await store.load(key))
        assert.isNull(await store.load(subKey))
        assert.deepStrictEqual(await store.listSessions!(key.projectKey), [])
        assert.deepStrictEqual(await store.listSubkeys!(key), [])
        // Appending the same entries after a deletion stores them again.
        await store.append(key, transcript("d", 3))
        sameText(await store.load(key), transcript("d", 3))
      } finally {
        await store.close()
      }
      // Nothing erased: the journal holds every line and the deletion, and verifies.
      const id = JournalSessionStore.sessionId(key)
      const kinds = await Effect.runPromise(journalOf(options, (j) =>
        Effect.gen(function*() {
          yield* j.verify(id)
          return (yield* Stream.runCollect(j.entries(id))).map((e) => e.kind)
        })))
      assert.strictEqual(kinds.filter((k) => k === JournalSessionStore.DELETE_KIND).length, 1)
      assert.strictEqual(kinds.filter((k) => k === "claude-code.line").length, 2 * transcript("d", 3).length)
    })

    it(
      "one line bound on every backend: a line above MAX_LINE_BYTES is kept as a marker of its size and SHA-256, the rest stored, a retry stores nothing twice",
      async () => {
        const options = backend.fresh()
        const text = (mib: number) => "x".repeat(Math.floor(mib * 1024 * 1024))
        // Within the bound: kept whole. 9 MiB, 17 MiB (with a uuid) and a 5 MiB line
        // without one: markers.
        const within: Entry = { type: "user", uuid: "within", message: { content: text(3.9) } }
        const nine: Entry = { type: "user", uuid: "nine", message: { content: text(9) } }
        const seventeen: Entry = { type: "assistant", uuid: "seventeen", message: { content: text(17) } }
        const bare: Entry = { type: "attachment", content: text(5) }
        const small = (uuid: string): Entry => ({ type: "user", uuid, message: { content: uuid } })
        const batch = [small("a"), within, nine, small("b"), seventeen, bare, small("c")]
        const store = await JournalSessionStore.open(options)
        try {
          await store.append(key, batch)
          // A retry of the batch, and of its second half alone, store nothing again.
          await store.append(key, batch)
          await store.append(key, batch.slice(3))
          // `load` gives back every line it has: the oversized ones are left out.
          sameText(await store.load(key), [small("a"), within, small("b"), small("c")])
        } finally {
          await store.close()
        }
        const id = JournalSessionStore.sessionId(key)
        const entries = await Effect.runPromise(journalOf(options, (j) =>
          Effect.gen(function*() {
            yield* j.verify(id)
            return yield* Stream.runCollect(j.entries(id))
          })))
        const markers = entries.flatMap((e) => e.kind === Planner.OVERSIZED_KIND && "payload" in e ? [e.payload] : [])
        const digest = (e: Entry) => {
          const bytes = new TextEncoder().encode(JSON.stringify(e))
          return { bytes: bytes.length, sha256: bytesToHex(sha256(bytes)) }
        }
        assert.deepStrictEqual(markers, [
          { n: 3, ...digest(nine), uuid: "nine" },
          { n: 5, ...digest(seventeen), uuid: "seventeen" },
          { n: 6, ...digest(bare) }
        ])
        assert.strictEqual(entries.filter((e) => e.kind === Planner.LINE_KIND).length, 4)
        // What the archive reads of a marker: the size and hash of the line.
        assert.deepStrictEqual(Planner.lineOfEntry(entries.find((e) => e.kind === Planner.OVERSIZED_KIND)!), {
          oversized: digest(nine)
        })
        assert.strictEqual(JournalSessionStore.MAX_LINE_BYTES, 4 * 1024 * 1024)
      },
      120_000
    )
  })
}

describe("JournalSessionStore listSessionSummaries only where it can answer", () => {
  // A fold of the SDK's shape: the number of entries folded so far.
  const fold: JournalSessionStore.FoldSessionSummary = (prev, k, entries, options) => ({
    sessionId: k.sessionId,
    mtime: options?.mtime ?? 0,
    data: { count: ((prev?.data["count"] as number | undefined) ?? 0) + entries.length }
  })
  const withService = <A>(
    options: JournalSessionStore.Options,
    f: (ops: JournalSessionStore.Operations) => Effect.Effect<A, unknown>
  ) =>
    Effect.runPromise(
      Effect.flatMap(Effect.service(JournalSessionStore.Service), f).pipe(
        Effect.provide(
          JournalSessionStore.layer(options).pipe(
            Layer.provide(SessionJournal.layer()),
            Layer.provide(NodePersistence.layer({ root: path.join(tempDir(), "journal") }))
          )
        )
      )
    )

  it("without foldSessionSummary neither the store nor the service has it (the SDK lists by listSessions and load)", async () => {
    const store: JournalSessionStore.StoreWithoutSummaries = await JournalSessionStore.open({
      dir: path.join(tempDir(), "journal")
    })
    try {
      await store.append(key, transcript("n", 2))
      assert.isFalse("listSessionSummaries" in store)
      // @ts-expect-error: the type says the store has no listSessionSummaries
      assert.throws(() => store.listSessionSummaries(key.projectKey))
      assert.deepStrictEqual((await store.listSessions!(key.projectKey)).map((s) => s.sessionId), [key.sessionId])
    } finally {
      await store.close()
    }
    const has = await withService(
      {},
      (ops) =>
        Effect.succeed({
          service: ops.listSessionSummaries !== undefined,
          sdk: "listSessionSummaries" in ops.sessionStore
        })
    )
    assert.deepStrictEqual(has, { service: false, sdk: false })
  })

  it("with foldSessionSummary the store's type has it, and it answers the folded summaries", async () => {
    const store = await JournalSessionStore.open({ dir: path.join(tempDir(), "journal"), foldSessionSummary: fold })
    try {
      await store.append(key, transcript("f", 2))
      await store.append(key, transcript("g", 1))
      const [summary, ...rest] = await store.listSessionSummaries(key.projectKey)
      assert.deepStrictEqual(rest, [])
      assert.deepStrictEqual(summary?.data, { count: transcript("f", 2).length + transcript("g", 1).length })
    } finally {
      await store.close()
    }
    const summaries = await withService({ foldSessionSummary: fold }, (ops) =>
      Effect.gen(function*() {
        yield* ops.append(key, transcript("h", 1))
        return yield* ops.listSessionSummaries!(key.projectKey)
      }))
    assert.deepStrictEqual(summaries.map((s) => s.data), [{ count: transcript("h", 1).length }])
  })
})

describe("JournalSessionStore interval options", () => {
  it("a bad lockWait, indexIdleTimeToLive, indexBytes or idleTimeToLive rejects open with a StorageError naming it", async () => {
    const bad: ReadonlyArray<Partial<JournalSessionStore.OpenOptions>> = [
      { lockWait: "soon" as Duration.Input },
      { lockWait: -1 },
      { indexIdleTimeToLive: "a while" as Duration.Input },
      { idleTimeToLive: Number.NaN },
      { indexBytes: -1 },
      { indexBytes: Number.NaN }
    ]
    for (const options of bad) {
      const opened = await JournalSessionStore.open(
        { ...filesystem.fresh(), ...options } as JournalSessionStore.OpenOptions
      )
        .then((store) => store.close().then(() => "opened"), (e: unknown) => e)
      const e = opened as StorageError
      assert.deepStrictEqual(
        e instanceof Error && e._tag === "StorageError" && e.reason._tag === "InvalidOption"
          ? [e.operation, e.reason.option]
          : String(opened),
        ["configure", Object.keys(options)[0]!],
        JSON.stringify(options)
      )
    }
  })
})

describe("JournalSessionStore sessions are journal sessions", () => {
  it("an edited line of a stored session fails verify", async () => {
    const options = filesystem.fresh()
    const store = await JournalSessionStore.open(options)
    try {
      await store.append(key, transcript("v", 4))
    } finally {
      await store.close()
    }
    const id = JournalSessionStore.sessionId(key)
    assert.strictEqual(
      (await Effect.runPromise(journalOf(options, (j) => j.verify(id)))).entriesChecked,
      transcript("v", 4).length
    )
    const segment = path.join(options.dir!, id, "00000000000000000000.jsonl")
    const bytes = fs.readFileSync(segment, "utf8")
    assert.include(bytes, "prompt v")
    fs.writeFileSync(segment, bytes.replace("prompt v", "prompt X"))
    const exit = await Effect.runPromise(Effect.exit(journalOf(options, (j) => j.verify(id))))
    assert.strictEqual(exit._tag, "Failure")
    assert.include(String(exit._tag === "Failure" ? exit.cause : ""), "IntegrityViolation")
  })
})

describe("JournalSessionStore on failing storage", () => {
  it("an append whose storage fails rejects; the retry stores the batch once, whether the failed append landed or not", async () => {
    const probe = IP.makeProbe()
    const runtime = ManagedRuntime.make(
      JournalSessionStore.layer().pipe(Layer.provide(SessionJournal.layer()), Layer.provide(IP.layerMemory(probe)))
    )
    try {
      const store = (await runtime.runPromise(JournalSessionStore.Service.use((s) => Effect.succeed(s)))).sessionStore
      const id = JournalSessionStore.sessionId(key)
      const first = transcript("f", 4)
      IP.plan(probe, id, 0, { _tag: "FailAfter" }) // stored, then reported failed
      const landed = await store.append(key, first).then(() => null, (e: unknown) => e)
      assert.include(String(landed), "injected failure")
      await store.append(key, first) // the SDK's retry
      sameText(await store.load(key), first)
      const second = transcript("g", 4)
      IP.plan(probe, id, IP.appendsOf(probe, id), { _tag: "FailBefore" }) // not stored
      const lost = await store.append(key, second).then(() => null, (e: unknown) => e)
      assert.include(String(lost), "injected failure")
      await store.append(key, second)
      sameText(await store.load(key), [...first, ...second])
    } finally {
      await runtime.dispose()
    }
  })
})

// The host of fixtures/storeHost.ts; resolves with the batch numbers it printed and how it ended.
const host = (backend: JournalSessionStore.OpenOptions, batches: number, killAfter?: number) =>
  new Promise<
    {
      readonly printed: Array<number>
      readonly code: number | null
      readonly signal: string | null
      readonly stderr: string
    }
  >(
    (resolve) => {
      const child = spawn(process.execPath, [
        path.join(import.meta.dirname, "fixtures", "storeHost.ts"),
        JSON.stringify(backend),
        String(batches)
      ], {
        env: { ...process.env, NODE_COMPILE_CACHE: path.join(os.tmpdir(), "sj-node-compile-cache") },
        stdio: ["ignore", "pipe", "pipe"]
      })
      const printed: Array<number> = []
      let out = ""
      let stderr = ""
      child.stdout.on("data", (d: Buffer) => {
        out += d.toString()
        const lines = out.split("\n")
        out = lines.pop()!
        for (const l of lines) printed.push(Number(l))
        if (killAfter !== undefined && printed.length >= killAfter) child.kill("SIGKILL")
      })
      child.stderr.on("data", (d: Buffer) => void (stderr += d.toString()))
      child.on("exit", (code, signal) => resolve({ printed, code, signal, stderr }))
    }
  )

// What fixtures/storeHost.ts appends as batch i.
const hostBatch = (i: number): Array<Entry> => [
  ...Array.from(
    { length: 9 },
    (_, k) => ({ type: "user", uuid: `b${i}-${k}`, message: { content: `batch ${i} entry ${k}` } })
  ),
  { type: "mode", mode: "default", batch: i }
]
const hostKey = { projectKey: "host-project", sessionId: "shared-session" }

describe("JournalSessionStore host processes", () => {
  it("a host killed with SIGKILL mid-session: every batch whose append resolved is stored, once, and the journal verifies", async () => {
    const options = filesystem.fresh()
    const run = await host(options, 100_000, 8)
    assert.strictEqual(run.signal, "SIGKILL", run.stderr)
    const store = await JournalSessionStore.open(options)
    try {
      const loaded = (await store.load(hostKey)) ?? []
      const resolved = run.printed.length
      assert.isAtLeast(resolved, 8)
      // Whole batches, in order: every resolved one, and at most the one in flight.
      assert.strictEqual(loaded.length % 10, 0)
      const stored = loaded.length / 10
      assert.include([resolved, resolved + 1], stored)
      sameText(loaded, Array.from({ length: stored }, (_, i) => hostBatch(i)).flat())
      // Appending after the crash goes on from there.
      await store.append(hostKey, hostBatch(stored))
      assert.strictEqual((await store.load(hostKey))?.length, (stored + 1) * 10)
    } finally {
      await store.close()
    }
    const report = await Effect.runPromise(journalOf(options, (j) => j.verify(JournalSessionStore.sessionId(hostKey))))
    assert.isAtLeast(report.entriesChecked, 10)
  })

  it("two host processes on one journal directory appending the same entries to one key take turns and store each once, in order", async () => {
    const options = filesystem.fresh()
    const runs = await Promise.all([host(options, 10), host(options, 10)])
    for (const r of runs) assert.strictEqual(r.code, 0, r.stderr)
    const store = await JournalSessionStore.open(options)
    try {
      sameText(await store.load(hostKey), Array.from({ length: 10 }, (_, i) => hostBatch(i)).flat())
    } finally {
      await store.close()
    }
  })

  it.skipIf(postgres.skip !== null)(
    "two host processes on one PostgreSQL appending the same entries to one key store each once, in order",
    async () => {
      const options = postgres.fresh()
      const batches = process.env["STRESS"] === "1" ? 200 : 10
      const runs = await Promise.all([host(options, batches), host(options, batches)])
      for (const r of runs) assert.strictEqual(r.code, 0, r.stderr)
      const store = await JournalSessionStore.open(options)
      try {
        sameText(await store.load(hostKey), Array.from({ length: batches }, (_, i) => hostBatch(i)).flat())
      } finally {
        await store.close()
      }
    }
  )
})
