/**
 * How the forwarder and the resident guard prove to each other that they share
 * the guard's token, without sending it (`sj1`, the guard's request scheme).
 *
 * A process that listens on the guard's port when the guard is not there (it
 * died, and something else took the port) must neither learn the token nor be
 * obeyed. So the forwarder never sends the token: every request carries
 *
 *     X-Session-Journal-Auth: sj1 <time> <nonce> <mac>
 *
 * where `<time>` is the sender's clock in milliseconds since the epoch (decimal),
 * `<nonce>` 16 fresh random bytes (base64url, 22 characters) and `<mac>`
 * HMAC-SHA256, keyed with the token's UTF-8 bytes, over the lines
 *
 *     session-journal guard request v1
 *     <METHOD>
 *     <path>
 *     <time>
 *     <nonce>
 *     <hex SHA-256 of the request body>
 *
 * (base64url, 43 characters). The guard recomputes it and compares in constant
 * time, refuses a time more than `WINDOW_MS` from its own clock, and refuses a
 * nonce it has already seen (`ReplayGuard`). Its answer to an authenticated
 * request carries
 *
 *     X-Session-Journal-Answer: sj1 <mac>
 *
 * an HMAC-SHA256 with the same key over
 *
 *     session-journal guard answer v1
 *     <nonce of the request>
 *     <status code>
 *     <hex SHA-256 of the response body>
 *
 * and the forwarder takes an answer only when that MAC verifies: an answer
 * without it, or for another request, or with a changed body, is no answer.
 * Claude Code's own `http` hooks still send `Authorization: Bearer TOKEN`, which
 * the guard accepts; their answers are not signed.
 *
 * The forwarder loads this module at every hook, so it loads nothing heavy: the
 * SHA-256 and HMAC are core's own (`Hmac`, which imports nothing else), not
 * `node:crypto`, whose module loads every part of Node's crypto for one MAC; the
 * nonce's bytes come from `/dev/urandom` (the global Web Crypto's
 * `getRandomValues` where there is none).
 *
 * @since 0.1.0
 */
import * as Hmac from "@session-journal/core/Hmac"
import type * as Fs from "node:fs"
import { createRequire } from "node:module"

// Loaded with `createRequire`, not `import`: an ES module import of a builtin reads
// every export of it, and `node:fs`'s lazy ones load its streams.
const fs = createRequire(import.meta.url)("node:fs") as typeof Fs

/**
 * The request header carrying the forwarder's proof.
 *
 * @since 0.1.0
 */
export const AUTH_HEADER = "x-session-journal-auth"

/**
 * The response header carrying the guard's proof.
 *
 * @since 0.1.0
 */
export const ANSWER_HEADER = "x-session-journal-answer"

/**
 * The scheme's name, first word of both headers.
 *
 * @since 0.1.0
 */
export const SCHEME = "sj1"

/**
 * How far a request's time may be from the guard's clock, either way (60 s): a
 * request older than that is refused, so the guard need remember nonces only
 * that long.
 *
 * @since 0.1.0
 */
export const WINDOW_MS = 60_000

/**
 * How many nonces the guard remembers at most (65,536, about 5 MiB).
 *
 * @since 0.1.0
 */
export const MAX_NONCES = 65_536

const sha256Hex = (bytes: Uint8Array): string => Hmac.toHex(Hmac.sha256(bytes))

const utf8 = new TextEncoder()

const hmac = (token: string, text: string): string =>
  Buffer.from(Hmac.hmacSha256(utf8.encode(token), utf8.encode(text))).toString("base64url")

/**
 * `n` random bytes from the kernel: read from `/dev/urandom` (already-loaded
 * `node:fs`, no module to load), else from the global Web Crypto.
 */
const randomBytes = (n: number): Uint8Array => {
  const bytes = new Uint8Array(n)
  let fd: number | undefined
  try {
    fd = fs.openSync("/dev/urandom", fs.constants.O_RDONLY)
    let at = 0
    while (at < n) {
      const got = fs.readSync(fd, bytes, at, n - at, null)
      if (got <= 0) throw new Error("/dev/urandom gave no bytes")
      at += got
    }
    return bytes
  } catch {
    return globalThis.crypto.getRandomValues(bytes)
  } finally {
    if (fd !== undefined) fs.closeSync(fd)
  }
}

/**
 * The parts of a request's proof.
 *
 * @since 0.1.0
 */
export interface Proof {
  readonly time: number
  readonly nonce: string
  readonly mac: string
}

/**
 * The MAC of a request (see the module's header).
 *
 * @since 0.1.0
 */
export const requestMac = (
  token: string,
  request: { readonly method: string; readonly path: string; readonly time: number; readonly nonce: string },
  body: Uint8Array
): string =>
  hmac(
    token,
    `session-journal guard request v1\n${request.method}\n${request.path}\n${request.time}\n${request.nonce}\n${
      sha256Hex(body)
    }`
  )

/**
 * The MAC of an answer to the request whose nonce is `nonce`.
 *
 * @since 0.1.0
 */
export const answerMac = (token: string, nonce: string, status: number, body: Uint8Array): string =>
  hmac(token, `session-journal guard answer v1\n${nonce}\n${status}\n${sha256Hex(body)}`)

