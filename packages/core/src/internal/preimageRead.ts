/**
 * Reading an entry back from the bytes its hash is taken over (docs/DESIGN.md §2): the
 * inverse of `preimage.ts`, for entry bundles (§14), where an entry travels as exactly
 * those bytes. Total: anything that is not a whole preimage is `undefined`, never a
 * throw. The entry read is a candidate: its fields still go through `Entry.decode`,
 * and its recomputed hash must equal the SHA-256 of the bytes, which also rules out
 * a payload text that is not the canonical one.
 */
import * as Utf8 from "../Utf8.ts"

/**
 * The text of UTF-8 `bytes`, or `undefined` when they are not well-formed UTF-8. A
 * leading U+FEFF is part of the text (a name may start with one), never dropped.
 */
export const decodeUtf8 = (bytes: Uint8Array): string | undefined => {
  try {
    return Utf8.decodeStrict(bytes, { keepBom: true })
  } catch {
    return undefined
  }
}

const TWO_32 = 4294967296
const ASCII_MAX = 128
const MAX_SAFE_HIGH = 0x1fffff

class Reader {
  pos = 0
  readonly bytes: Uint8Array
  readonly view: DataView
  constructor(bytes: Uint8Array) {
    this.bytes = bytes
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  }
  left(): number {
    return this.bytes.length - this.pos
  }
  // A u64 that is a safe integer, or undefined (`max` for the all-ones word).
  u64(): number | "max" | undefined {
    if (this.left() < 8) return undefined
    const low = this.view.getUint32(this.pos, true)
    const high = this.view.getUint32(this.pos + 4, true)
    this.pos += 8
    if (low === 0xffffffff && high === 0xffffffff) return "max"
    return high > MAX_SAFE_HIGH ? undefined : high * TWO_32 + low
  }
  u32(): number | undefined {
    if (this.left() < 4) return undefined
    const n = this.view.getUint32(this.pos, true)
    this.pos += 4
    return n
  }
  u8(): number | undefined {
    if (this.left() < 1) return undefined
    return this.bytes[this.pos++]
  }
  text(length: number | "max" | undefined): string | undefined {
    if (typeof length !== "number" || length > this.left()) return undefined
    const start = this.pos
    this.pos += length
    // Hashes, names and ids are short and ASCII: built directly, cheaper than a call
    // into the decoder; anything else goes through it (strict UTF-8).
    const slice = this.bytes.subarray(start, start + length)
    if (length <= ASCII_MAX) {
      let ascii = true
      for (let i = 0; i < length; i++) ascii &&= slice[i]! < 0x80
      if (ascii) return String.fromCharCode.apply(null, slice as unknown as Array<number>)
    }
    return decodeUtf8(slice)
  }
  lp(): string | undefined {
    return this.text(this.u64())
  }
}

/**
 * The JSON form of the entry whose preimage is `bytes` (without `entry_hash`, which
 * is the SHA-256 of the bytes), or `undefined` when the bytes are not one whole
 * preimage of a tool entry or of another kind.
 */
export const read = (bytes: Uint8Array): Record<string, unknown> | undefined => {
  const r = new Reader(bytes)
  const sequence = r.u64()
  const prevHash = r.lp()
  const timestamp = r.u64()
  if (typeof sequence !== "number" || prevHash === undefined || typeof timestamp !== "number") return undefined
  const marker = r.u64()
  if (marker === undefined) return undefined
  const head = { sequence, prev_hash: prevHash, timestamp_secs: timestamp }
  if (marker === "max") {
    const kind = r.lp()
    const payloadText = r.lp()
    if (kind === undefined || payloadText === undefined || r.left() !== 0) return undefined
    let payload: unknown
    try {
      payload = JSON.parse(payloadText)
    } catch {
      return undefined
    }
    return { ...head, kind, payload }
  }
  const toolName = r.text(marker)
  const serverId = r.lp()
  const agentId = r.lp()
  const bytesRead = r.u64()
  const bytesWritten = r.u64()
  const depth = r.u32()
  const allowed = r.u8()
  if (
    toolName === undefined || serverId === undefined || agentId === undefined || typeof bytesRead !== "number" ||
    typeof bytesWritten !== "number" || depth === undefined || (allowed !== 0 && allowed !== 1) || r.left() !== 0
  ) return undefined
  return {
    ...head,
    kind: "tool",
    tool_name: toolName,
    server_id: serverId,
    agent_id: agentId,
    bytes_read: bytesRead,
    bytes_written: bytesWritten,
    delegation_depth: depth,
    allowed: allowed === 1
  }
}
