/**
 * `serve` as an attacker and a heavy reader meet it, through the real binary:
 * requests with Host names a rebinding page would send (raw sockets, so the
 * header is exactly what is written), binding an address other machines reach,
 * ids the storage refuses, and the memory of concurrent loads of a long session
 * (the serve process's peak RSS from /proc), with its paging and its one
 * verification per state. STRESS=1 loads a 300,000-entry session 16 times at once.
 */
import { assert, describe, it } from "@effect/vitest"
import { SessionJournal } from "@session-journal/core"
import { NodePersistence } from "@session-journal/node"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { ChildProcess } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as net from "node:net"
import * as path from "node:path"
import { afterAll } from "vitest"
import { cleanup, exited, run, start, tempDir, waitForLine } from "./Run.ts"

const STRESS = process.env["STRESS"] === "1"
const started: Array<ChildProcess> = []

afterAll(async () => {
  for (const child of started) {
    if (child.exitCode === null) {
      child.kill("SIGTERM")
      await exited(child)
    }
  }
  cleanup()
})

const stop = async (child: ChildProcess) => {
  child.kill("SIGTERM")
  await exited(child)
}

const serve = async (args: ReadonlyArray<string>, flags: ReadonlyArray<string> = []) => {
  const child = start([...args, "serve", "--port", "0", ...flags])
  started.push(child)
  let stderr = ""
  child.stderr!.on("data", (b: Buffer) => (stderr += b.toString("utf8")))
  const line = await waitForLine(child, (l) => l.startsWith("serving "))
  const url = new URL(line.slice(line.indexOf("http://")))
  return { child, port: Number(url.port), stderr: () => stderr }
}

// One request written byte for byte (HTTP/1.1 unless told), `host` null for none;
// resolves with the status and body.
const raw = (port: number, target: string, host: string | null, version = "1.1") =>
  new Promise<{ status: number; body: string }>((resolve, reject) => {
    const socket = net.connect(port, "127.0.0.1")
    const chunks: Array<Buffer> = []
    socket.on("data", (b: Buffer) => {
      chunks.push(b)
      // The event stream never ends: its head is enough.
      if (target.endsWith("/events") && Buffer.concat(chunks).includes("\r\n\r\n")) socket.destroy()
    })
    socket.on("error", reject)
    socket.on("close", () => {
      const text = Buffer.concat(chunks).toString("utf8")
      const status = /^HTTP\/1\.[01] (\d{3})/.exec(text)
      // A request Node's parser refuses is closed without an answer: status 0.
      if (status === null) {
        return text === ""
          ? resolve({ status: 0, body: "" })
          : reject(new Error(`no HTTP response: ${JSON.stringify(text.slice(0, 200))}`))
      }
      resolve({ status: Number(status[1]), body: text.slice(text.indexOf("\r\n\r\n") + 4) })
    })
    // Written without ending our side: a server may close a half-closed connection before it answers.
    socket.write(
      `GET ${target} HTTP/${version}\r\n${host === null ? "" : `Host: ${host}\r\n`}Connection: close\r\n\r\n`
    )
  })

const get = (port: number, target: string) =>
  new Promise<{ status: number; body: string }>((resolve, reject) => {
    http.get({ host: "127.0.0.1", port, path: target }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (b: Buffer) => chunks.push(b))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }))
    }).on("error", reject)
  })

const record = (dir: string, id: string, tool = "read_file") =>
  run(["--dir", dir, "--json", "record", id, "--tool", tool, "--server", "s", "--agent", "a", "--read", "10"])

