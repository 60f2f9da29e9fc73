/**
 * A call is one row, in Chromium: the report of a hooked Claude Code session
 * (recorded through `Hook.handle`, `hookedSession.ts`) shows each call as one
 * row with the tool, what it did, the verdict with guard and reason, how long it
 * took and its bytes; the raw entries open on demand; every entry's `#eN` still
 * leads to the row that holds it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Entry } from "@session-journal/core"
import type { ChildProcess } from "node:child_process"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { afterAll, beforeAll } from "vitest"
import { hasChromium, launch, type Launched } from "./Browser.ts"
import { post, pre, sub, writeHooked } from "./hookedSession.ts"
import { cleanup, exited, run, start, tempDir, waitForLine } from "./Run.ts"

const SCREENSHOTS = process.env["SESSION_JOURNAL_SCREENSHOTS"]

describe.skipIf(!hasChromium())("call rows in Chromium", () => {
  let chrome: Launched | undefined
  let dir = ""
  let session = ""
  let entries: ReadonlyArray<Entry.Entry> = []
  beforeAll(async () => {
    dir = tempDir()
    ;({ session, entries } = await writeHooked(dir))
    chrome = await launch()
  }, 60_000)
  let server: ChildProcess | undefined
  let base = ""
  afterAll(async () => {
    await chrome?.close()
    if (server !== undefined && server.exitCode === null) {
      server.kill("SIGTERM")
      await exited(server)
    }
    cleanup()
  })

  it("report: one row per call, saying what it did, its verdict, time and bytes; entries on demand; every #eN found", async () => {
    const file = path.join(dir, "report.html")
    const r = await run(["--dir", dir, "report", session, "--out", file])
    assert.strictEqual(r.code, 0, r.stderr)
    const page = await chrome!.context.newPage()
    await page.goto(pathToFileURL(file).href)
    if (SCREENSHOTS !== undefined) {
      await page.locator("h2", { hasText: "Timeline" }).scrollIntoViewIfNeeded()
      await page.screenshot({ path: path.join(SCREENSHOTS, "call-rows.png") })
    }

    const calls = page.locator("tr.call")
    assert.deepStrictEqual(await calls.evaluateAll((rows) => rows.map((r) => r.getAttribute("data-tool"))), [
      "Bash",
      "Agent",
      "Read",
      "Write"
    ])
    const bash = page.locator(`tr.call[data-tool="Bash"]`)
    const text = await bash.innerText()
    assert.include(text, "npm test")
    assert.include(text, "allowed")
    assert.include(text, "took 1.5 s")
    const agent = await page.locator(`tr.call[data-tool="Agent"]`).innerText()
    assert.include(agent, "review")
    assert.include(agent, "took 5.0 s")
    const read = page.locator(`tr.call[data-tool="Read"]`)
    assert.strictEqual(await read.getAttribute("data-agent"), "a1b14090cc7d1bd2d")
    assert.include(await read.innerText(), "/tmp/otel/work/a.ts")
    const write = page.locator(`tr.call[data-tool="Write"]`)
    assert.strictEqual(await write.getAttribute("data-verdict"), "deny")
    const denied = await write.innerText()
    assert.include(denied, "DENIED")
    assert.include(denied, "/etc/passwd")
    assert.match(denied, /by\s+\S+/)

    // The raw entries, closed until asked for.
    const raw = bash.locator("details.raw")
    assert.isFalse(await raw.locator("pre").first().isVisible())
    await raw.locator("summary").click()
    assert.include(await raw.locator("pre").nth(1).innerText(), "tool_input")

    // Every entry's anchor is on the page once, and a call's decision and outcome lead to its row.
    for (const e of entries) {
      assert.strictEqual(await page.locator(`#e${e.sequence}`).count(), 1, `#e${e.sequence}`)
    }
    const bashSeq = Number(await bash.getAttribute("data-seq"))
    const ofBash = entries.filter((e) =>
      !Entry.isTool(e) && (e.payload as { tool_use_id?: string } | null)?.tool_use_id === "toolu_bash"
    )
    assert.strictEqual(ofBash.length, 2, "the decision and the outcome")
    for (const e of ofBash) {
      const row = await page.locator(`#e${e.sequence}`).evaluate((el) => el.closest("tr")?.id)
      assert.strictEqual(row, `e${bashSeq}`)
    }
    await page.close()
  })

  it("serve: a call written while the page is open is one row, replaced as its decision and outcome arrive", async () => {
    server = start(["--dir", dir, "serve", "--port", "0"])
    const line = await waitForLine(server, (l) => l.startsWith("serving "))
    base = line.slice(line.indexOf("http://"))
    const page = await chrome!.context.newPage()
    await page.goto(`${base}/sessions/${session}`)
    await page.locator("#live-status", { hasText: /^live: following/ }).waitFor({ timeout: 10_000 })
    const before = Number(await page.locator("#count-entries").innerText())

    // The tool entry and its decision come in one append; the outcome later.
    const called = await writeHooked(dir, [[20, pre("Grep", { pattern: "TODO", path: "src" }, "toolu_live")]])
    const toolSeq = called.entries.length - 2
    const row = page.locator(`#live tr#e${toolSeq}`)
    await row.locator("code.what", { hasText: "TODO in src" }).waitFor({ timeout: 10_000 })
    const done = await writeHooked(dir, [[21, post("Grep", "toolu_live", { duration_ms: 250 })]])
    const outcomeSeq = done.entries.length - 1
    await row.locator(".took", { hasText: "250 ms" }).waitFor({ timeout: 10_000 })
    assert.strictEqual(await page.locator(`#live tr.call`).count(), 1, "one row for the call")
    assert.strictEqual(
      await page.locator(`#e${outcomeSeq}`).evaluate((el) => el.closest("tr")?.id),
      `e${toolSeq}`,
      "the outcome's anchor is in the call's row"
    )
    assert.strictEqual(Number(await page.locator("#count-entries").innerText()), before + 3)
    await page.close()
  })

  it("serve: filters by tool, agent and verdict and a text search show only the matching rows, live rows included", async () => {
    const page = await chrome!.context.newPage()
    await page.goto(`${base}/sessions/${session}`)
    await page.locator("#live-status", { hasText: /^live: following/ }).waitFor({ timeout: 10_000 })
    const visible = () =>
      page.locator("tr[data-seq]:visible").evaluateAll((rows) =>
        rows.map((r) => r.getAttribute("data-tool") ?? r.getAttribute("data-kind"))
      )
    const all = (await visible()).length
    assert.deepStrictEqual(
      await page.locator("#filter-tool option").evaluateAll((os) => os.map((o) => o.getAttribute("value"))),
      ["", "Agent", "Bash", "Grep", "Read", "Write"]
    )
    await page.selectOption("#filter-tool", "Bash")
    assert.deepStrictEqual(await visible(), ["Bash"])
    assert.strictEqual(await page.locator("#filter-shown").innerText(), `1 of ${all} rows shown`)
    await page.selectOption("#filter-tool", "")
    await page.selectOption("#filter-verdict", "deny")
    assert.deepStrictEqual(await visible(), ["Write"])
    await page.selectOption("#filter-verdict", "")
    await page.selectOption("#filter-agent", sub.agent_id)
    assert.deepStrictEqual(await visible(), ["Read"])
    await page.selectOption("#filter-agent", "")
    await page.fill("#filter-text", "PASSWD")
    assert.deepStrictEqual(await visible(), ["Write"])
    await page.fill("#filter-text", "")
    assert.strictEqual((await visible()).length, all)

    // A live row is filtered as it comes.
    await page.selectOption("#filter-tool", "Grep")
    await writeHooked(dir, [[30, pre("Glob", { pattern: "**/*.ts" }, "toolu_glob")]])
    await page.locator("#filter-tool option[value=Glob]").waitFor({ state: "attached", timeout: 10_000 })
    assert.deepStrictEqual(await visible(), ["Grep"], "the new Glob row is hidden while Grep is chosen")
    await page.selectOption("#filter-tool", "Glob")
    assert.deepStrictEqual(await visible(), ["Glob"])
    if (SCREENSHOTS !== undefined) {
      await page.selectOption("#filter-tool", "")
      await page.locator("#filters").scrollIntoViewIfNeeded()
      await page.screenshot({ path: path.join(SCREENSHOTS, "filters.png") })
    }
    await page.close()
  })
})
