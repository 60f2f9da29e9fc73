/**
 * The time axis in Chromium: the report and the viewer's page of a hooked Claude
 * Code session (`hookedSession.ts`: a Bash call with Claude Code's
 * `duration_ms`, an Agent call whose sub-agent reads a file, a denied Write)
 * draw a waterfall with a row per call and per sub-agent, nested as a tree, each
 * bar from the recorded time of its call to that of its outcome. Tampered
 * copies of the session (an entry edited, an entry cut out, another chain in
 * place of the tail) draw only the calls of the verified entries: a call whose
 * outcome is not verified is drawn open, never with the unverified duration;
 * their timelines hold every entry before the failure (a cut too: the read
 * yields what it stored before the gap), none from it on.
 */
import { assert, describe, it } from "@effect/vitest"
import { Entry } from "@session-journal/core"
import * as fc from "fast-check"
import type { ChildProcess } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import type { Page } from "playwright-core"
import { afterAll, beforeAll } from "vitest"
import * as Html from "../src/viewer/Html.ts"
import * as Waterfall from "../src/viewer/Waterfall.ts"
import { hasChromium, launch, type Launched } from "./Browser.ts"
import { EVENTS, pre, sub, writeHooked } from "./hookedSession.ts"
import { entriesOf, SEED, type Step, step } from "./hookEntries.ts"
import { cleanup, exited, run, start, tempDir, waitForLine } from "./Run.ts"

interface WfRow {
  readonly span: string
  readonly key: string
  readonly parent: string
  readonly depth: number
  readonly entry: number
  readonly ms: string
  readonly verdict: string
  readonly text: string
}

const wfRows = (page: Page): Promise<Array<WfRow>> =>
  page.locator("#waterfall tbody tr").evaluateAll((rows) =>
    rows.map((r) => ({
      span: r.getAttribute("data-span") ?? "",
      key: r.getAttribute("data-key") ?? "",
      parent: r.getAttribute("data-parent") ?? "",
      depth: Number(r.getAttribute("data-depth")),
      entry: Number(r.getAttribute("data-entry")),
      ms: r.getAttribute("data-ms") ?? "",
      verdict: r.getAttribute("data-verdict") ?? "",
      text: r.textContent ?? ""
    }))
  )

// The same rows read from a page's HTML, for a page fetched without a browser.
const wfRowsOf = (html: string): Array<{ span: string; entry: number; ms: string; name: string }> =>
  [...html.matchAll(
    /<tr class="wf-[^"]*"[^>]*data-span="(\w+)"[^>]*data-entry="(\d+)"[^>]*data-ms="(\d*)"[^>]*>(.*?)<\/tr>/g
  )]
    .map((m) => ({
      span: m[1]!,
      entry: Number(m[2]),
      ms: m[3]!,
      name: /<b>([^<]*)<\/b>/.exec(m[4]!)?.[1] ?? ""
    }))

// The sequences of the entries a page's timeline holds (each entry has its `eN`
// anchor), those shown apart as unverified left out.
const timelineIds = (page: Page): Promise<Array<number>> =>
  page.locator("main").evaluate((main) =>
    [...main.querySelectorAll("[id]")]
      .filter((el) => /^e[0-9]+$/.test(el.id) && el.closest("#unverified") === null)
      .map((el) => Number(el.id.slice(1)))
      .sort((a, b) => a - b)
  )

// The same from a page's HTML, for a page fetched without a browser.
const timelineIdsOf = (html: string): Array<number> =>
  [...html.split(`<section id="unverified"`)[0]!.matchAll(/ id="e([0-9]+)"/g)].map((m) => Number(m[1]))
    .sort((a, b) => a - b)

const get = (url: string) =>
  new Promise<{ status: number; body: string }>((resolve, reject) => {
    http.get(url, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (b: Buffer) => chunks.push(b))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }))
    }).on("error", reject)
  })

const seqOf = (entries: ReadonlyArray<Entry.Entry>, tool: string): number =>
  entries.find((e) => Entry.isTool(e) && e.tool_name === tool)!.sequence

