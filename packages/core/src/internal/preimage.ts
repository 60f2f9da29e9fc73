/**
 * Byte encodings hashed by the chain (docs/DESIGN.md §2). Plain functions, no Effect: this
 * is the hot path of every write and every replay.
 */
import type { Link, ValidToolParams } from "../Entry.ts"
import * as Sha256 from "../Sha256.ts"

const TWO_32 = 4294967296

/** @internal */
export type ToolFields = Link & ValidToolParams

// Preimages are encoded into one reused scratch buffer rather than a fresh buffer per
// hash: every record and every replayed entry hashes once or twice, and the
// allocations showed up as garbage-collection time. Each call finishes with the
// buffer before it returns (the preimage functions return a copy).
interface Utf8Encoder {
  encodeInto(source: string, destination: Uint8Array): { readonly read: number; readonly written: number }
}
// A global of every runtime core targets (browsers, Node, Deno, Bun); declared here
// because core compiles without DOM or Node typings.
declare const TextEncoder: { new(): Utf8Encoder }
const encoder = new TextEncoder()

const SCRATCH_LIMIT = 1 << 20

// Strings up to this length are copied byte by byte while they are ASCII (hex
// hashes, tool names, ids): cheaper than a call into the encoder, which takes the
// rest of a string from its first non-ASCII character on.
const ASCII_COPY_MAX = 256

// Views of the first n bytes of a writer's buffer are kept for n up to this: making
// a view (`subarray`) costs about as much as encoding a short preimage, and preimages
// come in few lengths (a fold's is nearly always 144 bytes).
const VIEW_CACHE_MAX = 1024

class Scratch {
  bytes: Uint8Array
  view: DataView
  pos = 0
  readonly prefixes: Array<Uint8Array | undefined> = new Array<Uint8Array | undefined>(VIEW_CACHE_MAX + 1).fill(
    undefined
  )
  constructor(bytes: Uint8Array) {
    this.bytes = bytes
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  }
  /** The bytes written so far, as a view of the buffer. */
  written(): Uint8Array {
    const n = this.pos
    if (n > VIEW_CACHE_MAX) return this.bytes.subarray(0, n)
    return this.prefixes[n] ??= this.bytes.subarray(0, n)
  }
  u64(n: number): void {
    this.view.setUint32(this.pos, n >>> 0, true)
    this.view.setUint32(this.pos + 4, Math.floor(n / TWO_32), true)
    this.pos += 8
  }
  u64Max(): void {
    this.view.setUint32(this.pos, 0xffffffff, true)
    this.view.setUint32(this.pos + 4, 0xffffffff, true)
    this.pos += 8
  }
  /** Length-prefixed UTF-8 of `s`. */
  lp(s: string): void {
    const at = this.pos
    const start = at + 8
    const bytes = this.bytes
    const n = s.length
    let i = 0
    if (n <= ASCII_COPY_MAX) {
      for (; i < n; i++) {
        const c = s.charCodeAt(i)
        if (c >= 0x80) break
        bytes[start + i] = c
      }
    }
    let written = i
    if (i < n) written += encoder.encodeInto(i === 0 ? s : s.slice(i), bytes.subarray(start + i)).written
    this.pos = start + written
    this.view.setUint32(at, written, true)
    this.view.setUint32(at + 4, 0, true)
  }
  u32(n: number): void {
    this.view.setUint32(this.pos, n >>> 0, true)
    this.pos += 4
  }
  u8(n: number): void {
    this.bytes[this.pos++] = n
  }
  digest(): string {
    return Sha256.hex(this.written())
  }
  copy(): Uint8Array {
    return this.bytes.slice(0, this.pos)
  }
}

let shared = new Scratch(new Uint8Array(4096))

