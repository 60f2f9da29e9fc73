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
import type { ValidToolParams } from "./Entry.ts"
import type { Snapshot } from "./JournalState.ts"

/**
 * The outcome of a guard. A denial carries a sentence (`reason`) and the guard that
 * denied (`guard`): the combinator with the arguments that decided, written as the
 * policy file writes it (`maxStreak(3)`, `forbiddenTransitions([["Write","Bash"]])`),
 * so a user can find it in their policy. A verdict is never hashed: the chain
 * records only the call's `allowed`.
 *
 * @since 0.1.0
 */
export type Verdict =
  | { readonly _tag: "Allow" }
  | { readonly _tag: "Deny"; readonly reason: string; readonly guard: string }

/**
 * A guard: a pure function of the session snapshot and the proposed call.
 *
 * @since 0.1.0
 */
export type Guard = (snapshot: Snapshot, params: ValidToolParams) => Verdict

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
 * The name of a guard as denials carry it: the combinator and its arguments,
 * `maxStreak(3)`; an argument that is not a number is written as JSON,
 * `denyList(["rm"])`.
 *
 * @since 0.4.0
 */
export const label = (combinator: string, ...args: ReadonlyArray<unknown>): string =>
  `${combinator}(${
    args.map((a) => typeof a === "number" || typeof a === "bigint" ? String(a) : JSON.stringify(a)).join(", ")
  })`

/**
 * Whether a verdict allows.
 *
 * @since 0.1.0
 */
export const isAllowed = (verdict: Verdict): boolean => verdict._tag === "Allow"

/**
 * The kind of the entry `decide` writes after a decided call (and the caller's
 * `beside` entries) when those do not already record the decision: its payload is
 * `decisionPayload`.
 *
 * @since 0.7.0
 */
export const DECISION_KIND = "guard.decision"

/**
 * What a decision entry records about a decided call: the tool entry's sequence,
 * the verdict (`allow` | `deny`), and for a denial the guard and its reason
 * (null when allowed). Every door writes at least these fields, so `stats`,
 * `report` and `serve` read any decision alike.
 *
 * @since 0.7.0
 */
export const decisionPayload = (verdict: Verdict, toolSequence: number): {
  readonly tool_sequence: number
  readonly verdict: "allow" | "deny"
  readonly guard: string | null
  readonly reason: string | null
} => ({
  tool_sequence: toolSequence,
  verdict: verdict._tag === "Allow" ? "allow" : "deny",
  guard: verdict._tag === "Allow" ? null : verdict.guard,
  reason: verdict._tag === "Allow" ? null : verdict.reason
})

/**
 * Whether `payload` records `verdict` for the call at `toolSequence` (its
 * `tool_sequence`, `verdict`, and for a denial `guard` and `reason`, are those of
 * `decisionPayload`).
 *
 * @since 0.7.0
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
 * Allows when every guard allows; the first denial (in order) is the verdict.
 *
 * @since 0.1.0
 */
export const all = (...guards: ReadonlyArray<Guard>): Guard => (s, p) => {
  for (const g of guards) {
    const v = g(s, p)
    if (v._tag === "Deny") return v
  }
  return allow
}

/**
 * Allows when at least one guard allows; otherwise denies with every reason, naming
 * every denying guard: `any(allowList(["Read"]), maxStreak(1))`. With no guards it
 * denies (fail closed), as `any()`.
 *
 * @since 0.1.0
 */
export const any = (...guards: ReadonlyArray<Guard>): Guard => (s, p) => {
  const reasons: Array<string> = []
  const names: Array<string> = []
  for (const g of guards) {
    const v = g(s, p)
    if (v._tag === "Allow") return v
    reasons.push(v.reason)
    names.push(v.guard)
  }
  return deny(reasons.length === 0 ? "no guard allows" : reasons.join("; "), `any(${names.join(", ")})`)
}
