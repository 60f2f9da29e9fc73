/**
 * The forwarder (`session-journal claude-code forward --url URL`): the command hook that hands
 * each Claude Code hook event to the resident guard over loopback HTTP and
 * fails closed when it cannot.
 *
 * Claude Code lets a call run when an `http` hook cannot be reached (docs/claude-code/PROTOCOL.md
 * "HTTP hooks"), so a guard that is down, or killed mid-session, would stop
 * guarding without anyone noticing. This forwarder is installed as a `command`
 * hook instead: it reads the event from stdin (at most `MAX_EVENT_BYTES`),
 * POSTs it to the guard and writes the guard's answer to stdout. A PostToolUse
 * or PostToolUseFailure over the bound is read on without being kept and
 * scanned as the command hook scans it; its scan goes to the guard
 * (`Scanned`), which records it as an outcome marker (its size, its hash) whose
 * bytes are counted, so a policy's byte limits see it through either door. Any
 * other event over the bound is refused unread beyond it.
 *
 * It trusts only the guard. Whatever listens on the guard's port is a claim:
 * after the guard died another process may hold it. So the token is never sent;
 * the request carries a proof that the forwarder holds it (`sj1`: a fresh nonce,
 * the time and an HMAC-SHA256 keyed with the token over them and the body's
 * hash, `guardAuth.ts`), and an answer is taken only when it is a 200 whose
 * `X-Session-Journal-Answer` MAC (over the request's nonce, the status and the
 * body's hash) verifies under the token, whose body is at most
 * `MAX_ANSWER_BYTES` and whose JSON is a well-formed hook output for the event
 * (`checkAnswer`: for a PreToolUse `{}` or a `permissionDecision` of deny, ask
 * or allow with a string reason, nothing else). The whole exchange — reading the
 * event, connecting, sending, receiving — runs under one deadline
 * (`--timeout-ms`, default `DEFAULT_TIMEOUT_MS`, well under the installed hook's
 * `timeout`): a guard that answers a byte at a time cannot hold the hook until
 * Claude Code cancels it, which would let the call run.
 *
 * Every other ending is a refusal in the event's form (`Refusal.refusal` of
 * `@session-journal/claude-code`, the rule every door uses): a PreToolUse or a
 * PermissionRequest denied with the reason (`the session-journal guard at URL
 * is not reachable: connect ECONNREFUSED …`), any other event exit 2 with the
 * reason on stderr, a Stop or SubagentStop already kept going by a refusal
 * (`stop_hook_active`) exit 1, an event it cannot read exit 2.
 *
 * It does not decide by itself (by taking the journal's lock and running the
 * policy, `Hook.handle`, the one place every door's decision is made): the
 * guard is the journal's only writer, and a guard that is down is
 * a fault to repair, not a mode to run in. Denying says so at the first call,
 * with the address to check.
 *
 * The token comes from `$SESSION_JOURNAL_GUARD_TOKEN` (hooks inherit Claude
 * Code's environment), another variable (`--token-env NAME`), or a file only the
 * user can read (`--token-file FILE`, first line; refused when its group or others
 * may read it, `SecretFile`). This module loads nothing but Node's own
 * modules, `Refusal` (which imports nothing) and the small dependency-free
 * modules beside it, and is started without the command tree (the command
 * line's `main.ts` loads its process form, `commands/ForwardProcess.ts`, directly
 * for `claude-code forward`); the build bundles them with those modules
 * into one file of its own (`scripts/bundle.ts`), so a hook reads three files
 * (the bin, the entry, this one) and costs about one Node start, `node:crypto`
 * and `node:net` (it speaks the little HTTP/1.1 it needs itself, `exchange`).
 *
 * @since 0.1.0
 */
import { messageOf } from "@session-journal/core/ErrorMessage"
import { decodeStrict } from "@session-journal/core/Utf8"
import { createRequire } from "node:module"
import type * as Net from "node:net"
import * as GuardAuth from "./internal/guardAuth.ts"
import * as SecretFile from "./internal/secretFile.ts"
import type * as TopLevel from "./internal/topLevel.ts"
import * as Refusal from "./Refusal.ts"

