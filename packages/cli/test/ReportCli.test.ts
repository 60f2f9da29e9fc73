/**
 * `report` and `serve` as scripts meet them, without a browser: exit codes, the
 * default output file, a report of a damaged session and of one cut in the
 * middle (on the filesystem and on PostgreSQL), the viewer's refusals
 * (other methods, foreign Host names), a port in use, and the viewer on
 * PostgreSQL with its live events.
 */
import { assert, describe, it } from "@effect/vitest"
import { PgPersistence } from "@session-journal/postgres"
import * as Pg from "@session-journal/postgres/test/pg"
import * as Effect from "effect/Effect"
import * as SqlClient from "effect/sql/SqlClient"
import type { ChildProcess } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as path from "node:path"
import { afterAll } from "vitest"
import { cleanup, exited, run, start, tempDir, waitForLine } from "./Run.ts"

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

const record = (base: ReadonlyArray<string>, id: string, tool: string, env: NodeJS.ProcessEnv = {}) =>
  run([...base, "--json", "record", id, "--tool", tool, "--server", "s", "--agent", "a", "--read", "10"], { env })

const serve = async (args: ReadonlyArray<string>, env: NodeJS.ProcessEnv = {}): Promise<string> => {
  const child = start([...args, "serve", "--port", "0"], { env })
  started.push(child)
  const line = await waitForLine(child, (l) => l.startsWith("serving "))
  return line.slice(line.indexOf("http://"))
}

const get = (url: string, options?: { readonly method?: string; readonly host?: string }) =>
  new Promise<{ status: number; body: string; headers: http.IncomingHttpHeaders }>((resolve, reject) => {
    const u = new URL(url)
    const req = http.request({
      host: u.hostname,
      port: u.port,
      path: u.pathname + u.search,
      method: options?.method ?? "GET",
      headers: options?.host === undefined ? {} : { host: options.host }
    }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (b: Buffer) => chunks.push(b))
      res.on(
        "end",
        () =>
          resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8"), headers: res.headers })
      )
    })
    req.on("error", reject)
    req.end()
  })

// Reads server-sent events until `until` holds for the text so far.
const readEvents = (url: string, until: (text: string) => boolean, timeoutMs: number) =>
  new Promise<string>((resolve, reject) => {
    let text = ""
    const req = http.get(url, (res) => {
      res.on("data", (b: Buffer) => {
        text += b.toString("utf8")
        if (until(text)) {
          req.destroy()
          resolve(text)
        }
      })
    })
    req.on("error", (e) => (until(text) ? resolve(text) : reject(e)))
    setTimeout(() => {
      req.destroy()
      reject(new Error(`no matching events within ${timeoutMs} ms: ${text}`))
    }, timeoutMs)
  })