// Writes `count` entries to session `id` through the library, a thousand per append.
const seed = (dir: string, id: string, count: number) =>
  Effect.runPromise(
    Effect.gen(function*() {
      const j = yield* SessionJournal.SessionJournal
      for (let i = 0; i < count; i += 1000) {
        yield* j.writeAll(
          id,
          Array.from({ length: Math.min(1000, count - i) }, (_, k): SessionJournal.WriteItem => {
            const n = i + k
            return n % 4 === 0
              ? {
                _tag: "Other",
                kind: "message",
                payload: { role: "user", content: `turn ${n}: ${"lorem ipsum ".repeat(12)}` }
              }
              : {
                _tag: "Tool",
                params: {
                  tool_name: `tool_${n % 12}`,
                  server_id: "tools",
                  agent_id: "coder",
                  bytes_read: n % 5000,
                  bytes_written: n % 700,
                  delegation_depth: 0,
                  allowed: n % 40 !== 1
                }
              }
          })
        )
      }
    }).pipe(Effect.provide(SessionJournal.layer().pipe(Layer.provide(NodePersistence.layer({ root: dir })))))
  )

const peakKiB = (pid: number): number =>
  Number(/VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))![1])

const rowsOf = (html: string): Array<number> => [...html.matchAll(/<tr id="e(\d+)"/g)].map((m) => Number(m[1]))
const checkOf = (html: string): number => Number(/id="overview" data-check="(\d+)"/.exec(html)![1])

describe("serve: Host names (DNS rebinding)", () => {
  it("answers exact loopback names with the bound port only; anything else is 403 on every route", async () => {
    const dir = tempDir()
    assert.strictEqual((await record(dir, "s1")).code, 0)
    const { child, port } = await serve(["--dir", dir])
    const routes = ["/", "/viewer.js", "/sessions/s1", "/sessions/s1/verify", "/sessions/s1/events"]
    const hostile = [
      "127.0.0.1.attacker.example",
      "127.evil.example",
      "127.0.0.1.nip.io",
      "attacker.example",
      `127.0.0.1.attacker.example:${port}`,
      `127.evil.example:${port}`,
      `127.0.0.1.nip.io:${port}`,
      `attacker.example:${port}`,
      `localhost.:${port}`,
      `127.0.0.2:${port}`,
      `localhost:${port}@attacker.example`,
      `127.0.0.1:${port === 65535 ? 1 : port + 1}`,
      "127.0.0.1:1",
      "localhost",
      "127.0.0.1",
      ""
    ]
    for (const host of hostile) {
      for (const target of routes) {
        const r = await raw(port, target, host)
        if (host.includes("@")) assert.include([0, 403], r.status, `Host ${JSON.stringify(host)} ${target}`)
        else assert.strictEqual(r.status, 403, `Host ${JSON.stringify(host)} ${target}`)
        assert.notInclude(r.body, "s1\"", `nothing of the journal for Host ${JSON.stringify(host)}`)
      }
    }
    assert.strictEqual((await raw(port, "/", null, "1.0")).status, 403, "a request without Host")
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, `LOCALHOST:${port}`]) {
      for (const target of routes) {
        assert.strictEqual((await raw(port, target, host)).status, 200, `Host ${host} ${target}`)
      }
    }
    await stop(child)
  })

  it("a non-loopback --host needs --allow-remote; with it a warning, and foreign Host names are still 403", async () => {
    const dir = tempDir()
    assert.strictEqual((await record(dir, "s1")).code, 0)
    const [refused, named, badName] = await Promise.all([
      run(["--dir", dir, "serve", "--port", "0", "--host", "0.0.0.0"]),
      // A name that only looks like a loopback address is resolved by DNS: not loopback either.
      run(["--dir", dir, "serve", "--port", "0", "--host", "127.0.0.1.nip.io"]),
      run(["--dir", dir, "serve", "--port", "0", "--allowed-host", "a b"])
    ])
    assert.strictEqual(refused.code, 2, refused.stderr)
    assert.match(
      refused.stderr,
      /^session-journal: invalid --host: 0\.0\.0\.0 is not a loopback address: .*--allow-remote/
    )
    assert.strictEqual(refused.stdout, "")
    assert.strictEqual(named.code, 2, named.stderr)
    assert.strictEqual(badName.code, 2, badName.stderr)
    assert.match(badName.stderr, /invalid --allowed-host/)

    const { child, port, stderr } = await serve(["--dir", dir], [
      "--host",
      "0.0.0.0",
      "--allow-remote",
      "--allowed-host",
      "viewer.test"
    ])
    assert.match(
      stderr(),
      /warning: serving on 0\.0\.0\.0, which other machines may reach: anyone who connects can read every session/
    )
    assert.include(stderr(), `viewer.test:${port}`)
    for (
      const host of [
        "attacker.example",
        `attacker.example:${port}`,
        `127.0.0.1.nip.io:${port}`,
        "viewer.test",
        `viewer.test.attacker.example:${port}`
      ]
    ) {
      assert.strictEqual((await raw(port, "/sessions/s1", host)).status, 403, host)
    }
    assert.strictEqual((await raw(port, "/sessions/s1", `viewer.test:${port}`)).status, 200)
    assert.strictEqual((await raw(port, "/sessions/s1", `127.0.0.1:${port}`)).status, 200)
    await stop(child)
  })
})