// Loaded with `createRequire`, not `import`: an ES module import of a builtin reads
// every export of it, which can load more than the forwarder needs (`node:http`'s
// lazy `WebSocket` and friends load undici, about 50–150 ms).
const load = createRequire(import.meta.url)
const net = load("node:net") as typeof Net

/**
 * Largest event read from stdin: 4 MiB, the guard's bound (`Hook.MAX_INPUT_BYTES`,
 * not imported: this module loads nothing but Node's own).
 *
 * @since 0.1.0
 */
export const MAX_EVENT_BYTES = 4 * 1024 * 1024

/**
 * Largest answer taken from the guard (1 MiB; its answers are a few hundred
 * bytes): a longer one is no answer.
 *
 * @since 0.1.0
 */
export const MAX_ANSWER_BYTES = 1024 * 1024

/**
 * The forwarder's deadline by default (10 s), for the whole exchange: reading the
 * event, connecting, sending and receiving. It must be well under the hook's
 * `timeout` in the settings (`Install.HOOK_TIMEOUT_SECONDS`, 60 s), or Claude
 * Code cancels the hook first, which lets the call run.
 *
 * @since 0.1.0
 */
export const DEFAULT_TIMEOUT_MS = 10_000

/**
 * The variable the token is read from by default.
 *
 * @since 0.1.0
 */
export const TOKEN_VAR = "SESSION_JOURNAL_GUARD_TOKEN"

/**
 * Largest token file read (64 KiB).
 *
 * @since 0.1.0
 */
export const MAX_TOKEN_FILE_BYTES = 64 * 1024

/**
 * What the forwarder is told on its command line.
 *
 * @since 0.1.0
 */
export interface Options {
  /** The guard's hook URL, `http://127.0.0.1:PORT/hook`. */
  readonly url: string
  /** The variable holding the token (default `TOKEN_VAR`); ignored with `tokenFile`. */
  readonly tokenEnv?: string | undefined
  /** A file whose first line is the token. */
  readonly tokenFile?: string | undefined
  /** The deadline of the whole exchange (default `DEFAULT_TIMEOUT_MS`). */
  readonly timeoutMs?: number | undefined
}

/**
 * What the forwarder does: the text for stdout, the text for stderr, the exit code.
 *
 * @since 0.1.0
 */
export interface Outcome {
  readonly stdout: string
  readonly stderr: string
  readonly code: number
}

/**
 * The forwarder's own answer when the guard gave none, for the event named
 * `event` (null when the input could not be read as an event): `Refusal.refusal`
 * as a command hook gives it (`stopHookActive`: the input's `stop_hook_active`).
 *
 * @since 0.1.0
 */
export const fallback = (
  event: string | null,
  reason: string,
  options?: { readonly stopHookActive?: boolean | undefined }
): Outcome => {
  const r = Refusal.refusal(event, reason, options)
  return { stdout: r.output === null ? "" : JSON.stringify(r.output) + "\n", stderr: r.stderr, code: r.exitCode }
}

/**
 * Parses the arguments after `claude-code forward`: `--url URL` (required),
 * `--token-env NAME`, `--token-file FILE`, `--timeout-ms N`; a message on a
 * mistake.
 *
 * @since 0.1.0
 */
export const parseArgs = (args: ReadonlyArray<string>): Options | string => {
  const values: Record<string, string> = {}
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!
    const eq = arg.indexOf("=")
    const [name, inline] = arg.startsWith("--") && eq > 0 ? [arg.slice(0, eq), arg.slice(eq + 1)] : [arg, undefined]
    if (!["--url", "--token-env", "--token-file", "--timeout-ms"].includes(name)) {
      return `unknown argument ${JSON.stringify(arg)}`
    }
    const value = inline ?? args[++i]
    if (value === undefined) return `${name} needs a value`
    values[name] = value
  }
  const url = values["--url"]
  if (url === undefined) return "--url URL is required (the guard's hook URL, http://127.0.0.1:PORT/hook)"
  const timeout = values["--timeout-ms"]
  const timeoutMs = timeout === undefined ? undefined : Number(timeout)
  if (timeoutMs !== undefined && !(Number.isSafeInteger(timeoutMs) && timeoutMs > 0)) {
    return "--timeout-ms must be a positive integer"
  }
  return { url, tokenEnv: values["--token-env"], tokenFile: values["--token-file"], timeoutMs }
}

