/**
 * `session-journal policy check` and `policy test`, run as the real binary: a bad
 * file is exit 2 naming the JSON path and what was expected; `test` replays a
 * stored session without writing anything, lists each call the policy would deny
 * with its guard, and exits 5 when there is one.
 */
import { assert, describe, it } from "@effect/vitest"
import { JournalSessionStore } from "@session-journal/claude-code"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll } from "vitest"
import { cleanup, filesUnder, hasNodeAdapter, run, tempDir } from "./Run.ts"

const nodeAdapter = await hasNodeAdapter()

afterAll(cleanup)

const write = (dir: string, name: string, text: string): string => {
  const file = path.join(dir, name)
  fs.writeFileSync(file, text)
  return file
}

// Every file of the journal with the SHA-256 of its bytes and its mode.
const fingerprint = (dir: string): Array<string> =>
  filesUnder(dir).map((f) => {
    const p = path.join(dir, f)
    return `${f} ${fs.statSync(p).mode} ${crypto.createHash("sha256").update(fs.readFileSync(p)).digest("hex")}`
  })

const tool = (name: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ tool_name: name, server_id: "claude-code", agent_id: "main", ...extra })

describe("policy check", () => {
  it("a good file: exit 0 and one line naming its guards", async () => {
    const dir = tempDir()
    const file = write(
      dir,
      "p.json",
      `[{"maxStreak":3},{"forbiddenTransitions":[["Write","Bash"]]},{"denyList":["rm"]}]`
    )
    const r = await run(["policy", "check", file])
    assert.strictEqual(r.code, 0, r.stderr)
    assert.strictEqual(
      r.stdout,
      `${file}: ok, 3 guards: all(maxStreak(3), forbiddenTransitions([["Write","Bash"]]), denyList(["rm"]))\n`
    )
    const j = await run(["--json", "policy", "check", file])
    assert.deepStrictEqual(JSON.parse(j.stdout), {
      file,
      guards: 3,
      policy: "all(maxStreak(3), forbiddenTransitions([[\"Write\",\"Bash\"]]), denyList([\"rm\"]))"
    })
  })

  it("a bad file: exit 2, every JSON path named with what was expected", async () => {
    const dir = tempDir()
    const file = write(dir, "bad.json", `{"all":[{"maxStreak":1},{"denyList":[]},{"maxStreak":-1},{"maxStreek":2}]}`)
    const r = await run(["policy", "check", file])
    assert.strictEqual(r.code, 2)
    assert.strictEqual(r.stdout, "")
    assert.include(r.stderr, "$.all[2].maxStreak: expected a non-negative integer up to 2^53 - 1, got -1")
    assert.include(r.stderr, "$.all[3].maxStreek: unknown key")
    assert.strictEqual(r.stderr.trim().split("\n").length, 1)
  })

  it("not JSON, not UTF-8, too large, missing: exit 2 each, saying which", async () => {
    const dir = tempDir()
    const cases: Array<[string, RegExp]> = [
      [write(dir, "a.json", `{"maxStreak":`), /\$: expected JSON/],
      [write(dir, "b.json", "x"), /\$: expected JSON/],
      [path.join(dir, "missing.json"), /cannot read it: ENOENT/],
      [write(dir, "d.json", " ".repeat(1024 * 1024 + 1)), /longer than the bound/]
    ]
    fs.writeFileSync(path.join(dir, "c.json"), Buffer.from([0x7b, 0xff, 0x7d]))
    cases.push([path.join(dir, "c.json"), /UTF-8/])
    const ran = await Promise.all(cases.map(([file]) => run(["policy", "check", file])))
    cases.forEach(([file, pattern], i) => {
      assert.strictEqual(ran[i]!.code, 2, `${file}: ${ran[i]!.stderr}`)
      assert.match(ran[i]!.stderr, pattern)
    })
  })
})

