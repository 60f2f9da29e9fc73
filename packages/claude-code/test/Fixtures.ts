/**
 * Realistic Claude Code transcripts, written from the documented format: a
 * project directory with a main transcript (summary, file-history-snapshot,
 * queue-operation, user prompts, progress, assistant lines with thinking, text
 * and tool_use blocks, user lines with tool_result blocks, system lines, a
 * record type no version knows, a line that is not JSON, a line that is not
 * UTF-8) and a sub-agent transcript spawned by a `Task` call.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"

/** The working directory the fixture's sessions ran in. */
export const CWD = "/home/dev/shop_app.v2"
/** Its project directory name, as Claude Code encodes it. */
export const PROJECT = "-home-dev-shop-app-v2"
/** The main session's id. */
export const SESSION = "7f3c2a10-5b6e-4d8f-9a01-2c3d4e5f6a7b"
/** The sub-agent's id. */
export const AGENT = "a4f9c2e"

let uuidCounter = 0
const uuid = () => {
  const n = (uuidCounter++).toString(16).padStart(12, "0")
  return `00000000-0000-4000-8000-${n}`
}

const base = (type: string, sidechain: boolean, extra: Record<string, unknown>) => ({
  parentUuid: null,
  isSidechain: sidechain,
  userType: "external",
  cwd: CWD,
  sessionId: SESSION,
  version: "2.1.30",
  gitBranch: "main",
  ...(sidechain ? { agentId: AGENT } : {}),
  type,
  uuid: uuid(),
  timestamp: "2026-11-30T10:00:00.000Z",
  ...extra
})

const assistant = (sidechain: boolean, content: Array<unknown>) =>
  JSON.stringify(base("assistant", sidechain, {
    message: {
      id: `msg_${uuidCounter}`,
      type: "message",
      role: "assistant",
      model: "claude-sonnet-4-5",
      content,
      stop_reason: null,
      usage: { input_tokens: 12, output_tokens: 80 }
    },
    requestId: `req_${uuidCounter}`
  }))

const toolUse = (id: string, name: string, input: unknown) => ({ type: "tool_use", id, name, input })

const result = (sidechain: boolean, id: string, content: unknown, extra: Record<string, unknown> = {}) =>
  JSON.stringify(base("user", sidechain, {
    message: { role: "user", content: [{ tool_use_id: id, type: "tool_result", content, is_error: false }] },
    ...extra
  }))

/** The prompt of the `Task` call (also the sub-agent's first line). */
export const TASK_PROMPT = "Find every caller of applyDiscount and report their file paths."

/** Tool calls per tool name in one turn of `mainTurn`. */
export const MAIN_TURN_TOOLS: Readonly<Record<string, number>> = { Read: 1, Bash: 1, mcp__github__create_issue: 1 }

/** One ordinary turn of the main transcript (index `i` keeps ids unique), with three tool calls. */
export const mainTurn = (i: number, padding = 0): Array<string> => {
  const pad = "x".repeat(padding)
  return [
    JSON.stringify(
      base("user", false, { message: { role: "user", content: `Turn ${i}: fix the failing checkout test. ${pad}` } })
    ),
    assistant(false, [{
      type: "thinking",
      thinking: `The test fails in cart.ts, line ${i}. ${pad}`,
      signature: "EqQBCkYIBRgCKkB"
    }]),
    assistant(false, [{ type: "text", text: "Reading the cart module first." }]),
    assistant(false, [toolUse(`toolu_r${i}`, "Read", { file_path: "/home/dev/shop_app.v2/src/cart.ts" })]),
    JSON.stringify(
      base("progress", false, {
        data: { type: "hook_progress", hookEvent: "PostToolUse" },
        toolUseID: `toolu_r${i}`,
        parentToolUseID: `toolu_r${i}`
      })
    ),
    result(false, `toolu_r${i}`, `export const total = (items: Item[]) => items.reduce(sum, 0) // ${i} ${pad}`, {
      toolUseResult: { type: "text", file: { filePath: "src/cart.ts", numLines: 1 } }
    }),
    assistant(false, [
      { type: "text", text: "Running the tests, then filing an issue." },
      toolUse(`toolu_b${i}`, "Bash", { command: "pnpm test cart", description: "Run the cart tests" }),
      toolUse(`toolu_g${i}`, "mcp__github__create_issue", {
        title: `Checkout rounding ${i}`,
        body: "Totals are rounded twice."
      })
    ]),
    result(false, `toolu_b${i}`, [{ type: "text", text: `PASS src/cart.test.ts (${i})` }]),
    result(false, `toolu_g${i}`, "https://github.com/acme/shop/issues/12"),
    JSON.stringify(base("system", false, { subtype: "informational", content: "Hook PostToolUse ran", level: "info" }))
  ]
}