/**
 * What the forwarder read of a PostToolUse or PostToolUseFailure over
 * `MAX_EVENT_BYTES`: its event name and its scan (`internal/topLevel.ts`, the
 * command hook's scan), sent to the guard's scan route, which salvages it as an
 * outcome marker (its size, its hash) whose bytes are counted.
 *
 * @since 0.1.0
 */
export interface Scanned {
  readonly event: string
  readonly scan: TopLevel.Wire
}

// The events whose input can be salvaged past the bound (`Hook.decodeScan`).
const SALVAGEABLE: ReadonlySet<string | null> = new Set(["PostToolUse", "PostToolUseFailure"])

// Reads stdin: the event whole within `max` bytes; past it, a PostToolUse or
// PostToolUseFailure is read on unkept, scanned, and any other event is refused
// (null) unread beyond the bound, as the command hook does (`HookRunner`). The
// scanner is loaded only then: a hook within the bound loads nothing for it.
const readStdin = async (max: number): Promise<Buffer | Scanned | null> => {
  const parts: Array<Buffer> = []
  let size = 0
  let scan: { readonly module: typeof TopLevel; readonly scanner: TopLevel.Scanner } | undefined
  for await (const chunk of process.stdin as AsyncIterable<Buffer>) {
    size += chunk.length
    if (scan !== undefined) {
      scan.scanner.push(chunk)
      continue
    }
    if (size <= max) {
      parts.push(chunk)
      continue
    }
    const module = await import("./internal/topLevel.ts")
    const { createHash } = await import("node:crypto")
    const hash = createHash("sha256")
    scan = {
      module,
      scanner: new module.Scanner({ update: (bytes) => hash.update(bytes), hex: () => hash.digest("hex") })
    }
    for (const part of parts) scan.scanner.push(part)
    scan.scanner.push(chunk)
    parts.length = 0
    if (!SALVAGEABLE.has(module.textOf(scan.scanner.seen("hook_event_name")))) return null
  }
  if (scan === undefined) return Buffer.concat(parts)
  const found = scan.scanner.finish()
  return { event: scan.module.textOf(found.values.get("hook_event_name"))!, scan: scan.module.toWire(found) }
}

type Json = { readonly [key: string]: unknown }

const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v)

const parseObject = (bytes: Uint8Array): Json | null => {
  try {
    const value: unknown = JSON.parse(decodeStrict(bytes))
    return isObject(value) ? value : null
  } catch {
    return null
  }
}

const hasExactly = (o: Json, keys: ReadonlyArray<string>): boolean => {
  const own = Object.keys(o)
  return own.length === keys.length && keys.every((k) => Object.hasOwn(o, k))
}

/**
 * Whether `output` is a hook output the guard gives for an `event`, exactly:
 * `{}` for any event; for a PreToolUse `{"hookSpecificOutput":{"hookEventName":
 * "PreToolUse","permissionDecision":"deny"|"ask"|"allow",
 * "permissionDecisionReason":STRING}}`; for a PermissionRequest
 * `{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":
 * {"behavior":"deny","message":STRING}}}` or `{"behavior":"allow"}`; for any
 * other event `{"decision":"block","reason":STRING}`. No other key, no other
 * value: an answer that is anything else is not taken.
 *
 * @since 0.1.0
 */