describe.runIf(nodeAdapter)("policy test", () => {
  const session = async (dir: string, lines: ReadonlyArray<string>) => {
    const r = await run(["--dir", dir, "import", "s1", "-"], { input: lines.join("\n") + "\n" })
    assert.strictEqual(r.code, 0, r.stderr)
  }

  it("lists the calls it would deny with their guards, exit 5, and writes nothing", async () => {
    const dir = tempDir()
    const journal = path.join(dir, "j")
    await session(journal, [
      tool("Read", { bytes_read: 100 }),
      JSON.stringify({ kind: "message", payload: { role: "user", text: "go" } }),
      tool("Bash"),
      tool("Bash"),
      tool("Bash"),
      tool("Write", { bytes_written: 10 }),
      tool("Bash", { allowed: false }),
      tool("Task", { agent_id: "sub-1", delegation_depth: 1 })
    ])
    const file = write(
      dir,
      "p.json",
      `[{"maxStreak":2},{"forbiddenTransitions":[["Write","Bash"]]},{"maxDelegationDepth":0}]`
    )
    const before = fingerprint(journal)
    const r = await run(["--dir", journal, "policy", "test", file, "s1"])
    assert.strictEqual(r.code, 5, r.stderr)
    assert.strictEqual(
      r.stdout,
      [
        "#4 Bash (agent main): Bash would run more than 2 times in a row [maxStreak(2)]",
        "#6 Bash (agent main, recorded denied): Bash may not follow Write [forbiddenTransitions([[\"Write\",\"Bash\"]])]",
        "#7 Task (agent sub-1): delegation depth 1 exceeds 0 [maxDelegationDepth(0)]",
        "s1: 3 of 7 calls would be denied (by maxStreak(2), forbiddenTransitions([[\"Write\",\"Bash\"]]), maxDelegationDepth(0)) under all(maxStreak(2), forbiddenTransitions([[\"Write\",\"Bash\"]]), maxDelegationDepth(0))",
        ""
      ].join("\n")
    )
    assert.strictEqual(r.stderr, "session-journal: the policy would have denied 3 of 7 calls.\n")
    assert.deepStrictEqual(fingerprint(journal), before)

    const j = await run(["--dir", journal, "--json", "policy", "test", file, "s1"])
    assert.strictEqual(j.code, 5)
    const lines = j.stdout.trim().split("\n").map((l) => JSON.parse(l))
    assert.deepStrictEqual(lines[0], {
      type: "denied",
      sequence: 4,
      tool_name: "Bash",
      agent_id: "main",
      recorded_allowed: true,
      guard: "maxStreak(2)",
      reason: "Bash would run more than 2 times in a row"
    })
    assert.deepStrictEqual(lines.at(-1), {
      type: "summary",
      session: "s1",
      policy: "all(maxStreak(2), forbiddenTransitions([[\"Write\",\"Bash\"]]), maxDelegationDepth(0))",
      calls: 7,
      denied: 3,
      asked: 0,
      unjudged: 0
    })
    assert.deepStrictEqual(fingerprint(journal), before)
  })

  it("budgets count every earlier call: maxBytesRead and maxInvocations deny from the call that passes them", async () => {
    const dir = tempDir()
    const journal = path.join(dir, "j")
    await session(journal, [tool("Read", { bytes_read: 60 }), tool("Read", { bytes_read: 60 }), tool("Grep")])
    const bytes = await run(["--dir", journal, "policy", "test", write(dir, "b.json", `{"maxBytesRead":100}`), "s1"])
    assert.strictEqual(bytes.code, 5)
    assert.match(bytes.stdout, /^#1 Read \(agent main\): bytes read would exceed 100 \[maxBytesRead\(100\)\]\n/)
    const count = await run(["--dir", journal, "policy", "test", write(dir, "c.json", `{"maxInvocations":2}`), "s1"])
    assert.match(count.stdout, /^#2 Grep \(agent main\): invocations would exceed 2 \[maxInvocations\(2\)\]\n/)
  })

  it("a policy that denies nothing: exit 0; a bad policy or a missing session: exit 2", async () => {
    const dir = tempDir()
    const journal = path.join(dir, "j")
    await session(journal, [tool("Read"), tool("Bash")])
    const ok = await run(["--dir", journal, "policy", "test", write(dir, "ok.json", `{"maxStreak":5}`), "s1"])
    assert.strictEqual(ok.code, 0, ok.stderr)
    assert.strictEqual(ok.stdout, "s1: 0 of 2 calls would be denied under maxStreak(5)\n")
    const bad = await run(["--dir", journal, "policy", "test", write(dir, "bad.json", `{"allowList":"Read"}`), "s1"])
    assert.strictEqual(bad.code, 2)
    assert.include(bad.stderr, `$.allowList: expected an array of tool names, got "Read"`)
    const missing = await run(["--dir", journal, "policy", "test", path.join(dir, "ok.json"), "nosuch"])
    assert.strictEqual(missing.code, 2)
    assert.include(missing.stderr, "not found")
  })
})

describe("policy check of the keys that see calls", () => {
  it("a key an object repeats: exit 2 naming it; a tool name no agent spells so: a warning, exit 0", async () => {
    const dir = tempDir()
    const twice = await run(["policy", "check", write(dir, "twice.json", `{"all":[{"maxStreak":1,"maxStreak":100}]}`)])
    assert.strictEqual(twice.code, 2)
    assert.include(twice.stderr, "$.all[0].maxStreak: the key \"maxStreak\" appears more than once")
    const bad = await run(["policy", "check", write(dir, "bad.json", `{"deny":["Bash(rm -rf *)","Read(//x"]}`)])
    assert.strictEqual(bad.code, 2)
    assert.include(bad.stderr, "$.deny[1]")
    const named = write(dir, "named.json", `[{"denyList":["bash","mcp__github"]},{"ask":"Bash(git push *)"}]`)
    const warned = await run(["policy", "check", named])
    assert.strictEqual(warned.code, 0, warned.stderr)
    assert.match(warned.stdout, /: ok, 2 guards: /)
    assert.include(warned.stderr, `warning: ${named}: $[0].denyList[0]: no agent calls a tool "bash"`)
    assert.include(warned.stderr, `[0].denyList[1]: "mcp__github" names an MCP server`)
  })
})

// A PreToolUse hook input of a Bash call.
const event = (command: string) =>
  JSON.stringify({
    session_id: "s",
    cwd: "/tmp/w",
    hook_event_name: "PreToolUse",
    tool_name: "Bash",
    tool_input: { command },
    tool_use_id: "toolu_1"
  })

describe("the README's policy", () => {
  it("is a valid policy with no warning, and denies what it says it denies", async () => {
    const readme = fs.readFileSync(path.join(import.meta.dirname, "..", "..", "..", "README.md"), "utf8")
    const block = readme.split("```json\n").map((b) => b.slice(0, b.indexOf("```"))).find((b) =>
      b.includes("maxTokens")
    )
    assert.isDefined(block)
    const dir = tempDir()
    const file = write(dir, "readme.json", block!)
    const checked = await run(["policy", "check", file])
    assert.strictEqual(checked.code, 0, checked.stderr)
    assert.strictEqual(checked.stderr, "")
    const verdict = async (command: string) =>
      JSON.parse((await run(["--json", "policy", "explain", file, "--event", event(command), "--tokens", "10"])).stdout)
        .verdict
    assert.strictEqual(await verdict("ls && rm -rf /"), "deny")
    assert.strictEqual(await verdict("git push origin main"), "ask")
    assert.strictEqual(await verdict("npm test"), "allow")
  })
})

describe("policy explain", () => {
  it("says which rule decides and every rule's verdict; reads the event from stdin too; writes nothing", async () => {
    const dir = tempDir()
    const file = write(dir, "p.json", `[{"deny":"Bash(rm -rf *)"},{"ask":"Bash(git push *)"},{"maxStreak":9}]`)
    const r = await run(["policy", "explain", file, "--event", event("cd /tmp && rm -rf /")])
    assert.strictEqual(r.code, 0, r.stderr)
    assert.strictEqual(
      r.stdout,
      [
        `Bash: deny by deny("Bash(rm -rf *)"): the command "rm -rf /" of Bash matches deny pattern Bash(rm -rf *)`,
        `  deny  deny(["Bash(rm -rf *)"]): the command "rm -rf /" of Bash matches deny pattern Bash(rm -rf *)`,
        `  allow ask(["Bash(git push *)"])`,
        `  allow maxStreak(9)`,
        ""
      ].join("\n")
    )
    const asked = await run(["--json", "policy", "explain", file, "--event", "-"], { input: event("git push -f") })
    assert.strictEqual(asked.code, 0, asked.stderr)
    const j = JSON.parse(asked.stdout)
    assert.strictEqual(j.verdict, "ask")
    assert.strictEqual(j.decided_by, `ask("Bash(git push *)")`)
    assert.deepStrictEqual(j.rules.map((x: { verdict: string }) => x.verdict), ["allow", "ask", "allow"])
    const notPre = await run([
      "policy",
      "explain",
      file,
      "--event",
      `{"session_id":"s","cwd":"/","hook_event_name":"Stop"}`
    ])
    assert.strictEqual(notPre.code, 2)
    assert.include(notPre.stderr, "a PreToolUse hook input is needed")
  })

  it.runIf(nodeAdapter)("on a stored session, decides on its counters", async () => {
    const dir = tempDir()
    const journal = path.join(dir, "j")
    const imported = await run(["--dir", journal, "import", "s1", "-"], {
      input: [tool("Bash"), tool("Bash")].join("\n") + "\n"
    })
    assert.strictEqual(imported.code, 0, imported.stderr)
    const file = write(dir, "p.json", `{"maxInvocations":2}`)
    const before = fingerprint(journal)
    const fresh = await run(["--dir", journal, "policy", "explain", file, "--event", event("ls")])
    assert.match(fresh.stdout, /^Bash: allow/)
    const r = await run(["--dir", journal, "policy", "explain", file, "--event", event("ls"), "--session", "s1"])
    assert.strictEqual(r.code, 0, r.stderr)
    assert.match(r.stdout, /^Bash: deny by maxInvocations\(2\): invocations would exceed 2/)
    assert.deepStrictEqual(fingerprint(journal), before)
  })
})

describe.runIf(nodeAdapter)("policy test with the calls' inputs", () => {
  it("judges recorded inputs, and names per rule the calls it could not judge without theirs", async () => {
    const dir = tempDir()
    const journal = path.join(dir, "j")
    const decision = (seq: number, command: string) =>
      JSON.stringify({
        kind: "claude-code.decision",
        payload: { tool_sequence: seq, tool_use_id: `t${seq}`, tool_name: "Bash", tool_input: { command }, cwd: "/w" }
      })
    const imported = await run(["--dir", journal, "import", "s1", "-"], {
      input: [
        tool("Bash"),
        decision(0, "echo a; rm -rf /"),
        tool("Bash"),
        tool("Bash"),
        decision(3, "ls"),
        tool("Bash"),
        decision(5, "npm test")
      ].join("\n") + "\n"
    })
    assert.strictEqual(imported.code, 0, imported.stderr)
    const file = write(
      dir,
      "p.json",
      `[{"deny":"Bash(rm -rf *)"},{"maxInvocations":1,"of":"Bash(npm test*)"},{"maxStreak":9}]`
    )
    const r = await run(["--dir", journal, "policy", "test", file, "s1"])
    assert.strictEqual(r.code, 5, r.stderr)
    const lines = r.stdout.trim().split("\n")
    assert.strictEqual(
      lines[0],
      `#0 Bash (agent main): the command "rm -rf /" of Bash matches deny pattern Bash(rm -rf *) [deny("Bash(rm -rf *)")]`
    )
    assert.include(
      lines,
      `could not judge 1 call against deny(["Bash(rm -rf *)"]): their inputs were not recorded (#2)`
    )
    assert.include(
      lines,
      `could not judge 1 call against maxInvocations(1, of: ["Bash(npm test*)"]): their inputs were not recorded (#2)`
    )
    // The call without its input counted against the npm test limit (failing closed), so the recorded npm test
    // is over it: the report names the call that rule could not judge.
    assert.include(
      lines,
      `#5 Bash (agent main): invocations of ["Bash(npm test*)"] would exceed 1 [maxInvocations(1, of: ["Bash(npm test*)"])]`
    )
    assert.match(lines.at(-1)!, /^s1: 2 of 4 calls would be denied \(by .*\), 1 could not be judged under /)

    // An MCP gateway's decision carries the arguments the same way.
    const mcp = await run(["--dir", journal, "import", "m1", "-"], {
      input: [
        tool("mcp__gh__create_issue", { server_id: "gh" }),
        JSON.stringify({
          kind: "mcp.decision",
          payload: { tool_sequence: 0, tool_name: "mcp__gh__create_issue", tool_input: { title: "leak the secret" } }
        }),
        tool("mcp__gh__create_issue", { server_id: "gh" }),
        JSON.stringify({
          kind: "mcp.decision",
          payload: { tool_sequence: 2, tool_name: "mcp__gh__create_issue", tool_input: { title: "a bug" } }
        })
      ].join("\n") + "\n"
    })
    assert.strictEqual(mcp.code, 0, mcp.stderr)
    const gh = write(dir, "gh.json", `{"deny":"mcp__gh__create_issue(title:*secret*)"}`)
    const judged = await run(["--dir", journal, "policy", "test", gh, "m1"])
    assert.strictEqual(judged.code, 5, judged.stderr)
    assert.match(judged.stdout, /^#0 mcp__gh__create_issue \(agent main\): the value "leak the secret"/)
    assert.match(judged.stdout, /m1: 1 of 2 calls would be denied/)

    // Custody's copy of a transcript: the input is in the tool_use line, the tool entry after its result.
    const line = (n: number, value: unknown) =>
      JSON.stringify({ kind: "claude-code.line", payload: { n, line: JSON.stringify(value) } })
    const use = (id: string, command: string) => ({
      type: "assistant",
      cwd: "/w",
      message: { content: [{ type: "tool_use", id, name: "Bash", input: { command } }] }
    })
    const result = (id: string) => ({
      type: "user",
      message: { content: [{ type: "tool_result", tool_use_id: id, content: "ok" }] }
    })
    const custody = await run(["--dir", journal, "import", "cc1", "-"], {
      input: [
        line(1, use("u1", "ls")),
        line(2, result("u1")),
        tool("Bash"),
        line(3, use("u2", "cd / && rm -rf tmp")),
        line(4, result("u2")),
        tool("Bash")
      ].join("\n") + "\n"
    })
    assert.strictEqual(custody.code, 0, custody.stderr)
    const rm = write(dir, "rm.json", `{"deny":"Bash(rm -rf *)"}`)
    const replayed = await run(["--dir", journal, "policy", "test", rm, "cc1"])
    assert.strictEqual(replayed.code, 5, replayed.stderr)
    assert.match(replayed.stdout, /^#5 Bash \(agent main\): the command "rm -rf tmp" of Bash matches/)
    assert.match(replayed.stdout, /cc1: 1 of 2 calls would be denied \(by deny\("Bash\(rm -rf \*\)"\)\) under /)
  })
})

describe.runIf(nodeAdapter)("policy test of a transcript's copy: the Agent SDK store's, custody's", () => {
  const SID = "5d1c0f7e-0b6a-4c2e-9d3f-2a1b0c9d8e7f"
  let uuid = 0
  const assistant = (
    id: string,
    tokens: number,
    uses: ReadonlyArray<readonly [string, string, unknown]>,
    cwd = "/w"
  ) => ({
    type: "assistant",
    uuid: `a${uuid++}`,
    sessionId: SID,
    cwd,
    message: {
      id,
      role: "assistant",
      content: uses.map(([use, name, input]) => ({ type: "tool_use", id: use, name, input })),
      usage: { input_tokens: tokens, output_tokens: 0 }
    }
  })
  const results = (...ids: ReadonlyArray<string>) => ({
    type: "user",
    uuid: `u${uuid++}`,
    sessionId: SID,
    message: { role: "user", content: ids.map((id) => ({ type: "tool_result", tool_use_id: id, content: "ok" })) }
  })
  const stored = async (
    dir: string,
    key: JournalSessionStore.SessionKey,
    entries: ReadonlyArray<JournalSessionStore.SessionStoreEntry>
  ) => {
    const store = await JournalSessionStore.open({ dir })
    try {
      await store.append(key, entries.map((e) => ({ ...e })))
    } finally {
      await store.close()
    }
    return JournalSessionStore.sessionId(key)
  }

  it("judges each call with its tool_use's input, cwd and the tokens so far; after a spawn, tokens are unknown", async () => {
    const dir = tempDir()
    const key = { projectKey: "-w", sessionId: SID }
    const id = await stored(dir, key, [
      { type: "user", uuid: `u${uuid++}`, sessionId: SID, message: { role: "user", content: "go" } },
      assistant("m1", 100, [["t1", "Bash", { command: "ls &&  rm  -rf build" }]]),
      results("t1"),
      // A path that leaves its cwd through `..` is judged where it lands.
      assistant("m2", 1000, [["t2", "Read", { file_path: "../secret/key" }]], "/w/app"),
      results("t2"),
      assistant("m3", 1, [["t3", "Task", { prompt: "review", description: "review" }]]),
      results("t3"),
      assistant("m4", 1, [["t4", "Bash", { command: "echo hi" }]]),
      results("t4")
    ])
    const file = write(dir, "p.json", `[{"deny":"Bash(rm -rf *)"},{"deny":"Read(//w/secret/**)"},{"maxTokens":500}]`)
    const r = await run(["--dir", dir, "policy", "test", file, id])
    assert.strictEqual(r.code, 5, r.stderr)
    const lines = r.stdout.trim().split("\n")
    assert.deepStrictEqual(lines.slice(0, 3), [
      `#3 Bash (agent main): the command "rm -rf build" of Bash matches deny pattern Bash(rm -rf *) [deny("Bash(rm -rf *)")]`,
      `#6 Read (agent main): the path "/w/secret/key" of Read matches deny pattern Read(//w/secret/**) [deny("Read(//w/secret/**)")]`,
      `#9 Task (agent main): the agent used 1101 tokens, the budget is 500 [maxTokens(500)]`
    ])
    assert.include(lines, "could not judge 1 call against maxTokens(500): the tokens used were not recorded (#12)")
    assert.match(lines.at(-1)!, new RegExp(`^${id}: 3 of 4 calls would be denied .*, 1 could not be judged under `))
  })

  it("a sub-agent's copy: its calls judged by their inputs, its tokens unknown", async () => {
    const dir = tempDir()
    const key = { projectKey: "-w", sessionId: SID, subpath: "subagents/agent-abc" }
    const id = await stored(dir, key, [
      { type: "user", uuid: `u${uuid++}`, sessionId: SID, isSidechain: true, message: { role: "user", content: "x" } },
      assistant("s1", 10, [["v1", "Bash", { command: "sh -c 'rm -rf /'" }]]),
      results("v1")
    ])
    const file = write(dir, "p.json", `[{"deny":"Bash(rm -rf *)"},{"maxTokens":500}]`)
    const r = await run(["--dir", dir, "--json", "policy", "test", file, id])
    assert.strictEqual(r.code, 5, r.stderr)
    const lines = r.stdout.trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>)
    assert.deepInclude(lines, { type: "unjudged", rule: "maxTokens(500)", lacking: "tokens", calls: 1, sequences: [3] })
    assert.strictEqual(lines[0]!["guard"], `deny("Bash(rm -rf *)")`)
    assert.strictEqual(lines[0]!["agent_id"], "abc")
  })

  it("pairs a call with its tool_use as the tool entry was made: a repeated, already paired tool_use is skipped", async () => {
    const dir = tempDir()
    const key = { projectKey: "-w", sessionId: SID }
    // t1 comes again beside t2, and both results again: only t2 makes a tool entry, and it is the rm.
    const id = await stored(dir, key, [
      assistant("m1", 1, [["t1", "Bash", { command: "ls" }]]),
      results("t1"),
      assistant("m2", 1, [["t1", "Bash", { command: "ls" }], ["t2", "Bash", { command: "rm -rf /" }]]),
      results("t1", "t2")
    ])
    const file = write(dir, "p.json", `{"deny":"Bash(rm -rf *)"}`)
    const r = await run(["--dir", dir, "policy", "test", file, id])
    assert.strictEqual(r.code, 5, r.stderr)
    assert.match(r.stdout, /^#5 Bash \(agent main\): the command "rm -rf \/" of Bash matches deny pattern/)
    assert.match(r.stdout, new RegExp(`${id}: 1 of 2 calls would be denied`))
  })
})

describe.runIf(nodeAdapter)("policy test of the other doors' sessions", () => {
  it("an MCP gateway's: an outcome's bytes count in a limit whose of judges the call's arguments", async () => {
    const dir = tempDir()
    const call = (sequence: number, file: string) => [
      tool("mcp__fs__read", { server_id: "fs" }),
      JSON.stringify({
        kind: "mcp.decision",
        payload: {
          jsonrpc_id: sequence,
          tool_sequence: sequence,
          tool_name: "mcp__fs__read",
          tool_input: { path: file }
        }
      }),
      JSON.stringify({
        kind: "tool.outcome",
        payload: { jsonrpc_id: sequence, tool_sequence: sequence, tool_name: "mcp__fs__read", bytes_read: 100 }
      })
    ]
    const imported = await run(["--dir", dir, "import", "m1", "-"], {
      input: [...call(0, "secret.txt"), ...call(3, "notes.txt"), ...call(6, "secret.txt")].join("\n") + "\n"
    })
    assert.strictEqual(imported.code, 0, imported.stderr)
    const file = write(dir, "p.json", `{"maxBytesRead":50,"of":"mcp__fs__read(path:secret*)"}`)
    const r = await run(["--dir", dir, "policy", "test", file, "m1"])
    assert.strictEqual(r.code, 5, r.stderr)
    assert.deepStrictEqual(r.stdout.trim().split("\n"), [
      `#6 mcp__fs__read (agent main): bytes read of ["mcp__fs__read(path:secret*)"] would exceed 50 [maxBytesRead(50, of: ["mcp__fs__read(path:secret*)"])]`,
      `m1: 1 of 3 calls would be denied (by maxBytesRead(50, of: ["mcp__fs__read(path:secret*)"])) under maxBytesRead(50, of: ["mcp__fs__read(path:secret*)"])`
    ])
  })
})
