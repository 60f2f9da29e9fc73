/**
 * Input the command reads from stdin or a file: lines for `import`, whole
 * payloads for `append --payload -` / `--payload @FILE`. Every read is bounded
 * before anything is buffered whole, and bytes are decoded as strict UTF-8, so
 * an overlong line or a byte that is not UTF-8 is reported with its line and
 * byte, never stored as U+FFFD or held in memory whole.
 *
 * @since 0.1.0
 */
import { Utf8 } from "@session-journal/core"
import * as Context from "effect/Context"
import * as Result from "effect/Result"
import { InvalidInput } from "./Failure.ts"

/**
 * The command's stdin, as a function that gives it once it is read: the
 * process's by default; an in-process run (`Run.ts`) supplies its own.
 *
 * @since 0.1.0
 */
export const Stdin = Context.Reference<() => AsyncIterable<Uint8Array | string>>(
  "@session-journal/cli/Input/Stdin",
  { defaultValue: () => () => process.stdin }
)

/**
 * Longest input line (and `--payload` from stdin or a file) in bytes, without
 * its line break: 8 MiB, the filesystem adapter's bound on one stored record,
 * so a longer line could not be stored anyway.
 *
 * @since 0.1.0
 */
export const MAX_LINE_BYTES = 8 * 1024 * 1024

/**
 * `MAX_LINE_BYTES` as people read it.
 *
 * @since 0.1.0
 */
export const describeBytes = (n: number): string =>
  n % (1024 * 1024) === 0 ? `${n / (1024 * 1024)} MiB (${n} bytes)` : `${n} bytes`

/**
 * The offset of the first byte that does not start or continue a well-formed
 * UTF-8 sequence (RFC 3629: no overlong forms, no surrogates, nothing above
 * U+10FFFF, no truncated sequence), or -1 when all of `bytes` is well-formed.
 * `TextDecoder` with `fatal: true` refuses exactly these inputs but does not say
 * where; this says where.
 *
 * @since 0.1.0
 */
export const invalidUtf8At = (bytes: Uint8Array): number => {
  const n = bytes.length
  let i = 0
  while (i < n) {
    const c = bytes[i]!
    if (c < 0x80) {
      i++
      continue
    }
    let more: number
    let lo = 0x80
    let hi = 0xbf
    if (c >= 0xc2 && c <= 0xdf) more = 1
    else if (c >= 0xe0 && c <= 0xef) {
      more = 2
      if (c === 0xe0) lo = 0xa0
      else if (c === 0xed) hi = 0x9f
    } else if (c >= 0xf0 && c <= 0xf4) {
      more = 3
      if (c === 0xf0) lo = 0x90
      else if (c === 0xf4) hi = 0x8f
    } else return i
    if (i + more >= n) return i
    const c1 = bytes[i + 1]!
    if (c1 < lo || c1 > hi) return i
    for (let k = 2; k <= more; k++) {
      if ((bytes[i + k]! & 0xc0) !== 0x80) return i
    }
    i += more + 1
  }
  return -1
}

/**
 * Decodes `bytes` as strict UTF-8. A failure names `field`, the line when
 * there is one, and the byte: its position in the line (from 1) and, when
 * `inputOffset` is given, in the whole input (from 0).
 *
 * @since 0.1.0
 */
export const decodeUtf8 = (
  bytes: Uint8Array,
  where: { readonly field: string; readonly line?: number | undefined; readonly inputOffset?: number | undefined }
): Result.Result<string, InvalidInput> => {
  try {
    return Result.succeed(Utf8.decodeStrict(bytes, { keepBom: true }))
  } catch {
    const at = Math.max(0, invalidUtf8At(bytes))
    const byte = bytes[at]
    const shown = byte === undefined ? "" : ` (0x${byte.toString(16).padStart(2, "0")})`
    const input = where.inputOffset === undefined ? "" : `, offset ${where.inputOffset + at} of the input`
    return Result.fail(
      new InvalidInput({
        field: where.field,
        ...(where.line === undefined ? {} : { line: where.line }),
        reason: `not valid UTF-8 at byte ${at + 1}${where.line === undefined ? "" : " of the line"}${input}${shown}`
      })
    )
  }
}

/**
 * One complete input line: its number (from 1, counting blank lines), the byte
 * offset of its first byte in the input, and its bytes without the line break
 * (`\n`, or `\r\n`).
 *
 * @since 0.1.0
 */
export interface Line {
  readonly number: number
  readonly offset: number
  readonly bytes: Uint8Array
}

const BOM = [0xef, 0xbb, 0xbf] as const