export const isAnswer = (event: string, output: unknown): boolean => {
  if (!isObject(output)) return false
  if (hasExactly(output, [])) return true
  if (event === "PreToolUse") {
    const h = output["hookSpecificOutput"]
    return hasExactly(output, ["hookSpecificOutput"]) && isObject(h) &&
      hasExactly(h, ["hookEventName", "permissionDecision", "permissionDecisionReason"]) &&
      h["hookEventName"] === "PreToolUse" &&
      (h["permissionDecision"] === "deny" || h["permissionDecision"] === "ask" ||
        h["permissionDecision"] === "allow") &&
      typeof h["permissionDecisionReason"] === "string"
  }
  if (event === "PermissionRequest") {
    const h = output["hookSpecificOutput"]
    if (!(hasExactly(output, ["hookSpecificOutput"]) && isObject(h))) return false
    const d = h["decision"]
    return hasExactly(h, ["hookEventName", "decision"]) && h["hookEventName"] === "PermissionRequest" &&
      isObject(d) &&
      ((hasExactly(d, ["behavior", "message"]) && d["behavior"] === "deny" && typeof d["message"] === "string") ||
        (hasExactly(d, ["behavior"]) && d["behavior"] === "allow"))
  }
  return hasExactly(output, ["decision", "reason"]) && output["decision"] === "block" &&
    typeof output["reason"] === "string"
}

/**
 * The guard's answer body for `event` as the output to print, or why it is not
 * one (`isAnswer`; strict UTF-8 JSON).
 *
 * @since 0.1.0
 */
export const checkAnswer = (event: string, body: Uint8Array): Json | string => {
  const parsed = parseObject(body)
  if (parsed === null) return "its answer is not a JSON object in UTF-8"
  return isAnswer(event, parsed) ? parsed : `its answer is not a hook output for ${event}`
}

const readToken = (options: Options): string | { readonly problem: string } => {
  if (options.tokenFile !== undefined) {
    const read = SecretFile.read(options.tokenFile, "token file", MAX_TOKEN_FILE_BYTES)
    if (read._tag === "Refused") return { problem: read.reason }
    const token = read.text.split("\n")[0]!.trim()
    return token === "" ? { problem: `the token file ${options.tokenFile} is empty` } : token
  }
  const name = options.tokenEnv ?? TOKEN_VAR
  const token = process.env[name]
  return token === undefined || token === "" ? { problem: `$${name} is not set in Claude Code's environment` } : token
}

/**
 * What came back from the guard: its status, body and answer header.
 *
 * @since 0.1.0
 */
export interface Exchanged {
  readonly status: number
  readonly body: Buffer
  readonly proof: string | undefined
}

/**
 * Largest head (status line and headers) of an answer taken from the guard
 * (16 KiB; its heads are a few hundred bytes).
 *
 * @since 0.1.0
 */
export const MAX_ANSWER_HEAD_BYTES = 16 * 1024

/**
 * Reads an HTTP/1.1 answer's head: its status, its body's length (`"chunked"`
 * for a body in chunks) and its answer proof, or why it is not one the forwarder
 * takes. Strict: a status line `HTTP/1.x NNN …`, header lines `name: value`, one
 * `Content-Length` (decimal, at most `MAX_ANSWER_BYTES`) or `Transfer-Encoding:
 * chunked` (not both); a proof given more than once is none.
 *
 * @since 0.1.0
 */
export const parseAnswerHead = (
  head: string
): { readonly status: number; readonly length: number | "chunked"; readonly proof: string | undefined } | string => {
  const lines = head.split("\r\n")
  const status = /^HTTP\/1\.[01] ([1-9][0-9]{2})(?: [^\r\n]*)?$/.exec(lines[0]!)
  if (status === null) return "its answer is not HTTP/1.1"
  let length: number | undefined
  let chunked = false
  let proof: string | undefined
  let proofs = 0
  for (const line of lines.slice(1)) {
    const header = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*(.*?)[ \t]*$/.exec(line)
    if (header === null) return "its answer has a malformed header"
    const name = header[1]!.toLowerCase()
    const value = header[2]!
    if (name === "transfer-encoding") {
      if (chunked || value.toLowerCase() !== "chunked") return "its answer's transfer encoding is not chunked"
      chunked = true
    } else if (name === "content-length") {
      if (length !== undefined || !/^[0-9]{1,10}$/.test(value)) return "its answer's length is not one number"
      length = Number(value)
    } else if (name === GuardAuth.ANSWER_HEADER) {
      proofs++
      proof = value
    }
  }
  if (chunked && length !== undefined) return "its answer has both a length and chunks"
  if (!chunked && length === undefined) return "its answer is not of a declared length"
  if (length !== undefined && length > MAX_ANSWER_BYTES) return `its answer is larger than ${MAX_ANSWER_BYTES} bytes`
  return { status: Number(status[1]), length: length ?? "chunked", proof: proofs === 1 ? proof : undefined }
}

