/**
 * `effect/ai` chats saved after every turn. `chat.bytes_written`: bytes the process
 * hands to `write(2)` while a 1,000-turn conversation (each turn: a user message,
 * an assistant text with a tool call, the tool result) is persisted with
 * `@session-journal/ai` on the filesystem adapter, against `Chat.layerPersisted`
 * over `KeyValueStore.layerFileSystem`, which rewrites the whole history as one
 * JSON file at each save. `chat.wall_time`: the time of the same conversation on
 * both. The model is scripted (no network), so both sides do identical model work.
 * Bytes are read from `/proc/self/io` (`wchar`), so every write counts: segments,
 * checkpoints, lock files, temp files.
 */
import { Chat, LanguageModel, type Prompt, type Response, Tool, Toolkit } from "effect/ai"
import * as Effect from "effect/Effect"
import type * as FileSystem from "effect/FileSystem"
import * as Layer from "effect/Layer"
import type * as Path from "effect/Path"
import { KeyValueStore, Persistence as KvPersistence } from "effect/persistence"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { SessionJournal } from "../../packages/core/src/index.ts"
import { firstLine, type FsLayer, loadNode, repoRoot } from "../lib/adapters.ts"
import { withTempDir } from "../lib/env.ts"
import {
  durationFigure,
  type Figure,
  interleaveMany,
  notRun,
  type RunOptions,
  type Sample,
  type Scenario
} from "../lib/harness.ts"

const Lookup = Tool.make("lookup", {
  parameters: Schema.Struct({ query: Schema.String }),
  success: Schema.Struct({ answer: Schema.String })
})
const Tools = Toolkit.make(Lookup)
const ToolHandlers = Tools.toLayer({
  lookup: ({ query }) => Effect.succeed({ answer: `answer to ${query}: ${"x".repeat(60)}` })
})

const lastUserText = (prompt: Prompt.Prompt): string | undefined => {
  const last = prompt.content[prompt.content.length - 1]
  if (last === undefined || last.role !== "user") return undefined
  const part = last.content[0]
  return part?.type === "text" ? part.text : undefined
}

// "turn N" → a sentence and a lookup call; anything else → a short answer.
const script = (prompt: Prompt.Prompt): Array<Response.PartEncoded> => {
  const turn = lastUserText(prompt)?.match(/^turn (\d+)/)
  if (turn) {
    return [
      { type: "text", text: `Let me look up item ${turn[1]} for you.` },
      { type: "tool-call", id: `call-${turn[1]}`, name: "lookup", params: { query: `item ${turn[1]}` } }
    ]
  }
  return [{ type: "text", text: `Seen ${prompt.content.length} messages.` }]
}

const ScriptedModel = Layer.effect(
  LanguageModel.LanguageModel,
  LanguageModel.make({
    generateText: (options) => Effect.succeed(script(options.prompt)),
    streamText: () => Stream.empty
  })
)

/** Total size of the files under `dir` whose name passes `keep`. */
const sizes = (dir: string, keep: (name: string) => boolean): number =>
  fs.readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((d) => d.isFile() && keep(d.name))
    .reduce((n, d) => n + fs.statSync(path.join(d.parentPath, d.name)).size, 0)

const wchar = (): number => {
  const io = fs.readFileSync("/proc/self/io", "utf8")
  const m = io.match(/^wchar:\s*(\d+)/m)
  if (m === null) throw new Error("no wchar in /proc/self/io")
  return Number(m[1])
}

const conversation = (turns: number) =>
  Effect.gen(function*() {
    const chats = yield* Chat.Persistence
    const chat = yield* chats.getOrCreate("bench-chat")
    for (let i = 1; i <= turns; i++) {
      yield* chat.generateText({ prompt: `turn ${i}: please look up item ${i} and summarise it`, toolkit: Tools })
    }
    return (yield* chat.export) as Prompt.PromptEncoded
  })

type ChatLayer = Layer.Layer<Chat.Persistence, unknown>

const measure = async (
  layer: ChatLayer,
  turns: number
): Promise<Sample & { readonly bytes: number; readonly messages: number }> => {
  const before = wchar()
  const t0 = performance.now()
  const exported = await Effect.runPromise(
    conversation(turns).pipe(Effect.provide(Layer.mergeAll(layer, ScriptedModel, ToolHandlers)))
  )
  const ms = performance.now() - t0
  return { ops: turns, ms, bytes: wchar() - before, messages: exported.content.length }
}

