/**
 * The pure parts: Claude Code's project-directory encoding, the session-id rule,
 * what a line says and the pairing of tool calls, the planner's fold and plans;
 * and an architecture test: the pure modules import no `node:*` and no file access.
 */
import { Entry } from "@session-journal/core"
import * as fc from "fast-check"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { Planner, ProjectDir, SessionIds, Transcript } from "../src/index.ts"
import * as F from "./Fixtures.ts"

const SEED = Number(process.env["SEED"] ?? Math.floor(Math.random() * 2 ** 31))

describe("ProjectDir", () => {
  it("replaces every character outside [A-Za-z0-9] by -, without collapsing runs", () => {
    expect(ProjectDir.encode("/Users/foo/src/github.com/omnara-ai/omnara")).toBe(
      "-Users-foo-src-github-com-omnara-ai-omnara"
    )
    expect(ProjectDir.encode("/home/user/my_example_workspace")).toBe("-home-user-my-example-workspace")
    expect(ProjectDir.encode("/Users/me/.agents")).toBe("-Users-me--agents")
    expect(ProjectDir.encode("C:\\git\\cc-plus")).toBe("C--git-cc-plus")
    expect(ProjectDir.encode("/p/Open Source/文档/😀")).toBe("-p-Open-Source------")
    expect(ProjectDir.encode(F.CWD)).toBe(F.PROJECT)
  })

  it("matches a long path by its first 200 characters and a hash suffix", () => {
    const cwd = "/" + "deep/".repeat(50)
    const name = ProjectDir.encode(cwd).slice(0, 200) + "-1kx9q2"
    expect(ProjectDir.matches(name, cwd)).toBe(true)
    expect(ProjectDir.matches(ProjectDir.encode(cwd).slice(0, 200), cwd)).toBe(false)
    expect(ProjectDir.matches("-home-dev-shop-app-v2", "/home/dev/shop_app.v2")).toBe(true)
    expect(ProjectDir.matches("-home-dev-shop-app-v2", "/home/dev/shop")).toBe(false)
  })
})

describe("SessionIds", () => {
  it("derives valid, distinct, stable ids from a transcript's place", () => {
    const places = [
      "7f3c2a10-5b6e-4d8f-9a01-2c3d4e5f6a7b.jsonl",
      "7f3c2a10-5b6e-4d8f-9a01-2c3d4e5f6a7b/subagents/agent-a4f9c2e.jsonl",
      "7f3c2a10-5b6e-4d8f-9a01-2c3d4e5f6a7b/subagents/agent-acompact-1234.jsonl",
      "agent-a4f9c2e.jsonl",
      "weird name with spaces.jsonl",
      "x".repeat(300) + ".jsonl",
      "s/subagents/agent-" + "y".repeat(100) + ".jsonl"
    ]
    const ids = places.map((p) => SessionIds.sessionId(SessionIds.classify("-home-dev", p)!))
    for (const id of ids) expect(Entry.isSessionId(id)).toBe(true)
    expect(new Set(ids).size).toBe(ids.length)
    expect(ids[0]).toMatch(/^cc-[0-9a-f]{8}-7f3c2a10-5b6e-4d8f-9a01-2c3d4e5f6a7b$/)
    expect(ids[1]).toBe(ids[0] + "_agent-a4f9c2e")
    expect(ids[4]).toMatch(/^cc-[0-9a-f]{8}-_[0-9a-f]{40}$/)
    // The same file in another project is another session.
    expect(SessionIds.sessionId(SessionIds.classify("-home-other", places[0]!)!)).not.toBe(ids[0])
    expect(SessionIds.classify("-p", "memory/notes.md")).toBeNull()
    expect(SessionIds.classify("-p", "s/tool-results/x.jsonl")).toBeNull()
  })
})

