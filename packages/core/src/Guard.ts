/**
 * Guards: pure policies that decide, from one consistent snapshot of a session and
 * the parameters of a proposed tool call, whether the call is allowed. The service's
 * `decide` evaluates a guard and records the call with `allowed` set by the verdict,
 * atomically, so no other write can slip between the decision and its record.
 *
 * Every built-in guard reads cumulative counters, never the bounded rings, so it
 * keeps holding after entries are evicted.
 *
 * @since 0.1.0
 */
import type * as Schema from "effect/Schema"
import type { ValidToolParams } from "./Entry.ts"
import { GUARD_STATE_KIND, guardStateProblem, MAX_GUARD_STATE_BYTES } from "./internal/validate.ts"
import type { Snapshot } from "./JournalState.ts"
import type * as Pattern from "./Pattern.ts"

/**
 * A policy's own state (docs/DESIGN.md §16): JSON data keyed by each stateful rule's
 * canonical label (`maxInvocations(5, of: ["Bash(npm test *)"], per: "1m")`), so
 * identical rules share it. Its JSON text is at most `MAX_STATE_BYTES` long.
 *
 * @since 0.1.0
 */
export type GuardState = { readonly [label: string]: Schema.Json }

/**
 * The kind of the entry `decide` writes with a policy's next state (its payload is
 * the whole `GuardState`), after the tool entry and the decision, only when the
 * state changed.
 *
 * @since 0.1.0
 */
export const STATE_KIND: string = GUARD_STATE_KIND

/**
 * Longest JSON text of a `GuardState` (64 KiB). A `guard.state` payload over it is
 * refused when written and ignored when folded.
 *
 * @since 0.1.0
 */
export const MAX_STATE_BYTES: number = MAX_GUARD_STATE_BYTES

/**
 * Why `payload` is no `GuardState` (not a plain object, not JSON, or its JSON text
 * over `MAX_STATE_BYTES`), or `undefined` when it is one.
 *
 * @since 0.1.0
 */
export const stateProblem: (payload: unknown) => string | undefined = guardStateProblem

/**
 * What a guard sees besides the snapshot and the parameters: the call as the agent
 * sent it (`null` when the door knows only the parameters), where relative paths are
 * anchored (any anchor may be absent), the time from Effect's `Clock`, the tokens the
 * agent used so far as the door measured them (`null`: unknown), whether a person
 * can be prompted, and the policy's own state (`null` before any).
 *
 * @since 0.1.0
 */
export interface GuardContext {
  readonly call: Pattern.Call | null
  readonly where: Partial<Pattern.Context>
  readonly nowMillis: number
  readonly tokens: bigint | null
  readonly canAsk: boolean
  readonly state: GuardState | null
}

/**
 * The context of a guard evaluated without one (a caller that passes only the
 * snapshot and the parameters): no call, no anchors, time 0, tokens unknown, no one
 * to ask, no state. Rules that need what it lacks fail closed.
 *
 * @since 0.1.0
 */
export const noContext: GuardContext = {
  call: null,
  where: {},
  nowMillis: 0,
  tokens: null,
  canAsk: false,
  state: null
}

/**
 * The outcome of a guard. A denial carries a sentence (`reason`) and the guard that
 * denied (`guard`): the combinator with the arguments that decided, written as the
 * policy file writes it (`maxStreak(3)`, `forbiddenTransitions([["Write","Bash"]])`),
 * so a user can find it in their policy. An `Ask` carries the same: a
 * person must approve the call; where no one can be asked, `decide` turns it into a
 * denial (`unanswered`). `state` is the policy's next state, given only
 * when it changed (the context's own `state` object means unchanged). The tool entry records `allowed: false` for a denial and `true`
 * for an ask (docs/DESIGN.md §16); the decision entry records the verdict.
 *
 * @since 0.1.0
 */
export type Verdict =
  | { readonly _tag: "Allow"; readonly state?: GuardState | undefined }
  | { readonly _tag: "Deny"; readonly reason: string; readonly guard: string; readonly state?: GuardState | undefined }
  | { readonly _tag: "Ask"; readonly reason: string; readonly guard: string; readonly state?: GuardState | undefined }

/**
 * A guard: a pure function of the session snapshot, the proposed call and (since
 * 0.8.0) its context. A guard of two arguments is still a guard; a caller that has
 * no context passes none, and a guard that needs one reads `noContext`.
 *
 * @since 0.1.0
 */
export type Guard = (snapshot: Snapshot, params: ValidToolParams, context?: GuardContext) => Verdict

/**
 * The allowing verdict.
 *
 * @since 0.1.0
 */
export const allow: Verdict = { _tag: "Allow" }

/**
 * A denying verdict with its reason and the name of the guard that denied
 * (returned to the caller of `decide`).
 *
 * @since 0.1.0
 */
export const deny = (reason: string, guard: string): Verdict => ({ _tag: "Deny", reason, guard })

/**
 * A verdict that asks a person to approve the call, with its reason and the name of
 * the guard that asked.
 *
 * @since 0.1.0
 */
export const ask = (reason: string, guard: string): Verdict => ({ _tag: "Ask", reason, guard })