const platformNode = async (): Promise<Layer.Layer<FileSystem.FileSystem | Path.Path>> => {
  // The cli package declares @effect/platform-node; resolve it from there.
  const require = createRequire(path.join(repoRoot, "packages", "cli", "package.json"))
  const mod = await import(pathToFileURL(require.resolve("@effect/platform-node/NodeServices")).href) as {
    readonly layer: Layer.Layer<FileSystem.FileSystem | Path.Path>
  }
  return mod.layer
}

const journalChat = async (fsLayer: FsLayer, root: string): Promise<ChatLayer> => {
  const mod: Record<string, unknown> = await import("../../packages/ai/src/index.ts")
  const ns = mod["JournalChat"] as {
    readonly layer?: () => Layer.Layer<Chat.Persistence, never, SessionJournal.SessionJournal>
  } | undefined
  if (typeof ns?.layer !== "function") throw new Error("@session-journal/ai does not export JournalChat.layer")
  return ns.layer().pipe(Layer.provide(SessionJournal.layer().pipe(Layer.provide(fsLayer(root)))))
}

const kvChat = (services: Layer.Layer<FileSystem.FileSystem | Path.Path>, dir: string): ChatLayer =>
  Chat.layerPersisted({ storeId: "chats" }).pipe(
    Layer.provide(KvPersistence.layerBackingKvs),
    Layer.provide(KeyValueStore.layerFileSystem(dir)),
    Layer.provide(services)
  )

const run = async (options: RunOptions): Promise<ReadonlyArray<Figure>> => {
  const KV = "Chat.layerPersisted over KeyValueStore.layerFileSystem"
  const BYTES_GOAL = { op: "<=", target: 0.02 } as const
  const turns = options.quick ? 50 : 1000
  const node = await loadNode()
  let subjectLayer: ((root: string) => Promise<ChatLayer>) | null = null
  let why: string | null = null
  if (!node.ok) why = node.why
  else {
    try {
      await journalChat(node.value, "/nonexistent-probe")
      const fsLayer = node.value
      subjectLayer = (root) => journalChat(fsLayer, root)
    } catch (error) {
      why = `@session-journal/ai failed to load: ${firstLine(error)}`
    }
  }
  if (subjectLayer === null || !fs.existsSync("/proc/self/io")) {
    const reason = why ?? "no /proc/self/io on this system"
    return [
      notRun("chat.bytes_written", "bytes", KV, BYTES_GOAL, reason),
      notRun("chat.wall_time", "ms", KV, null, reason)
    ]
  }
  const makeSubject = subjectLayer
  const services = await platformNode()
  const rounds = 3
  const bytes = { journal: [] as Array<number>, kv: [] as Array<number> }
  const messages = { journal: 0, kv: 0 }
  let segmentBytes = 0
  const s = await interleaveMany(rounds, [
    {
      name: "journal",
      run: (r) =>
        withTempDir("chat-journal", async (dir) => {
          const m = await measure(await makeSubject(dir), turns)
          if (r >= 0) bytes.journal.push(m.bytes)
          segmentBytes = sizes(dir, (f) => f.endsWith(".jsonl"))
          messages.journal = m.messages
          return m
        })
    },
    {
      name: "kv",
      run: (r) =>
        withTempDir("chat-kv", async (dir) => {
          const m = await measure(kvChat(services, dir), turns)
          if (r >= 0) bytes.kv.push(m.bytes)
          messages.kv = m.messages
          return m
        })
    }
  ], { log: options.log, label: "chat", warmup: false })
  if (messages.journal !== messages.kv) {
    throw new Error(`histories differ: ${messages.journal} vs ${messages.kv} messages`)
  }
  const jb = Math.max(...bytes.journal)
  const kb = Math.min(...bytes.kv)
  const ratio = jb / kb
  return [
    {
      name: "chat.bytes_written",
      value: jb,
      unit: "bytes",
      baseline: KV,
      baseline_value: kb,
      ratio,
      goal: BYTES_GOAL,
      met: ratio <= BYTES_GOAL.target,
      note:
        `${turns} turns, ${messages.journal} messages; bytes passed to write(2) (wchar), worst of ${rounds} runs for the journal, ` +
        `best for the baseline; of the journal's bytes, ${
          segmentBytes.toLocaleString("en-US")
        } are the segments' final size ` +
        `(the rest: checkpoints, lock); the key-value store does not fsync, the journal does`
    },
    durationFigure(
      "chat.wall_time",
      KV,
      { subject: s["journal"]!, baseline: s["kv"]! },
      null,
      `${turns} turns, ${rounds} rounds`
    )
  ]
}

/** `chat.bytes_written` and `chat.wall_time`. */
export const chatScenario: Scenario = { name: "chat", figures: ["chat.bytes_written", "chat.wall_time"], run }