describe("serve: stopping", () => {
  it("stops on SIGTERM while pages follow a session and the list (their streams never end by themselves)", async () => {
    const dir = tempDir()
    assert.strictEqual((await record(dir, "s1")).code, 0)
    const { child, port } = await serve(["--dir", dir])
    // Two event streams held open, as two open pages hold them.
    const open = (target: string) =>
      new Promise<http.ClientRequest>((resolve, reject) => {
        const req = http.get({ host: "127.0.0.1", port, path: target }, (res) => {
          res.once("data", () => resolve(req))
          res.on("error", () => undefined)
        })
        req.on("error", () => undefined)
        req.once("error", reject)
      })
    await Promise.all([open("/sessions/s1/events?from=0"), open("/events")])
    child.kill("SIGTERM")
    // Before, closing the server waited for these streams to end: it never exited.
    assert.isNumber(await exited(child), "it exited")
  }, 60_000)
})

describe("serve: ids and parameters", () => {
  it("an id the storage refuses (CON and the other Windows device names) is 400, as is a bad ?from", async () => {
    const dir = tempDir()
    assert.strictEqual((await record(dir, "s1")).code, 0)
    const { child, port } = await serve(["--dir", dir])
    for (
      const target of [
        "/sessions/CON",
        "/sessions/con",
        "/sessions/NUL",
        "/sessions/COM1",
        "/sessions/LPT9",
        "/sessions/aux/verify",
        "/sessions/PRN",
        "/sessions/CON/events"
      ]
    ) {
      const r = await get(port, target)
      assert.strictEqual(r.status, 400, `${target}: ${r.body.slice(-300)}`)
      assert.match(r.body, /invalid session id .*device name Windows reserves/)
    }
    assert.strictEqual((await get(port, "/sessions/bad%20id")).status, 400)
    assert.strictEqual((await get(port, "/sessions/CONX")).status, 404)
    for (const from of ["abc", "-1", "1.5", "99999999999999999"]) {
      assert.strictEqual((await get(port, `/sessions/s1?from=${from}`)).status, 400, from)
    }
    // A damaged session still has its page: the failure, and the entries before the damage.
    await seed(dir, "dmg", 4)
    const segment = path.join(dir, "dmg", fs.readdirSync(path.join(dir, "dmg")).find((f) => f.endsWith(".jsonl"))!)
    const lines = fs.readFileSync(segment, "utf8").split("\n").filter((l) => l.length > 0)
    const row = JSON.parse(lines[2]!)
    row.e.bytes_read += 1
    lines[2] = JSON.stringify(row)
    fs.writeFileSync(segment, lines.join("\n") + "\n")
    const damaged = await get(port, "/sessions/dmg")
    assert.strictEqual(damaged.status, 200, damaged.body.slice(-400))
    assert.match(damaged.body, /data-ok="false"/)
    assert.match(damaged.body, /INTEGRITY VIOLATION|CORRUPTION/)
    // The segment's first line is its header: the edited line holds entry 1.
    assert.deepStrictEqual(rowsOf(damaged.body), [0], "the edited entry and those after it are not shown as history")
    assert.match(damaged.body, /id="window-stopped".*entries from 1 on are not shown/)
    assert.notInclude(damaged.body, `id="live-status"`)
    await stop(child)
  })
})