describe("Transcript", () => {
  it("reads tool calls, results and sub-agent links; says nothing about other lines", () => {
    const lines = F.mainLines(1)
    const infos = lines.map(Transcript.parse)
    const uses = infos.flatMap((i) => i.toolUses.map((u) => u.name))
    expect(uses).toEqual(["Read", "Bash", "mcp__github__create_issue", "Task"])
    expect(infos.flatMap((i) => i.toolResults).length).toBe(4)
    expect(infos.find((i) => i.agentLink !== undefined)?.agentLink).toEqual({
      agentId: F.AGENT,
      toolUseId: "toolu_task"
    })
    expect(Transcript.parse("this line is not JSON {")).toMatchObject({ type: null, toolUses: [] })
    expect(Transcript.parse("[1,2]").type).toBeNull()
    expect(
      Transcript.parse("{\"type\":\"assistant\",\"message\":{\"content\":[null,{\"type\":\"tool_use\"}]}}").toolUses
    ).toEqual([])
    expect(Transcript.serverOf("mcp__github__create_issue")).toBe("github")
    expect(Transcript.serverOf("mcp____x")).toBe("claude-code")
    expect(Transcript.serverOf("Bash")).toBe("claude-code")
  })

  it("pairs each tool_use once with its result, in the order of the results", () => {
    const pairing = Transcript.emptyPairing()
    const calls = F.mainLines(2).flatMap((l) => Transcript.pair(pairing, Transcript.parse(l), "main", 0))
    const counts: Record<string, number> = {}
    for (const c of calls) counts[c.tool_name] = (counts[c.tool_name] ?? 0) + 1
    expect(counts).toEqual(F.mainTools(2))
    expect(pairing.pending.size).toBe(0)
    // A repeated use or result of a paired id adds nothing.
    const again = F.mainLines(2).flatMap((l) => Transcript.pair(pairing, Transcript.parse(l), "main", 0))
    expect(again).toEqual([])
  })

  it(`pairUses completes the calls pair does, in its order, each with its input and cwd (property, SEED=${SEED})`, () => {
    // Lines from a few ids, so that uses repeat, results come twice, before their use or never.
    const id = fc.constantFrom("t1", "t2", "t3", "t4")
    const line = fc.oneof(
      fc.record({
        uses: fc.array(fc.tuple(id, fc.constantFrom("Bash", "Read", "", " Bad"), fc.string()), { maxLength: 3 }),
        cwd: fc.option(fc.constantFrom("/w", "/w/app"), { nil: undefined })
      }).map(({ cwd, uses }) =>
        JSON.stringify({
          type: "assistant",
          ...(cwd === undefined ? {} : { cwd }),
          message: {
            content: uses.map(([u, name, command]) => ({ type: "tool_use", id: u, name, input: { command } }))
          }
        })
      ),
      fc.array(id, { maxLength: 3 }).map((ids) =>
        JSON.stringify({
          type: "user",
          message: { content: ids.map((u) => ({ type: "tool_result", tool_use_id: u, content: "ok" })) }
        })
      )
    )
    fc.assert(
      fc.property(fc.array(line, { maxLength: 30 }), (lines) => {
        const a = Transcript.emptyPairing()
        const b = Transcript.emptyPairing()
        for (const text of lines) {
          const calls = Transcript.pair(a, Transcript.parse(text), "main", 0)
          const uses = Transcript.pairUses(b, Transcript.parseCalls(text))
          expect(uses.map(Transcript.toolNameOf)).toEqual(calls.map((c) => c.tool_name))
          expect(uses.map((u) => u.inputBytes)).toEqual(calls.map((c) => c.bytes_written))
          const value = JSON.parse(text) as { cwd?: string; message: { content: Array<{ input?: unknown }> } }
          expect(Transcript.parseCalls(text).toolUses.map((u) => u.call)).toEqual(
            value.message.content.flatMap((c) => c.input === undefined ? [] : [{ input: c.input, cwd: value.cwd }])
          )
          expect(Transcript.parse(text).toolUses.every((u) => u.call === undefined)).toBe(true)
        }
      }),
      { seed: SEED }
    )
  })

  it("a pairing stays bounded: the newest waiting uses and the newest paired ids", () => {
    const useLine = (ids: ReadonlyArray<string>) =>
      Transcript.parse(JSON.stringify({
        type: "assistant",
        message: { content: ids.map((id) => ({ type: "tool_use", id, name: "Bash", input: { command: id } })) }
      }))
    const resultLine = (ids: ReadonlyArray<string>) =>
      Transcript.parse(JSON.stringify({
        type: "user",
        message: { content: ids.map((id) => ({ type: "tool_result", tool_use_id: id, content: "ok" })) }
      }))
    const pairing = Transcript.emptyPairing()
    const waiting = 3 * Transcript.PAIRING_PENDING_MAX
    // Uses whose results never come, one line each and then one line of many.
    for (let i = 0; i < waiting / 2; i++) Transcript.pair(pairing, useLine([`w${i}`]), "main", 0)
    Transcript.pair(pairing, useLine(Array.from({ length: waiting / 2 }, (_, i) => `w${waiting / 2 + i}`)), "main", 0)
    expect(pairing.pending.size).toBe(Transcript.PAIRING_PENDING_MAX)
    // The newest waiting uses still pair; the oldest were let go of.
    expect(Transcript.pair(pairing, resultLine([`w${waiting - 1}`]), "main", 0)).toHaveLength(1)
    expect(Transcript.pair(pairing, resultLine(["w0"]), "main", 0)).toEqual([])
    // Many calls paired: only the newest ids are remembered, and a recent one
    // repeated still adds nothing.
    for (let i = 0; i < 3 * Transcript.PAIRING_PAIRED_MAX; i++) {
      Transcript.pair(pairing, useLine([`p${i}`]), "main", 0)
      Transcript.pair(pairing, resultLine([`p${i}`]), "main", 0)
    }
    expect(pairing.paired.size).toBe(Transcript.PAIRING_PAIRED_MAX)
    expect(pairing.pending.size).toBeLessThanOrEqual(Transcript.PAIRING_PENDING_MAX)
    const recent = `p${3 * Transcript.PAIRING_PAIRED_MAX - 1}`
    expect(Transcript.pair(pairing, useLine([recent]), "main", 0)).toEqual([])
    expect(Transcript.pair(pairing, resultLine([recent]), "main", 0)).toEqual([])
    // Adding to a pairing directly, then bounding it.
    for (let i = 0; i < 2 * Transcript.PAIRING_PAIRED_MAX; i++) pairing.paired.add(`x${i}`)
    Transcript.bound(pairing)
    expect(pairing.paired.size).toBe(Transcript.PAIRING_PAIRED_MAX)
    expect(pairing.paired.has(`x${2 * Transcript.PAIRING_PAIRED_MAX - 1}`)).toBe(true)
    expect(pairing.paired.has("x0")).toBe(false)
  })

  it("a call whose result line says Claude Code refused it is allowed: false (PROTOCOL.md (e))", () => {
    const use = JSON.stringify({
      type: "assistant",
      message: { content: [{ type: "tool_use", id: "t1", name: "Bash", input: { command: "x" } }] }
    })
    const result = (extra: Record<string, unknown>) =>
      JSON.stringify({
        type: "user",
        message: { content: [{ type: "tool_result", tool_use_id: "t1", content: "Error: no", is_error: true }] },
        ...extra
      })
    const allowedOf = (extra: Record<string, unknown>) => {
      const pairing = Transcript.emptyPairing()
      return [use, result(extra)].flatMap((l) => Transcript.pair(pairing, Transcript.parse(l), "main", 0)).map((c) =>
        c.allowed
      )
    }
    // A hook's deny, and Claude Code's own permission rules, as the CLI writes them.
    expect(allowedOf({
      toolDenialKind: "permission-rule",
      permissionDecision: { decision: "reject", source: "hook", reasonType: "hook", reasonCode: "hook:PreToolUse" }
    })).toEqual([false])
    expect(allowedOf({ toolDenialKind: "user-rejected", permissionDecision: { decision: "reject", source: "config" } }))
      .toEqual([false])
    // Either field alone says it.
    expect(allowedOf({ permissionDecision: { decision: "reject" } })).toEqual([false])
    expect(allowedOf({ toolDenialKind: "anything" })).toEqual([false])
    // A call that ran, or fields of another shape, say nothing of a refusal (an error is not one).
    expect(allowedOf({ permissionDecision: { decision: "accept", source: "config" } })).toEqual([true])
    expect(allowedOf({})).toEqual([true])
    expect(allowedOf({ permissionDecision: "reject", toolDenialKind: null })).toEqual([true])
  })

  it("keeps bytes that are not UTF-8 (and a byte-order mark) exactly", () => {
    const decoder = Transcript.strictDecoder()
    for (
      const bytes of [
        new Uint8Array([0xff, 0xfe, 0x41]),
        new Uint8Array([0xef, 0xbb, 0xbf, 0x7b, 0x7d]),
        new Uint8Array([])
      ]
    ) {
      const value = Transcript.decodeLine(bytes, decoder)
      expect(Array.from(Transcript.lineBytes(value))).toEqual(Array.from(bytes))
    }
  })
})

