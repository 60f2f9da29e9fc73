/**
 * Which requests a local HTTP server answers, by their `Host` header: the
 * defence against DNS rebinding. A web page of another site can make the
 * browser send requests to 127.0.0.1 through a name of its own that it later
 * resolves there (`127.0.0.1.attacker.example`, `127.0.0.1.nip.io`); the
 * browser then sends that name as `Host`, so a server that answers only exact
 * names it knows (`127.0.0.1`, `localhost`, `[::1]`, and names its operator
 * gave) with its own port is out of the page's reach. Pure: `serve` uses it,
 * and so can any other local server of the command.
 *
 * @since 0.1.0
 */

/**
 * The names a loopback server answers: the IPv4 and IPv6 loopback addresses
 * and `localhost`, exactly (a name that only starts with `127.` is anybody's).
 *
 * @since 0.1.0
 */
export const LOOPBACK_NAMES: ReadonlyArray<string> = ["127.0.0.1", "localhost", "[::1]"]

/**
 * What a server accepts: its port and the host names (lowercase, IPv6 in
 * brackets), each with the port it must come with.
 *
 * @since 0.1.0
 */
export interface Policy {
  /** The port the server is bound to. */
  readonly port: number
  /** Accepted `name:port` pairs, lowercase. */
  readonly accepted: ReadonlySet<string>
}

const LABEL = "[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
const NAME = new RegExp(`^(?:\\[[0-9a-f:.]+\\]|${LABEL}(?:\\.${LABEL})*)(?::([0-9]{1,5}))?$`)

/**
 * Splits `NAME` or `NAME:PORT` as given by an operator (an IPv6 address in
 * brackets); null when it is not a host name or address (or the port is out of
 * range). The name comes back lowercase.
 *
 * @since 0.1.0
 */
export const parseName = (text: string): { readonly name: string; readonly port: number | null } | null => {
  const lower = text.toLowerCase()
  const m = NAME.exec(lower)
  if (m === null) return null
  const port = m[1] === undefined ? null : Number(m[1])
  if (port !== null && (port < 1 || port > 65535 || m[1] !== String(port))) return null
  const name = port === null ? lower : lower.slice(0, lower.length - m[1]!.length - 1)
  return { name, port }
}

/**
 * The policy of a server bound to `port`: the loopback names and `extra`
 * (`NAME` or `NAME:PORT` each, already checked with `parseName`) with the bound
 * port unless they name their own (a name reached through a port forward).
 *
 * @since 0.1.0
 */
export const policy = (port: number, extra: ReadonlyArray<string> = []): Policy => {
  const accepted = new Set<string>()
  for (const name of LOOPBACK_NAMES) accepted.add(`${name}:${port}`)
  for (const text of extra) {
    const parsed = parseName(text)
    if (parsed !== null) accepted.add(`${parsed.name}:${parsed.port ?? port}`)
  }
  return { port, accepted }
}

/**
 * Whether a request with this `Host` header is answered. The header must be
 * exactly an accepted name with its port, as browsers send it; the port may be
 * left out only where browsers leave it out, for port 80 (the default of
 * `http:`). Names compare without case (DNS names have none); nothing else is
 * tolerated: no trailing dot, no user part, no missing header.
 *
 * @since 0.1.0
 */
export const allows = (policy: Policy, host: string | undefined): boolean => {
  if (host === undefined) return false
  const parsed = parseName(host)
  if (parsed === null) return false
  const port = parsed.port ?? 80
  return policy.accepted.has(`${parsed.name}:${port}`)
}

const IPV4_LOOPBACK =
  /^127\.(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){2}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$/

/**
 * Whether a bind address reaches this machine's loopback interface only: an
 * IPv4 address in 127.0.0.0/8 written as four numbers, `::1` (bracketed or
 * not), or `localhost`. A name that merely starts with `127.` is resolved by
 * DNS and is not one.
 *
 * @since 0.1.0
 */
export const isLoopbackAddress = (address: string): boolean => {
  const lower = address.toLowerCase()
  return lower === "localhost" || lower === "::1" || lower === "[::1]" || IPV4_LOOPBACK.test(lower)
}