/** The main transcript's lines, the `Task` call and its result included; `turns` ordinary turns. */
export const mainLines = (turns = 2): Array<string> => {
  const lines: Array<string> = [
    JSON.stringify({
      type: "summary",
      summary: "Fix checkout rounding",
      leafUuid: "00000000-0000-4000-8000-00000000ffff"
    }),
    JSON.stringify({
      type: "file-history-snapshot",
      messageId: uuid(),
      snapshot: { messageId: uuid(), trackedFileBackups: {}, timestamp: "2026-11-30T10:00:00.000Z" },
      isSnapshotUpdate: false
    }),
    JSON.stringify({
      type: "queue-operation",
      operation: "enqueue",
      timestamp: "2026-11-30T10:00:00.000Z",
      sessionId: SESSION,
      content: "also check the tax code"
    })
  ]
  for (let i = 0; i < turns; i++) lines.push(...mainTurn(i))
  lines.push(
    assistant(false, [
      toolUse("toolu_task", "Task", {
        description: "Find callers",
        prompt: TASK_PROMPT,
        subagent_type: "general-purpose"
      })
    ]),
    JSON.stringify(
      base("progress", false, {
        data: { type: "agent_progress", agentId: AGENT, prompt: TASK_PROMPT },
        toolUseID: "toolu_task",
        parentToolUseID: "toolu_task"
      })
    ),
    result(false, "toolu_task", [{ type: "text", text: `Found 2 callers.\nagentId: ${AGENT}` }], {
      toolUseResult: { status: "completed", agentId: AGENT, totalToolUseCount: 2 }
    }),
    JSON.stringify({ type: "custom-title", customTitle: "checkout", sessionId: SESSION }),
    JSON.stringify({ type: "hologram-snapshot", schema: 9, sessionId: SESSION, frames: [{ at: 1.5, data: "AAEC" }] }),
    "this line is not JSON {",
    ""
  )
  return lines
}

/** Tool calls per name in `mainLines(turns)`. */
export const mainTools = (turns = 2): Record<string, number> => ({
  Read: turns,
  Bash: turns,
  mcp__github__create_issue: turns,
  Task: 1
})

/** The sub-agent's lines: its prompt, two tool calls (Grep, Read) with results, and its answer. */
export const subLines = (): Array<string> => [
  JSON.stringify(base("user", true, { message: { role: "user", content: TASK_PROMPT } })),
  assistant(true, [
    { type: "thinking", thinking: "Search for the symbol.", signature: "Eq" },
    toolUse("toolu_s1", "Grep", { pattern: "applyDiscount", path: "src" })
  ]),
  result(true, "toolu_s1", "src/cart.ts\nsrc/promo.ts"),
  assistant(true, [toolUse("toolu_s2", "Read", { file_path: "src/promo.ts" })]),
  result(true, "toolu_s2", [{ type: "text", text: "export const promo = applyDiscount(0.1)" }]),
  assistant(true, [{ type: "text", text: "Found 2 callers: src/cart.ts, src/promo.ts" }])
]

