/**
 * RFC 8785 JSON Canonicalization Scheme for values that are already plain JSON.
 *
 * Written here rather than taken from a package because RFC 8785 reduces to three
 * ECMAScript rules (JSON.stringify for strings and numbers, keys sorted by UTF-16
 * code units, no whitespace) and the available packages either pull in more than
 * that or accept non-JSON input silently. Input is validated first (`isJson`), so
 * the only values reaching `canonicalize` are null, booleans, finite numbers,
 * well-formed strings, arrays and plain objects.
 */

/** @internal */
export type Json = null | boolean | number | string | ReadonlyArray<Json> | { readonly [key: string]: Json }

const loneSurrogate = /\p{Cs}/u

/**
 * Returns the path of the first non-JSON part of `value`, or `undefined` when the
 * whole value is JSON that RFC 8785 can canonicalize (finite numbers, well-formed
 * strings, plain objects and arrays, no cycles).
 *
 * @internal
 */
export const firstInvalid = (value: unknown, path = "$", seen: Set<object> = new Set()): string | undefined => {
  switch (typeof value) {
    case "boolean":
      return undefined
    case "number":
      return Number.isFinite(value) ? undefined : path
    case "string":
      return isWellFormed(value) ? undefined : path
    case "object": {
      if (value === null) return undefined
      if (seen.has(value)) return path
      seen.add(value)
      try {
        if (Array.isArray(value)) {
          for (let i = 0; i < value.length; i++) {
            const bad = firstInvalid(value[i], `${path}[${i}]`, seen)
            if (bad !== undefined) return bad
          }
          return undefined
        }
        const proto = Object.getPrototypeOf(value)
        if (proto !== Object.prototype && proto !== null) return path
        for (const key of Object.keys(value)) {
          if (!isWellFormed(key)) return `${path}.<key>`
          const bad = firstInvalid((value as Record<string, unknown>)[key], `${path}.${key}`, seen)
          if (bad !== undefined) return bad
        }
        return undefined
      } finally {
        seen.delete(value)
      }
    }
    default:
      return path
  }
}

/**
 * Whether a string has a UTF-8 encoding (no lone surrogates). In unicode mode a
 * correctly paired surrogate is one code point, so only a lone surrogate matches Cs.
 *
 * @internal
 */
export const isWellFormed = (s: string): boolean => !loneSurrogate.test(s)

/**
 * The RFC 8785 canonical form of a JSON value (call `firstInvalid` first).
 *
 * @internal
 */
export const canonicalize = (value: Json): string => {
  if (value === null || typeof value !== "object") {
    // JSON.stringify gives ECMAScript's shortest round-trip number form (and "0" for -0)
    // and the string escaping RFC 8785 prescribes.
    return JSON.stringify(value)
  }
  if (Array.isArray(value)) {
    let out = "["
    for (let i = 0; i < value.length; i++) {
      if (i > 0) out += ","
      out += canonicalize(value[i] as Json)
    }
    return out + "]"
  }
  const obj = value as { readonly [key: string]: Json }
  // Default sort compares UTF-16 code units, which is the order RFC 8785 requires.
  const keys = Object.keys(obj).sort()
  let out = "{"
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!
    if (i > 0) out += ","
    out += JSON.stringify(key) + ":" + canonicalize(obj[key]!)
  }
  return out + "}"
}
