/**
 * What a door reads from a Claude Code session's transcripts before it decides:
 * the count of the calls our hooks allowed (`HookRuns`, from the main
 * transcript) and the tokens the session used (`Usage`, from the main transcript
 * and every sub-agent's, `<project>/<session_id>/subagents/agent-*.jsonl`), read
 * incrementally: the scan so far is kept per journal session, so each event reads
 * only the transcripts' new bytes (and stats each sub-agent's transcript). The
 * command hook keeps it in a small file per journal session under the user's
 * state directory (`session-journal-scans/<session>.json` beside the journal's
 * default directory, not in it); the resident guard and the driver in memory
 * (`memoryKeeper`). The kept scan is a claim: one for another file is dropped and
 * the transcript scanned from its start; a transcript shorter than the kept
 * offset was cut (Claude Code only appends), and what was counted stands.
 * Nothing here fails: a main transcript that cannot be read counts no allowed
 * call and no known tokens (null).
 */
import type * as Random from "effect/Random"
import * as fs from "node:fs"
import * as path from "node:path"
import * as HookRuns from "../HookRuns.ts"
import * as Usage from "../Usage.ts"

const CHUNK = 1024 * 1024
const MAX_CARRY = 16 * 1024 * 1024
/** Sub-agent transcripts followed at most; past it, the tokens are unknown. */
const MAX_AGENTS = 1024

interface Kept extends HookRuns.Scan {
  readonly file: string
  readonly usage?: Usage.Scan | undefined
  readonly agents?: { readonly [name: string]: Usage.Scan } | undefined
}

/**
 * Where a door keeps its scans between events.
 */
export interface Keeper {
  readonly read: (session: string) => Promise<unknown>
  readonly write: (session: string, kept: unknown) => Promise<void>
}

/** Keeps nothing: every event scans the transcripts whole. */
export const noKeeper: Keeper = { read: async () => undefined, write: async () => undefined }

/** Keeps the scans of the latest `capacity` sessions in memory (the resident guard, the driver). */
export const memoryKeeper = (capacity = 1024): Keeper => {
  const kept = new Map<string, unknown>()
  return {
    read: async (session) => kept.get(session),
    write: async (session, scan) => {
      kept.delete(session)
      if (kept.size >= capacity) kept.delete(kept.keys().next().value!)
      kept.set(session, scan)
    }
  }
}

/**
 * Keeps each session's scan in a file of `dir` (none: nothing kept), written through
 * a temporary file whose name draws on `random`.
 */
export const fileKeeper = (dir: string | undefined, random: Random.Random): Keeper =>
  dir === undefined ? noKeeper : {
    read: async (session) => {
      try {
        return JSON.parse(await fs.promises.readFile(path.join(dir, `${session}.json`), "utf8"))
      } catch {
        return undefined
      }
    },
    write: async (session, kept) => {
      const file = path.join(dir, `${session}.json`)
      try {
        await fs.promises.mkdir(dir, { recursive: true, mode: 0o700 })
        // Unique, not secret (created exclusively): Effect's `Random`, no `node:crypto` loaded for it.
        const temp = `${file}.${process.pid}-${Math.floor(random.nextDoubleUnsafe() * 0x1_0000_0000).toString(16)}.tmp`
        await fs.promises.writeFile(temp, JSON.stringify(kept), { flag: "wx", mode: 0o600 })
        await fs.promises.rename(temp, file)
      } catch {
        // A scan not kept is done again next time.
      }
    }
  }

const claimOf = (kept: unknown, transcript: string): Kept | null => {
  if (typeof kept !== "object" || kept === null) return null
  const k = kept as Partial<Kept>
  // A usage scan at another offset than the calls' (or none, as kept before tokens
  // were counted) is no claim on the tokens before it: the transcript is read again.
  const ok = k.file === transcript && Number.isSafeInteger(k.offset) && Number.isSafeInteger(k.allowed) &&
    k.offset! >= 0 && k.allowed! >= 0 && Array.isArray(k.recent) && k.recent.every((id) => typeof id === "string") &&
    Usage.isScan(k.usage) && k.usage.offset === k.offset
  if (!ok) return null
  const agents: { [name: string]: Usage.Scan } = {}
  if (typeof k.agents === "object" && k.agents !== null) {
    for (const [name, scan] of Object.entries(k.agents)) if (Usage.isScan(scan)) agents[name] = scan
  }
  return {
    file: transcript,
    offset: k.offset!,
    allowed: k.allowed!,
    recent: k.recent!,
    usage: k.usage,
    agents
  }
}

/**
 * Feeds a file's bytes from `offset` on to `feed`, which says up to where it
 * counted them (complete lines). The bytes after that wait for the next chunk; a
 * line longer than MAX_CARRY is skipped, not held. Returns the offset reached, or
 * null when the file cannot be opened; a file shorter than `offset` was cut:
 * `offset` stands.
 */