/** Tool calls per name in `subLines()`. */
export const subTools: Readonly<Record<string, number>> = { Grep: 1, Read: 1 }

/** The files of a written tree. */
export interface Tree {
  readonly root: string
  readonly projectDir: string
  readonly main: string
  readonly sub: string
}

/** Bytes of lines joined with newlines, a newline after each; one line is not UTF-8 when `binary`. */
export const bytesOf = (lines: ReadonlyArray<string>, binary = false): Buffer => {
  const parts = lines.map((l) => Buffer.from(l + "\n", "utf8"))
  if (binary) parts.splice(parts.length - 1, 0, Buffer.from([0xff, 0xfe, 0x41, 0x0a]))
  return Buffer.concat(parts)
}

/** Writes the project tree under `root` (the projects directory). */
export const writeTree = (root: string, turns = 2): Tree => {
  const projectDir = path.join(root, PROJECT)
  fs.mkdirSync(path.join(projectDir, SESSION, "subagents"), { recursive: true })
  const main = path.join(projectDir, `${SESSION}.jsonl`)
  const sub = path.join(projectDir, SESSION, "subagents", `agent-${AGENT}.jsonl`)
  fs.writeFileSync(main, bytesOf(mainLines(turns), true))
  fs.writeFileSync(sub, bytesOf(subLines()))
  fs.mkdirSync(path.join(projectDir, "memory"), { recursive: true })
  fs.writeFileSync(path.join(projectDir, "memory", "notes.md"), "not a transcript\n")
  return { root, projectDir, main, sub }
}

/**
 * A long main transcript of about `bytes` bytes in `lines` lines (the benchmark's
 * 3 MB, 1,900 lines): turns of ten lines, padded.
 */
export const longTranscript = (lines = 1900, bytes = 3_000_000): Buffer => {
  const turns = Math.floor(lines / 10)
  const plain = mainTurn(0).join("\n").length
  const padding = Math.max(0, Math.floor((bytes / turns - plain) / 3))
  const all: Array<string> = []
  for (let i = 0; i < turns; i++) all.push(...mainTurn(i, padding))
  return bytesOf(all)
}

/**
 * A wide tree: `count` small main transcripts (one turn each) spread over
 * projects of 100, every tenth with a sub-agent directory, as a machine with
 * months of sessions has.
 */
export const writeWideTree = (root: string, count: number): Array<string> => {
  const files: Array<string> = []
  const turn = bytesOf(mainTurn(0))
  for (let i = 0; i < count; i++) {
    const project = path.join(root, `-home-dev-project-${Math.floor(i / 100)}`)
    const session = `00000000-0000-4000-8000-${i.toString(16).padStart(12, "0")}`
    fs.mkdirSync(project, { recursive: true })
    const file = path.join(project, `${session}.jsonl`)
    fs.writeFileSync(file, turn)
    files.push(file)
    if (i % 10 === 0) {
      fs.mkdirSync(path.join(project, session, "subagents"), { recursive: true })
      const sub = path.join(project, session, "subagents", "agent-b0b0b0.jsonl")
      fs.writeFileSync(sub, bytesOf(subLines()))
      files.push(sub)
    }
  }
  return files
}

let clockTicks: number | undefined

/**
 * CPU time (user + system) a process has used so far, in milliseconds, from
 * `/proc/<pid>/stat` (Linux only).
 */
export const cpuMillis = (pid: number): number => {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100
    } catch {
      clockTicks = 100
    }
  }
  const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
  // Fields after the command name (which may hold spaces), from field 3 on.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / clockTicks
}

/** Bytes a process has read so far through read calls of any kind (`rchar` of `/proc/<pid>/io`, Linux only). */
export const readBytes = (pid: number): number => {
  const m = /^rchar:\s*(\d+)$/m.exec(fs.readFileSync(`/proc/${pid}/io`, "utf8"))
  if (m === null) throw new Error(`no rchar in /proc/${pid}/io`)
  return Number(m[1])
}
