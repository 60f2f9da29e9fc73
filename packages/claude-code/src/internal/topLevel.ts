/**
 * A streaming scan of one JSON object's top level, byte by byte, in constant
 * memory whatever its size or nesting: the string and scalar values of its
 * first 256 top-level keys (each up to a bound), the size in bytes of every top-level
 * value as it is written, the whole input's size and SHA-256. Nested values are
 * skipped by counting brackets outside strings, never built. It checks the
 * structure only as far as it needs to find the top level; it is what a hook
 * input that cannot be journaled as is (too large, too deep, not well-formed
 * text) still tells.
 */
import { decodeStrict } from "@session-journal/core/Utf8"

/** Longest key, and longest scalar or string value, kept (in bytes as written). */
const MAX_KEPT = 64 * 1024

/** Top-level keys whose values and sizes are kept (the first ones). */
const MAX_KEYS = 256

/** What the scan found. */
export interface Found {
  /** The raw text (as written, escapes included) of each top-level string or scalar value of at most `MAX_KEPT` bytes. */
  readonly values: ReadonlyMap<string, { readonly raw: Uint8Array; readonly string: boolean }>
  /** The size in bytes of each top-level value as written. */
  readonly sizes: ReadonlyMap<string, number>
  /** Bytes scanned. */
  readonly bytes: number
  /** SHA-256 of every byte scanned, lowercase hex (on `finish`). */
  readonly sha256: string
  /** Whether the input was one object, closed, with nothing but whitespace after it. */
  readonly complete: boolean
}

type State =
  | "start"
  | "key"
  | "inKey"
  | "colon"
  | "value"
  | "inString"
  | "nested"
  | "scalar"
  | "comma"
  | "done"
  | "broken"

const isSpace = (b: number) => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09

/**
 * The running SHA-256 a scanner keeps of what it reads, given by its user: the
 * command hook's (`@noble/hashes`, which it loads anyway) or the forwarder's
 * (`node:crypto`, so the forwarder loads no hashing code of its own).
 */
export interface Hash {
  update(bytes: Uint8Array): void
  /** The digest of every byte given, lowercase hex. */
  hex(): string
}

/** The scanner: `push` chunks, then `finish`. */
export class Scanner {
  private readonly hash: Hash
  constructor(hash: Hash) {
    this.hash = hash
  }
  private state: State = "start"
  private escape = false
  private nestedInString = false
  private depth = 0
  private key: Array<number> = []
  private keyTooLong = false
  private current = ""
  private kept: Array<number> | null = []
  private size = 0
  private valueIsString = false
  private total = 0
  private readonly values = new Map<string, { readonly raw: Uint8Array; readonly string: boolean }>()
  private readonly sizes = new Map<string, number>()

  /** The value of a top-level key seen so far (raw text), if kept. */
  seen(key: string): { readonly raw: Uint8Array; readonly string: boolean } | undefined {
    return this.values.get(key)
  }

  push(bytes: Uint8Array): void {
    this.hash.update(bytes)
    this.total += bytes.length
    for (let i = 0; i < bytes.length; i++) this.step(bytes[i]!)
  }

  finish(): Found {
    if (this.state === "scalar") this.endValue()
    return {
      values: this.values,
      sizes: this.sizes,
      bytes: this.total,
      sha256: this.hash.hex(),
      complete: this.state === "done"
    }
  }

  private keep(b: number) {
    this.size++
    if (this.kept !== null) {
      if (this.kept.length >= MAX_KEPT) this.kept = null
      else this.kept.push(b)
    }
  }

  private startValue(string: boolean) {
    this.size = 0
    this.kept = []
    this.valueIsString = string
  }

  private endValue() {
    // At most MAX_KEYS keys are remembered: a hostile input of millions of keys
    // costs no more memory than a plain one.
    if (this.sizes.has(this.current) || this.sizes.size < MAX_KEYS) this.sizes.set(this.current, this.size)
    if (this.kept !== null && !this.values.has(this.current) && this.values.size < MAX_KEYS) {
      // The value inside its quotes, for a string.
      const raw = Uint8Array.from(this.valueIsString ? this.kept.slice(1, -1) : this.kept)
      this.values.set(this.current, { raw, string: this.valueIsString })
    }
    this.kept = null
    this.state = "comma"
  }