describe("report", () => {
  it("--help, the default file ID.html, an unknown session and a bad id", async () => {
    const dir = tempDir()
    const cwd = tempDir()
    assert.strictEqual((await record(["--dir", dir], "r1", "read_file")).code, 0)
    const [helpReport, helpServe, written, unknown, bad] = await Promise.all([
      run(["report", "--help"]),
      run(["serve", "--help"]),
      run(["--dir", dir, "--json", "report", "r1"], { cwd }),
      run(["--dir", dir, "report", "nope"], { cwd }),
      run(["--dir", dir, "report", "bad id"], { cwd })
    ])
    assert.strictEqual(helpReport.code, 0)
    assert.include(helpReport.stdout, "--out")
    assert.strictEqual(helpServe.code, 0)
    assert.include(helpServe.stdout, "--port")
    assert.include(helpServe.stdout, "--host")
    assert.strictEqual(written.code, 0, written.stderr)
    const doc = JSON.parse(written.stdout)
    assert.strictEqual(doc.file, path.join(fs.realpathSync(cwd), "r1.html"))
    assert.strictEqual(doc.entries, 1)
    assert.isTrue(doc.ok)
    assert.strictEqual(fs.statSync(doc.file).size, doc.bytes)
    assert.strictEqual(unknown.code, 2, unknown.stderr)
    assert.match(unknown.stderr, /session nope not found/)
    assert.strictEqual(bad.code, 2, bad.stderr)
    assert.deepStrictEqual(fs.readdirSync(cwd), ["r1.html"], "failed runs leave no file")
  })

  it("a damaged session still gets its report, showing the failure; the command exits 1", async () => {
    const dir = tempDir()
    for (let i = 0; i < 4; i++) assert.strictEqual((await record(["--dir", dir], "dmg", `t${i}`)).code, 0)
    const segment = path.join(dir, "dmg", fs.readdirSync(path.join(dir, "dmg")).find((f) => f.endsWith(".jsonl"))!)
    const rows = fs.readFileSync(segment, "utf8").split("\n").filter((l) => l.length > 0)
    const row = JSON.parse(rows[2]!)
    row.e.bytes_read += 1
    rows[2] = JSON.stringify(row)
    fs.writeFileSync(segment, rows.join("\n") + "\n")
    const file = path.join(tempDir(), "dmg.html")
    const r = await run(["--dir", dir, "report", "dmg", "--out", file])
    assert.strictEqual(r.code, 1, r.stderr)
    assert.include(r.stdout, "VERIFICATION FAILED")
    const html = fs.readFileSync(file, "utf8")
    assert.match(html, /data-ok="false"/)
    assert.match(html, /INTEGRITY VIOLATION|CORRUPTION/)
    // Only the entries before the edited one count and are in the timeline; the
    // edited one and those after it are apart, marked, counted in nothing.
    const bad = row.e.sequence as number
    assert.include(html, `<span id="count-entries">${bad}</span>`)
    assert.include(html, `<span id="count-tools">${bad}</span>`)
    const [timeline, apart] = html.split(`<section id="unverified"`)
    assert.isDefined(apart, "the unverified entries are shown apart")
    for (let n = bad; n < 4; n++) assert.notInclude(timeline, `id="e${n}"`)
    assert.include(apart!, `${4 - bad} stored entries from sequence ${bad} on`)
    assert.include(apart!, `<tr data-verified="false" data-mark="failed-here" id="e${bad}"`)
    assert.include(apart!, `<tr data-verified="false" data-mark="unverified" id="e${bad + 1}"`)
    assert.include(html, `hold only the entries before sequence ${bad}, which verified`)
  })
})

const url = Pg.url
const admin = () => Pg.adminLayer("sj-cli-test-admin")

// The sequences in a page's timeline (each entry has its `eN` anchor), the part apart left out.
const timelineIds = (html: string): Array<number> =>
  [...html.split(`<section id="unverified"`)[0]!.matchAll(/ id="e([0-9]+)"/g)].map((m) => Number(m[1]))
    .sort((a, b) => a - b)

// A session of six calls with entry 3 cut out of the middle (`cut` removes it from
// storage): its report and its page show entries 0–2 as verified, counted and in
// the timeline, and say the gap is where verification failed; the report shows
// the gap where it stands and entries 4 and 5 apart, marked not verified.
const cutSession = async (
  base: ReadonlyArray<string>,
  env: NodeJS.ProcessEnv,
  cut: (id: string) => Promise<void>
) => {
  const id = "cut"
  for (let i = 0; i < 6; i++) assert.strictEqual((await record(base, id, `t${i}`, env)).code, 0)
  await cut(id)
  const file = path.join(tempDir(), "cut.html")
  const r = await run([...base, "report", id, "--out", file], { env })
  assert.strictEqual(r.code, 1, r.stderr)
  const html = fs.readFileSync(file, "utf8")
  assert.include(html, "entries 3..3 are missing")
  assert.include(html, `<span id="count-entries">3</span>`)
  assert.include(html, `hold only the entries before sequence 3, which verified`)
  assert.deepStrictEqual(timelineIds(html), [0, 1, 2], "the entries before the gap, in the timeline")
  const page = await get(`${await serve(base, env)}/sessions/${id}`)
  assert.strictEqual(page.status, 200)
  assert.deepStrictEqual(timelineIds(page.body), [0, 1, 2], "the page's timeline too")
  assert.include(page.body, `from 3 on are not vouched for: they count in nothing here and are not shown`)
  // The report shows the gap where it stands and the entries stored after it apart, marked.
  const apart = html.split(`<section id="unverified"`)[1] ?? ""
  assert.include(html, "appear only apart, marked not verified")
  assert.include(apart, `2 stored entries from sequence 3 on`)
  assert.include(apart, `<tr data-verified="false" data-mark="missing" id="missing-3"`)
  assert.include(apart, `entry 3 is not stored: verification failed here`)
  assert.include(apart, `<tr data-verified="false" data-mark="unverified" id="e4"`)
  assert.include(apart, `<tr data-verified="false" data-mark="unverified" id="e5"`)
  assert.isBelow(apart.indexOf(`id="missing-3"`), apart.indexOf(`id="e4"`), "the gap where it stands")
}