/**
 * One request to the guard, proved with the token (`guardAuth.ts`): `POST` with a
 * JSON body or `GET`, over one connection (`node:net`, HTTP/1.1, `Connection:
 * close`); the answer taken as `parseAnswerHead` reads its head, with a body of
 * exactly its `Content-Length` or in chunks (at most `MAX_ANSWER_BYTES` either
 * way; anything else fails).
 * No deadline of its own: `signal` aborts it. `time` is the request's time the
 * proof signs (milliseconds since the epoch, from the caller's clock). Resolves
 * with the answer and the nonce the answer's proof must name.
 *
 * `node:http` is not used: loading it and its client costs more than the rest of
 * the exchange, at every hook event.
 *
 * @since 0.1.0
 */
export const exchange = (
  url: URL,
  token: string,
  request: {
    readonly method: "POST" | "GET"
    readonly body: Uint8Array
    readonly signal: AbortSignal
    readonly time: number
  }
): Promise<{ readonly answer: Exchanged; readonly nonce: string }> =>
  new Promise((resolve, reject) => {
    if (url.protocol !== "http:") return reject(new Error("not an http: URL"))
    const target = `${url.pathname}${url.search}`
    if (/[\s]/.test(target)) return reject(new Error("the URL's path is not one HTTP target"))
    const { header, nonce } = GuardAuth.sign(token, {
      method: request.method,
      path: url.pathname,
      time: request.time
    }, request.body)
    const head = [
      `${request.method} ${target} HTTP/1.1`,
      `host: ${url.host}`,
      `${GuardAuth.AUTH_HEADER}: ${header}`,
      "connection: close",
      ...(request.method === "POST"
        ? ["content-type: application/json", `content-length: ${request.body.length}`]
        : [])
    ].join("\r\n") + "\r\n\r\n"
    const host = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname
    const socket = net.connect({ host, port: url.port === "" ? 80 : Number(url.port) })
    let settled = false
    const fail = (e: Error) => {
      if (settled) return
      settled = true
      socket.destroy()
      reject(e)
    }
    const onAbort = () => fail(new Error("aborted"))
    if (request.signal.aborted) return onAbort()
    request.signal.addEventListener("abort", onAbort, { once: true })
    let received = Buffer.alloc(0)
    let answer: ReturnType<typeof parseAnswerHead> | undefined
    // The body read so far; for chunks, where the next chunk's size line starts.
    const body: Array<Buffer> = []
    let bodySize = 0
    let at = 0
    const done = () => {
      if (settled) return
      settled = true
      request.signal.removeEventListener("abort", onAbort)
      socket.destroy()
      const a = answer as Exclude<typeof answer, string | undefined>
      resolve({ answer: { status: a.status, body: Buffer.concat(body), proof: a.proof }, nonce })
    }
    const take = (bytes: Buffer) => {
      bodySize += bytes.length
      if (bodySize > MAX_ANSWER_BYTES) return fail(new Error(`its answer is larger than ${MAX_ANSWER_BYTES} bytes`))
      body.push(bytes)
    }
    // Reads what arrived; `ended`: the guard closed the connection.
    const check = (ended: boolean) => {
      if (settled) return
      if (answer === undefined) {
        const end = received.indexOf("\r\n\r\n")
        if (end < 0 ? received.length > MAX_ANSWER_HEAD_BYTES : end > MAX_ANSWER_HEAD_BYTES) {
          return fail(new Error("its answer's head is too large"))
        }
        if (end < 0) return ended ? fail(new Error("the connection closed before an answer")) : undefined
        answer = parseAnswerHead(received.subarray(0, end).toString("latin1"))
        if (typeof answer === "string") return fail(new Error(answer))
        at = end + 4
      }
      if (typeof answer === "string") return
      if (answer.length !== "chunked") {
        const got = received.length - at
        if (got > answer.length) return fail(new Error("its answer is longer than its declared length"))
        if (got < answer.length) {
          return ended ? fail(new Error("the connection closed before the whole answer")) : undefined
        }
        take(received.subarray(at))
        return done()
      }
      // Chunks: `SIZE[;ext]\r\n`, SIZE bytes, `\r\n`; the last of size 0, then `\r\n`.
      for (;;) {
        const line = received.indexOf("\r\n", at)
        if (line < 0) {
          if (received.length - at > 1024) return fail(new Error("its answer's chunks are malformed"))
          return ended ? fail(new Error("the connection closed before the whole answer")) : undefined
        }
        const size = /^([0-9A-Fa-f]{1,8})(?:;[^\r\n]*)?$/.exec(received.subarray(at, line).toString("latin1"))
        if (size === null) return fail(new Error("its answer's chunks are malformed"))
        const n = parseInt(size[1]!, 16)
        if (n === 0) {
          if (received.length < line + 4) {
            return ended ? fail(new Error("the connection closed before the whole answer")) : undefined
          }
          if (received.subarray(line + 2, line + 4).toString("latin1") !== "\r\n") {
            return fail(new Error("its answer's chunks are malformed"))
          }
          return done()
        }
        if (bodySize + n > MAX_ANSWER_BYTES) {
          return fail(new Error(`its answer is larger than ${MAX_ANSWER_BYTES} bytes`))
        }
        if (received.length < line + 2 + n + 2) {
          return ended ? fail(new Error("the connection closed before the whole answer")) : undefined
        }
        if (received.subarray(line + 2 + n, line + 4 + n).toString("latin1") !== "\r\n") {
          return fail(new Error("its answer's chunks are malformed"))
        }
        take(received.subarray(line + 2, line + 2 + n))
        at = line + 4 + n
      }
    }
    // What arrived, in a buffer that doubles as it fills (a guard that sends a
    // byte at a time costs no more than one that sends it all at once).
    let store = Buffer.allocUnsafe(4096)
    socket.on("data", (chunk: Buffer) => {
      const used = received.length
      if (used + chunk.length > MAX_ANSWER_HEAD_BYTES + 2 * MAX_ANSWER_BYTES) {
        return fail(new Error(`its answer is larger than ${MAX_ANSWER_BYTES} bytes`))
      }
      if (used + chunk.length > store.length) {
        const grown = Buffer.allocUnsafe(Math.max(2 * store.length, used + chunk.length))
        store.copy(grown, 0, 0, used)
        store = grown
      }
      chunk.copy(store, used)
      received = store.subarray(0, used + chunk.length)
      check(false)
    })
    socket.on("end", () => check(true))
    socket.on("close", () => check(true))
    socket.on("error", fail)
    socket.write(head)
    if (request.method === "POST") socket.write(request.body)
  })