  private step(b: number) {
    switch (this.state) {
      case "start":
        if (b === 0x7b) this.state = "key"
        else if (!isSpace(b)) this.state = "broken"
        return
      case "key":
        if (b === 0x22) {
          this.state = "inKey"
          this.key = []
          this.keyTooLong = false
        } else if (b === 0x7d) this.state = "done"
        else if (!isSpace(b)) this.state = "broken"
        return
      case "inKey":
        if (this.escape) this.escape = false
        else if (b === 0x5c) this.escape = true
        else if (b === 0x22) {
          try {
            this.current = this.keyTooLong ? "" : JSON.parse(`"${decodeStrict(Uint8Array.from(this.key))}"`)
          } catch {
            this.current = ""
          }
          this.state = "colon"
          return
        }
        if (this.key.length < 256) this.key.push(b)
        else this.keyTooLong = true
        return
      case "colon":
        if (b === 0x3a) this.state = "value"
        else if (!isSpace(b)) this.state = "broken"
        return
      case "value":
        if (isSpace(b)) return
        if (b === 0x22) {
          this.startValue(true)
          this.keep(b)
          this.state = "inString"
        } else if (b === 0x7b || b === 0x5b) {
          this.startValue(false)
          this.kept = null
          this.size = 1
          this.depth = 1
          this.nestedInString = false
          this.state = "nested"
        } else {
          this.startValue(false)
          this.keep(b)
          this.state = "scalar"
        }
        return
      case "inString":
        this.keep(b)
        if (this.escape) this.escape = false
        else if (b === 0x5c) this.escape = true
        else if (b === 0x22) this.endValue()
        return
      case "nested":
        this.size++
        if (this.nestedInString) {
          if (this.escape) this.escape = false
          else if (b === 0x5c) this.escape = true
          else if (b === 0x22) this.nestedInString = false
        } else if (b === 0x22) this.nestedInString = true
        else if (b === 0x7b || b === 0x5b) this.depth++
        else if (b === 0x7d || b === 0x5d) {
          this.depth--
          if (this.depth === 0) this.endValue()
        }
        return
      case "scalar":
        if (b === 0x2c || b === 0x7d || isSpace(b)) {
          this.endValue()
          this.step(b)
        } else this.keep(b)
        return
      case "comma":
        if (b === 0x2c) this.state = "key"
        else if (b === 0x7d) this.state = "done"
        else if (!isSpace(b)) this.state = "broken"
        return
      case "done":
        if (!isSpace(b)) this.state = "broken"
        return
      case "broken":
        return
    }
  }
}

/** The text a kept string value spells (its escapes read), or null: not a string, not UTF-8, a bad escape. */
export const textOf = (v: { readonly raw: Uint8Array; readonly string: boolean } | undefined): string | null => {
  if (v === undefined || !v.string) return null
  try {
    const s: unknown = JSON.parse(`"${decodeStrict(v.raw, { keepBom: true })}"`)
    return typeof s === "string" ? s : null
  } catch {
    return null
  }
}

/**
 * The top-level keys whose values a salvage reads (`Hook`'s `salvage`), and
 * those whose sizes it reads: all a scan sent on (`toWire`) keeps.
 */
export const SALVAGE_VALUES: ReadonlyArray<string> = [
  "hook_event_name",
  "session_id",
  "cwd",
  "tool_name",
  "tool_use_id",
  "transcript_path",
  "prompt_id",
  "permission_mode",
  "agent_id",
  "agent_type",
  "duration_ms",
  "is_interrupt"
]
export const SALVAGE_SIZES: ReadonlyArray<string> = ["tool_response", "error"]