// Loads a session page `concurrency` times at once and checks each is the newest
// window; returns the peak RSS of the server and the pages.
const loadConcurrently = async (port: number, id: string, entries: number, concurrency: number) => {
  const pages = await Promise.all(Array.from({ length: concurrency }, () => get(port, `/sessions/${id}`)))
  for (const p of pages) {
    assert.strictEqual(p.status, 200)
    const rows = rowsOf(p.body)
    assert.strictEqual(rows.length, 500, "a page holds one window of entries")
    assert.deepStrictEqual([rows[0], rows[499]], [entries - 500, entries - 1])
    assert.include(p.body, `<span id="count-entries">${entries}</span>`, "the header counts the whole session")
    assert.include(p.body, `id="entries-checked">${entries}<`, "and its verification checked every entry")
  }
  return pages
}

// Opens a session's event stream from `from`; `until` resolves once the stream has
// carried `text` (an overview event's JSON), `close` ends it.
const openOverview = (port: number, id: string, from: number) =>
  new Promise<{ until: (text: string) => Promise<void>; close: () => void }>((resolve, reject) => {
    let seen = ""
    const waiting: Array<[string, () => void]> = []
    const req = http.get({ host: "127.0.0.1", port, path: `/sessions/${id}/events?from=${from}` }, (res) => {
      res.on("data", (b: Buffer) => {
        // Only the newest overview matters: keep a bounded tail of the text.
        seen = (seen + b.toString("utf8")).slice(-4_000_000)
        for (const [text, done] of waiting.splice(0)) {
          if (seen.includes(text)) done()
          else waiting.push([text, done])
        }
      })
      res.on("error", () => undefined)
      resolve({
        until: (text) => new Promise<void>((done) => (seen.includes(text) ? done() : waiting.push([text, done]))),
        close: () => req.destroy()
      })
    })
    req.on("error", reject)
  })

describe("serve: bounded memory", () => {
  it("concurrent loads of a long session: one window each, one verification per state, bounded RSS; paging", async () => {
    const dir = tempDir()
    const entries = 20_000
    await seed(dir, "big", entries)
    const { child, port } = await serve(["--dir", dir])
    const pages = await loadConcurrently(port, "big", entries, 8)
    assert.deepStrictEqual(pages.map((p) => checkOf(p.body)), Array(8).fill(1), "the 8 loads share one verification")
    // Before windowing and sharing this took 790 MiB (8.6 MB pages, 8 verifications).
    const peak = peakKiB(child.pid!)
    assert.isBelow(peak, 320 * 1024, `peak RSS ${peak} KiB`)

    const live = pages[0]!.body
    assert.match(live, /id="live-status" data-from="20000"/, "the newest window follows new entries")
    assert.include(live, `href="/sessions/big?from=19000" rel="prev"`)
    assert.notInclude(live, `rel="next"`)

    const oldest = await get(port, "/sessions/big?from=0")
    assert.deepStrictEqual(rowsOf(oldest.body), Array.from({ length: 500 }, (_, i) => i))
    assert.include(oldest.body, `href="/sessions/big?from=500" rel="next"`)
    assert.notInclude(oldest.body, `id="live-status"`, "an older window is not live")
    assert.strictEqual(checkOf(oldest.body), 1, "an unchanged session is not verified again")
    const middle = await get(port, "/sessions/big?from=12345")
    assert.deepStrictEqual(rowsOf(middle.body), Array.from({ length: 500 }, (_, i) => 12345 + i))
    assert.include(middle.body, `href="/sessions/big?from=11845" rel="prev"`)
    const past = await get(port, "/sessions/big?from=30000")
    assert.deepStrictEqual(rowsOf(past.body), [])
    assert.match(past.body, /id="live-status" data-from="20000"/)

    // A new entry is a new state: verified once more, and the newest window moves.
    assert.strictEqual((await record(dir, "big", "after")).code, 0)
    const after = await Promise.all([get(port, "/sessions/big"), get(port, "/sessions/big")])
    for (const p of after) {
      assert.strictEqual(checkOf(p.body), 2)
      const rows = rowsOf(p.body)
      assert.deepStrictEqual([rows.length, rows[0], rows[499]], [500, 19501, 20000])
    }
    // Verification on demand is done afresh.
    const verify = await get(port, "/sessions/big/verify")
    assert.strictEqual(checkOf(verify.body), 3)
    assert.include(verify.body, `id="entries-checked">20001<`)
    await stop(child)
  })

  it.skipIf(!STRESS)("16 concurrent loads of a 300,000-entry session stay under 512 MiB", async () => {
    const dir = tempDir()
    const entries = 300_000
    await seed(dir, "big", entries)
    const { child, port } = await serve(["--dir", dir])
    const pages = await loadConcurrently(port, "big", entries, 16)
    assert.deepStrictEqual(pages.map((p) => checkOf(p.body)), Array(16).fill(1))
    const peak = peakKiB(child.pid!)
    assert.isBelow(peak, 512 * 1024, `peak RSS ${peak} KiB`)
    // The 16 pages follow the session: one live header for all of them, its
    // counts, charts and time axis kept as entries come.
    const streams = await Promise.all(Array.from({ length: 16 }, () => openOverview(port, "big", entries)))
    assert.strictEqual((await record(dir, "big", "after")).code, 0)
    await Promise.all(streams.map((s) => s.until(`"entries":${entries + 1},`)))
    for (const s of streams) s.close()
    const followed = peakKiB(child.pid!)
    console.log(`serve 300,000 entries: peak RSS ${peak} KiB after 16 loads, ${followed} KiB with 16 followers`)
    assert.isBelow(followed, 512 * 1024, `peak RSS ${followed} KiB`)
    await stop(child)
  }, 900_000)
})

