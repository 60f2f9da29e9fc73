/**
 * One story per agent session: a Claude Code session recorded by the hooks
 * (`Hook.handle`), its transcript taken into custody (`claude-code archive`, a
 * main and a sub-agent transcript) and its Agent SDK store copy
 * (`JournalSessionStore`) are grouped under Claude Code's session id in `list`;
 * `stats` of any of them names the others.
 */
import { assert, describe, it } from "@effect/vitest"
import { JournalSessionStore } from "@session-journal/claude-code"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll } from "vitest"
import * as Stories from "../src/viewer/Stories.ts"
import { SID, sub, writeHooked } from "./hookedSession.ts"
import { cleanup, run, tempDir } from "./Run.ts"

const line = (record: Record<string, unknown>) =>
  JSON.stringify({ sessionId: SID, timestamp: "2025-11-29T07:06:40.000Z", ...record })

describe("one story per agent session", () => {
  let dir = ""
  let hooked = ""
  beforeAll(async () => {
    dir = tempDir()
    hooked = (await writeHooked(dir)).session
    // Claude Code's transcripts of the session: the main one and a sub-agent's.
    const project = path.join(tempDir(), "-tmp-otel-work")
    fs.mkdirSync(path.join(project, SID, "subagents"), { recursive: true })
    fs.writeFileSync(
      path.join(project, `${SID}.jsonl`),
      line({ type: "user", uuid: "u1", message: { role: "user", content: "fix the build" } }) + "\n"
    )
    fs.writeFileSync(
      path.join(project, SID, "subagents", `agent-${sub.agent_id}.jsonl`),
      line({
        type: "user",
        uuid: "s1",
        isSidechain: true,
        agentId: sub.agent_id,
        message: { role: "user", content: "review" }
      }) +
        "\n"
    )
    const archived = await run(["--dir", dir, "claude-code", "archive", "--source", path.dirname(project)])
    assert.strictEqual(archived.code, 0, archived.stderr)
    // The Agent SDK's store copy of it.
    const store = await JournalSessionStore.open({ dir })
    await store.append({ projectKey: "-tmp-otel-work", sessionId: SID }, [{ type: "user", uuid: "u1", sessionId: SID }])
    await store.close()
    // And a session of nothing of the kind.
    const plain = await run(["--dir", dir, "record", "plain", "--tool", "t", "--server", "s", "--agent", "a"])
    assert.strictEqual(plain.code, 0, plain.stderr)
  })
  afterAll(() => cleanup())

  it("list groups the hooked, custody and store sessions under Claude Code's session id", async () => {
    const json = await run(["--dir", dir, "--json", "list"])
    assert.strictEqual(json.code, 0, json.stderr)
    const sessions = (JSON.parse(json.stdout) as {
      sessions: Array<{ id: string; agent_session?: string; role?: string }>
    }).sessions
    const roles = sessions.filter((s) => s.agent_session === SID).map((s) => `${s.role} ${s.id.split("-")[0]}`).sort()
    assert.deepStrictEqual(roles, ["custody cc", "custody cc", "hooked cch", "store ccs"])
    assert.isUndefined(sessions.find((s) => s.id === "plain")!.agent_session)

    const text = await run(["--dir", dir, "list"])
    assert.strictEqual(text.code, 0, text.stderr)
    const story = text.stdout.split("\n").find((l) => l.startsWith(`${SID}  `))
    assert.isDefined(story, text.stdout)
    assert.include(story!, `hooked ${hooked}`)
    assert.match(story!, /custody cc-\S+ · \+1 sub-agent · store ccs-\S+/)
  })

  it("stats of any of them names the others", async () => {
    const sessions = (JSON.parse((await run(["--dir", dir, "--json", "list"])).stdout) as {
      sessions: Array<{ id: string; agent_session?: string }>
    }).sessions.filter((s) => s.agent_session === SID)
    for (const { id } of sessions) {
      const r = await run(["--dir", dir, "--json", "stats", id])
      assert.strictEqual(r.code, 0, r.stderr)
      const doc = JSON.parse(r.stdout) as { agent_session: { id: string; sessions: Array<{ id: string }> } }
      assert.strictEqual(doc.agent_session.id, SID)
      assert.deepStrictEqual(doc.agent_session.sessions.map((s) => s.id).sort(), sessions.map((s) => s.id).sort())
    }
    const text = await run(["--dir", dir, "stats", hooked])
    assert.include(text.stdout, `agent session    ${SID} (this is its hooked session)`)
  })

  it("memberOf reads each kind's metadata, and nothing else", () => {
    assert.deepStrictEqual(Stories.memberOf("x", { updated_at: 1, data: { claude_code_session: "s" } }), {
      id: "x",
      agentSession: "s",
      role: "hooked",
      subAgent: null
    })
    assert.strictEqual(
      Stories.memberOf("x", { updated_at: 1, data: { claude_session_id: "s", transcript: "subagent", agent_id: "a" } })
        ?.subAgent,
      "a"
    )
    assert.strictEqual(
      Stories.memberOf("x", { updated_at: 1, data: { session_store: { session_id: "s" } } })?.role,
      "store"
    )
    assert.isNull(Stories.memberOf("x", { updated_at: 1, data: { session_store: "s" } }))
    assert.isNull(Stories.memberOf("x", null))
  })
})