/**
 * The verdict where no one can be asked: an `Ask` becomes a denial by the same
 * guard, saying that approval was needed; any other verdict is itself.
 *
 * @since 0.1.0
 */
export const unanswered = (verdict: Verdict): Verdict =>
  verdict._tag === "Ask"
    ? {
      _tag: "Deny",
      reason: `approval was needed (${verdict.reason}) and no one could be asked`,
      guard: verdict.guard,
      ...(verdict.state === undefined ? {} : { state: verdict.state })
    }
    : verdict

/**
 * The name of a guard as denials carry it: the combinator and its arguments,
 * `maxStreak(3)`; an argument that is not a number is written as JSON,
 * `denyList(["rm"])`.
 *
 * @since 0.1.0
 */
export const label = (combinator: string, ...args: ReadonlyArray<unknown>): string =>
  `${combinator}(${
    args.map((a) => typeof a === "number" || typeof a === "bigint" ? String(a) : JSON.stringify(a)).join(", ")
  })`

/**
 * Whether a verdict allows: only `Allow` does (an `Ask` does not: a gate that cannot
 * prompt refuses it).
 *
 * @since 0.1.0
 */
export const isAllowed = (verdict: Verdict): boolean => verdict._tag === "Allow"

/**
 * The kind of the entry `decide` writes after a decided call (and the caller's
 * `beside` entries) when those do not already record the decision: its payload is
 * `decisionPayload`.
 *
 * @since 0.1.0
 */
export const DECISION_KIND = "guard.decision"

/**
 * What a decision entry records about a decided call: the tool entry's sequence,
 * the verdict (`allow` | `deny` | `ask`), and for a denial or an ask the guard and
 * its reason (null when allowed); with `tokens`, the tokens the agent
 * had used as the door measured them, which the decision saw. Every door writes at
 * least these fields, so `stats`, `report` and `serve` read any decision alike.
 *
 * @since 0.1.0
 */
export const decisionPayload = (verdict: Verdict, toolSequence: number, tokens?: bigint | null): {
  readonly tool_sequence: number
  readonly verdict: "allow" | "deny" | "ask"
  readonly guard: string | null
  readonly reason: string | null
  readonly tokens?: number | string
} => ({
  tool_sequence: toolSequence,
  verdict: verdict._tag === "Allow" ? "allow" : verdict._tag === "Ask" ? "ask" : "deny",
  guard: verdict._tag === "Allow" ? null : verdict.guard,
  reason: verdict._tag === "Allow" ? null : verdict.reason,
  ...(tokens === undefined || tokens === null ? {} : { tokens: tokenJson(tokens) })
})

// As a counter is written (JournalState.counterToJson), not imported: the state module
// imports this one.
const tokenJson = (n: bigint): number | string => n >= 0n && n <= 9007199254740991n ? Number(n) : n.toString()

/**
 * Whether `payload` records `verdict` for the call at `toolSequence` (its
 * `tool_sequence`, `verdict`, and for a denial or an ask `guard` and `reason`, are
 * those of `decisionPayload`).
 *
 * @since 0.1.0
 */
export const recordsDecision = (payload: unknown, verdict: Verdict, toolSequence: number): boolean => {
  if (typeof payload !== "object" || payload === null || Array.isArray(payload)) return false
  const p = payload as { readonly [key: string]: unknown }
  const expected = decisionPayload(verdict, toolSequence)
  return p["tool_sequence"] === expected.tool_sequence && p["verdict"] === expected.verdict &&
    (verdict._tag === "Allow" || (p["guard"] === expected.guard && p["reason"] === expected.reason))
}

// Limits are turned into bigint bounds once, when the guard is built, so that
// evaluating a guard inside `decide` can never throw (BigInt(1.5) would). The
// quantities compared are whole numbers, so a fractional limit rounds down;
// +Infinity means unbounded; NaN and -Infinity bound everything (fail closed).
const toBound = (limit: number | bigint): bigint | null => {
  if (typeof limit === "bigint") return limit
  if (limit === Infinity) return null
  if (Number.isNaN(limit) || limit === -Infinity) return -1n
  return BigInt(Math.floor(limit))
}

const exceeds = (n: bigint, bound: bigint | null): boolean => bound !== null && n > bound

/**
 * Denies when the session's total bytes read plus this call's would exceed `limit`.
 *
 * @since 0.1.0
 */
export const maxBytesRead = (limit: number | bigint): Guard => {
  const bound = toBound(limit)
  const name = label("maxBytesRead", limit)
  return (s, p) =>
    exceeds(s.data_flow.total_bytes_read + BigInt(p.bytes_read), bound)
      ? deny(`bytes read would exceed ${limit}`, name)
      : allow
}

/**
 * Denies when the session's total bytes written plus this call's would exceed `limit`.
 *
 * @since 0.1.0
 */
export const maxBytesWritten = (limit: number | bigint): Guard => {
  const bound = toBound(limit)
  const name = label("maxBytesWritten", limit)
  return (s, p) =>
    exceeds(s.data_flow.total_bytes_written + BigInt(p.bytes_written), bound)
      ? deny(`bytes written would exceed ${limit}`, name)
      : allow
}

