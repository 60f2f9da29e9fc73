/**
 * `tail --follow --postgres` through a server outage: the follower's connections
 * (its reads and its LISTEN) are terminated again and again for about three
 * seconds, as a restart would drop them; the follower reconnects with backoff and
 * goes on from the last entry it printed, with no duplicate and no gap. The shared
 * server itself is never restarted: only the follower's own backends, found by the
 * test's unique table prefix in their queries, are terminated.
 */
import { assert, describe, it } from "@effect/vitest"
import { PgPersistence } from "@session-journal/postgres"
import * as Pg from "@session-journal/postgres/test/pg"
import { SessionJournal } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { ChildProcess } from "node:child_process"
import * as net from "node:net"
import { afterAll } from "vitest"
import { cleanup, exited, run, start } from "./Run.ts"

const reachable = Pg.skipReason === null
const prefix = Pg.freshPrefix("follow")
const env = { SESSION_JOURNAL_PG_TABLE_PREFIX: prefix }
const base = ["--postgres", Pg.url]
const admin = () => Pg.adminLayer("sj-cli-follow-admin")
const started: Array<ChildProcess> = []

afterAll(async () => {
  for (const child of started) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGKILL")
      await exited(child)
    }
  }
  cleanup()
  if (reachable) await Effect.runPromise(PgPersistence.dropTables(prefix).pipe(Effect.provide(admin())))
})

const importLines = (id: string, tools: ReadonlyArray<string>) =>
  run([...base, "import", id, "-"], {
    env,
    input: tools.map((t) => JSON.stringify({ tool_name: t, server_id: "s", agent_id: "a" })).join("\n") + "\n"
  })

// A TCP proxy in front of the server: the follower connects through it, so a
// restart of "the server" (every connection dropped, connections refused for a
// while) is played without touching the shared server.
const makeProxy = async (target: URL) => {
  const sockets = new Set<net.Socket>()
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 5432), target.hostname)
    for (const s of [client, upstream]) {
      sockets.add(s)
      s.on("close", () => sockets.delete(s))
      s.on("error", () => s.destroy())
    }
    client.pipe(upstream)
    upstream.pipe(client)
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as net.AddressInfo).port
  return {
    port,
    /** Drops every connection and refuses new ones for `ms`, then accepts again. */
    restart: async (ms: number) => {
      await new Promise<void>((resolve) => {
        server.close(() => resolve())
        for (const s of sockets) s.destroy()
      })
      await new Promise((r) => setTimeout(r, ms))
      await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve))
    },
    close: () => {
      for (const s of sockets) s.destroy()
      server.close()
    }
  }
}

// A writer in this process, under another application name, so the outage spares it.
const writeDuring = (tool: string) =>
  Effect.gen(function*() {
    const journal = yield* SessionJournal.SessionJournal
    yield* journal.record("pf", { tool_name: tool, server_id: "s", agent_id: "a", bytes_read: 0, bytes_written: 0, delegation_depth: 0 })
  }).pipe(
    Effect.scoped,
    Effect.provide(SessionJournal.layer().pipe(
      Layer.provide(PgPersistence.layerFromUrl(Pg.url, { tablePrefix: prefix, applicationName: "sj-cli-follow-writer" }))
    ))
  )

describe.skipIf(!reachable)("tail --follow --postgres", () => {
  it("a 3 s restart of the server: the follower reconnects and prints what was written meanwhile and later, once each", async () => {
    assert.strictEqual((await importLines("pf", ["t0", "t1", "t2"])).code, 0)
    const proxy = await makeProxy(new URL(Pg.url))
    const through = new URL(Pg.url)
    through.port = String(proxy.port)
    const child = start(["--postgres", through.toString(), "--json", "tail", "pf", "--follow"], { env })
    started.push(child)
    let stdout = ""
    let stderr = ""
    child.stdout!.on("data", (b: Buffer) => (stdout += b.toString("utf8")))
    child.stderr!.on("data", (b: Buffer) => (stderr += b.toString("utf8")))
    const printed = () => stdout.split("\n").filter((l) => l.length > 0).map((l) => (JSON.parse(l) as { sequence: number }).sequence)
    const eventually = async (check: () => boolean, what: string, ms = 30_000) => {
      const until = Date.now() + ms
      while (!check() && Date.now() < until && child.exitCode === null) await new Promise((r) => setTimeout(r, 25))
      assert.isTrue(check(), `${what}; exit ${child.exitCode}; stderr: ${stderr}`)
    }
    try {
      await eventually(() => printed().length === 3, "the follower prints 0..2")
      // The server "restarts": down for 3 s; an entry is written meanwhile (directly,
      // not through the proxy), and two after it is back.
      const restarted = proxy.restart(3000)
      await new Promise((r) => setTimeout(r, 500))
      await Effect.runPromise(writeDuring("during"))
      await restarted
      assert.strictEqual((await importLines("pf", ["after0", "after1"])).code, 0)
      await eventually(() => printed().length >= 6, "the follower prints what was written")
      assert.isNull(child.exitCode, stderr)
      assert.deepStrictEqual(printed(), [0, 1, 2, 3, 4, 5])
      assert.strictEqual(stderr, "")
    } finally {
      proxy.close()
    }
  }, 90_000)
})