describe("serve: the live stream continues the page's history", () => {
  // The head of a stream that does not end: what it carried once `text` came, or it ended.
  const streamUntil = (port: number, target: string, text: string) =>
    new Promise<string>((resolve, reject) => {
      const req = http.get({ host: "127.0.0.1", port, path: target }, (res) => {
        let seen = ""
        res.on("data", (b: Buffer) => {
          seen += b.toString("utf8")
          if (seen.includes(text)) {
            req.destroy()
            resolve(seen)
          }
        })
        res.on("end", () => resolve(seen))
      })
      req.on("error", reject)
    })

  it("starts only where the page's last entry still stands; a history replaced since the page was drawn is refused", async () => {
    const dir = tempDir()
    for (const tool of ["a", "b", "c"]) assert.strictEqual((await record(dir, "h", tool)).code, 0)
    const { child, port } = await serve(["--dir", dir])
    const page = await get(port, "/sessions/h")
    const prev = /id="live-status" data-from="3" data-prev="([0-9a-f]{64})"/.exec(page.body)?.[1]
    assert.isDefined(prev, "the page names its last entry's hash")
    // The same history: entries written after the page come on its stream.
    assert.strictEqual((await record(dir, "h", "d")).code, 0)
    const same = await streamUntil(port, `/sessions/h/events?from=3&prev=${prev}`, "event: entry")
    assert.include(same, "event: entry\nid: 3:")
    // Another history in its place (the session removed and written again): refused.
    fs.rmSync(path.join(dir, "h"), { recursive: true })
    for (const tool of ["x", "y", "z", "w"]) assert.strictEqual((await record(dir, "h", tool)).code, 0)
    const replaced = await streamUntil(port, `/sessions/h/events?from=3&prev=${prev}`, "event: failure")
    assert.include(
      replaced,
      "the session's history changed since this page was drawn: entry 2 is not the one shown here"
    )
    assert.notInclude(replaced, "event: entry")
    // A reconnecting page says where it got to with the last event's id: checked the same way.
    const reconnect = await new Promise<string>((resolve, reject) => {
      http.get({
        host: "127.0.0.1",
        port,
        path: "/sessions/h/events?from=0",
        headers: { "last-event-id": `2:${prev}` }
      }, (res) => {
        let seen = ""
        res.on("data", (b: Buffer) => (seen += b.toString("utf8")))
        res.on("end", () => resolve(seen))
      }).on("error", reject)
    })
    assert.include(reconnect, "history changed since this page was drawn")
    await stop(child)
  })
})
