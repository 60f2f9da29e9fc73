/**
 * The hosts of WebFetch patterns (docs/DESIGN.md §15): the host of a URL as the
 * patterns compare it, and `domain:` globs (`*.` for subdomains, `*` within a label).
 */
import * as Wild from "./wildcard.ts"

/**
 * The host of an `http(s)`-style URL, lower-cased without trailing dots, or
 * `undefined` when the URL cannot be read (no `scheme://`, an empty host, characters
 * outside ASCII letters, digits, `-`, `_` and dots, or a bracketed IPv6 literal kept as is).
 */
export const hostOf = (url: unknown, maxLength: number): string | undefined => {
  if (typeof url !== "string" || url.length > maxLength) return undefined
  const m = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/([^/?#\\]*)/.exec(url.trim())
  if (m === null) return undefined
  const authority = m[1]!.slice(m[1]!.lastIndexOf("@") + 1)
  if (authority.startsWith("[")) {
    const end = authority.indexOf("]")
    return end < 0 ? undefined : authority.slice(0, end + 1).toLowerCase()
  }
  const colon = authority.indexOf(":")
  const host = (colon < 0 ? authority : authority.slice(0, colon)).toLowerCase().replace(/\.+$/, "")
  return /^[a-z0-9_-]+(?:\.[a-z0-9_-]+)*$/.test(host) ? host : undefined
}

export interface DomainGlob {
  readonly any: boolean
  readonly subdomains: boolean
  readonly labels: ReadonlyArray<ReadonlyArray<string>>
}

export const domainGlob = (domain: string): DomainGlob => {
  const d = domain.toLowerCase().replace(/\.+$/, "")
  if (d === "*") return { any: true, subdomains: false, labels: [] }
  const subdomains = d.startsWith("*.")
  const rest = subdomains ? d.slice(2) : d
  return { any: false, subdomains, labels: rest.split(".").map(Wild.starPieces) }
}

export const domainMatch = (glob: DomainGlob, host: string): boolean => {
  if (glob.any) return true
  const labels = host.split(".")
  const extra = labels.length - glob.labels.length
  if (glob.subdomains ? extra < 1 : extra !== 0) return false
  return glob.labels.every((pieces, k) => Wild.starMatch(pieces, labels[extra + k]!))
}
