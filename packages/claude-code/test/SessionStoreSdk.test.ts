/**
 * The real Agent SDK driving the real Claude Code CLI (offline, against the fake
 * Messages API) with `sessionStore: JournalSessionStore`: every line of the local
 * transcript lands in its journal session, in order, and `load` deep-equals the
 * file's lines; the sub-agent's transcript comes back through `listSubkeys`; the
 * journal verifies and holds every tool call as a chio tool entry; with the local transcript removed, a resumed turn sees the
 * earlier conversation and lands in the same journal session; the SDK's
 * `importSessionToStore`, run twice into another journal, stores each line once;
 * summaries are the SDK's `foldSessionSummary` of what was stored, and the SDK's
 * `listSessions` finds the session through a store with summaries and through one
 * without (which has no `listSessionSummaries`). Skipped, with
 * the reason on stderr, when the CLI or the SDK is not installed.
 */
import { SessionJournal } from "@session-journal/core"
import { NodePersistence } from "@session-journal/node"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, assert, describe, it } from "vitest"
import { JournalSessionStore, ProjectDir } from "../src/index.ts"
import { loadSdk, type SdkMessage, sdkPresent } from "./agentSdk.ts"
import * as Claude from "./claudeCli.ts"
import * as Fake from "./fakeApi.ts"

afterAll(Claude.cleanup)

const fileLines = (file: string): Array<JournalSessionStore.SessionStoreEntry> =>
  fs.readFileSync(file, "utf8").split("\n").filter((l) => l !== "").map((l) =>
    JSON.parse(l) as JournalSessionStore.SessionStoreEntry
  )

// The CLI (2.1.328) mirrors every line of its transcript but its own API
// diagnostics: `api-request-shape`, `api-request-blob` and `api-request` lines stay
// in the local file only.
const NOT_MIRRORED = new Set(["api-request-shape", "api-request-blob", "api-request"])
const mirrored = (lines: ReadonlyArray<JournalSessionStore.SessionStoreEntry>) =>
  lines.filter((l) => !NOT_MIRRORED.has(l.type))

const verify = (root: string, id: string) =>
  Effect.runPromise(
    Effect.scoped(SessionJournal.SessionJournal.use((j) => j.verify(id))).pipe(
      Effect.provide(SessionJournal.layer().pipe(Layer.provide(NodePersistence.layer({ root }))))
    )
  )

const toolsOf = (root: string, ids: ReadonlyArray<string>) =>
  Effect.runPromise(
    Effect.scoped(SessionJournal.SessionJournal.use((j) =>
      Effect.forEach(ids, (id) =>
        Effect.map(Stream.runCollect(j.entries(id)), (all) =>
          all.flatMap((e) => "tool_name" in e ? [e] : [])))
    )).pipe(Effect.provide(SessionJournal.layer().pipe(Layer.provide(NodePersistence.layer({ root })))))
  )