// The shared writer, emptied, when `bound` bytes fit in it (growing it up to a
// limit); a one-off writer for very large preimages, so the shared one stays small.
const writer = (bound: number): Scratch => {
  if (bound > shared.bytes.length) {
    if (bound > SCRATCH_LIMIT) return new Scratch(new Uint8Array(bound))
    shared = new Scratch(new Uint8Array(Math.max(bound, shared.bytes.length * 2)))
  }
  shared.pos = 0
  return shared
}

// UTF-8 needs at most 3 bytes per UTF-16 code unit.
const utf8Bound = (s: string): number => 8 + 3 * s.length

// chio-http-session's encoding: u64(sequence) ‖ lp(prev_hash) ‖ u64(timestamp_secs) ‖
// lp(tool_name) ‖ lp(server_id) ‖ lp(agent_id) ‖ u64(bytes_read) ‖ u64(bytes_written) ‖
// u32(delegation_depth) ‖ u8(allowed).
const writeTool = (e: ToolFields): Scratch => {
  const w = writer(
    8 + utf8Bound(e.prev_hash) + 8 + utf8Bound(e.tool_name) + utf8Bound(e.server_id) + utf8Bound(e.agent_id) + 21
  )
  w.u64(e.sequence)
  w.lp(e.prev_hash)
  w.u64(e.timestamp_secs)
  w.lp(e.tool_name)
  w.lp(e.server_id)
  w.lp(e.agent_id)
  w.u64(e.bytes_read)
  w.u64(e.bytes_written)
  w.u32(e.delegation_depth)
  w.u8(e.allowed ? 1 : 0)
  return w
}

// Any other kind: u64(sequence) ‖ lp(prev_hash) ‖ u64(timestamp_secs) ‖ u64(2^64−1) ‖
// lp(kind) ‖ lp(canonical payload). The all-ones marker sits where a tool entry has
// the length of its tool name, which can never be 2^64−1, so no two kinds collide.
const writeOther = (
  sequence: number,
  prevHash: string,
  timestampSecs: number,
  kind: string,
  canonicalPayload: string
): Scratch => {
  const w = writer(8 + utf8Bound(prevHash) + 16 + utf8Bound(kind) + utf8Bound(canonicalPayload))
  w.u64(sequence)
  w.lp(prevHash)
  w.u64(timestampSecs)
  w.u64Max()
  w.lp(kind)
  w.lp(canonicalPayload)
  return w
}

// fold(p, h) = SHA-256(lp(p) ‖ lp(h)) over the hex strings.
const writeFold = (p: string, h: string): Scratch => {
  const w = writer(utf8Bound(p) + utf8Bound(h))
  w.lp(p)
  w.lp(h)
  return w
}

/**
 * The bytes a tool entry's hash is taken over (a fresh copy).
 *
 * @internal
 */
export const toolPreimage = (e: ToolFields): Uint8Array => writeTool(e).copy()

/**
 * The bytes a non-tool entry's hash is taken over (a fresh copy).
 *
 * @internal
 */
export const otherPreimage = (
  sequence: number,
  prevHash: string,
  timestampSecs: number,
  kind: string,
  canonicalPayload: string
): Uint8Array => writeOther(sequence, prevHash, timestampSecs, kind, canonicalPayload).copy()

/**
 * The bytes `fold(p, h)` is taken over (a fresh copy).
 *
 * @internal
 */
export const foldPreimage = (p: string, h: string): Uint8Array => writeFold(p, h).copy()

/**
 * The hash of a tool entry, hex.
 *
 * @internal
 */
export const hashTool = (e: ToolFields): string => writeTool(e).digest()

/**
 * The hash of a non-tool entry, hex.
 *
 * @internal
 */
export const hashOther = (
  sequence: number,
  prevHash: string,
  timestampSecs: number,
  kind: string,
  canonicalPayload: string
): string => writeOther(sequence, prevHash, timestampSecs, kind, canonicalPayload).digest()

/**
 * `fold(p, h)`, hex.
 *
 * @internal
 */
export const hashFold = (p: string, h: string): string => writeFold(p, h).digest()