export const readOn = async (
  file: string,
  offset: number,
  feed: (bytes: Uint8Array, at: number) => number
): Promise<number | null> => {
  let handle: fs.promises.FileHandle
  try {
    handle = await fs.promises.open(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK)
  } catch {
    return null
  }
  let counted = offset
  try {
    const size = (await handle.stat()).size
    if (offset > size) return offset
    const buffer = Buffer.alloc(Math.min(CHUNK, Math.max(size - offset, 1)))
    let carry: Uint8Array = new Uint8Array(0)
    let position = offset
    while (position < size) {
      const { bytesRead } = await handle.read(buffer, 0, Math.min(buffer.length, size - position), position)
      if (bytesRead === 0) break
      position += bytesRead
      const bytes = carry.length === 0
        ? buffer.subarray(0, bytesRead)
        : Buffer.concat([carry, buffer.subarray(0, bytesRead)])
      const next = feed(bytes, counted)
      carry = Uint8Array.prototype.slice.call(bytes, next - counted)
      counted = next
      if (carry.length > MAX_CARRY) {
        counted += carry.length
        carry = new Uint8Array(0)
      }
    }
  } catch {
    // What was counted stands.
  } finally {
    await handle.close().catch(() => undefined)
  }
  return counted
}

/**
 * What a door learns from the transcripts: the calls our hooks allowed (main
 * transcript) and the tokens used, main agent and sub-agents (null: unknown).
 */
export interface Totals {
  readonly allowed: number
  readonly tokens: bigint | null
}

/**
 * The usage scan of the file at `file` extended by its bytes after `scan.offset`
 * (with `extend`: `Usage.extend` for Claude Code's transcripts; lines above the
 * bound are counted past), or null when the file cannot be opened: a sub-agent's
 * transcript, a Codex rollout.
 */
export const usageScan = async <S extends Usage.Scan>(
  file: string,
  scan: S,
  extend: (scan: S, bytes: Uint8Array) => S
): Promise<S | null> => {
  let next = scan
  const reached = await readOn(file, scan.offset, (bytes, at) => {
    next = extend({ ...next, offset: at }, bytes)
    return next.offset
  })
  return reached === null ? null : { ...next, offset: reached }
}

/**
 * The totals of the transcript at `transcript` (an absolute path) and its
 * sub-agents', keeping the scan with `keeper` under `session`.
 */
export const totals = async (transcript: string, keeper: Keeper, session: string): Promise<Totals> => {
  if (!path.isAbsolute(transcript)) return { allowed: 0, tokens: null }
  const kept = claimOf(await keeper.read(session), transcript)
  let calls: HookRuns.Scan = kept ?? HookRuns.empty
  let usage: Usage.Scan = kept?.usage ?? Usage.empty
  const reached = await readOn(transcript, calls.offset, (bytes, at) => {
    calls = HookRuns.extend({ ...calls, offset: at }, bytes)
    usage = Usage.extend({ ...usage, offset: at }, bytes)
    return calls.offset
  })
  if (reached === null) return { allowed: kept?.allowed ?? 0, tokens: null }
  calls = { ...calls, offset: reached }
  usage = { ...usage, offset: reached }
  // Sub-agents: `<project>/<session_id>/subagents/agent-<id>.jsonl`.
  const dir = path.join(transcript.replace(/\.jsonl$/, ""), "subagents")
  const agents: { [name: string]: Usage.Scan } = {}
  let tokens: bigint | null = Usage.tokensOf(usage)
  let names: Array<string> = []
  try {
    names = (await fs.promises.readdir(dir)).filter((n) => n.startsWith("agent-") && n.endsWith(".jsonl"))
  } catch {
    names = []
  }
  if (names.length > MAX_AGENTS) tokens = null
  else {
    for (const name of names) {
      const scan = await usageScan(path.join(dir, name), kept?.agents?.[name] ?? Usage.empty, Usage.extend)
      // A sub-agent's transcript listed and then unreadable: its tokens are unknown.
      if (scan === null) {
        tokens = null
        continue
      }
      agents[name] = scan
      if (tokens !== null) tokens += Usage.tokensOf(scan)
    }
  }
  await keeper.write(session, { file: transcript, ...calls, usage, agents })
  return { allowed: calls.allowed, tokens }
}

/** Bytes from the end of a transcript where a call's line is looked for first. */
const CALL_TAIL = 4 * 1024 * 1024