describe("report of a session cut in the middle", () => {
  it("on the filesystem: the entries before the gap as verified, the gap where it stands, those after it apart", async () => {
    const dir = tempDir()
    await cutSession(["--dir", dir], {}, async (id) => {
      const segment = path.join(dir, id, fs.readdirSync(path.join(dir, id)).find((f) => f.endsWith(".jsonl"))!)
      const rows = fs.readFileSync(segment, "utf8").split("\n").filter((l) => l.length > 0)
      // Line 0 is the segment's header: entry 3 is on line 4.
      fs.writeFileSync(segment, rows.filter((_, n) => n !== 4).join("\n") + "\n")
    })
  })

  it.skipIf(Pg.skipReason !== null)(
    "on PostgreSQL: the same",
    async () => {
      const cutPrefix = Pg.freshPrefix("cut")
      try {
        await cutSession(
          ["--postgres", url],
          { SESSION_JOURNAL_PG_TABLE_PREFIX: cutPrefix },
          (id) =>
            Effect.runPromise(
              SqlClient.SqlClient.use((q) =>
                q`DELETE FROM ${q(`${cutPrefix}entries`)} WHERE session_id = ${id} AND sequence = 3`
              ).pipe(Effect.provide(admin()), Effect.asVoid) as Effect.Effect<void>
            )
        )
      } finally {
        await Effect.runPromise(PgPersistence.dropTables(cutPrefix).pipe(Effect.provide(admin())))
      }
    }
  )
})

describe("serve", () => {
  it("answers GET only, loopback Host names only, and reports a port in use (exit 3)", async () => {
    const dir = tempDir()
    assert.strictEqual((await record(["--dir", dir], "s1", "<b>x</b>")).code, 0)
    const base = await serve(["--dir", dir])
    const list = await get(base + "/")
    assert.strictEqual(list.status, 200)
    assert.match(String(list.headers["content-type"]), /^text\/html; charset=utf-8/)
    assert.strictEqual(list.headers["x-content-type-options"], "nosniff")
    assert.include(list.body, "data-id=\"s1\"")
    const session = await get(base + "/sessions/s1")
    assert.include(session.body, "&lt;b&gt;x&lt;/b&gt;")
    assert.notInclude(session.body, "<b>x</b>")
    assert.strictEqual((await get(base + "/sessions/s1", { method: "POST" })).status, 404)
    assert.strictEqual((await get(base + "/sessions/s1", { method: "DELETE" })).status, 404)
    assert.strictEqual((await get(base + "/", { host: "evil.example:80" })).status, 403)
    assert.strictEqual((await get(base + "/", { host: `localhost:${new URL(base).port}` })).status, 200)
    assert.strictEqual((await get(base + "/sessions/nope")).status, 404)
    assert.strictEqual((await get(base + "/sessions/bad%20id")).status, 400)

    const busy = await run(["--dir", dir, "serve", "--port", new URL(base).port])
    assert.strictEqual(busy.code, 3, busy.stderr)
    assert.match(busy.stderr, /^session-journal: serve is not available: cannot listen on 127\.0\.0\.1:\d+/)
  })
})

const reachable = Pg.skipReason === null
const prefix = Pg.freshPrefix("view")
const pgEnv = { SESSION_JOURNAL_PG_TABLE_PREFIX: prefix }

describe.skipIf(!reachable)("serve --postgres", () => {
  afterAll(() => Effect.runPromise(PgPersistence.dropTables(prefix).pipe(Effect.provide(admin()))))

  it("lists sessions, renders a page and streams an entry another process records", async () => {
    const base = ["--postgres", url]
    assert.strictEqual((await record(base, "pgv", "read_file", pgEnv)).code, 0)
    const server = await serve(base, pgEnv)
    assert.include((await get(server + "/")).body, "data-id=\"pgv\"")
    const page = await get(server + "/sessions/pgv")
    assert.strictEqual(page.status, 200)
    assert.include(page.body, "verified ok")
    const events = readEvents(server + "/sessions/pgv/events?from=1", (t) => t.includes("\nid: 1:"), 10_000)
    assert.strictEqual((await record(base, "pgv", "write_file", pgEnv)).code, 0)
    const text = await events
    assert.include(text, "write_file")
    assert.notInclude(text, "\nid: 0:")
  })
})