const errorOf = (body: Buffer): string => {
  const parsed = parseObject(body)
  const error = parsed?.["error"]
  return typeof error === "string" ? error.slice(0, 500) : "(no reason given)"
}

/**
 * Runs `work` under a deadline of `ms`: its result, or `onTimeout`'s once the
 * deadline passes, whatever `work` is doing (it is aborted through its signal).
 *
 * @since 0.1.0
 */
export const withDeadline = <A>(
  ms: number,
  work: (signal: AbortSignal) => Promise<A>,
  onTimeout: () => A
): Promise<A> => {
  const controller = new AbortController()
  let timer: ReturnType<typeof setTimeout> | undefined
  const deadline = new Promise<A>((resolve) => {
    timer = setTimeout(() => {
      controller.abort()
      resolve(onTimeout())
    }, ms)
  })
  return Promise.race([work(controller.signal), deadline]).finally(() => clearTimeout(timer))
}

/**
 * The forwarder's clock: milliseconds since the epoch. The forwarder loads no
 * Effect (it runs once per hook event), so it has no `Clock` service: the process
 * that runs it gives it the clock once, at its entry, and a test may give another.
 *
 * @since 0.1.0
 */
export type Now = () => number

/**
 * Forwards the event `body` to the guard and decides what to print and exit with,
 * all within `leftMs` (default: the options' `timeoutMs`, `DEFAULT_TIMEOUT_MS`
 * without it; `main` passes what reading stdin left of it); the request is dated
 * by `now`.
 *
 * @since 0.1.0
 */
