/**
 * `report` and `serve` in a real browser: the real binary writes a report and
 * serves the journal, headless Chromium opens both. Checked: the header and its
 * verification against `stats`, the denial rows, the chart bars against `stats`,
 * hostile transcript content shown as text and never run, a 2,000-entry session,
 * and an entry recorded by another process appearing on the live page within 2 s.
 * Set SESSION_JOURNAL_SCREENSHOTS=DIR to save the screenshots the README shows.
 */
import { assert, describe, it } from "@effect/vitest"
import { SessionJournal } from "@session-journal/core"
import { NodePersistence } from "@session-journal/node"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { ChildProcess } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import type { Page } from "playwright-core"
import { afterAll, beforeAll } from "vitest"
import { hasChromium, launch, type Launched } from "./Browser.ts"
import { cleanup, exited, run, start, tempDir, waitForLine } from "./Run.ts"

const HOSTILE_USER = `<script>window.__pwned = 1</script> please fix it`
const HOSTILE_ASSISTANT = `"><img src=x onerror="window.__pwned=2"> and </textarea><b>not bold</b>`
const HOSTILE_TITLE = `Fix <i>parser</i> & "deploy" \uD800 <script>window.__pwned=3</script>`
const SCREENSHOTS = process.env["SESSION_JOURNAL_SCREENSHOTS"]

const tool = (tool_name: string, bytes_read: number, bytes_written = 0, allowed = true, delegation_depth = 0) => ({
  _tag: "Tool" as const,
  params: {
    tool_name,
    server_id: "tools",
    agent_id: delegation_depth > 0 ? "reviewer" : "coder",
    bytes_read,
    bytes_written,
    delegation_depth,
    allowed
  }
})
const message = (role: string, content: unknown) => ({
  _tag: "Other" as const,
  kind: "message",
  payload: { role, content }
})

// A session with messages, allowed and denied calls, recorded guard reasons,
// an entry of an unknown kind, a long message, hostile text and a sub-agent.
const writeFixture = (dir: string) =>
  Effect.runPromise(
    Effect.gen(function*() {
      const j = yield* SessionJournal.SessionJournal
      yield* j.writeAll("main", [
        message("user", HOSTILE_USER),
        tool("read_file", 4096),
        tool("read_file", 2048),
        message("assistant", HOSTILE_ASSISTANT),
        tool("write_file", 0, 1500),
        tool("deploy", 0, 0, false),
        message("tool", [{
          type: "tool-result",
          id: "c1",
          name: "deploy",
          result: { type: "execution-denied", reason: "forbidden transition write_file -> deploy" }
        }]),
        tool("bash", 100, 0, false),
        message("tool", [{
          type: "tool-result",
          id: "c2",
          name: "bash",
          result: { type: "execution-denied", reason: "bash is on the deny list" }
        }]),
        tool("bash", 100, 0, false),
        message("tool", [{
          type: "tool-result",
          id: "c3",
          name: "bash",
          result: { type: "execution-denied", reason: "bash is on the deny list" }
        }]),
        tool("review", 300, 20, true, 1),
        { _tag: "Other", kind: "plan", payload: { steps: ["read", "fix", "</pre><script>window.__pwned=4</script>"] } },
        message("assistant", "A long answer.\n" + "line of a long answer\n".repeat(100))
      ])
      yield* j.setMeta("main", {
        title: HOSTILE_TITLE,
        labels: ["ci", "<script>label</script>"],
        data: { sub_sessions: ["main-sub-1"] }
      })
      yield* j.writeAll("main-sub-1", [message("user", "review the diff"), tool("read_file", 10)])
      yield* j.setMeta("main-sub-1", { title: "review sub-agent", data: { parent_session: "main" } })
      // A long session: 2,000 entries.
      const items = Array.from({ length: 2000 }, (_, i) =>
        i % 4 === 0
          ? message(i % 8 === 0 ? "user" : "assistant", `turn ${i} ${"x".repeat(i % 900)}`)
          : tool(`tool_${i % 7}`, i, i % 3, i % 50 !== 1))
      for (let i = 0; i < items.length; i += 500) yield* j.writeAll("long", items.slice(i, i + 500))
    }).pipe(Effect.provide(SessionJournal.layer().pipe(Layer.provide(NodePersistence.layer({ root: dir })))))
  )

const statsOf = async (dir: string, id: string) => {
  const r = await run(["--dir", dir, "--json", "stats", id])
  assert.strictEqual(r.code, 0, r.stderr)
  return JSON.parse(r.stdout) as {
    head_hash: string
    tool_counts: Record<string, number>
    data_flow: Record<string, number>
  }
}

// What a page shows that must never happen with hostile content.
const assertInert = async (page: Page) => {
  assert.strictEqual(await page.evaluate("window.__pwned"), undefined)
  assert.strictEqual(await page.locator("img").count(), 0)
  assert.strictEqual(await page.locator("main b:text('not bold')").count(), 0)
  const text = await page.locator("main").innerText()
  assert.include(text, "<script>window.__pwned = 1</script> please fix it")
  assert.include(text, `"><img src=x onerror="window.__pwned=2"> and </textarea><b>not bold</b>`)
}

