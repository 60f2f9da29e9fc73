/**
 * The command hook's count of the calls our hooks allowed in a Claude Code
 * session, from its transcript (`HookRuns`), read incrementally: the scan so far
 * is kept in a small file per journal session under the user's state directory
 * (`session-journal-scans/<session>.json` beside the journal's default directory,
 * not in it), so each event reads only the transcript's new bytes. The kept scan
 * is a claim: one for another file is dropped and the transcript scanned from its
 * start; a transcript shorter than the kept offset was cut (Claude Code only
 * appends), and the kept count stands. Nothing here fails: a transcript that cannot be read
 * counts nothing.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import * as HookRuns from "../HookRuns.ts"

const CHUNK = 1024 * 1024
const MAX_CARRY = 16 * 1024 * 1024

interface Kept extends HookRuns.Scan {
  readonly file: string
}

const readKept = async (cache: string, transcript: string): Promise<HookRuns.Scan> => {
  try {
    const kept = JSON.parse(await fs.promises.readFile(cache, "utf8")) as Partial<Kept>
    return kept.file === transcript && Number.isSafeInteger(kept.offset) && Number.isSafeInteger(kept.allowed) &&
        kept.offset! >= 0 && kept.allowed! >= 0 && Array.isArray(kept.recent) &&
        kept.recent.every((id) => typeof id === "string")
      ? { offset: kept.offset!, allowed: kept.allowed!, recent: kept.recent }
      : HookRuns.empty
  } catch {
    return HookRuns.empty
  }
}

const keep = async (cache: string, kept: Kept): Promise<void> => {
  try {
    await fs.promises.mkdir(path.dirname(cache), { recursive: true, mode: 0o700 })
    // Unique, not secret (created exclusively): no `node:crypto` loaded for it.
    const temp = `${cache}.${process.pid}-${Math.floor(Math.random() * 0x1_0000_0000).toString(16)}.tmp`
    await fs.promises.writeFile(temp, JSON.stringify(kept), { flag: "wx", mode: 0o600 })
    await fs.promises.rename(temp, cache)
  } catch {
    // A scan not kept is done again next time.
  }
}

/**
 * Where the scans are kept: `session-journal-scans` beside the user's state
 * directory of journals (the command line's `Storage.userStateDir`), outside it;
 * none without one.
 */
export const cacheDir = (state: string | undefined): string | undefined =>
  state === undefined ? undefined : path.join(path.dirname(state), "session-journal-scans")

/**
 * How many calls our hooks allowed in the transcript at `transcript` (an absolute
 * path), keeping the scan in `cacheDir` (none: scanned whole every time).
 */
export const allowedCalls = async (
  transcript: string,
  cacheDir: string | undefined,
  session: string
): Promise<number> => {
  if (!path.isAbsolute(transcript)) return 0
  const cache = cacheDir === undefined ? undefined : path.join(cacheDir, `${session}.json`)
  let scan = cache === undefined ? HookRuns.empty : await readKept(cache, transcript)
  let handle: fs.promises.FileHandle
  try {
    handle = await fs.promises.open(transcript, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK)
  } catch {
    return 0
  }
  try {
    const size = (await handle.stat()).size
    // Claude Code only appends to a transcript: one shorter than what was counted
    // was cut, and what was counted stands (the journal must still hold it).
    if (scan.offset > size) return scan.allowed
    const buffer = Buffer.alloc(Math.min(CHUNK, Math.max(size - scan.offset, 1)))
    let carry: Uint8Array = new Uint8Array(0)
    let position = scan.offset + carry.length
    while (position < size) {
      const { bytesRead } = await handle.read(buffer, 0, Math.min(buffer.length, size - position), position)
      if (bytesRead === 0) break
      position += bytesRead
      const bytes = carry.length === 0
        ? buffer.subarray(0, bytesRead)
        : Buffer.concat([carry, buffer.subarray(0, bytesRead)])
      const next = HookRuns.extend(scan, bytes)
      // The bytes after the last newline wait for the next chunk; a line longer
      // than MAX_CARRY is no hook record and is skipped, not held.
      carry = Uint8Array.prototype.slice.call(bytes, next.offset - scan.offset)
      scan = next
      if (carry.length > MAX_CARRY) {
        scan = { ...scan, offset: scan.offset + carry.length }
        carry = new Uint8Array(0)
      }
    }
  } catch {
    // What was counted stands.
  } finally {
    await handle.close().catch(() => undefined)
  }
  if (cache !== undefined) await keep(cache, { file: transcript, ...scan })
  return scan.allowed
}
