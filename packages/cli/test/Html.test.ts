/**
 * The page building blocks without a browser: escaping of hostile text, the
 * timeline rows, the charts, the summary and the related sessions of a report.
 */
import { assert, describe, it } from "@effect/vitest"
import { Entry } from "@session-journal/core"
import * as Charts from "../src/viewer/Charts.ts"
import * as Html from "../src/viewer/Html.ts"
import * as ReportModel from "../src/viewer/ReportModel.ts"
import * as Timeline from "../src/viewer/Timeline.ts"

const HOSTILE = [
  "<script>alert(1)</script>",
  "\"><img src=x onerror=alert(1)>",
  "'><svg onload=alert(1)>",
  "</textarea></title></style><script>x</script>",
  "&lt;already escaped&gt;",
  "lone \uD800 high, lone \uDC00 low, pair \uD83D\uDE00"
]

// After escaping, no markup-significant character is left and no lone surrogate.
const assertInert = (html: string) => {
  assert.notMatch(html, /[<>"']/)
  assert.notMatch(html, /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/)
}

const link = { sequence: 0, prev_hash: Entry.ZERO_HASH, timestamp_secs: 1764400000 }
const toolEntry = (tool_name: string, allowed = true, sequence = 0): Entry.ToolEntry =>
  Entry.makeTool({ ...link, sequence }, {
    tool_name,
    server_id: "srv",
    agent_id: "agent",
    bytes_read: 10,
    bytes_written: 5,
    delegation_depth: 0,
    allowed
  })
const other = (kind: string, payload: unknown, sequence = 0): Entry.OtherEntry =>
  Entry.makeOther({ ...link, sequence }, kind, payload as never)

describe("Html.escape", () => {
  it("leaves no markup and no lone surrogate in hostile text", () => {
    for (const s of HOSTILE) assertInert(Html.escape(s))
    assert.strictEqual(Html.escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;")
    assert.strictEqual(Html.escape("x\uD800y\uDC00z"), "x\uFFFDy\uFFFDz")
    assert.strictEqual(Html.escape("\uD83D\uDE00"), "\uD83D\uDE00")
  })
})

describe("Timeline.row", () => {
  it("shows hostile messages, tool fields and payloads as text", () => {
    for (const s of HOSTILE.filter((h) => !/[\uD800-\uDFFF]/.test(h) || h.includes("\uD83D"))) {
      const rows = [
        Timeline.row(other("message", { role: s, content: s })),
        Timeline.row(
          other("message", { role: "user", content: [{ type: "text", text: s }, { type: "tool-call", name: s }] })
        ),
        Timeline.row(other(`kind-${s.length}`, { html: s })),
        Timeline.row(toolEntry(s.replace(/\s/g, "_"), false))
      ]
      for (const row of rows) {
        assert.notInclude(row, "<script")
        assert.notInclude(row, "<img")
        assert.notInclude(row, "<svg")
        assert.notInclude(row, "</textarea")
      }
    }
  })

  it("marks denied calls and collapses long text", () => {
    assert.include(Timeline.row(toolEntry("deploy", false)), "DENIED")
    assert.include(Timeline.row(toolEntry("deploy", false)), "class=\"tool denied\"")
    assert.notInclude(Timeline.row(toolEntry("read", true)), "DENIED")
    assert.include(
      Timeline.row(other("message", { role: "user", content: "x".repeat(Timeline.COLLAPSE_CHARS + 1) })),
      "<details>"
    )
    assert.notInclude(Timeline.row(other("message", { role: "user", content: "short" })), "<details>")
  })

  it("pages keep every entry", () => {
    const entries = Array.from({ length: 1201 }, (_, i) => toolEntry("t", true, i))
    const html = Array.from(Timeline.pages(entries)).join("")
    assert.strictEqual(html.match(/<tr id="e/g)?.length, 1201)
    assert.strictEqual(html.match(/<details class="page"/g)?.length, 3)
  })
})

describe("Charts", () => {
  it("escapes labels and sums bars past the limit", () => {
    const svg = Charts.bars([["<script>", 3], ["\"quoted\"", 1]], { className: "c", title: "t" })
    assert.notInclude(svg, "<script>")
    assert.include(svg, "data-label=\"&lt;script&gt;\" data-value=\"3\"")
    const many = Array.from({ length: Charts.MAX_BARS + 5 }, (_, i) => [`t${i}`, 1] as const)
    const capped = Charts.bars(many, { className: "c", title: "t" })
    assert.strictEqual(capped.match(/<g class="bar/g)?.length, Charts.MAX_BARS + 1)
    assert.include(capped, "data-label=\"other (5)\" data-value=\"5\"")
  })

  it("samples long series and keeps the final value", () => {
    const values = Array.from({ length: 10_000 }, (_, i) => i)
    const svg = Charts.lines([{ name: "read", color: "#000", values }], { className: "c", title: "t" })
    assert.include(svg, "data-final=\"9999\"")
    const points = /points="([^"]*)"/.exec(svg)![1]!.split(" ")
    assert.strictEqual(points.length, Charts.MAX_POINTS)
  })
})

describe("Report", () => {
  it("summarizes counts, denials and recorded guard reasons", () => {
    const entries = [
      other("message", { role: "user", content: "go" }, 0),
      toolEntry("a", true, 1),
      toolEntry("b", false, 2),
      other("message", {
        role: "tool",
        content: [{ type: "tool-result", result: { type: "execution-denied", reason: "r1" } }]
      }, 3),
      other("demo", { denied_reason: "r1" }, 4)
    ]
    const s = ReportModel.summarize(entries)
    assert.deepStrictEqual([s.entries, s.messages, s.tools, s.others, s.denied], [5, 2, 2, 1, 1])
    assert.deepStrictEqual([...s.toolCounts], [["a", 1], ["b", 1]])
    assert.deepStrictEqual([...s.reasons], [["r1", 2]])
    assert.deepStrictEqual(s.cumulativeRead, [0, 10, 20, 20, 20])
  })

  it("counts an outcome's bytes in the data flow, as stats does", () => {
    const s = ReportModel.summarize([
      toolEntry("Read", true, 0),
      other(Entry.OUTCOME_KIND, { tool_use_id: "t", bytes_read: 100, bytes_written: 0 }, 1),
      other(Entry.OUTCOME_KIND, { bytes_read: -1, bytes_written: 7 }, 2)
    ])
    assert.deepStrictEqual(s.cumulativeRead, [10, 110, 110])
    assert.deepStrictEqual(s.cumulativeWritten, [5, 5, 12])
  })

  it("keeps at most MAX_SERIES points of the byte series however long the session, each a running total, the last the total", () => {
    for (const count of [ReportModel.MAX_SERIES, ReportModel.MAX_SERIES + 1, 12_345, 100_000]) {
      const summarizer = ReportModel.summarizer()
      const totals: Array<number> = []
      for (let i = 0; i < count; i++) {
        // Every third entry an outcome with bytes of its own: the series is no straight line.
        const e = i % 3 === 0
          ? other(Entry.OUTCOME_KIND, { bytes_read: i % 1000, bytes_written: 1 }, i)
          : toolEntry("t", true, i)
        summarizer.add(e)
        totals.push((totals.at(-1) ?? 0) + (i % 3 === 0 ? i % 1000 : 10))
      }
      const s = summarizer.summary()
      assert.isAtMost(s.cumulativeRead.length, ReportModel.MAX_SERIES + 1, String(count))
      assert.strictEqual(s.cumulativeRead.length, s.cumulativeWritten.length)
      assert.strictEqual(s.read, totals.at(-1))
      assert.strictEqual(s.cumulativeRead.at(-1), totals.at(-1), "the series ends at the total")
      // Point k is the total after entry (k + 1) · stride, the last one excepted.
      s.cumulativeRead.slice(0, -1).forEach((v, k) => assert.strictEqual(v, totals[(k + 1) * s.stride - 1]))
    }
  })

  it("links sub-agent and parent sessions named by the metadata, valid ids only", () => {
    const meta = { updated_at: 0, data: { sub_sessions: ["s-1", { id: "s-2" }, "../etc", "<x>"], parent: "p-1" } }
    assert.deepStrictEqual(ReportModel.relatedSessions(meta), {
      parent: "p-1",
      subs: ["s-1", "s-2"],
      hooked: null,
      custody: null
    })
    assert.deepStrictEqual(ReportModel.relatedSessions(null), { parent: null, subs: [], hooked: null, custody: null })
    // The two records of one Claude Code session name each other.
    assert.deepStrictEqual(
      ReportModel.relatedSessions({ updated_at: 0, data: { hooked_session: "cch-1-a", custody_session: "../x" } }),
      { parent: null, subs: [], hooked: "cch-1-a", custody: null }
    )
  })
})