/**
 * A scan as JSON, for the forwarder to send the guard what it read of an input
 * too large to send (`Forwarder`, `GuardServer`'s `SCAN_PATH`): the values and
 * sizes a salvage reads (raw values in base64: they may not be UTF-8), the
 * input's size and SHA-256, whether it was one whole object. At most
 * `SALVAGE_VALUES.length` values of `MAX_KEPT` bytes each: about 1 MiB of JSON
 * at the very most.
 */
export interface Wire {
  readonly values: { readonly [key: string]: { readonly raw: string; readonly string: boolean } }
  readonly sizes: { readonly [key: string]: number }
  readonly bytes: number
  readonly sha256: string
  readonly complete: boolean
}

/** A scan's `Wire` form. */
export const toWire = (found: Found): Wire => {
  const values: Record<string, { readonly raw: string; readonly string: boolean }> = {}
  for (const key of SALVAGE_VALUES) {
    const v = found.values.get(key)
    if (v !== undefined) values[key] = { raw: toBase64(v.raw), string: v.string }
  }
  const sizes: Record<string, number> = {}
  for (const key of SALVAGE_SIZES) {
    const n = found.sizes.get(key)
    if (n !== undefined) sizes[key] = n
  }
  return { values, sizes, bytes: found.bytes, sha256: found.sha256, complete: found.complete }
}

const isRecord = (v: unknown): v is { readonly [key: string]: unknown } =>
  typeof v === "object" && v !== null && !Array.isArray(v)

const exactly = (o: { readonly [key: string]: unknown }, keys: ReadonlyArray<string>): boolean => {
  const own = Object.keys(o)
  return own.length === keys.length && keys.every((k) => Object.hasOwn(o, k))
}

const isCount = (n: unknown): n is number => typeof n === "number" && Number.isSafeInteger(n) && n >= 0

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/

// Base64 with the globals every runtime has (`btoa`, `atob`: over a byte per character).
const toBase64 = (bytes: Uint8Array): string => {
  let s = ""
  for (let i = 0; i < bytes.length; i++) s += String.fromCharCode(bytes[i]!)
  return btoa(s)
}

const fromBase64 = (text: string): Uint8Array | null => {
  try {
    return Uint8Array.from(atob(text), (c) => c.charCodeAt(0))
  } catch {
    return null
  }
}

/**
 * The scan a `Wire` form holds, or null when it is anything else: exactly its
 * keys, only the keys a salvage reads, each raw value canonical base64 of at most
 * `MAX_KEPT` bytes, sizes and the byte count non-negative safe integers, the
 * hash 64 lowercase hex digits.
 */
export const fromWire = (json: unknown): Found | null => {
  if (!isRecord(json) || !exactly(json, ["values", "sizes", "bytes", "sha256", "complete"])) return null
  const { bytes, complete, sha256: hash, sizes, values } = json
  if (!isCount(bytes) || typeof complete !== "boolean" || typeof hash !== "string" || !/^[0-9a-f]{64}$/.test(hash)) {
    return null
  }
  if (!isRecord(values) || !isRecord(sizes)) return null
  const foundValues = new Map<string, { readonly raw: Uint8Array; readonly string: boolean }>()
  for (const [key, v] of Object.entries(values)) {
    if (!SALVAGE_VALUES.includes(key) || !isRecord(v) || !exactly(v, ["raw", "string"])) return null
    if (typeof v["raw"] !== "string" || typeof v["string"] !== "boolean" || !BASE64.test(v["raw"])) return null
    const raw = fromBase64(v["raw"])
    if (raw === null || raw.length > MAX_KEPT || toBase64(raw) !== v["raw"]) return null
    foundValues.set(key, { raw, string: v["string"] })
  }
  const foundSizes = new Map<string, number>()
  for (const [key, n] of Object.entries(sizes)) {
    if (!SALVAGE_SIZES.includes(key) || !isCount(n)) return null
    foundSizes.set(key, n)
  }
  return { values: foundValues, sizes: foundSizes, bytes, sha256: hash, complete }
}