/**
 * Denies the call that would make more than `limit` invocations (denied calls count
 * too, as in chio).
 *
 * @since 0.1.0
 */
export const maxInvocations = (limit: number | bigint): Guard => {
  const bound = toBound(limit)
  const name = label("maxInvocations", limit)
  return (s) =>
    exceeds(s.data_flow.total_invocations + 1n, bound) ? deny(`invocations would exceed ${limit}`, name) : allow
}

/**
 * Denies a call whose delegation depth exceeds `limit`.
 *
 * @since 0.1.0
 */
export const maxDelegationDepth = (limit: number): Guard => {
  const bound = toBound(limit)
  const name = label("maxDelegationDepth", limit)
  return (_, p) =>
    exceeds(BigInt(p.delegation_depth), bound)
      ? deny(`delegation depth ${p.delegation_depth} exceeds ${limit}`, name)
      : allow
}

/**
 * Denies the call that would make the same tool run more than `limit` times in a
 * row (a first call counts as a run of one). Reads the streak counter, so it holds
 * after the streak outgrew the ring.
 *
 * @since 0.1.0
 */
export const maxStreak = (limit: number | bigint): Guard => {
  const bound = toBound(limit)
  const name = label("maxStreak", limit)
  return (s, p) => {
    const streak = s.current_streak_tool === p.tool_name ? s.current_streak_len + 1n : 1n
    return exceeds(streak, bound) ? deny(`${p.tool_name} would run more than ${limit} times in a row`, name) : allow
  }
}

/**
 * Denies a call to `to` directly after a call to `from`, for each listed pair. A
 * denial names the pair that matched: `forbiddenTransitions([["Write","Bash"]])`.
 *
 * @since 0.1.0
 */
export const forbiddenTransitions = (pairs: ReadonlyArray<readonly [from: string, to: string]>): Guard => {
  const list = pairs.map(([from, to]) => [from, to] as const)
  return (s, p) => {
    const last = s.current_streak_tool
    if (last === null) return allow
    for (const [from, to] of list) {
      if (from === last && to === p.tool_name) {
        return deny(`${to} may not follow ${from}`, label("forbiddenTransitions", [[from, to]]))
      }
    }
    return allow
  }
}

/**
 * Denies a call to a tool unless each of its required predecessors has been called
 * at least once. Reads `tool_counts`: a predecessor that was never counted (also one
 * dropped because the cap was full) fails closed. A denial names the tool's entry:
 * `requirePredecessors({"Bash":["Read"]})`.
 *
 * @since 0.1.0
 */
export const requirePredecessors = (required: Readonly<Record<string, ReadonlyArray<string>>>): Guard => (s, p) => {
  const needs = Object.hasOwn(required, p.tool_name) ? required[p.tool_name]! : []
  for (const name of needs) {
    if ((s.tool_counts.get(name) ?? 0n) === 0n) {
      // A computed key is an own property even when it is "__proto__".
      return deny(`${p.tool_name} requires ${name} first`, label("requirePredecessors", { [p.tool_name]: needs }))
    }
  }
  return allow
}

/**
 * Allows only the listed tools.
 *
 * @since 0.1.0
 */
export const allowList = (names: Iterable<string>): Guard => {
  const set = new Set(names)
  const name = label("allowList", [...set])
  return (_, p) => set.has(p.tool_name) ? allow : deny(`${p.tool_name} is not on the allow list`, name)
}

/**
 * Denies the listed tools. A denial names the tool it matched: `denyList(["rm"])`.
 *
 * @since 0.1.0
 */
export const denyList = (names: Iterable<string>): Guard => {
  const set = new Set(names)
  return (_, p) =>
    set.has(p.tool_name) ? deny(`${p.tool_name} is on the deny list`, label("denyList", [p.tool_name])) : allow
}

/**
 * Allows when every guard allows; the first denial (in order) is the verdict, else
 * the first ask.
 *
 * @since 0.1.0
 */
export const all = (...guards: ReadonlyArray<Guard>): Guard => (s, p, c) => {
  let asked: Verdict | undefined
  for (const g of guards) {
    const v = g(s, p, c)
    if (v._tag === "Deny") return v
    if (v._tag === "Ask") asked ??= v
  }
  return asked ?? allow
}

/**
 * Allows when at least one guard allows; otherwise the first ask, if any guard asks;
 * otherwise denies with every reason, naming every denying guard:
 * `any(allowList(["Read"]), maxStreak(1))`. With no guards it denies (fail closed),
 * as `any()`.
 *
 * @since 0.1.0
 */
export const any = (...guards: ReadonlyArray<Guard>): Guard => (s, p, c) => {
  const reasons: Array<string> = []
  const names: Array<string> = []
  let asked: Verdict | undefined
  for (const g of guards) {
    const v = g(s, p, c)
    if (v._tag === "Allow") return v
    if (v._tag === "Ask") asked ??= v
    reasons.push(v.reason)
    names.push(v.guard)
  }
  return asked ?? deny(reasons.length === 0 ? "no guard allows" : reasons.join("; "), `any(${names.join(", ")})`)
}