export const forward = async (
  options: Options,
  body: Buffer | Scanned | null,
  now: Now,
  leftMs?: number
): Promise<Outcome> => {
  const where = `the session-journal guard at ${options.url}`
  if (body === null) {
    return fallback(null, `the hook event is larger than ${MAX_EVENT_BYTES} bytes; not forwarded to ${where}`)
  }
  const scanned = Buffer.isBuffer(body) ? null : body
  const input = scanned === null ? parseObject(body as Buffer) : null
  const name = scanned !== null
    ? scanned.event
    : typeof input?.["hook_event_name"] === "string"
    ? input["hook_event_name"]
    : null
  if (name === null) {
    return fallback(null, `the hook input is not a JSON hook event in UTF-8; not forwarded to ${where}`)
  }
  const refuse = (reason: string) => fallback(name, reason, { stopHookActive: Refusal.stopHookActive(input) })
  let url: URL
  try {
    url = new URL(options.url)
    if (url.protocol !== "http:") throw new Error("not an http: URL")
    // An event too large to send goes to the guard's scan route (`GuardServer.SCAN_PATH`), beside its hook route.
    if (scanned !== null) url = new URL(`${url.pathname.replace(/\/+$/, "")}/scan`, url)
  } catch (e) {
    return refuse(`${where} cannot be reached: the URL is not valid (${messageOf(e)})`)
  }
  const token = readToken(options)
  if (typeof token !== "string") return refuse(`${where} cannot be asked: no token (${token.problem})`)
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS
  return withDeadline(
    leftMs ?? timeoutMs,
    async (signal) => {
      try {
        const sent = scanned === null ? body as Buffer : Buffer.from(JSON.stringify(scanned.scan), "utf8")
        const { answer, nonce } = await exchange(url, token, { method: "POST", body: sent, signal, time: now() })
        if (!GuardAuth.verifyAnswer(token, nonce, answer.proof, answer.status, answer.body)) {
          return refuse(
            `${where} answered ${answer.status} without proof that it holds the token ` +
              `(a wrong token, or another program on the guard's port); its answer is not used`
          )
        }
        if (answer.status !== 200) return refuse(`${where} refused the event: ${answer.status} ${errorOf(answer.body)}`)
        const output = checkAnswer(name, answer.body)
        if (typeof output === "string") return refuse(`${where} gave no usable answer: ${output}`)
        return { stdout: JSON.stringify(output) + "\n", stderr: "", code: 0 }
      } catch (e) {
        if (signal.aborted) return refuse(`${where} did not answer within ${timeoutMs} ms`)
        return refuse(`${where} is not reachable: ${messageOf(e)}`)
      }
    },
    () => refuse(`${where} did not answer within ${timeoutMs} ms`)
  )
}

/**
 * Runs the forwarder on the arguments after `claude-code forward` and the event
 * on the process's stdin; resolves with what to write to stdout and stderr and
 * the exit code (the command line writes them). The deadline (`--timeout-ms`)
 * starts here, read on `now`: reading stdin is part of it.
 *
 * @since 0.1.0
 */
export const outcomeOf = async (args: ReadonlyArray<string>, now: Now): Promise<Outcome> => {
  const parsed = parseArgs(args)
  return typeof parsed === "string"
    ? fallback(null, `session-journal claude-code forward: ${parsed}`)
    : await run(parsed, now)
}

const run = async (options: Options, now: Now): Promise<Outcome> => {
  const started = now()
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS
  const body = await withDeadline<Buffer | Scanned | null | "late" | { readonly failed: unknown }>(
    timeoutMs,
    () => readStdin(MAX_EVENT_BYTES).catch((e: unknown) => ({ failed: e })),
    () => "late"
  )
  if (body === "late") {
    return fallback(null, `the hook event did not arrive on stdin within ${timeoutMs} ms; not forwarded`)
  }
  if (body !== null && "failed" in body) {
    return fallback(null, `the hook event could not be read from stdin: ${messageOf(body.failed)}; not forwarded`)
  }
  return forward(options, body, now, Math.max(1, timeoutMs - (now() - started)))
}
