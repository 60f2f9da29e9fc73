/**
 * `tail --follow --postgres` through a server outage, without touching the shared
 * server: a TCP proxy in front of it drops every connection and refuses new ones
 * for 3 s, as a restart does (the follower used to exit 3 at once); and the
 * follower's own backends (found by the command's application name and this test's
 * unique table prefix in their queries) are terminated again and again for ~3 s.
 * Either way the follower reconnects with backoff and goes on from the last entry
 * it printed, printing what was written meanwhile and later once each, no gap.
 */
import { assert, describe, it } from "@effect/vitest"
import { SessionJournal } from "@session-journal/core"
import { PgPersistence } from "@session-journal/postgres"
import * as Pg from "@session-journal/postgres/test/pg"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as SqlClient from "effect/sql/SqlClient"
import type { ChildProcess } from "node:child_process"
import * as net from "node:net"
import { afterAll } from "vitest"
import { cleanup, killAll, run, start } from "./Run.ts"

const reachable = Pg.skipReason === null
const prefix = Pg.freshPrefix("follow")
const env = { SESSION_JOURNAL_PG_TABLE_PREFIX: prefix }
const base = ["--postgres", Pg.url]
const admin = () => Pg.adminLayer("sj-cli-follow-admin")
const started: Array<ChildProcess> = []

afterAll(async () => {
  await killAll(started)
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

// Terminates every backend of the command (its application name) whose query
// names this test's tables or channel: the follower's reads and its LISTEN. Says
// how many it terminated.
const terminateFollower = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ readonly n: number }>`
    SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
    WHERE pid <> pg_backend_pid() AND application_name = 'session-journal' AND query LIKE ${"%" + prefix + "%"}`
  return rows[0]?.n ?? 0
})

// A writer in this process, under another application name, so the outage spares it.
const writeDuring = (tool: string, id = "pf") =>
  Effect.gen(function*() {
    const journal = yield* SessionJournal.SessionJournal
    yield* journal.record(id, {
      tool_name: tool,
      server_id: "s",
      agent_id: "a",
      bytes_read: 0,
      bytes_written: 0,
      delegation_depth: 0
    })
  }).pipe(
    Effect.scoped,
    Effect.provide(
      SessionJournal.layer().pipe(
        Layer.provide(
          PgPersistence.layerFromUrl(Pg.url, { tablePrefix: prefix, applicationName: "sj-cli-follow-writer" })
        )
      )
    )
  )

describe.skipIf(!reachable)("tail --follow --postgres", () => {
  it(
    "a 3 s restart of the server: the follower reconnects and prints what was written meanwhile and later, once each",
    async () => {
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
      const printed = () =>
        stdout.split("\n").filter((l) => l.length > 0).map((l) => (JSON.parse(l) as { sequence: number }).sequence)
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
    },
    90_000
  )

  it("its backends terminated again and again for ~3 s: it goes on with no duplicate and no gap", async () => {
    assert.strictEqual((await importLines("pk", ["t0", "t1", "t2"])).code, 0)
    const child = start([...base, "--json", "tail", "pk", "--follow"], { env })
    started.push(child)
    let stdout = ""
    let stderr = ""
    child.stdout!.on("data", (b: Buffer) => (stdout += b.toString("utf8")))
    child.stderr!.on("data", (b: Buffer) => (stderr += b.toString("utf8")))
    const printed = () =>
      stdout.split("\n").filter((l) => l.length > 0).map((l) => (JSON.parse(l) as { sequence: number }).sequence)
    const eventually = async (check: () => boolean, what: string, ms = 30_000) => {
      const until = Date.now() + ms
      while (!check() && Date.now() < until && child.exitCode === null) await new Promise((r) => setTimeout(r, 25))
      assert.isTrue(check(), `${what}; exit ${child.exitCode}; stderr: ${stderr}`)
    }
    await eventually(() => printed().length === 3, "the follower prints 0..2")
    const terminated = await Effect.runPromise(
      Effect.gen(function*() {
        let total = 0
        let wrote = false
        const until = Date.now() + 3000
        while (Date.now() < until) {
          total += yield* terminateFollower
          if (!wrote && Date.now() > until - 1500) {
            wrote = true
            yield* writeDuring("during", "pk")
          }
          yield* Effect.sleep("20 millis")
        }
        return total
      }).pipe(Effect.provide(admin()))
    )
    assert.isAbove(terminated, 0, "the follower's backends were terminated")
    assert.strictEqual((await importLines("pk", ["after0", "after1"])).code, 0)
    await eventually(() => printed().length >= 6, "the follower prints what was written")
    assert.isNull(child.exitCode, stderr)
    assert.deepStrictEqual(printed(), [0, 1, 2, 3, 4, 5])
  }, 90_000)
})