// Waits until the page says it follows the session. Through a locator, which runs in
// Playwright's own world: a predicate polled in the page's world needs `eval`, which
// the viewer's Content-Security-Policy refuses (it failed so whenever the first check
// came too early).
const liveFollowing = (page: Page) =>
  page.locator("#live-status", { hasText: /^live: following/ }).waitFor({ timeout: 10_000 })

const screenshot = async (page: Page, name: string) => {
  await page.setViewportSize({ width: 1200, height: 900 })
  await page.screenshot({ path: path.join(SCREENSHOTS!, name), fullPage: true })
}

const barsOf = (page: Page, chart: string) =>
  page.locator(`svg.${chart} g.bar`).evaluateAll((gs) =>
    gs.map((g) => [g.getAttribute("data-label"), Number(g.getAttribute("data-value"))] as const)
  )

describe.skipIf(!hasChromium())("report and serve in Chromium", () => {
  let dir = ""
  let out = ""
  let chrome: Launched | undefined
  let server: ChildProcess | undefined

  beforeAll(async () => {
    dir = tempDir()
    out = tempDir()
    const [launched] = await Promise.all([launch(), writeFixture(dir)])
    chrome = launched
  }, 60_000)

  afterAll(async () => {
    if (server !== undefined && server.exitCode === null) {
      server.kill("SIGTERM")
      await exited(server)
    }
    await chrome?.close()
    cleanup()
  })

  it("report: header, verification, denials, charts against stats, hostile text inert", async () => {
    const file = path.join(out, "main.html")
    const [r, stats] = await Promise.all([run(["--dir", dir, "report", "main", "--out", file]), statsOf(dir, "main")])
    assert.strictEqual(r.code, 0, r.stderr)
    assert.include(r.stdout, "verified ok")
    const html = fs.readFileSync(file, "utf8")
    assert.notMatch(html, /<script/i, "a report carries no script at all")
    assert.notMatch(html, /(src|href)="(https?:)?\/\//, "nor any external reference")

    const page = await chrome!.context.newPage()
    const requests: Array<string> = []
    page.on("request", (req) => requests.push(req.url()))
    await page.goto(pathToFileURL(file).href)
    assert.deepStrictEqual(requests, [pathToFileURL(file).href], "nothing but the file itself is loaded")

    assert.strictEqual(await page.locator("#title").innerText(), HOSTILE_TITLE.replace("\uD800", "\uFFFD"))
    assert.strictEqual(await page.title(), `${HOSTILE_TITLE.replace("\uD800", "\uFFFD")} · session-journal`)
    assert.strictEqual(await page.locator("#session-id").innerText(), "main")
    assert.include(await page.locator("#labels").innerText(), "<script>label</script>")
    assert.strictEqual(await page.locator("#count-entries").innerText(), "14")
    assert.strictEqual(await page.locator("#count-messages").innerText(), "6")
    assert.strictEqual(await page.locator("#count-tools").innerText(), "7")
    assert.strictEqual(await page.locator("#verification").getAttribute("data-ok"), "true")
    assert.include(await page.locator("#verification").innerText(), "verified ok")
    assert.strictEqual(await page.locator("#head").innerText(), stats.head_hash)
    assert.strictEqual(await page.locator("#entries-checked").innerText(), "14")
    assert.include(await page.locator("#verification").innerText(), "session-journal verify main")

    const denied = page.locator("tr.tool.denied")
    assert.strictEqual(await denied.count(), 3)
    assert.deepStrictEqual(await denied.evaluateAll((rows) => rows.map((r) => r.getAttribute("data-seq"))), [
      "5",
      "7",
      "9"
    ])
    for (const text of await denied.allInnerTexts()) assert.include(text, "DENIED")
    assert.strictEqual(await page.locator("tr.tool.allowed").count(), 4)

    const tools = await barsOf(page, "chart-tools")
    assert.deepStrictEqual(Object.fromEntries(tools), stats.tool_counts)
    assert.deepStrictEqual(await barsOf(page, "chart-reasons"), [["bash is on the deny list", 2], [
      "forbidden transition write_file -> deploy",
      1
    ]])
    const finals = await page.locator("svg.chart-bytes polyline").evaluateAll((ps) =>
      ps.map((p) => Number(p.getAttribute("data-final")))
    )
    assert.deepStrictEqual(finals, [
      Number(stats.data_flow["total_bytes_read"]),
      Number(stats.data_flow["total_bytes_written"])
    ])

    assert.strictEqual(
      await page.locator("tr[data-kind=plan] pre").innerText().then((t) => t.includes("</pre><script>")),
      true
    )
    assert.strictEqual(await page.locator("#e13 details").count(), 1, "a long message is collapsed")
    assert.strictEqual(await page.locator("#sub-sessions a").getAttribute("href"), "main-sub-1.html")
    await assertInert(page)
    if (SCREENSHOTS !== undefined) await screenshot(page, "report.png")
    await page.close()
  })

  it("report: a 2,000-entry session keeps every entry and opens fast", async () => {
    const file = path.join(out, "long.html")
    const [r, stats] = await Promise.all([
      run(["--dir", dir, "--json", "report", "long", "--out", file]),
      statsOf(dir, "long")
    ])
    assert.strictEqual(r.code, 0, r.stderr)
    const written = JSON.parse(r.stdout)
    assert.strictEqual(written.entries, 2000)
    const page = await chrome!.context.newPage()
    const started = Date.now()
    await page.goto(pathToFileURL(file).href, { waitUntil: "load" })
    const loaded = Date.now() - started
    assert.isBelow(loaded, 5000)
    assert.strictEqual(await page.locator("tr[data-seq]").count(), 2000)
    assert.strictEqual(await page.locator("details.page").count(), 4)
    assert.strictEqual(await page.locator("tr.tool.denied").count(), 40)
    assert.deepStrictEqual(Object.fromEntries(await barsOf(page, "chart-tools")), stats.tool_counts)
    await page.close()
  })

  it("serve: the list, a session page, verify on demand, and an entry from another process live within 2 s", async () => {
    server = start(["--dir", dir, "serve", "--port", "0"])
    const line = await waitForLine(server, (l) => l.startsWith("serving "))
    const base = line.slice(line.indexOf("http://"))
    assert.match(base, /^http:\/\/127\.0\.0\.1:\d+$/)

    const page = await chrome!.context.newPage()
    await page.goto(base + "/")
    const ids = await page.locator("#sessions tr[data-id]").evaluateAll((rows) =>
      rows.map((r) => r.getAttribute("data-id"))
    )
    assert.sameMembers(ids as Array<string>, ["main", "main-sub-1", "long"])
    assert.include(await page.locator("tr[data-id=main]").innerText(), HOSTILE_TITLE.replace("\uD800", "\uFFFD"))

    await page.locator("tr[data-id=main] a", { hasText: "verify" }).click()
    await page.waitForSelector("#verification")
    assert.strictEqual(await page.locator("#verification").getAttribute("data-ok"), "true")

    await page.goto(base + "/sessions/main")
    await liveFollowing(page)
    assert.strictEqual(await page.locator("tr.tool.denied").count(), 3)
    assert.strictEqual(await page.locator("#sub-sessions a").getAttribute("href"), "/sessions/main-sub-1")
    await assertInert(page)

    // Another process writes; the page must show it within 2 s of it being durable.
    const recorded = await run([
      "--dir",
      dir,
      "--json",
      "record",
      "main",
      "--tool",
      "<img src=x onerror=alert(1)>",
      "--server",
      "tools",
      "--agent",
      "coder",
      "--denied"
    ])
    assert.strictEqual(recorded.code, 0, recorded.stderr)
    const durableAt = Date.now()
    const seq = JSON.parse(recorded.stdout).sequence as number
    await page.waitForSelector(`#live #e${seq}`, { timeout: 2000 })
    const latency = Date.now() - durableAt
    assert.isBelow(latency, 2000)
    assert.include(await page.locator(`#e${seq}`).innerText(), "<img src=x onerror=alert(1)>")
    assert.include(await page.locator(`#e${seq}`).innerText(), "DENIED")
    assert.strictEqual(await page.locator("#count-entries").innerText(), "15")
    assert.strictEqual(await page.locator("#count-denied").innerText(), "4 denied")
    await assertInert(page)
    if (SCREENSHOTS !== undefined) await screenshot(page, "serve.png")

    // A long session is shown a window at a time, the newest first; the links page through the rest.
    await page.goto(base + "/sessions/long")
    const seqs = () =>
      page.locator("tr[data-seq]").evaluateAll((rows) => rows.map((r) => Number(r.getAttribute("data-seq"))))
    assert.deepStrictEqual(await seqs(), Array.from({ length: 500 }, (_, i) => 1500 + i))
    assert.strictEqual(await page.locator("#count-entries").innerText(), "2000", "the header counts the whole session")
    assert.strictEqual(await page.locator("#entries-checked").innerText(), "2000")
    await liveFollowing(page)
    await page.locator("#window-top a[rel=prev]").click()
    await page.waitForURL(/from=1000$/)
    assert.deepStrictEqual(await seqs(), Array.from({ length: 500 }, (_, i) => 1000 + i))
    assert.strictEqual(await page.locator("#live-status").count(), 0, "an older window is not live")
    await page.locator("#window-bottom a[rel=first]").click()
    await page.waitForURL(/from=0$/)
    assert.deepStrictEqual(await seqs(), Array.from({ length: 500 }, (_, i) => i))
    await page.locator("#window-top a[rel=last]").click()
    await page.waitForURL(/\/sessions\/long$/)
    assert.strictEqual((await seqs())[0], 1500)

    const missing = await page.goto(base + "/sessions/nope")
    assert.strictEqual(missing?.status(), 404)
    await page.close()
  })
})