/**
 * A fresh nonce: 16 random bytes, base64url.
 *
 * @since 0.1.0
 */
export const makeNonce = (): string => Buffer.from(randomBytes(16)).toString("base64url")

/**
 * The `X-Session-Journal-Auth` value of a request, and the nonce its answer must name.
 *
 * @since 0.1.0
 */
export const sign = (
  token: string,
  request: { readonly method: string; readonly path: string; readonly time: number },
  body: Uint8Array,
  nonce: string = makeNonce()
): { readonly header: string; readonly nonce: string } => ({
  header: `${SCHEME} ${request.time} ${nonce} ${requestMac(token, { ...request, nonce }, body)}`,
  nonce
})

const PROOF = /^sj1 (0|[1-9][0-9]{0,15}) ([A-Za-z0-9_-]{22}) ([A-Za-z0-9_-]{43})$/

/**
 * Reads an `X-Session-Journal-Auth` value; null when it is not exactly of the form.
 *
 * @since 0.1.0
 */
export const parse = (header: string | undefined): Proof | null => {
  const m = header === undefined ? null : PROOF.exec(header)
  if (m === null) return null
  const time = Number(m[1])
  return Number.isSafeInteger(time) ? { time, nonce: m[2]!, mac: m[3]! } : null
}

/**
 * Whether two MACs (base64url text) are equal, in time independent of where they differ.
 *
 * @since 0.1.0
 */
export const macEquals = (given: string, expected: string): boolean => {
  // Unequal lengths fail at once (a MAC's length is public).
  return Hmac.equalBytes(utf8.encode(given), utf8.encode(expected))
}

/**
 * Whether `proof` is a request's own MAC under `token` (time and replays aside).
 *
 * @since 0.1.0
 */
export const verifyRequest = (
  token: string,
  proof: Proof,
  request: { readonly method: string; readonly path: string },
  body: Uint8Array
): boolean => macEquals(proof.mac, requestMac(token, { ...request, time: proof.time, nonce: proof.nonce }, body))

/**
 * The `X-Session-Journal-Answer` value of an answer.
 *
 * @since 0.1.0
 */
export const answerHeader = (token: string, nonce: string, status: number, body: Uint8Array): string =>
  `${SCHEME} ${answerMac(token, nonce, status, body)}`

/**
 * Whether an answer's `X-Session-Journal-Answer` proves it came from the holder of
 * `token`, for the request whose nonce is `nonce`, with this status and body.
 *
 * @since 0.1.0
 */
export const verifyAnswer = (
  token: string,
  nonce: string,
  header: string | undefined,
  status: number,
  body: Uint8Array
): boolean => {
  const m = header === undefined ? null : /^sj1 ([A-Za-z0-9_-]{43})$/.exec(header)
  return m !== null && macEquals(m[1]!, answerMac(token, nonce, status, body))
}

/**
 * The guard's memory of the nonces it took: a request is fresh when its time is
 * within `windowMs` of `now`, after every time forgotten to stay within
 * `capacity`, and its nonce was not seen. Nonces older than the window are
 * forgotten (a replay of one fails the time check); when `capacity` nonces are
 * held the oldest is forgotten and every request at or before its time refused
 * from then on, so the memory stays bounded and a replay is refused either way.
 * Not thread-safe: one caller at a time (the guard's handler, which runs on one
 * thread and does not yield between `check` and its record).
 *
 * @since 0.1.0
 */
export interface ReplayGuard {
  /** Records the nonce and returns null when the request is fresh; else says why not. */
  readonly check: (proof: { readonly time: number; readonly nonce: string }, now: number) => string | null
  /** How many nonces are held. */
  readonly size: () => number
}

/**
 * A `ReplayGuard`.
 *
 * @since 0.1.0
 */
export const makeReplayGuard = (
  options: { readonly windowMs?: number | undefined; readonly capacity?: number | undefined } = {}
): ReplayGuard => {
  const windowMs = options.windowMs ?? WINDOW_MS
  const capacity = Math.max(1, options.capacity ?? MAX_NONCES)
  // Insertion order; times are close to it (each within the window of its arrival).
  const seen = new Map<string, number>()
  let floor = -Infinity
  const prune = (now: number) => {
    for (const [nonce, time] of seen) {
      if (time >= now - windowMs) break
      seen.delete(nonce)
    }
  }
  return {
    check: (proof, now) => {
      if (Math.abs(now - proof.time) > windowMs) {
        return `its time is ${Math.round((proof.time - now) / 1000)} s from the guard's clock (at most ${
          windowMs / 1000
        } s either way)`
      }
      if (proof.time <= floor) return "it is older than the nonces the guard still remembers"
      prune(now)
      if (seen.has(proof.nonce)) return "its nonce was already used (a replay)"
      while (seen.size >= capacity) {
        const [oldest, time] = seen.entries().next().value as [string, number]
        seen.delete(oldest)
        floor = Math.max(floor, time)
      }
      seen.set(proof.nonce, proof.time)
      return null
    },
    size: () => seen.size
  }
}
