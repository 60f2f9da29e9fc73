/**
 * The physical work of verifying a long chain, written as tightly as this file can:
 * read the segment files, `JSON.parse` every line, encode each entry's hash preimage
 * and the eviction fold's preimage (docs/DESIGN.md §2) into one reused buffer, and hash both
 * with the given hex SHA-256 (the fastest byte-identical one the package has). Every
 * entry's recomputed hash is compared with its stored one, which also proves that
 * this encoder is byte-identical to the journal's.
 */
import * as fs from "node:fs"

const TWO_32 = 4294967296
const scratch = new Uint8Array(1 << 16)
const view = new DataView(scratch.buffer)
const encoder = new TextEncoder()

const u64 = (at: number, n: number): number => {
  view.setUint32(at, n >>> 0, true)
  view.setUint32(at + 4, Math.floor(n / TWO_32), true)
  return at + 8
}

// Length-prefixed UTF-8; ASCII (all hashes, typical names) is copied byte by byte.
const lp = (at: number, s: string): number => {
  const n = s.length
  const body = at + 8
  let i = 0
  for (; i < n; i++) {
    const c = s.charCodeAt(i)
    if (c >= 0x80) break
    scratch[body + i] = c
  }
  if (i === n) return u64(at, n) + n
  const { written } = encoder.encodeInto(s, scratch.subarray(body))
  return u64(at, written) + written
}

interface ToolLine {
  readonly k: string
  readonly e: {
    readonly sequence: number
    readonly prev_hash: string
    readonly entry_hash: string
    readonly timestamp_secs: number
    readonly tool_name: string
    readonly server_id: string
    readonly agent_id: string
    readonly bytes_read: number
    readonly bytes_written: number
    readonly delegation_depth: number
    readonly allowed: boolean
  }
}

/**
 * Parses every line of `segments` and hashes each tool entry twice (its own hash,
 * checked against the stored one, and a fold into a running evicted head). Returns
 * the number of entries and the final fold.
 */
export const parseAndHashTwice = (
  segments: ReadonlyArray<string>,
  digest: (bytes: Uint8Array) => string
): { readonly count: number; readonly fold: string } => {
  let count = 0
  let fold = ""
  for (const file of segments) {
    const text = fs.readFileSync(file, "utf8")
    let start = 0
    for (let end = text.indexOf("\n"); end !== -1; start = end + 1, end = text.indexOf("\n", start)) {
      const record = JSON.parse(text.slice(start, end)) as ToolLine
      if (record.k !== "entry") continue
      const e = record.e
      let at = u64(0, e.sequence)
      at = lp(at, e.prev_hash)
      at = u64(at, e.timestamp_secs)
      at = lp(at, e.tool_name)
      at = lp(at, e.server_id)
      at = lp(at, e.agent_id)
      at = u64(at, e.bytes_read)
      at = u64(at, e.bytes_written)
      view.setUint32(at, e.delegation_depth >>> 0, true)
      scratch[at + 4] = e.allowed ? 1 : 0
      const hash = digest(scratch.subarray(0, at + 5))
      if (hash !== e.entry_hash) throw new Error(`sequence ${e.sequence}: hash ${hash}, stored ${e.entry_hash}`)
      fold = digest(scratch.subarray(0, lp(lp(0, fold), hash)))
      count++
    }
  }
  return { count, fold }
}
