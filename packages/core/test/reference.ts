/**
 * An encoder of docs/DESIGN.md §2 written with node's Buffer and crypto, sharing no code with
 * the implementation under test: the reference the hashing tests compare against.
 */
import { createHash } from "node:crypto"
import { Entry } from "../src/index.ts"

/** u64 little-endian. */
export const u64 = (n: number | bigint): Buffer => {
  const b = Buffer.alloc(8)
  b.writeBigUInt64LE(BigInt(n))
  return b
}
/** u32 little-endian. */
export const u32 = (n: number): Buffer => {
  const b = Buffer.alloc(4)
  b.writeUInt32LE(n)
  return b
}
/** Length-prefixed UTF-8. */
export const lp = (s: string): Buffer => {
  const bytes = Buffer.from(s, "utf8")
  return Buffer.concat([u64(bytes.length), bytes])
}
/** SHA-256 hex of bytes. */
export const sha = (b: Buffer): string => createHash("sha256").update(b).digest("hex")

/** The hash of an entry, encoded independently. */
export const referenceHash = (e: Entry.Entry): string =>
  Entry.isTool(e)
    ? sha(Buffer.concat([
      u64(e.sequence),
      lp(e.prev_hash),
      u64(e.timestamp_secs),
      lp(e.tool_name),
      lp(e.server_id),
      lp(e.agent_id),
      u64(e.bytes_read),
      u64(e.bytes_written),
      u32(e.delegation_depth),
      Buffer.from([e.allowed ? 1 : 0])
    ]))
    : sha(Buffer.concat([
      u64(e.sequence),
      lp(e.prev_hash),
      u64(e.timestamp_secs),
      u64(2n ** 64n - 1n),
      lp(e.kind),
      lp(Entry.canonicalPayload(e.payload))
    ]))

/** fold(p, h), encoded independently. */
export const referenceFold = (p: string, h: string): string => sha(Buffer.concat([lp(p), lp(h)]))