/**
 * Splits a byte stream into lines, holding at most `maxLineBytes` of an
 * unfinished line: a line that grows past the bound fails as soon as it does,
 * naming the line and the bound, before the rest of it is read. A UTF-8 byte
 * order mark at the very start of the input is dropped.
 *
 * @since 0.1.0
 */
export class LineSplitter {
  private parts: Array<Uint8Array> = []
  private pending = 0
  private number = 0
  private offset = 0
  private started = false
  readonly maxLineBytes: number
  readonly field: string
  constructor(maxLineBytes: number = MAX_LINE_BYTES, field: string = "input") {
    this.maxLineBytes = maxLineBytes
    this.field = field
  }

  /** The lines that `chunk` completes. */
  push(chunk: Uint8Array): Result.Result<Array<Line>, InvalidInput> {
    if (!this.started && chunk.length > 0) {
      this.started = true
      if (chunk.length >= 3 && chunk[0] === BOM[0] && chunk[1] === BOM[1] && chunk[2] === BOM[2]) {
        chunk = chunk.subarray(3)
        this.offset = 3
      }
    }
    const out: Array<Line> = []
    let start = 0
    for (;;) {
      const nl = chunk.indexOf(10, start)
      if (nl < 0) break
      const piece = chunk.subarray(start, nl)
      const bad = this.grow(piece.length)
      if (bad !== undefined) return Result.fail(bad)
      const line = this.finish(piece, nl - start + 1)
      if (line.bytes.length > this.maxLineBytes) return Result.fail(this.tooLong(line.number))
      out.push(line)
      start = nl + 1
    }
    if (start < chunk.length) {
      const rest = chunk.subarray(start)
      const bad = this.grow(rest.length)
      if (bad !== undefined) return Result.fail(bad)
      // Copied: the stream may reuse the chunk's memory.
      this.parts.push(Uint8Array.prototype.slice.call(rest))
      this.pending += rest.length
    }
    return Result.succeed(out)
  }

  /** The unterminated last line, if any, once the input has ended. */
  end(): Result.Result<Array<Line>, InvalidInput> {
    if (this.pending === 0) return Result.succeed([])
    const line = this.finish(new Uint8Array(0), 0)
    return line.bytes.length > this.maxLineBytes ? Result.fail(this.tooLong(line.number)) : Result.succeed([line])
  }

  private grow(n: number): InvalidInput | undefined {
    // A `\r` before the `\n` is not part of the line, so allow one byte for it.
    return this.pending + n <= this.maxLineBytes + 1 ? undefined : this.tooLong(this.number + 1)
  }

  private tooLong(line: number): InvalidInput {
    return new InvalidInput({
      field: this.field,
      line,
      reason: `the line is longer than the bound of ${describeBytes(this.maxLineBytes)}`
    })
  }

  private finish(piece: Uint8Array, consumed: number): Line {
    let bytes: Uint8Array
    if (this.parts.length === 0) bytes = piece
    else {
      bytes = new Uint8Array(this.pending + piece.length)
      let at = 0
      for (const part of this.parts) {
        bytes.set(part, at)
        at += part.length
      }
      bytes.set(piece, at)
    }
    const total = bytes.length + (consumed - piece.length)
    if (bytes.length > 0 && bytes[bytes.length - 1] === 13) bytes = bytes.subarray(0, bytes.length - 1)
    const line: Line = { number: ++this.number, offset: this.offset, bytes }
    this.offset += total
    this.parts = []
    this.pending = 0
    return line
  }
}

/**
 * Reads all of a stream as one strictly decoded UTF-8 text of at most
 * `maxBytes` bytes; reading stops as soon as the bound is passed.
 *
 * @since 0.1.0
 */
export const readBounded = async (
  source: AsyncIterable<Uint8Array | string>,
  field: string,
  maxBytes: number = MAX_LINE_BYTES
): Promise<Result.Result<string, InvalidInput>> => {
  const parts: Array<Uint8Array> = []
  let size = 0
  for await (const chunk of source) {
    const bytes = typeof chunk === "string" ? new TextEncoder().encode(chunk) : chunk
    size += bytes.length
    if (size > maxBytes) {
      return Result.fail(new InvalidInput({ field, reason: `longer than the bound of ${describeBytes(maxBytes)}` }))
    }
    parts.push(Uint8Array.prototype.slice.call(bytes))
  }
  const all = new Uint8Array(size)
  let at = 0
  for (const part of parts) {
    all.set(part, at)
    at += part.length
  }
  return decodeUtf8(all, { field })
}
