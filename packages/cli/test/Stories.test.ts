/**
 * One story per agent session: a Claude Code session recorded by the hooks
 * (`Hook.handle`), its transcript taken into custody (`claude-code archive`, a
 * main and a sub-agent transcript) and its Agent SDK store copy
 * (`JournalSessionStore`) are grouped under Claude Code's session id in `list`
 * and on `serve`'s list page (live, and found there by any of their ids);
 * `stats` of any of them names the others.
 */
import { assert, describe, it } from "@effect/vitest"
import { JournalSessionStore } from "@session-journal/claude-code"
import type { ChildProcess } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import type { Page } from "playwright-core"
import { afterAll, beforeAll } from "vitest"
import * as Stories from "../src/viewer/Stories.ts"
import { hasChromium, launch } from "./Browser.ts"
import { SID, sub, writeHooked } from "./hookedSession.ts"
import { cleanup, killAll, run, start, tempDir, waitForLine } from "./Run.ts"

const WAIT = { timeout: 30_000 }

const exactly = (page: Page, selector: string, text: string) =>
  page.locator(selector).filter({ hasText: new RegExp(`^${text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`) })

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
  const started: Array<ChildProcess> = []
  afterAll(async () => {
    await killAll(started)
    cleanup()
  })

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

  it("the report of any of them names its story and links the others", async () => {
    const members = (JSON.parse((await run(["--dir", dir, "--json", "list"])).stdout) as {
      sessions: Array<{ id: string; agent_session?: string }>
    }).sessions.filter((s) => s.agent_session === SID).map((s) => s.id)
    for (const id of members) {
      const file = path.join(tempDir(), `${id}.html`)
      const r = await run(["--dir", dir, "report", id, "--out", file])
      assert.strictEqual(r.code, 0, r.stderr)
      const story = /<dd id="story"[^]*?<\/dd>/.exec(fs.readFileSync(file, "utf8"))?.[0] ?? ""
      assert.include(story, `data-story="${SID}"`)
      for (const other of members) {
        assert.include(story, other === id ? `<b class="mono">${id}</b>` : `href="${other}.html"`, `${id}: ${other}`)
      }
    }
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

  it.skipIf(!hasChromium())(
    "serve's list page groups them the same way, live, and finds a story by any of its ids",
    async () => {
      const json = JSON.parse((await run(["--dir", dir, "--json", "list"])).stdout) as {
        sessions: Array<{ id: string; agent_session?: string }>
      }
      const members = json.sessions.filter((s) => s.agent_session === SID).map((s) => s.id)
      const store = members.find((id) => id.startsWith("ccs-"))!
      const child = start(["--dir", dir, "serve", "--port", "0"])
      started.push(child)
      const line = await waitForLine(child, (l) => l.startsWith("serving "))
      const chrome = await launch()
      try {
        const page = await chrome.context.newPage()
        await page.goto(`${line.slice(line.indexOf("http://"))}/`)
        await page.locator("#list-status", { hasText: /^live:/ }).waitFor(WAIT)
        // One body per story, its members in the order `list` names them: hooked, custody (main, then the
        // sub-agent's), store; the plain session outside of it.
        const story = page.locator(`#sessions tbody.story[data-story="${SID}"]`)
        assert.strictEqual(await page.locator("#sessions tbody.story").count(), 1)
        const roles = await story.locator("tr[data-id]").evaluateAll((rows) =>
          rows.map((r) => `${r.getAttribute("data-role")} ${r.getAttribute("data-id")!.split("-")[0]}`)
        )
        assert.deepStrictEqual(roles, ["hooked cch", "custody cc", "custody cc", "store ccs"])
        assert.include(await story.locator("tr.story-head").innerText(), SID)
        assert.strictEqual(await page.locator(`#sessions tbody:not(.story) tr[data-id="plain"]`).count(), 1)
        assert.include(await story.locator(`tr[data-id="${hooked}"]`).innerText(), "hooked")

        // Any id of the story finds all of it, and nothing else; a part of one does too.
        const visible = () =>
          page.locator("#sessions tr[data-id]").evaluateAll((rows) =>
            rows.filter((r) => r.getClientRects().length > 0).map((r) => r.getAttribute("data-id")).sort()
          )
        for (const q of [SID, hooked, store, store.slice(4, 14).toUpperCase(), ...members]) {
          await page.locator("#list-filter").fill(q)
          assert.deepStrictEqual(await visible(), [...members].sort(), `searching ${q}`)
          await exactly(page, "#list-shown", `${members.length} of ${members.length + 1} sessions shown`).waitFor(WAIT)
        }
        await page.locator("#list-filter").fill("plain")
        assert.deepStrictEqual(await visible(), ["plain"])
        await page.locator("#list-filter").fill("")
        assert.strictEqual((await visible()).length, members.length + 1)

        // Live: a new member joins its story, a new plain session appears, and the filter still holds.
        await page.locator("#list-filter").fill(store)
        const more = await JournalSessionStore.open({ dir })
        await more.append({ projectKey: "-tmp-otel-work", sessionId: SID, subpath: "subagents/agent-b2" }, [
          { type: "user", uuid: "b1", sessionId: SID }
        ])
        await more.close()
        assert.strictEqual(
          (await run(["--dir", dir, "record", "later", "--tool", "t", "--server", "s", "--agent", "a"])).code,
          0
        )
        await story.locator(`tr[data-role="store"]`).nth(1).waitFor(WAIT)
        await page.locator(`#sessions tr[data-id="later"]`).waitFor({ state: "attached", ...WAIT })
        assert.strictEqual(await story.locator("tr[data-id]").count(), members.length + 1)
        assert.include(await story.locator(`tr[data-role="store"]`).nth(1).innerText(), "sub-agent subagents/agent-b2")
        assert.deepStrictEqual((await visible()).length, members.length + 1, "the story, all of it")
        assert.isFalse(await page.locator(`#sessions tr[data-id="later"]`).isVisible(), "filtered out as it came")
        // Every id links to its page.
        await page.locator("#list-filter").fill("")
        await story.locator(`tr[data-role="store"] a`).first().click()
        await page.waitForURL(/\/sessions\/ccs-/)
        // A member's page names its story, every other member linked: any of them finds the others.
        const named = page.locator(`#story[data-story="${SID}"]`)
        assert.include(await named.innerText(), "(this is its store session)")
        const linked = await named.locator("a").evaluateAll((links) => links.map((a) => a.textContent ?? ""))
        const now = (JSON.parse((await run(["--dir", dir, "--json", "list"])).stdout) as {
          sessions: Array<{ id: string; agent_session?: string }>
        }).sessions.filter((s) => s.agent_session === SID).map((s) => s.id)
        assert.strictEqual(now.length, members.length + 1, "the sub-agent's store copy joined")
        assert.deepStrictEqual(linked.sort(), now.filter((id) => id !== store).sort())
        await named.locator(`a`, { hasText: hooked }).click()
        await page.waitForURL(new RegExp(`/sessions/${hooked}$`))
        assert.include(await page.locator("#story").innerText(), "(this is its hooked session)")
        await page.close()
      } finally {
        await chrome.close()
      }
    },
    180_000
  )

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