/**
 * Waits until the transcript at `transcript` holds the call `toolUseId` (the
 * `tool_use` block of the answer that asked for it), looking `polls` times,
 * `everyMs` apart (default: 50 looks, 10 ms apart). Claude Code writes its
 * transcript in batches on its own schedule: when a PreToolUse hook starts, the
 * lines of the calls before it (their results, our hooks' runs, the answers'
 * tokens) may not be there yet; they are written before the line of the call
 * itself, which comes within tens of milliseconds (Claude Code 2.1.328: 30–75 ms,
 * none of them there when the hook started). So a door that counts what the
 * transcript says waits for that line first, in the transcript that holds the
 * call (`awaitCallOf`: a sub-agent's are in its own). Resolves whether it came: when it did
 * not, the totals are what the transcript holds. A transcript that does not exist
 * yet is not waited for (it holds no earlier call). Looks back from the end over at
 * most the last `CALL_TAIL` bytes, then only at what is appended.
 */
export const awaitCall = async (
  transcript: string,
  toolUseId: string,
  options?: { readonly polls?: number | undefined; readonly everyMs?: number | undefined }
): Promise<boolean> => {
  if (!path.isAbsolute(transcript) || !/^[A-Za-z0-9_-]{1,256}$/.test(toolUseId)) return false
  const needle = Buffer.from(`"${toolUseId}"`, "latin1")
  const polls = options?.polls ?? 50
  const everyMs = options?.everyMs ?? 10
  let from: number | undefined
  for (let look = 0; look <= polls; look++) {
    if (look > 0) await new Promise((resolve) => setTimeout(resolve, everyMs))
    let handle: fs.promises.FileHandle
    try {
      handle = await fs.promises.open(transcript, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK)
    } catch {
      if (look === 0) return false
      continue
    }
    try {
      const size = (await handle.stat()).size
      if (from === undefined ? await inTail(handle, size, needle) : await inRange(handle, from, size, needle)) {
        return true
      }
      from = Math.max(0, size - needle.length + 1)
    } catch {
      // A read that fails is looked at again.
    } finally {
      await handle.close()
    }
  }
  return false
}

/**
 * The transcript that holds an event's call: the main transcript for the main
 * agent's, the sub-agent's own for a sub-agent's (`subagents/agent-<agent_id>.jsonl`
 * in the directory named after the main transcript, where `totals` reads its
 * tokens); null when the path or the id cannot name one.
 */
export const callTranscript = (input: {
  readonly transcript_path?: string | undefined
  readonly agent_id?: string | undefined
}): string | null => {
  const transcript = input.transcript_path
  if (transcript === undefined || !path.isAbsolute(transcript)) return null
  if (input.agent_id === undefined) return transcript
  if (!/^[A-Za-z0-9_-]{1,128}$/.test(input.agent_id)) return null
  return path.join(transcript.replace(/\.jsonl$/, ""), "subagents", `agent-${input.agent_id}.jsonl`)
}

/**
 * `awaitCall` on the transcript that holds the event's call (`callTranscript`): a
 * door reads the transcripts once it holds the call, the lines written before it
 * (in that transcript and, written in the same batches, in the others) then there
 * too. Whether it came.
 */
export const awaitCallOf = (input: {
  readonly transcript_path?: string | undefined
  readonly agent_id?: string | undefined
  readonly tool_use_id: string
}): Promise<boolean> => {
  const file = callTranscript(input)
  return file === null ? Promise.resolve(false) : awaitCall(file, input.tool_use_id)
}

/** How far back each step of `inTail` reads. */
const TAIL_STEP = 64 * 1024

// Whether `needle` is in the last `CALL_TAIL` bytes before `size`, read from the end
// back, a step at a time (a call's line is usually near the end).
const inTail = async (handle: fs.promises.FileHandle, size: number, needle: Buffer): Promise<boolean> => {
  const floor = Math.max(0, size - CALL_TAIL)
  for (let end = size; end > floor;) {
    const start = Math.max(floor, end - TAIL_STEP)
    // Each step reaches into the one after it by the needle's length, so a split needle is found.
    if (await inRange(handle, start, Math.min(size, end + needle.length - 1), needle)) return true
    end = start
  }
  return false
}

// Whether `needle` is in bytes `[start, end)`, read forward.
const inRange = async (
  handle: fs.promises.FileHandle,
  start: number,
  end: number,
  needle: Buffer
): Promise<boolean> => {
  let position = Math.min(start, end)
  const buffer = Buffer.alloc(Math.min(CHUNK, Math.max(end - position, 1)))
  while (position < end) {
    const { bytesRead } = await handle.read(buffer, 0, Math.min(buffer.length, end - position), position)
    if (bytesRead === 0) break
    if (buffer.subarray(0, bytesRead).includes(needle)) return true
    // The next read overlaps this one by the needle's length, so a split needle is found.
    position += bytesRead <= needle.length ? bytesRead : bytesRead - needle.length + 1
  }
  return false
}

/**
 * Where the command hook keeps its scans: `session-journal-scans` beside the
 * user's state directory of journals (the command line's `Storage.userStateDir`),
 * outside it; none without one.
 */
export const cacheDir = (state: string | undefined): string | undefined =>
  state === undefined ? undefined : path.join(path.dirname(state), "session-journal-scans")