describe.skipIf(Claude.CLAUDE_BIN === null || !sdkPresent())(
  "the Agent SDK with sessionStore: JournalSessionStore",
  () => {
    it("query() mirrors the transcript into the journal; resume from the store; importSessionToStore twice stores once", async () => {
      const sdk = await loadSdk()
      const subagent = {
        name: "Agent",
        input: {
          description: "run one",
          prompt: "SUBTASK: run echo",
          subagent_type: "general-purpose",
          run_in_background: false
        }
      }
      const firstTurns = Fake.perConversation((r) =>
        r.prompt.includes("SUBTASK")
          ? [Fake.tools(Fake.bash("echo from-sub")), Fake.text("sub done")]
          : [Fake.tools(subagent), Fake.tools(Fake.bash("echo turn-one")), Fake.text("first done")]
      )
      // The resumed conversation (it holds the second prompt) is answered at once.
      const api = await Fake.start((r) =>
        JSON.stringify(r.messages).includes("SECOND") ? Fake.text("second done") : firstTurns(r)
      )
      const root = Claude.tempDir()
      const work = path.join(root, "work")
      const home = path.join(root, "home")
      fs.mkdirSync(path.join(home, "tmp"), { recursive: true })
      fs.mkdirSync(work, { recursive: true })
      const journal = path.join(root, "journal")
      const store = await JournalSessionStore.open({ dir: journal, foldSessionSummary: sdk.foldSessionSummary })
      // The SDK maps the CLI's transcript paths to keys under its own CLAUDE_CONFIG_DIR:
      // the CLI's and this process's must be the same directory.
      const configDir = path.join(home, ".claude")
      const savedConfig = process.env["CLAUDE_CONFIG_DIR"]
      process.env["CLAUDE_CONFIG_DIR"] = configDir
      const stderr: Array<string> = []
      const run = async (prompt: string, resume?: string) => {
        const messages: Array<SdkMessage> = []
        for await (
          const m of sdk.query({
            prompt,
            options: {
              cwd: work,
              env: { ...Claude.offlineEnv(api, home), CLAUDE_CONFIG_DIR: configDir },
              pathToClaudeCodeExecutable: Claude.CLAUDE_BIN!,
              sessionStore: store,
              tools: ["Bash", "Agent"],
              allowedTools: ["Bash", "Agent"],
              settingSources: [],
              stderr: (d) => void stderr.push(d),
              ...(resume !== undefined ? { resume } : {})
            }
          })
        ) messages.push(m)
        return messages
      }
      try {
        const first = await run("FIRST: delegate, then say turn-one.")
        assert.deepStrictEqual(first.filter((m) => m.subtype === "mirror_error"), [], stderr.join(""))
        const result = first.find((m) => m.type === "result")
        assert.strictEqual(result?.["result"], "first done", stderr.join(""))
        const sid = String(result?.session_id)
        const project = path.join(configDir, "projects", ProjectDir.encode(work))
        const transcript = path.join(project, `${sid}.jsonl`)
        const local = fileLines(transcript)
        assert.isAbove(local.length, 5)

        // The SDK's project key, as it sent it: the only project with sessions.
        const key = { projectKey: ProjectDir.encode(work), sessionId: sid }
        assert.deepStrictEqual((await store.listSessions!(key.projectKey)).map((s) => s.sessionId), [sid])
        assert.deepStrictEqual(await store.load(key), mirrored(local))

        // The sub-agent's transcript, through listSubkeys.
        const subkeys = await store.listSubkeys!(key)
        assert.strictEqual(subkeys.length, 1)
        assert.match(subkeys[0]!, /^subagents\/agent-[0-9a-f]+$/)
        const subFile = path.join(project, sid, `${subkeys[0]!}.jsonl`)
        // Besides its lines, the SDK mirrors the sub-agent's metadata file as `agent_metadata` entries.
        const subLoaded = (await store.load({ ...key, subpath: subkeys[0]! })) ?? []
        assert.deepStrictEqual(subLoaded.filter((e) => e.type !== "agent_metadata"), mirrored(fileLines(subFile)))
        assert.isAtLeast(subLoaded.filter((e) => e.type === "agent_metadata").length, 1)

        // The summary is the SDK's fold of the stored lines, at the store's mtime.
        const [summary] = await store.listSessionSummaries(key.projectKey)
        assert.deepStrictEqual(
          summary,
          sdk.foldSessionSummary(undefined, key, mirrored(local), { mtime: summary!.mtime })
        )

        // An ordinary journal session: it verifies, and its tool calls are chio tool
        // entries (main: the Agent call and a Bash; the sub-agent: its Bash).
        const id = JournalSessionStore.sessionId(key)
        assert.strictEqual((await verify(journal, id)).entriesChecked, mirrored(local).length + 2)
        const subId = JournalSessionStore.sessionId({ ...key, subpath: subkeys[0]! })
        const tools = await toolsOf(journal, [id, subId])
        assert.deepStrictEqual(tools[0]!.map((t) => [t.tool_name, t.agent_id, t.delegation_depth]), [[
          "Agent",
          "main",
          0
        ], ["Bash", "main", 0]])
        assert.deepStrictEqual(tools[1]!.map((t) => [t.tool_name, t.delegation_depth]), [["Bash", 1]])
        assert.strictEqual(tools[1]![0]!.agent_id, subkeys[0]!.slice("subagents/agent-".length))

        // importSessionToStore of the local session, twice (in other batch sizes), into another journal.
        const other = await JournalSessionStore.open({ dir: path.join(root, "imported") })
        try {
          await sdk.importSessionToStore(sid, other, { dir: work })
          const once = await other.load(key)
          await sdk.importSessionToStore(sid, other, { dir: work, batchSize: 7 })
          assert.deepStrictEqual(await other.load(key), once)
          assert.deepStrictEqual(once, local)
          const subOnce = await other.load({ ...key, subpath: subkeys[0]! })
          assert.deepStrictEqual(subOnce?.filter((e) => e.type !== "agent_metadata"), fileLines(subFile))
          // Without foldSessionSummary the store has no listSessionSummaries, and the
          // SDK lists its sessions by listSessions and load; with it, by the summaries.
          assert.isFalse("listSessionSummaries" in other)
          assert.deepStrictEqual((await sdk.listSessions({ dir: work, sessionStore: other })).map((s) => s.sessionId), [
            sid
          ])
          assert.deepStrictEqual((await sdk.listSessions({ dir: work, sessionStore: store })).map((s) => s.sessionId), [
            sid
          ])
        } finally {
          await other.close()
        }

        // Resume from the store with the local transcript gone.
        fs.rmSync(transcript)
        fs.rmSync(path.join(project, sid), { recursive: true, force: true })
        const requestsBefore = api.requests.length
        const second = await run("SECOND: say it again.", sid)
        assert.strictEqual(second.find((m) => m.type === "result")?.["result"], "second done", stderr.join(""))
        const resumed = api.requests.slice(requestsBefore).find((r) => JSON.stringify(r.messages).includes("SECOND"))
        assert.isDefined(resumed)
        assert.include(JSON.stringify(resumed!.messages), "turn-one", "the resumed turn sees the earlier conversation")
        const after = (await store.load(key)) ?? []
        assert.deepStrictEqual(after.slice(0, mirrored(local).length), mirrored(local))
        assert.isAbove(after.length, mirrored(local).length)
        assert.strictEqual(JournalSessionStore.sessionId(key), id)
        assert.deepStrictEqual((await store.listSessions!(key.projectKey)).map((s) => s.sessionId), [sid])

        assert.deepStrictEqual(api.connects, [])
      } finally {
        if (savedConfig === undefined) delete process.env["CLAUDE_CONFIG_DIR"]
        else process.env["CLAUDE_CONFIG_DIR"] = savedConfig
        await store.close()
        await api.close()
      }
    })
  }
)