// The session's one segment: its lines (the first is the segment's header, then an entry a line).
const segmentOf = (dir: string, session: string) => {
  const file = path.join(dir, session, fs.readdirSync(path.join(dir, session)).find((f) => f.endsWith(".jsonl"))!)
  const lines = fs.readFileSync(file, "utf8").split("\n").filter((l) => l.length > 0)
  const at = (sequence: number) =>
    lines.findIndex((l) => (JSON.parse(l) as { e?: Entry.Entry }).e?.sequence === sequence)
  return {
    lines,
    at,
    write: (next: ReadonlyArray<string>) => fs.writeFileSync(file, next.join("\n") + "\n")
  }
}

const serve = async (dir: string, started: Array<ChildProcess>) => {
  const child = start(["--dir", dir, "serve", "--port", "0"])
  started.push(child)
  const line = await waitForLine(child, (l) => l.startsWith("serving "))
  return line.slice(line.indexOf("http://"))
}

describe("the waterfall's rows", () => {
  it("for any hooked session the rows are a tree under the session, ends never before starts, at most MAX_SPANS (property)", () => {
    fc.assert(
      fc.property(
        fc.array(step, { maxLength: 80 }),
        fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 1, maxLength: 4 }),
        (steps, gaps) => {
          const entries = entriesOf(steps, gaps)
          const w = Waterfall.builder("s")
          for (const e of entries) w.add(e)
          const rows = w.rows()
          const keys = new Set(rows.map((r) => r.key))
          for (const r of rows) {
            if (r.kind === "session") continue
            assert.isTrue(r.parent !== null && keys.has(r.parent), `${r.key} under a kept row`)
            if (r.end !== null) assert.isTrue(r.end >= r.start, r.key)
            assert.isBelow(r.sequence, entries.length)
          }
          const calls = entries.filter(Entry.isTool).length
          assert.strictEqual(w.calls(), calls)
          assert.strictEqual(rows.filter((r) => r.kind === "call").length, calls, "all kept below the bound")
          const html = w.render({ link: (n) => `#e${n}` })
          assert.strictEqual((html.match(/<tr class="wf-/g) ?? []).length, rows.length - (rows.length > 0 ? 1 : 0))
        }
      ),
      { seed: SEED, verbose: true, numRuns: 300 }
    )
  })

  it("a session of transcript lines is drawn from them, at the times they state; its archived tool entries are not drawn again", () => {
    const ARCHIVED = 1_764_500_000 // a day after the lines' own times
    const link = { prev_hash: Entry.ZERO_HASH, timestamp_secs: ARCHIVED }
    const at = (s: number) => new Date((1_764_400_000 + s) * 1000).toISOString()
    const use = (id: string, name: string, input: unknown) => ({ type: "tool_use", id, name, input })
    const result = (id: string, error = false) => ({
      type: "tool_result",
      tool_use_id: id,
      content: "…",
      is_error: error
    })
    const lines: Array<Record<string, unknown>> = [
      { type: "user", timestamp: at(0), message: { role: "user", content: "review and test" } },
      { type: "assistant", timestamp: at(1), message: { role: "assistant", content: [use("ta", "Agent", {})] } },
      {
        type: "assistant",
        timestamp: at(2),
        isSidechain: true,
        agentId: "sub1",
        message: { role: "assistant", content: [use("tr", "Read", { file_path: "/w/a.ts" })] }
      },
      {
        type: "user",
        timestamp: at(4),
        isSidechain: true,
        agentId: "sub1",
        message: { role: "user", content: [result("tr")] }
      },
      { type: "user", timestamp: at(6), message: { role: "user", content: [result("ta")] } },
      {
        type: "assistant",
        timestamp: at(7),
        message: { role: "assistant", content: [use("tb", "Bash", { command: "rm -rf /" })] }
      },
      {
        type: "user",
        timestamp: at(8),
        permissionDecision: { decision: "reject" },
        message: { role: "user", content: [result("tb", true)] }
      }
    ]
    const entries: Array<Entry.Entry> = []
    for (const line of lines) {
      entries.push(
        Entry.makeOther({ ...link, sequence: entries.length }, "claude-code.line", {
          n: entries.length + 1,
          line: JSON.stringify(line)
        })
      )
      // Custody writes a call's tool entry after the line that completes it.
      const done = (line["message"] as { content: unknown }).content
      if (Array.isArray(done) && done.some((p: { type?: string }) => p.type === "tool_result")) {
        entries.push(Entry.makeTool({ ...link, sequence: entries.length }, {
          tool_name: "Copy",
          server_id: "claude-code",
          agent_id: "main",
          bytes_read: 0,
          bytes_written: 0,
          delegation_depth: 0,
          allowed: true
        }))
      }
    }
    const w = Waterfall.builder("cc-1")
    for (const e of entries) w.add(e)
    const html = w.render({ link: (n) => `#e${n}` })
    const rows = [...html.matchAll(/data-span="(\w+)" data-depth="(\d+)"[^>]*data-ms="(\d*)"[^>]*>.*?<b>([^<]*)<\/b>/g)]
      .map((m) => [m[1], Number(m[2]), m[3], m[4]])
    assert.deepStrictEqual(rows, [
      ["call", 0, "5000", "Agent"],
      ["agent", 1, "2000", "sub1"],
      ["call", 2, "2000", "Read"],
      ["call", 0, "1000", "Bash"]
    ])
    assert.match(html, /data-span="call"[^>]*data-verdict="deny"[^>]*>.*?<b>Bash<\/b>/, "the refused call")
    assert.notInclude(html, "Copy", "the archived copies are not drawn")
    assert.strictEqual(w.calls(), 3)
    assert.include(html, `${Html.isoSeconds(1_764_400_001)} → ${Html.isoSeconds(1_764_400_008)}`, "the lines' times")
  })

  it("a long session keeps the newest rows only, and says how many calls there were", () => {
    // 20,000 calls, every tenth an Agent call whose sub-agent makes a call.
    const steps: Array<Step> = []
    for (let i = 0; i < 20_000; i++) {
      const agent = i % 10 === 1 ? 1 : 0
      if (i % 10 === 0) steps.push({ _tag: "call", tool: "Agent", agent: 0, allowed: true, decide: true })
      else steps.push({ _tag: "call", tool: "Bash", agent, allowed: i % 7 !== 0, decide: true })
      steps.push({ _tag: "outcome", pick: 1_000_000, ms: i % 3 === 0 ? null : 5 })
      if (i % 10 === 2) steps.push({ _tag: "stop", agent: 1 })
    }
    const entries = entriesOf(steps, [1])
    const w = Waterfall.builder("s")
    for (const e of entries) w.add(e)
    const rows = w.rows()
    assert.isAtMost(rows.length, Waterfall.MAX_SPANS + 64 + 1, "the bound, a batch about to leave, the session")
    assert.strictEqual(w.calls(), 20_000)
    let last = -1
    for (const e of entries) if (Entry.isTool(e)) last = e.sequence
    assert.include(rows.map((r) => r.sequence), last, "the newest call is kept")
    const html = w.render({ link: (n) => `#e${n}` })
    assert.match(html, /\(the newest \d+ of 20000 calls\)/)
  })
})

describe.skipIf(!hasChromium())("the time axis in Chromium", () => {
  let chrome: Launched | undefined
  const started: Array<ChildProcess> = []
  beforeAll(async () => {
    chrome = await launch()
  })
  afterAll(async () => {
    for (const child of started) {
      if (child.exitCode === null) {
        child.kill("SIGTERM")
        await exited(child)
      }
    }
    await chrome?.close()
    cleanup()
  }, 60_000)

  it("report and serve: a row per call and sub-agent, nested, each bar from its call's time to its outcome's", async () => {
    const dir = tempDir()
    const { session, entries } = await writeHooked(dir)
    const file = path.join(dir, "report.html")
    const r = await run(["--dir", dir, "report", session, "--out", file])
    assert.strictEqual(r.code, 0, r.stderr)
    const page = await chrome!.context.newPage()
    await page.goto(pathToFileURL(file).href)

    const rows = await wfRows(page)
    const [bash, agentCall, subAgent, read, write] = rows
    assert.strictEqual(rows.length, 5, JSON.stringify(rows))
    assert.deepStrictEqual(
      rows.map((x) => [x.span, x.depth, x.entry]),
      [
        ["call", 0, seqOf(entries, "Bash")],
        ["call", 0, seqOf(entries, "Agent")],
        ["agent", 1, entries.find((e) => e.kind === "claude-code.SubagentStart")!.sequence],
        ["call", 2, seqOf(entries, "Read")],
        ["call", 0, seqOf(entries, "Write")]
      ]
    )
    // The tree: the sub-agent under the Agent call that started it, its call under it.
    assert.strictEqual(subAgent!.parent, agentCall!.key)
    assert.strictEqual(read!.parent, subAgent!.key)
    assert.include(subAgent!.text, sub.agent_type, "the agent's type, as the journal records it")
    assert.include(subAgent!.text, sub.agent_id)
    // Durations: Claude Code's own for Bash; from the entries' times otherwise (EVENTS' seconds).
    assert.deepStrictEqual(rows.map((x) => x.ms), ["1500", "5000", "3000", "1000", "0"])
    assert.strictEqual(write!.verdict, "deny")
    assert.include(write!.text, "DENIED")
    assert.include(bash!.text, "npm test", "what the call did")
    assert.include(read!.text, "/tmp/otel/work/a.ts")

    // On the axis: each bar starts in time order, and a nested bar lies within its parent's.
    const box = async (key: string) => (await page.locator(`#waterfall tr[data-key="${key}"] .wf-bar`).boundingBox())!
    const [b, a, s, rd, w] = await Promise.all(rows.map((x) => box(x.key)))
    assert.isBelow(b!.x, a!.x)
    assert.isBelow(a!.x, s!.x)
    assert.isBelow(rd!.x, w!.x)
    for (const [inner, outer] of [[s!, a!], [rd!, s!]] as const) {
      assert.isAtLeast(inner.x, outer.x - 0.5)
      assert.isAtMost(inner.x + inner.width, outer.x + outer.width + 0.5)
    }
    assert.isAbove(a!.width, b!.width, "the 5 s Agent call is longer than the 1.5 s Bash call")

    // A row leads to its entry in the timeline.
    await page.locator(`#waterfall tr[data-key="${read!.key}"] a`).click()
    assert.match(page.url(), new RegExp(`#e${read!.entry}$`))
    assert.strictEqual(await page.locator(`#e${read!.entry}`).getAttribute("data-tool"), "Read")
    await page.close()

    // The viewer's page draws the same waterfall, its links to the window holding each entry.
    const base = await serve(dir, started)
    const live = await chrome!.context.newPage()
    await live.goto(`${base}/sessions/${session}`)
    assert.deepStrictEqual(
      (await wfRows(live)).map((x) => [x.span, x.depth, x.entry, x.ms, x.verdict]),
      rows.map((x) => [x.span, x.depth, x.entry, x.ms, x.verdict])
    )
    assert.strictEqual(
      await live.locator(`#waterfall tr[data-key="${read!.key}"] a`).getAttribute("href"),
      `/sessions/${session}?from=${read!.entry}#e${read!.entry}`
    )
    await live.close()
  })

  it(
    "tampered sessions (an entry edited, an entry cut out, another chain in place of the tail): only verified calls are drawn",
    async () => {
      // The session up to the Agent call, then on two diverging copies: the rest of
      // EVENTS in one, a Glob call in the other.
      const upTo = EVENTS.findIndex(([, input]) => input["tool_name"] === "Agent") + 1
      const original = tempDir()
      const { session, entries: base } = await writeHooked(original, EVENTS.slice(0, upTo))
      const other = tempDir()
      fs.cpSync(original, other, { recursive: true })
      const { entries } = await writeHooked(original, EVENTS.slice(upTo))
      const { entries: forked } = await writeHooked(other, [[9, pre("Glob", { pattern: "**/*.ts" }, "toolu_glob")]])
      assert.isAbove(forked.length, base.length + 1)
      const read = seqOf(entries, "Read")

      const cases: Array<{ name: string; failsAt: number; tamper: (dir: string) => void }> = [
        {
          name: "edit",
          failsAt: read,
          tamper: (dir) => {
            const seg = segmentOf(dir, session)
            const i = seg.at(read)
            const row = JSON.parse(seg.lines[i]!)
            row.e.bytes_read += 1
            seg.write(seg.lines.map((l, n) => (n === i ? JSON.stringify(row) : l)))
          }
        },
        {
          name: "cut",
          failsAt: read,
          tamper: (dir) => {
            const seg = segmentOf(dir, session)
            seg.write(seg.lines.filter((_, n) => n !== seg.at(read)))
          }
        },
        {
          // The stored entries from `base.length` on: the original's first, then the
          // other copy's, which link to a different entry before them.
          name: "fork",
          failsAt: base.length + 1,
          tamper: (dir) => {
            const seg = segmentOf(dir, session)
            const theirs = segmentOf(other, session)
            seg.write([
              ...seg.lines.slice(0, seg.at(base.length) + 1),
              ...theirs.lines.slice(theirs.at(base.length + 1))
            ])
          }
        }
      ]
      for (const c of cases) {
        const dir = tempDir()
        fs.cpSync(original, dir, { recursive: true })
        c.tamper(dir)
        const file = path.join(dir, "report.html")
        const r = await run(["--dir", dir, "report", session, "--out", file])
        assert.strictEqual(r.code, 1, `${c.name}: ${r.stderr}`)
        const page = await chrome!.context.newPage()
        await page.goto(pathToFileURL(file).href)
        assert.strictEqual(await page.locator("#verification").getAttribute("data-ok"), "false", c.name)
        assert.include(
          await page.locator("#verification").innerText(),
          `only the entries before sequence ${c.failsAt}, which verified`,
          c.name
        )
        // The entries stored past the failure are apart, every case (a cut's after the gap, which is
        // marked where it stands), and the box says so.
        assert.strictEqual(await page.locator("#unverified").count(), 1, c.name)
        assert.include(await page.locator("#verification").innerText(), "appear only apart", c.name)
        assert.strictEqual(
          await page.locator(`#unverified tr[data-mark="missing"]`).count(),
          c.name === "cut" ? 1 : 0,
          c.name
        )
        assert.strictEqual(
          await page.locator(`#unverified tr[data-mark="failed-here"]`).count(),
          c.name === "cut" ? 0 : 1,
          c.name
        )
        const rows = await wfRows(page)
        for (const x of rows) {
          assert.isBelow(x.entry, c.failsAt, `${c.name}: ${x.text}`)
          assert.notMatch(x.text, /Glob|Read|Write/, `${c.name}: no call of an unverified entry`)
        }
        // Drawn open when drawn: its outcome is not verified.
        for (const x of rows.filter((x) => x.span === "call" && x.text.includes("Agent"))) {
          assert.strictEqual(x.ms, "", `${c.name}: the Agent call's outcome is not verified: drawn open`)
        }
        assert.strictEqual(rows.length, 3, `${c.name}: Bash, Agent and its sub-agent`)
        // The timeline holds every entry before the failure, and none from it on.
        const verified = Array.from({ length: c.failsAt }, (_, n) => n)
        assert.deepStrictEqual(await timelineIds(page), verified, `${c.name}: the verified entries, all of them`)
        await page.close()

        // And the viewer's page, in Chromium: the verified entries, nothing else, and it does not follow.
        const url = `${await serve(dir, started)}/sessions/${session}`
        const shown = await chrome!.context.newPage()
        await shown.goto(url)
        assert.strictEqual(await shown.locator("#verification").getAttribute("data-ok"), "false", c.name)
        assert.deepStrictEqual(await timelineIds(shown), verified, `${c.name}: the page in Chromium`)
        assert.strictEqual(await shown.locator("[data-verified]").count(), 0, `${c.name}: nothing apart`)
        assert.strictEqual(await shown.locator("#live-status").count(), 0, `${c.name}: not followed`)
        await shown.close()
        const served = await get(url)
        assert.strictEqual(served.status, 200, c.name)
        assert.match(served.body, /data-ok="false"/)
        assert.notInclude(served.body, "appear only apart", `${c.name}: the page shows nothing apart, and says so`)
        assert.include(
          served.body,
          `from ${c.failsAt} on are not vouched for: they count in nothing here and are not shown`
        )
        assert.deepStrictEqual(timelineIdsOf(served.body), verified, `${c.name}: the page's timeline too`)
        const drawn = wfRowsOf(served.body)
        assert.deepStrictEqual(drawn.map((x) => [x.span, x.entry, x.ms]), rows.map((x) => [x.span, x.entry, x.ms]))
        for (const x of drawn) assert.notInclude(["Glob", "Read", "Write"], x.name, c.name)
      }
    },
    180_000
  )
})