describe("Planner", () => {
  const entry = (sequence: number, kind: string, payload: unknown): Entry.Entry =>
    ({ sequence, prev_hash: "", entry_hash: `h${sequence}`, timestamp_secs: 0, kind, payload }) as Entry.Entry
  const file = ["a", "b", "c"].map((text) => ({ text }))
  const fold = (entries: ReadonlyArray<Entry.Entry>, lines = file) => {
    const state = Planner.empty()
    for (const e of entries) Planner.observe(state, e, lines)
    return state
  }

  it("extends a prefix, leaves an equal copy, diverges at the first differing or missing line", () => {
    expect(Planner.plan(fold([]), 3)).toEqual({ _tag: "Extend", from: 0 })
    const two = [
      entry(0, Planner.LINE_KIND, { n: 1, line: "a" }),
      entry(1, "tool", {}),
      entry(2, Planner.LINE_KIND, { n: 2, line: "b" })
    ]
    expect(Planner.plan(fold(two), 3)).toEqual({ _tag: "Extend", from: 2 })
    const changed = fold(two, [{ text: "a" }, { text: "B" }, { text: "c" }])
    expect(Planner.plan(changed, 3)).toMatchObject({ _tag: "Diverge", line: 2, reason: "changed" })
    expect(Planner.plan(fold(two), 1)).toMatchObject({ _tag: "Diverge", line: 2, reason: "shorter" })
    const all = [...two, entry(3, Planner.LINE_KIND, { n: 3, line: "c" })]
    expect(Planner.plan(fold(all), 3)).toEqual({ _tag: "Unchanged" })
    // A line entry out of order is a divergence at its place.
    expect(Planner.plan(fold([entry(0, Planner.LINE_KIND, { n: 2, line: "a" })]), 3)).toMatchObject({
      _tag: "Diverge",
      line: 1
    })
  })

  it("after a divergence the current version is the kept prefix and what follows", () => {
    const entries = [
      entry(0, Planner.LINE_KIND, { n: 1, line: "a" }),
      entry(1, Planner.LINE_KIND, { n: 2, line: "x" }),
      entry(2, Planner.DIVERGENCE_KIND, { line: 2, journaled_lines: 2, file_lines: 3, reason: "changed" }),
      entry(3, Planner.LINE_KIND, { n: 2, line: "b" })
    ]
    const state = fold(entries)
    expect(state.lines).toBe(2)
    expect(state.refs.map((r) => r.sequence)).toEqual([0, 3])
    expect(Planner.plan(state, 3)).toEqual({ _tag: "Extend", from: 2 })
    const restorer = new Planner.Restorer()
    for (const e of entries) restorer.push(e)
    expect(new TextDecoder().decode(Planner.bytesOf(restorer.lines))).toBe("a\nb\n")
  })
})

describe("architecture", () => {
  it("the pure modules import no node:* and no file access", () => {
    const src = path.join(import.meta.dirname, "..", "src")
    for (
      const name of [
        "ProjectDir.ts",
        "SessionIds.ts",
        "Transcript.ts",
        "Planner.ts",
        "Errors.ts",
        "internal/storeIndex.ts"
      ]
    ) {
      const text = fs.readFileSync(path.join(src, name), "utf8")
      expect(text, name).not.toMatch(/from "node:|@session-journal\/node|internal\/source/)
    }
    // No module of the API touches a file: custody's access goes through
    // internal/source.ts, the doors' (settings, secrets, scans) through their own
    // internal modules.
    for (const name of fs.readdirSync(src).filter((n) => n.endsWith(".ts"))) {
      const text = fs.readFileSync(path.join(src, name), "utf8")
      expect(text, name).not.toMatch(/from "node:fs|@session-journal\/node/)
    }
  })
})
