/**
 * UTF-8 as the journal counts and reads it: the byte length of a string without
 * encoding it, the byte length of a value's JSON text (what a tool call's
 * `bytes_written` and `bytes_read` count), and the one strict decoding every
 * stored or received text goes through (invalid UTF-8 is refused, never replaced).
 *
 * @since 0.1.0
 */

/**
 * The UTF-8 length of a string without encoding it; a lone surrogate counts as
 * U+FFFD (3 bytes), as `TextEncoder` writes it.
 *
 * @since 0.1.0
 */
export const utf8Length = (s: string): number => {
  let bytes = 0
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c < 0x80) bytes += 1
    else if (c < 0x800) bytes += 2
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1)
      if (d >= 0xdc00 && d <= 0xdfff) {
        bytes += 4
        i++
      } else bytes += 3
    } else bytes += 3
  }
  return bytes
}

/**
 * The UTF-8 length of a value's JSON text (of a string itself); 0 for a value
 * without one (`undefined`, a function, a cycle, a bigint).
 *
 * @since 0.1.0
 */
export const jsonBytes = (value: unknown): number => {
  if (typeof value === "string") return utf8Length(value)
  try {
    const text = JSON.stringify(value)
    return text === undefined ? 0 : utf8Length(text)
  } catch {
    return 0
  }
}

/**
 * Options of `strictDecoder` and `decodeStrict`.
 *
 * @since 0.1.0
 */
export interface DecodeOptions {
  /**
   * Keep a leading byte-order mark in the text (a settings file written back must
   * keep it) instead of dropping it.
   */
  readonly keepBom?: boolean | undefined
}

/**
 * A UTF-8 decoder: `TextDecoder`'s `decode`, streaming with `{ stream: true }`.
 *
 * @since 0.1.0
 */
export interface Decoder {
  decode(input?: Uint8Array, options?: { readonly stream?: boolean }): string
}

// A global of every runtime core targets (browsers, Node, Deno, Bun); declared here
// because core compiles without DOM or Node typings.
declare const TextDecoder: {
  new(label: "utf-8", options: { readonly fatal: boolean; readonly ignoreBOM: boolean }): Decoder
}

/**
 * A `TextDecoder` that refuses invalid UTF-8 (`decode` throws a `TypeError`)
 * instead of replacing it with U+FFFD. For a streaming decode (`{ stream: true }`),
 * which keeps state between calls; `decodeStrict` otherwise.
 *
 * @since 0.1.0
 */
export const strictDecoder = (options?: DecodeOptions): Decoder =>
  new TextDecoder("utf-8", { fatal: true, ignoreBOM: options?.keepBom === true })

// A decode that is not streamed keeps no state, so one decoder of each kind serves all.
const dropping = strictDecoder()
const keeping = strictDecoder({ keepBom: true })

/**
 * The text of `bytes`, which must be valid UTF-8: throws a `TypeError` where they
 * are not (never replaces a byte with U+FFFD). A leading byte-order mark is
 * dropped unless `keepBom`.
 *
 * @since 0.1.0
 */
export const decodeStrict = (bytes: Uint8Array, options?: DecodeOptions): string =>
  (options?.keepBom === true ? keeping : dropping).decode(bytes)
