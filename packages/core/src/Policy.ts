/**
 * The policy file: a guard written as JSON, one key per `Guard` combinator with the
 * same name and meaning, decoded with Schema into plain data and turned into a
 * `Guard` by `toGuard`.
 *
 * ```json
 * [
 *   { "maxStreak": 3 },
 *   { "forbiddenTransitions": [["Write", "Bash"]] },
 *   { "requirePredecessors": { "Bash": ["Read"] } },
 *   { "any": [{ "allowList": ["Read", "Grep"] }, { "maxBytesRead": 50000000 }] }
 * ]
 * ```
 *
 * Every object has exactly one key: `all`, `any` (arrays of policies),
 * `maxBytesRead`, `maxBytesWritten`, `maxInvocations`, `maxDelegationDepth`,
 * `maxStreak` (non-negative integers up to 2^53 − 1), `forbiddenTransitions` (pairs
 * `[from, to]` of tool names), `requirePredecessors` (tool name → tool names),
 * `allowList`, `denyList` (tool names). A top-level array means `all`. Unknown keys
 * are refused. A bad document decodes to `InvalidPolicy`, each issue naming its
 * JSON path and what was expected: `$.all[2].maxStreak: expected a non-negative
 * integer, got -1`.
 *
 * `format` writes a policy in the notation denials name their guard with
 * (`Guard.label`): `all(maxStreak(3), forbiddenTransitions([["Write","Bash"]]))`.
 *
 * Since 0.8.0 policies also see what a call does (docs/DESIGN.md §16): `deny` and
 * `ask` take patterns (`Pattern`), the limits take `of` (count only matching calls)
 * and `per` (a sliding window), `after` refuses calls once a matching call was made,
 * and `maxTokens` bounds the tokens used. `compile` prepares a policy once; `check`,
 * `explain` and `observe` serve the author and the doors.
 *
 * @since 0.1.0
 */
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as SchemaIssue from "effect/SchemaIssue"
import * as Entry from "./Entry.ts"
import { messageOf } from "./Errors.ts"
import * as Guard from "./Guard.ts"
import { duplicateKeys } from "./internal/duplicateKeys.ts"
import { check as checkJson, copiedFrom } from "./internal/jcs.ts"
import * as PatternIndex from "./internal/patternIndex.ts"
import * as Slots from "./internal/slots.ts"
import { isIdentity, MAX_U53 } from "./internal/validate.ts"
import * as JournalState from "./JournalState.ts"
import * as Pattern from "./Pattern.ts"
import { utf8Length } from "./Utf8.ts"

// ---------------------------------------------------------------------------
// The data

/**
 * A decoded policy: one object with one key, exactly as the file writes it.
 *
 * @since 0.1.0
 */
export type Policy =
  | { readonly all: ReadonlyArray<Policy> }
  | { readonly any: ReadonlyArray<Policy> }
  | ({ readonly maxBytesRead: number } & Scope)
  | ({ readonly maxBytesWritten: number } & Scope)
  | ({ readonly maxInvocations: number } & Scope)
  | { readonly maxDelegationDepth: number }
  | ({ readonly maxStreak: number } & Scope)
  | { readonly forbiddenTransitions: ReadonlyArray<readonly [from: string, to: string]> }
  | { readonly requirePredecessors: { readonly [tool: string]: ReadonlyArray<string> } }
  | { readonly allowList: ReadonlyArray<string> }
  | { readonly denyList: ReadonlyArray<string> }
  | { readonly after: Patterns; readonly deny: Patterns; readonly reason?: string }
  | { readonly after: Patterns; readonly ask: Patterns; readonly reason?: string }
  | { readonly deny: Patterns; readonly reason?: string }
  | { readonly ask: Patterns; readonly reason?: string }
  | { readonly maxTokens: number }

/**
 * Patterns as a policy writes them: one pattern text, or an array of them.
 *
 * @since 0.1.0
 */
export type Patterns = string | ReadonlyArray<string>

/**
 * The modifiers of a limit: `of` counts only the calls that match (deny mode), `per`
 * counts in a sliding window of that duration (`"30s"`, `"1m"`, `"1h"`, `"1d"`).
 *
 * @since 0.1.0
 */
export interface Scope {
  readonly of?: Patterns
  readonly per?: string
}

/**
 * A policy object as JSON: every key optional, exactly one present once decoded.
 *
 * @since 0.1.0
 */
export interface PolicyJson {
  readonly all?: ReadonlyArray<PolicyJson>
  readonly any?: ReadonlyArray<PolicyJson>
  readonly maxBytesRead?: number
  readonly maxBytesWritten?: number
  readonly maxInvocations?: number
  readonly maxDelegationDepth?: number
  readonly maxStreak?: number
  readonly forbiddenTransitions?: ReadonlyArray<readonly [string, string]>
  readonly requirePredecessors?: { readonly [tool: string]: ReadonlyArray<string> }
  readonly allowList?: ReadonlyArray<string>
  readonly denyList?: ReadonlyArray<string>
  readonly deny?: Patterns
  readonly ask?: Patterns
  readonly after?: Patterns
  readonly maxTokens?: number
  readonly reason?: string
  readonly of?: Patterns
  readonly per?: string
}

/**
 * The main keys of a policy object: one per `Guard` combinator, and
 * `deny`, `ask`, `after` and `maxTokens`.
 *
 * @since 0.1.0
 */
export const keys = [
  "all",
  "any",
  "maxBytesRead",
  "maxBytesWritten",
  "maxInvocations",
  "maxDelegationDepth",
  "maxStreak",
  "forbiddenTransitions",
  "requirePredecessors",
  "allowList",
  "denyList",
  "deny",
  "ask",
  "after",
  "maxTokens"
] as const

/**
 * The modifiers, and the main keys each goes with: `reason` with `deny`, `ask` and
 * `after`; `of` and `per` with the four limits. With `after`, `deny` or `ask` is its
 * second list.
 *
 * @since 0.1.0
 */
export const modifiers: { readonly [modifier: string]: ReadonlyArray<string> } = {
  reason: ["deny", "ask", "after"],
  of: ["maxInvocations", "maxStreak", "maxBytesRead", "maxBytesWritten"],
  per: ["maxInvocations", "maxStreak", "maxBytesRead", "maxBytesWritten"]
}

const mainKeys: ReadonlySet<string> = new Set(keys)

/**
 * Deepest nesting of a policy document, in JSON levels (`{"all":[…]}` is two). Far
 * beyond any real policy; it keeps the decoder's and `toGuard`'s recursion bounded.
 *
 * @since 0.1.0
 */
export const MAX_DEPTH = 64

// ---------------------------------------------------------------------------
// Schemas

// A type-level failure says the `identifier` of the schema's last check was
// expected, a failed check its own `expected`.
const Limit = Schema.Number.check(
  Schema.makeFilter((n: number) => Number.isInteger(n) && n >= 0 && n <= MAX_U53, {
    identifier: "a non-negative integer",
    expected: "a non-negative integer up to 2^53 - 1"
  })
)

const toolName = "a tool name (not empty, no surrounding whitespace or control characters)"

const Name = Schema.String.check(
  Schema.makeFilter((s: string) => isIdentity(s), { identifier: toolName, expected: toolName })
)

const Names = Schema.Array(Name).annotate({ identifier: "an array of tool names" })

const Pair = Schema.Tuple([Name, Name]).annotate({ identifier: "a pair [from, to] of tool names" })

const Predecessors = Schema.Record(Schema.String, Names).check(
  Schema.makeFilter((o: { readonly [tool: string]: ReadonlyArray<string> }) => {
    const bad = Object.keys(o).find((k) => !isIdentity(k))
    return bad === undefined ? undefined : `expected keys that are tool names, got ${JSON.stringify(bad)}`
  }, { identifier: "an object from tool names to arrays of tool names" })
)

const patternsId = "a pattern or an array of patterns"
const PatternList = Schema.Union([Schema.String, Schema.Array(Schema.String)]).annotate({ identifier: patternsId })

const durationId = "a duration: an integer from 1 and s, m, h or d (\"30s\", \"1m\"), at most 366d"
const Duration = Schema.String.check(
  Schema.makeFilter((t: string) => Slots.durationMillis(t) !== undefined, {
    identifier: durationId,
    expected: durationId
  })
)

// What is wrong with the keys of a policy object, and at which key, or undefined.
const shapeProblem = (o: object): { readonly key?: string; readonly message: string } | undefined => {
  const present = Object.keys(o)
  if (present.includes("after")) {
    const second = present.filter((k) => k === "deny" || k === "ask")
    if (second.length !== 1) {
      return { message: "expected \"after\" with exactly one of \"deny\" or \"ask\"" }
    }
    const bad = present.find((k) => k !== "after" && k !== "reason" && k !== second[0])
    return bad === undefined
      ? undefined
      : { key: bad, message: `"${bad}" does not go with "after" (it takes "deny" or "ask" and "reason")` }
  }
  const mains = present.filter((k) => mainKeys.has(k))
  if (mains.length !== 1) {
    return {
      message: `${oneKey}, got ${present.length === 0 ? "none" : present.map((k) => JSON.stringify(k)).join(", ")}`
    }
  }
  const main = mains[0]!
  for (const k of present) {
    if (k === main) continue
    const takes = modifiers[k]
    if (takes !== undefined && !takes.includes(main)) {
      return { key: k, message: `"${k}" does not go with "${main}"; it modifies ${takes.join(", ")}` }
    }
  }
  return undefined
}

const isPolicy = (o: PolicyJson): o is Policy => shapeProblem(o) === undefined

const oneKey = `expected exactly one of the keys ${keys.join(", ")}`

const Node: Schema.Codec<Policy, PolicyJson> = Schema.Struct({
  all: Schema.optionalKey(Schema.Array(Schema.suspend(() => Node)).annotate({ identifier: "an array of policies" })),
  any: Schema.optionalKey(Schema.Array(Schema.suspend(() => Node)).annotate({ identifier: "an array of policies" })),
  maxBytesRead: Schema.optionalKey(Limit),
  maxBytesWritten: Schema.optionalKey(Limit),
  maxInvocations: Schema.optionalKey(Limit),
  maxDelegationDepth: Schema.optionalKey(Limit),
  maxStreak: Schema.optionalKey(Limit),
  forbiddenTransitions: Schema.optionalKey(
    Schema.Array(Pair).annotate({ identifier: "an array of pairs [from, to] of tool names" })
  ),
  requirePredecessors: Schema.optionalKey(Predecessors),
  allowList: Schema.optionalKey(Names),
  denyList: Schema.optionalKey(Names),
  deny: Schema.optionalKey(PatternList),
  ask: Schema.optionalKey(PatternList),
  after: Schema.optionalKey(PatternList),
  maxTokens: Schema.optionalKey(Limit),
  reason: Schema.optionalKey(Schema.String),
  of: Schema.optionalKey(PatternList),
  per: Schema.optionalKey(Duration)
}).pipe(
  Schema.refine(isPolicy, { identifier: "a policy object", message: oneKey })
)

/**
 * One policy object. Decode it with `decode` / `decodeText`, which also refuse
 * unknown keys (this schema alone, with Effect's default parse options, drops them).
 *
 * @since 0.1.0
 */
export const Policy: Schema.Codec<Policy, PolicyJson> = Node

/**
 * A policy document: one policy object, or an array of them meaning `all`.
 *
 * @since 0.1.0
 */
export const Document = Schema.Union([
  Schema.Array(Node),
  Node
]).annotate({ identifier: "a policy: an object with one key, or an array of them" })

// ---------------------------------------------------------------------------
// Errors

/**
 * One problem of a policy document: where (`$.all[2].maxStreak`) and what was expected.
 *
 * @since 0.1.0
 */
export const Issue = Schema.Struct({
  path: Schema.String,
  message: Schema.String
})

/**
 * A policy document that does not decode; `issues` lists every problem found, each
 * with its JSON path.
 *
 * @since 0.1.0
 */
export class InvalidPolicy extends Schema.TaggedError<InvalidPolicy>()("InvalidPolicy", {
  issues: Schema.Array(Issue)
}) {
  override get message(): string {
    return this.issues.map((i) => `${i.path}: ${i.message}`).join("; ")
  }
}

const identifier = /^[A-Za-z_$][A-Za-z0-9_$]*$/

/**
 * A JSON path in the usual notation: `$`, `.key` for identifier keys, `["a b"]`
 * for other keys, `[2]` for array indices.
 *
 * @since 0.1.0
 */
export const formatPath = (path: ReadonlyArray<PropertyKey>): string => {
  let out = "$"
  for (const key of path) {
    if (typeof key === "number") out += `[${key}]`
    else if (typeof key === "string" && identifier.test(key)) out += `.${key}`
    else out += `[${JSON.stringify(String(key))}]`
  }
  return out
}

const lower = (s: string): string => s.startsWith("Expected ") ? `e${s.slice(1)}` : s

const unknownKey = `unknown key, expected one of ${keys.join(", ")} or a modifier (${
  Object.keys(modifiers).join(", ")
})`

// Excess keys and missing elements occur only in policy objects and in pairs.
const leafHook: SchemaIssue.LeafHook = (issue) => {
  switch (issue._tag) {
    case "UnexpectedKey":
      return unknownKey
    case "MissingKey":
      return "missing, expected a pair [from, to] of tool names"
    default:
      return lower(SchemaIssue.defaultLeafHook(issue))
  }
}

const formatter = SchemaIssue.makeFormatterStandardSchemaV1({ leafHook })

const at = (json: unknown, path: ReadonlyArray<PropertyKey>): unknown => {
  let v = json
  for (const key of path) v = typeof v === "object" && v !== null ? (v as Record<PropertyKey, unknown>)[key] : undefined
  return v
}

// Says which keys an object with the wrong keys had, and where, and that a pair
// has an element too many: the hooks see the issue, not where it is.
const describe = (
  json: unknown,
  path: ReadonlyArray<PropertyKey>,
  message: string
): { readonly path: ReadonlyArray<PropertyKey>; readonly message: string } => {
  if (message === unknownKey && typeof path[path.length - 1] === "number") {
    return { path, message: "unexpected element, expected a pair [from, to] of tool names" }
  }
  if (message === oneKey) {
    const v = at(json, path)
    const problem = typeof v === "object" && v !== null ? shapeProblem(v) : undefined
    if (problem === undefined) return { path, message: `${oneKey}, got none` }
    return { path: problem.key === undefined ? path : [...path, problem.key], message: problem.message }
  }
  return { path, message }
}

const invalid = (path: string, message: string) => new InvalidPolicy({ issues: [{ path, message }] })

// ---------------------------------------------------------------------------
// Decoding and encoding

/**
 * Decodes a parsed policy document (an object, or an array meaning `all`).
 *
 * @since 0.1.0
 */
export const decode = (json: unknown): Result.Result<Policy, InvalidPolicy> => {
  // Bounded before the recursive decoder sees it; lone surrogates are refused too
  // (a tool name must be well-formed to be journaled).
  const problem = checkJson(json, { maxDepth: MAX_DEPTH, maxSize: Infinity })
  if (problem !== undefined) {
    return Result.fail(
      problem._tag === "TooDeep"
        ? invalid("$", `nested deeper than ${MAX_DEPTH} levels`)
        : invalid(problem.path, "expected JSON (well-formed strings, finite numbers)")
    )
  }
  const decoded = Schema.decodeUnknownResult(Document)(json, {
    onExcessProperty: "error",
    errors: "all",
    reportInput: true
  })
  if (Result.isFailure(decoded)) {
    const issues = formatter(decoded.failure.issue).issues.map((i) => {
      const found = describe(json, (i.path ?? []).map((k) => (typeof k === "object" ? k.key : k)), lower(i.message))
      return { path: formatPath(found.path), message: found.message }
    })
    return Result.fail(new InvalidPolicy({ issues }))
  }
  const policy: Policy = isArray(decoded.success) ? { all: decoded.success } : decoded.success
  const issues = patternIssues(policy, Array.isArray(json) ? [] : null)
  const bound = stateBound(policy)
  if (bound > Guard.MAX_STATE_BYTES) {
    issues.push({
      path: "$",
      message: `the policy's state could take ${bound} bytes, over the bound of ${Guard.MAX_STATE_BYTES}: ` +
        "fewer or shorter rules with of, per or after"
    })
  }
  return issues.length === 0 ? Result.succeed(policy) : Result.fail(new InvalidPolicy({ issues }))
}

// Every pattern text parsed, each fault at its JSON path. `prefix` is the path of the
// top-level array when the document was one (its elements are `$[i]`), else null.
const patternIssues = (
  root: Policy,
  prefix: ReadonlyArray<PropertyKey> | null
): Array<{ readonly path: string; readonly message: string }> => {
  const out: Array<{ readonly path: string; readonly message: string }> = []
  const visit = (p: Policy, path: ReadonlyArray<PropertyKey>): void => {
    if ("all" in p || "any" in p) {
      const children = "all" in p ? p.all : p.any
      const key = "all" in p ? "all" : "any"
      children.forEach((c, i) => visit(c, path === prefix ? [i] : [...path, key, i]))
      return
    }
    for (const key of ["deny", "ask", "after", "of"] as const) {
      const value = (p as PolicyJson)[key]
      if (value === undefined) continue
      const texts = typeof value === "string" ? [value] : value
      texts.forEach((t, i) => {
        const r = Pattern.parse(t)
        if (Result.isFailure(r)) {
          // A tool misspelled in case reads its specifier as another tool's would: say which tool was meant.
          const tool = t.slice(0, Math.max(0, t.indexOf("(")))
          const meant = byLowerCase.get(tool.toLowerCase())
          out.push({
            path: formatPath(typeof value === "string" ? [...path, key] : [...path, key, i]),
            message: `expected a pattern: ${r.failure.reason} at ${r.failure.at}: ${r.failure.detail}` +
              (meant !== undefined && meant !== tool ? ` (Claude Code's tool is ${JSON.stringify(meant)})` : "")
          })
        }
      })
    }
  }
  visit(root, prefix ?? [])
  return out
}

const isArray = (p: Policy | ReadonlyArray<Policy>): p is ReadonlyArray<Policy> => Array.isArray(p)

/**
 * Decodes the text of a policy file.
 *
 * @since 0.1.0
 */
export const decodeText = (text: string): Result.Result<Policy, InvalidPolicy> => {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (e) {
    return Result.fail(invalid("$", `expected JSON: ${messageOf(e)}`))
  }
  return decode(json)
}

/**
 * A policy as the JSON value of a file (`decode` gives it back).
 *
 * @since 0.1.0
 */
export const encode = (policy: Policy): PolicyJson => Schema.encodeSync(Policy)(policy)

// ---------------------------------------------------------------------------
// Meaning

// The pattern texts of a list, as written.
const textsOf = (p: Patterns): ReadonlyArray<string> => typeof p === "string" ? [p] : p

// The canonical texts of a list (a text that does not parse is kept as written).
const canonical = (p: Patterns): Array<string> =>
  textsOf(p).map((t) => {
    const r = Pattern.parse(t)
    return Result.isSuccess(r) ? Pattern.format(r.success) : t
  })

const limitKeys = ["maxInvocations", "maxStreak", "maxBytesRead", "maxBytesWritten"] as const
type LimitKey = typeof limitKeys[number]

const limitOf = (policy: Policy): { readonly key: LimitKey; readonly limit: number; readonly scope: Scope } | null => {
  for (const key of limitKeys) {
    if (key in policy) {
      const p = policy as { readonly [k: string]: unknown } & Scope
      return {
        key,
        limit: p[key] as number,
        scope: { ...(p.of === undefined ? {} : { of: p.of }), ...(p.per === undefined ? {} : { per: p.per }) }
      }
    }
  }
  return null
}

// The label of a rule written as the policy file writes it, patterns canonical:
// `maxInvocations(5, of: ["Bash(npm test *)"], per: "1m")`.
const ruleLabel = (policy: Policy): string => {
  const limit = limitOf(policy)
  if (limit !== null) {
    const mods = [
      ...(limit.scope.of === undefined ? [] : [`of: ${JSON.stringify(canonical(limit.scope.of))}`]),
      ...(limit.scope.per === undefined ? [] : [`per: ${JSON.stringify(limit.scope.per)}`])
    ]
    return mods.length === 0
      ? Guard.label(limit.key, limit.limit)
      : `${limit.key}(${[String(limit.limit), ...mods].join(", ")})`
  }
  const reason = "reason" in policy && policy.reason !== undefined ? `, reason: ${JSON.stringify(policy.reason)}` : ""
  if ("after" in policy) {
    const [kind, list] = "deny" in policy ? ["deny", policy.deny] : ["ask", policy.ask]
    return `after(${JSON.stringify(canonical(policy.after))}, ${kind}: ${JSON.stringify(canonical(list))}${reason})`
  }
  if ("deny" in policy) return `deny(${JSON.stringify(canonical(policy.deny))}${reason})`
  if ("ask" in policy) return `ask(${JSON.stringify(canonical(policy.ask))}${reason})`
  const [key, value] = Object.entries(policy)[0]!
  return Guard.label(key, value)
}

/**
 * A policy in the notation denials name their guard with:
 * `all(maxStreak(3), denyList(["rm"]))`, `deny(["Bash(rm -rf *)"])`,
 * `maxInvocations(5, of: ["Bash(npm test *)"], per: "1m")`,
 * `after(["Read(**\/.env*)"], deny: ["WebFetch","Bash(curl *)"])`, `maxTokens(2000000)`.
 *
 * @since 0.1.0
 */
export const format = (policy: Policy): string => {
  if ("all" in policy) return `all(${policy.all.map(format).join(", ")})`
  if ("any" in policy) return `any(${policy.any.map(format).join(", ")})`
  return ruleLabel(policy)
}

/**
 * How many guards a policy combines (its leaves, `all` and `any` not counted).
 *
 * @since 0.1.0
 */
export const size = (policy: Policy): number =>
  "all" in policy
    ? policy.all.reduce((n, p) => n + size(p), 0)
    : "any" in policy
    ? policy.any.reduce((n, p) => n + size(p), 0)
    : 1

// ---------------------------------------------------------------------------
// Compiled policies

// What one decision evaluates against: the call (the parameters' tool alone when the
// door sent none), the anchors, the context, and every list's answer, computed once
// for all lists by the policy's index (`answers`, null until first asked; undefined
// when the index cannot judge the call, each list's own answer then in `matched`).
interface Eval {
  readonly call: Pattern.Call
  readonly where: Pattern.Context
  readonly context: Guard.GuardContext
  readonly state: Guard.GuardState | null
  /** The slot of each stateful rule (`Builder.keys`) in `state`, read once. */
  readonly slots: ReadonlyArray<Schema.Json | undefined>
  readonly index: PatternIndex.Index
  answers: PatternIndex.Answers | undefined | null
  matched: Array<Pattern.Match | undefined> | undefined
}

const NO_MATCH: Pattern.Match = { matched: false }

// A list of patterns as a rule holds it: the matcher, and its index among the
// policy's lists.
interface Gate {
  readonly matcher: Pattern.Matcher
  readonly index: number
}

// Every list's answer, judged together on first need; undefined when each list must
// judge alone.
const answersOf = (x: Eval): PatternIndex.Answers | undefined => {
  if (x.answers === null) {
    try {
      x.answers = PatternIndex.judgeAll(x.index, x.call, x.where)
    } catch {
      // Unreachable by design; each list then judges alone, failing closed as it does.
      x.answers = undefined
    }
  }
  return x.answers
}

// The lists that matched, or undefined when each list judges alone (any may match).
const listsHit = (x: Eval): ReadonlyArray<number> | undefined => answersOf(x)?.hits

// Whether a list can have matched: a rule gated by one that cannot allows.
const mayMatch = (x: Eval, g: Gate): boolean => {
  const answers = answersOf(x)
  return answers === undefined || answers.hits.includes(g.index)
}

const matchOf = (x: Eval, g: Gate): Pattern.Match => {
  const answers = answersOf(x)
  if (answers !== undefined) return PatternIndex.answerOf(answers, g.index) ?? NO_MATCH
  const matched = x.matched ??= new Array(x.index.lists)
  let r = matched[g.index]
  if (r === undefined) {
    r = Pattern.matches(g.matcher, x.call, x.where, "deny")
    matched[g.index] = r
  }
  return r
}

// What building a policy's rules collects: its lists of patterns, and the keys of its
// stateful rules, each once (identical rules share a slot), with their slots' indices.
interface Builder {
  readonly gates: Array<Gate>
  readonly keys: Array<string>
  readonly slots: Map<string, number>
}

const gateOf = (patterns: ReadonlyArray<Pattern.Pattern>, b: Builder): Gate => {
  const gate: Gate = { matcher: Pattern.compile(patterns), index: b.gates.length }
  b.gates.push(gate)
  return gate
}

// The index of a stateful rule's slot. Its key is interned (a property name), so that
// reading it from a state is a lookup by identity.
const slotFor = (key: string, b: Builder): number => {
  let slot = b.slots.get(key)
  if (slot === undefined) {
    slot = b.keys.length
    b.keys.push(Object.keys({ [key]: true })[0]!)
    b.slots.set(key, slot)
  }
  return slot
}

const NO_SLOTS: ReadonlyArray<Schema.Json | undefined> = []

// The slots a state holds for the rules of `keys` (none in a state that is none).
const slotsIn = (
  state: Guard.GuardState | null,
  keys: ReadonlyArray<string>
): ReadonlyArray<Schema.Json | undefined> => {
  if (keys.length === 0) return NO_SLOTS
  const out = new Array<Schema.Json | undefined>(keys.length)
  if (state !== null) {
    for (let i = 0; i < keys.length; i++) {
      // Most keys are absent: one lookup says so (an own `undefined` reads the same).
      const value = state[keys[i]!]
      out[i] = value !== undefined && Object.hasOwn(state, keys[i]!)
        ? value
        : undefined
    }
  }
  return out
}

// The lists as the index takes them: each pattern with its canonical text.
const indexOf = (gates: ReadonlyArray<Gate>): PatternIndex.Index =>
  PatternIndex.make(
    gates.map((g) => g.matcher.patterns.map((pattern, i) => ({ pattern, text: g.matcher.compiled[i]!.text })))
  )

// One rule: its verdict, and for a stateful rule (`key`, its label; `slot`, the index
// of its slot, else -1) its next slot. `gate`: the list without whose match the rule
// allows (undefined: none, the rule must always decide); `stepGate` the same for its
// step (undefined: it must always step).
interface Rule {
  readonly _tag: "Rule"
  readonly label: string
  readonly key: string | null
  readonly slot: number
  readonly gate: Gate | undefined
  readonly decide: (s: JournalState.Snapshot, p: Entry.ValidToolParams, x: Eval) => Guard.Verdict
  readonly stepGate: Gate | undefined
  readonly step:
    | ((
      slot: Schema.Json | undefined,
      s: JournalState.Snapshot,
      p: Entry.ValidToolParams,
      x: Eval,
      final: Guard.Verdict
    ) => Schema.Json | undefined)
    | undefined
  readonly observe:
    | ((
      slot: Schema.Json | undefined,
      x: Eval,
      bytes: { readonly read: number; readonly written: number },
      nowMillis: number | undefined
    ) => Schema.Json | undefined)
    | undefined
}

// Every rule has the same fields, the absent ones undefined.
const rule = (
  r: Pick<Rule, "label" | "decide"> & Partial<Omit<Rule, "_tag" | "label" | "decide">>
): Rule => ({
  _tag: "Rule",
  label: r.label,
  key: r.key ?? null,
  slot: r.slot ?? -1,
  gate: r.gate,
  decide: r.decide,
  stepGate: r.stepGate,
  step: r.step,
  observe: r.observe
})

// An `all` or `any` of nodes. An `all` knows which of its children must decide every
// call (`always`, positions in order) and which only when a list matched
// (`byGate[gate index]`, positions in order).
type Node = Rule | {
  readonly _tag: "All" | "Any"
  readonly children: ReadonlyArray<Node>
  readonly always: ReadonlyArray<number>
  readonly byGate: ReadonlyArray<ReadonlyArray<number> | undefined>
}

const combine = (tag: "All" | "Any", children: ReadonlyArray<Node>): Node => {
  const always: Array<number> = []
  const byGate: Array<Array<number> | undefined> = []
  children.forEach((c, i) => {
    if (c._tag !== "Rule" || c.gate === undefined) always.push(i)
    else (byGate[c.gate.index] ??= []).push(i)
  })
  return { _tag: tag, children, always, byGate }
}

// What `Compiled.root` holds.
// What `Compiled.root` holds; `unindexed` decides as `guard` does without the index,
// every list judging alone and every rule deciding and stepping (what the index is
// tested against).
interface Root {
  readonly node: Node
  readonly evalOf: (p: Entry.ValidToolParams, context: Guard.GuardContext) => Eval
  readonly unindexed: Guard.Guard
}

/**
 * A policy prepared once (`compile`): its patterns compiled, its rules built. `guard`
 * decides with it; the rest is for `explain` and `observe`.
 *
 * @since 0.1.0
 */
export interface Compiled {
  readonly policy: Policy
  readonly guard: Guard.Guard
  /** The labels of the stateful rules, each once: the keys of the policy's `GuardState`. */
  readonly stateKeys: ReadonlyArray<string>
  /** The rules, as the tree of the policy (opaque). */
  readonly root: unknown
}

const compileGate = (p: Patterns, b: Builder): Gate => {
  const patterns: Array<Pattern.Pattern> = []
  for (const t of textsOf(p)) {
    const r = Pattern.parse(t)
    // `decode` refused what does not parse; a hand-built policy's bad text matches
    // every call (fail closed).
    patterns.push(Result.isSuccess(r) ? r.success : { _tag: "Tool", tool: "*" })
  }
  return gateOf(patterns, b)
}

const what: { readonly [tag: string]: string } = {
  Command: "command",
  Path: "path",
  Domain: "host",
  Param: "value"
}

// A sentence naming what matched.
const matchedSentence = (m: Pattern.Match, x: Eval, kind: string): string => {
  const tool = typeof x.call.tool_name === "string" ? x.call.tool_name : "the call"
  if (m.failClosed === true) {
    return `${tool} could not be judged against ${kind} pattern ${m.pattern} (its input is missing, unreadable or ` +
      `over a bound), so it is treated as matching`
  }
  if (m.part === undefined) return `${tool} matches ${kind} pattern ${m.pattern}`
  const parsed = Pattern.parse(m.pattern ?? "")
  const part = Result.isSuccess(parsed) ? what[parsed.success._tag] ?? "input" : "input"
  return `the ${part} ${JSON.stringify(m.part)} of ${tool} matches ${kind} pattern ${m.pattern}`
}

const patternRule = (kind: "deny" | "ask", list: Patterns, reason: string | undefined, b: Builder): Rule => {
  const matcher = compileGate(list, b)
  const make = kind === "deny" ? Guard.deny : Guard.ask
  return rule({
    label: ruleLabel(reason === undefined ? { [kind]: list } as Policy : { [kind]: list, reason } as Policy),
    gate: matcher,
    decide: (_s, _p, x) => {
      const m = matchOf(x, matcher)
      return m.matched ? make(reason ?? matchedSentence(m, x, kind), Guard.label(kind, m.pattern ?? "")) : Guard.allow
    }
  })
}

const afterRule = (policy: Extract<Policy, { readonly after: Patterns }>, b: Builder): Rule => {
  const first = compileGate(policy.after, b)
  const kind = "deny" in policy ? "deny" : "ask"
  const second = compileGate("deny" in policy ? policy.deny : policy.ask, b)
  const make = kind === "deny" ? Guard.deny : Guard.ask
  const label = ruleLabel(policy)
  const slot = slotFor(label, b)
  const after = JSON.stringify(canonical(policy.after))
  return rule({
    label,
    key: label,
    slot,
    gate: second,
    decide: (_s, _p, x) => {
      // Set, or anything else there (fail closed): only absence is untainted.
      if (x.slots[slot] === undefined) return Guard.allow
      const m = matchOf(x, second)
      if (!m.matched) return Guard.allow
      return make(policy.reason ?? `${matchedSentence(m, x, kind)}, after a call matching ${after}`, label)
    },
    stepGate: first,
    step: (slot, _s, _p, x, final) =>
      slot === undefined && final._tag !== "Deny" && matchOf(x, first).matched ? true : undefined
  })
}

const tokensRule = (limit: number): Rule => {
  const label = Guard.label("maxTokens", limit)
  const bound = BigInt(limit)
  return rule({
    label,
    decide: (_s, _p, x) =>
      x.context.tokens === null
        ? Guard.deny(`token use unknown: ${label} needs the tokens the agent used`, label)
        : x.context.tokens >= bound
        ? Guard.deny(`the agent used ${x.context.tokens} tokens, the budget is ${limit}`, label)
        : Guard.allow
  })
}

const limitNames: { readonly [k in LimitKey]: string } = {
  maxInvocations: "invocations",
  maxStreak: "calls in a row",
  maxBytesRead: "bytes read",
  maxBytesWritten: "bytes written"
}

const scopedRule = (key: LimitKey, limit: number, scope: Scope, label: string, b: Builder): Rule => {
  const of = scope.of === undefined ? undefined : compileGate(scope.of, b)
  const slot = slotFor(label, b)
  const per = scope.per === undefined ? undefined : Slots.durationMillis(scope.per)
  const windows = new Slots.Windows()
  const applies = (x: Eval): boolean => of === undefined || matchOf(x, of).matched
  const amount = (p: Entry.ValidToolParams): number =>
    key === "maxBytesRead" ? p.bytes_read : key === "maxBytesWritten" ? p.bytes_written : 1
  // A streak is broken by a call that does not match (with `of`), or of another tool.
  const broken = (s: JournalState.Snapshot, p: Entry.ValidToolParams, x: Eval): boolean =>
    key === "maxStreak" && (of === undefined ? s.current_streak_tool !== p.tool_name : !applies(x))
  const scopeText = [
    ...(scope.of === undefined ? [] : [`of ${JSON.stringify(canonical(scope.of))}`]),
    ...(scope.per === undefined ? [] : [`per ${scope.per}`])
  ].join(" ")
  return rule({
    label,
    key: label,
    slot,
    gate: of,
    decide: (s, p, x) => {
      if (!applies(x)) return Guard.allow
      const before = broken(s, p, x) ? 0 : Slots.total(windows, x.slots[slot], x.context.nowMillis, per)
      const after = before + amount(p)
      return after > limit
        ? Guard.deny(`${limitNames[key]} ${scopeText} would exceed ${limit}`, label)
        : Guard.allow
    },
    // A streak with `of` is reset by a call that does not match.
    stepGate: key === "maxStreak" ? undefined : of,
    step: (slot, s, p, x) => {
      if (key === "maxStreak" && of !== undefined && !applies(x)) {
        return slot === undefined || Slots.isEmpty(slot)
          ? undefined
          : Slots.added(windows, undefined, 0, x.context.nowMillis, per)
      }
      if (!applies(x)) return undefined
      const n = amount(p)
      // A window is moved on only when something is added (or a streak restarts).
      if (n === 0 && !broken(s, p, x)) return undefined
      return Slots.added(windows, slot, n, x.context.nowMillis, per, broken(s, p, x))
    },
    observe: key === "maxBytesRead" || key === "maxBytesWritten"
      ? (slot, x, bytes, nowMillis) => {
        const n = key === "maxBytesRead" ? bytes.read : bytes.written
        return n === 0 || !applies(x) ? undefined : Slots.added(windows, slot, n, nowMillis, per)
      }
      : undefined
  })
}

// Builds the rule tree of a policy; `toGuardOld` gives the combinators' guard for
// the keys that were there before patterns (the same functions as always).
const build = (policy: Policy, b: Builder): Node => {
  if ("all" in policy) return combine("All", policy.all.map((p) => build(p, b)))
  if ("any" in policy) return combine("Any", policy.any.map((p) => build(p, b)))
  if ("after" in policy) return afterRule(policy, b)
  if ("deny" in policy) return patternRule("deny", policy.deny, policy.reason, b)
  if ("ask" in policy) return patternRule("ask", policy.ask, policy.reason, b)
  if ("maxTokens" in policy) return tokensRule(policy.maxTokens)
  const limit = limitOf(policy)
  if (limit !== null && (limit.scope.of !== undefined || limit.scope.per !== undefined)) {
    return scopedRule(limit.key, limit.limit, limit.scope, ruleLabel(policy), b)
  }
  const guard = oldGuard(policy)
  return rule({ label: ruleLabel(policy), decide: (s, p) => guard(s, p) })
}

const oldGuard = (policy: Policy): Guard.Guard => {
  if ("maxBytesRead" in policy) return Guard.maxBytesRead(policy.maxBytesRead)
  if ("maxBytesWritten" in policy) return Guard.maxBytesWritten(policy.maxBytesWritten)
  if ("maxInvocations" in policy) return Guard.maxInvocations(policy.maxInvocations)
  if ("maxDelegationDepth" in policy) return Guard.maxDelegationDepth(policy.maxDelegationDepth)
  if ("maxStreak" in policy) return Guard.maxStreak(policy.maxStreak)
  if ("forbiddenTransitions" in policy) return Guard.forbiddenTransitions(policy.forbiddenTransitions)
  if ("requirePredecessors" in policy) return Guard.requirePredecessors(policy.requirePredecessors)
  if ("allowList" in policy) return Guard.allowList(policy.allowList)
  if ("denyList" in policy) return Guard.denyList(policy.denyList)
  return () => Guard.deny("the policy has no rule here", "unknown")
}

// The verdict of a tree: `all` the first denial, else the first ask; `any` the first
// allow, else the first ask, else a denial naming every denying guard (as the
// `Guard` combinators).
const evaluate = (node: Node, s: JournalState.Snapshot, p: Entry.ValidToolParams, x: Eval): Guard.Verdict => {
  if (node._tag === "Rule") return node.decide(s, p, x)
  if (node._tag === "All") {
    let asked: Guard.Verdict | undefined
    const hits = listsHit(x)
    if (hits === undefined) {
      for (const c of node.children) {
        const v = evaluate(c, s, p, x)
        if (v._tag === "Deny") return v
        if (v._tag === "Ask") asked ??= v
      }
      return asked ?? Guard.allow
    }
    // Only the children that can do other than allow, in order: a rule whose list did
    // not match allows.
    let extra: Array<number> | undefined
    for (const g of hits) {
      const more = node.byGate[g]
      if (more !== undefined) (extra ??= []).push(...more)
    }
    const order = extra === undefined ? node.always : [...node.always, ...extra].sort(byNumber)
    for (const i of order) {
      const v = evaluate(node.children[i]!, s, p, x)
      if (v._tag === "Deny") return v
      if (v._tag === "Ask") asked ??= v
    }
    return asked ?? Guard.allow
  }
  const reasons: Array<string> = []
  const names: Array<string> = []
  let asked: Guard.Verdict | undefined
  for (const c of node.children) {
    const v = evaluate(c, s, p, x)
    if (v._tag === "Allow") return v
    if (v._tag === "Ask") asked ??= v
    reasons.push(v.reason)
    names.push(v.guard)
  }
  return asked ??
    Guard.deny(reasons.length === 0 ? "no guard allows" : reasons.join("; "), `any(${names.join(", ")})`)
}

const byNumber = (a: number, b: number): number => a - b

const rulesOf = (node: Node, out: Array<Rule> = []): Array<Rule> => {
  if (node._tag === "Rule") out.push(node)
  else for (const c of node.children) rulesOf(c, out)
  return out
}

const anchors = (where: Partial<Pattern.Context>): Pattern.Context => ({
  cwd: where.cwd ?? "",
  projectDir: where.projectDir ?? "",
  home: where.home ?? ""
})

// The next state: every stateful rule stepped once (identical rules share a slot),
// keys of rules no longer in the policy dropped; undefined when nothing changed.
// `own`: the state is the one this policy made last, its keys exactly those of its
// defined slots, in the rules' order.
const nextState = (
  stateful: ReadonlyArray<Rule>,
  keys: ReadonlyArray<string>,
  s: JournalState.Snapshot,
  p: Entry.ValidToolParams,
  x: Eval,
  final: Guard.Verdict,
  own: boolean
): Made | undefined => {
  const slots = x.slots.slice()
  let changed = false
  // Whether a rule without a slot got one (its key would be new).
  let added = false
  for (const r of stateful) {
    const slot = x.slots[r.slot]
    // A rule whose step needs a list that did not match keeps its slot.
    const stepped = r.step === undefined || (r.stepGate !== undefined && !mayMatch(x, r.stepGate))
      ? undefined
      : r.step(slot, s, p, x, final)
    if (stepped === undefined) continue
    changed = true
    if (slot === undefined) added = true
    slots[r.slot] = stepped
  }
  if (own && !changed) return undefined
  let next: { [key: string]: Schema.Json }
  if (!added && (own || (changed && x.state !== null && orderly(x.state, keys, x.slots)))) {
    // The same keys in the same order: a copy with the stepped slots replaced.
    next = { ...x.state }
    for (let i = 0; i < slots.length; i++) if (slots[i] !== x.slots[i]) next[keys[i]!] = slots[i]!
  } else {
    next = {}
    for (let i = 0; i < slots.length; i++) if (slots[i] !== undefined) next[keys[i]!] = slots[i]!
  }
  if (!changed && x.state !== null && Object.keys(x.state).length !== Object.keys(next).length) changed = true
  return changed ? { state: next, slots } : undefined
}

// Whether a state holds exactly the keys of its defined slots, in the rules' order, and
// nothing else: a copy of it (a session that stored the state it was given) steps as
// the state itself.
const orderly = (
  state: Guard.GuardState,
  keys: ReadonlyArray<string>,
  slots: ReadonlyArray<Schema.Json | undefined>
): boolean => {
  const own = Object.keys(state)
  let j = 0
  for (let i = 0; i < keys.length; i++) {
    if (slots[i] === undefined) continue
    if (own[j] !== keys[i]) return false
    j++
  }
  return j === own.length && Object.getOwnPropertySymbols(state).length === 0
}

// A state a policy made, with its slots.
interface Made {
  readonly state: Guard.GuardState
  readonly slots: ReadonlyArray<Schema.Json | undefined>
}

/**
 * Prepares a policy once: every pattern compiled, every rule built. `guard` decides
 * with it and never throws (a fault inside denies, saying so); where the context
 * cannot ask, an `Ask` is a denial already (`Guard.unanswered`), and the next state
 * counts the call as decided.
 *
 * @since 0.1.0
 */
export const compile = (policy: Policy): Compiled => {
  // A policy built in code is held to the file's rules (`decode`): TypeScript lets an
  // object with two rules through (`{ denyList, maxStreak }`: both keys are known to
  // the union), and a value out of range type-checks too. Such a policy decides
  // nothing as written, so it denies every call and says why (fail closed).
  const checked = decode(policy)
  if (Result.isFailure(checked)) {
    const why = checked.failure.issues.map((i) => `${i.path}: ${i.message}`).join("; ")
    return { ...compile({ deny: ["*"], reason: `the policy is invalid (${why})` }), policy }
  }
  const b: Builder = { gates: [], keys: [], slots: new Map() }
  const root = build(policy, b)
  const { gates, keys } = b
  const index = indexOf(gates)
  // The state this policy made last: given back, its slots are known without
  // reading them; the journal's frozen copy of it (`SessionJournal.decide` stores
  // that) has its keys, and each window slot is known for the copy of the one its
  // rule made (`Slots.Windows`). A state is never changed once made, so its copy
  // holds what it holds.
  let last: Made | undefined
  const isLast = (state: Guard.GuardState | null): boolean =>
    state !== null && last !== undefined && (state === last.state || copiedFrom(state) === last.state)
  const evalOf = (p: Entry.ValidToolParams, context: Guard.GuardContext, indexed = true): Eval => ({
    call: context.call ?? { tool_name: p.tool_name },
    where: anchors(context.where),
    context,
    state: context.state,
    slots: context.state !== null && context.state === last?.state ? last.slots : slotsIn(context.state, keys),
    index,
    answers: indexed ? null : undefined,
    matched: undefined
  })
  const seen = new Set<string>()
  const stateful = rulesOf(root).filter((r) => r.key !== null && !seen.has(r.key) && seen.add(r.key) !== undefined)
  const decideWith = (indexed: boolean): Guard.Guard => (s, p, c) => {
    try {
      const context = c ?? Guard.noContext
      const x = evalOf(p, context, indexed)
      const v = evaluate(root, s, p, x)
      const final = context.canAsk ? v : Guard.unanswered(v)
      if (stateful.length === 0 && context.state === null) return final
      const made = nextState(stateful, keys, s, p, x, final, isLast(context.state))
      if (made === undefined) return final
      last = made
      return { ...final, state: made.state }
    } catch (e) {
      return Guard.deny(`the policy could not decide: ${messageOf(e)}`, "policy")
    }
  }
  const guard = decideWith(true)
  const unindexed = decideWith(false)
  return { policy, guard, stateKeys: stateful.map((r) => r.key!), root: { node: root, evalOf, unindexed } }
}

/**
 * The guard a policy stands for: `compile(policy).guard`.
 *
 * @since 0.1.0
 */
export const toGuard = (policy: Policy): Guard.Guard => compile(policy).guard

/**
 * One rule's part in a decision (`explain`): its label and its own verdict.
 *
 * @since 0.1.0
 */
export interface RuleVerdict {
  readonly rule: string
  readonly verdict: Guard.Verdict
}

/**
 * Which rule decides a call and why, writing nothing: the policy's verdict (with the
 * next state, as `decide` would store it), the rule that decided (its guard label,
 * null when allowed) and every rule's own verdict, in the policy's order.
 *
 * @since 0.1.0
 */
export const explain = (
  compiled: Compiled,
  snapshot: JournalState.Snapshot,
  params: Entry.ValidToolParams,
  context?: Guard.GuardContext
): {
  readonly verdict: Guard.Verdict
  readonly decidedBy: string | null
  readonly rules: ReadonlyArray<RuleVerdict>
} => {
  const verdict = compiled.guard(snapshot, params, context)
  const { evalOf, node } = compiled.root as Root
  const x = evalOf(params, context ?? Guard.noContext)
  const rules: Array<RuleVerdict> = []
  for (const r of rulesOf(node)) {
    let v: Guard.Verdict
    try {
      v = r.decide(snapshot, params, x)
    } catch (e) {
      v = Guard.deny(`the rule could not decide: ${messageOf(e)}`, r.label)
    }
    rules.push({ rule: r.label, verdict: v })
  }
  return { verdict, decidedBy: verdict._tag === "Allow" ? null : verdict.guard, rules }
}

/**
 * Folds an outcome's bytes into the policy's scoped byte limits (those with `of` or
 * `per`): each whose `of` matches the call adds `bytes.read` (`maxBytesRead`) or
 * `bytes.written` (`maxBytesWritten`), in a window to the slot of `nowMillis` (to its
 * newest slot when absent). The next state, or null when nothing changed. A door
 * stores it with the outcome in one append (`observePlan`).
 *
 * @since 0.1.0
 */
export const observe = (
  compiled: Compiled,
  state: Guard.GuardState | null,
  call: Pattern.Call,
  bytes: { readonly read: number; readonly written: number },
  options?: { readonly where?: Partial<Pattern.Context>; readonly nowMillis?: number }
): Guard.GuardState | null => {
  try {
    const { evalOf, node } = compiled.root as Root
    const x: Eval = {
      ...evalOf({
        tool_name: "",
        server_id: "",
        agent_id: "",
        bytes_read: 0,
        bytes_written: 0,
        delegation_depth: 0,
        allowed: true
      }, {
        ...Guard.noContext,
        call,
        where: options?.where ?? {},
        state
      })
    }
    const next: { [key: string]: Schema.Json } = state === null ? {} : { ...state }
    let changed = false
    const seen = new Set<string>()
    for (const r of rulesOf(node)) {
      if (r.key === null || r.observe === undefined || seen.has(r.key)) continue
      seen.add(r.key)
      const stepped = r.observe(x.slots[r.slot], x, bytes, options?.nowMillis)
      if (stepped !== undefined) {
        next[r.key] = stepped
        changed = true
      }
    }
    return changed ? next : null
  } catch {
    return null
  }
}

/**
 * A plan for `SessionJournal.writeFrom` that stores an outcome (`kind`, `payload`)
 * and, in the same append, the state `observe` gives from the session's state under
 * its lock, at the writer's time.
 *
 * @since 0.1.0
 */
export const observePlan = (
  compiled: Compiled,
  outcome: { readonly kind: string; readonly payload: unknown },
  call: Pattern.Call,
  bytes: { readonly read: number; readonly written: number },
  where?: Partial<Pattern.Context>
) =>
(state: JournalState.JournalState, nowMillis: number): {
  readonly items: ReadonlyArray<{ readonly _tag: "Other"; readonly kind: string; readonly payload: unknown }>
  readonly result: Guard.GuardState | null
} => {
  const next = observe(compiled, state.guard_state, call, bytes, {
    ...(where === undefined ? {} : { where }),
    nowMillis
  })
  return {
    items: [
      { _tag: "Other", kind: outcome.kind, payload: outcome.payload },
      ...(next === null ? [] : [{ _tag: "Other" as const, kind: Guard.STATE_KIND, payload: next }])
    ],
    result: next
  }
}

// The most JSON text the state of a policy can take: each stateful rule's label as
// a key and its largest slot.
const stateBound = (policy: Policy): number => {
  const labels = new Set<string>()
  const visit = (p: Policy): void => {
    if ("all" in p) p.all.forEach(visit)
    else if ("any" in p) p.any.forEach(visit)
    else if ("after" in p) labels.add(ruleLabel(p))
    else {
      const limit = limitOf(p)
      if (limit !== null && (limit.scope.of !== undefined || limit.scope.per !== undefined)) labels.add(ruleLabel(p))
    }
  }
  visit(policy)
  let n = 2
  for (const l of labels) n += utf8Length(JSON.stringify(l)) + 2 + Slots.MAX_SLOT_TEXT
  return n
}

// ---------------------------------------------------------------------------
// Authoring

/**
 * The tools Claude Code calls, by the names its hooks and permission rules use.
 * `check` warns on a name that differs from one of them only in case.
 *
 * @since 0.1.0
 */
export const claudeCodeTools: ReadonlyArray<string> = [
  "Agent",
  "Bash",
  "BashOutput",
  "Edit",
  "ExitPlanMode",
  "Glob",
  "Grep",
  "KillShell",
  "LS",
  "ListMcpResourcesTool",
  "MultiEdit",
  "NotebookEdit",
  "NotebookRead",
  "Read",
  "ReadMcpResourceTool",
  "SlashCommand",
  "Skill",
  "Task",
  "TodoWrite",
  "WebFetch",
  "WebSearch",
  "Write"
]

const byLowerCase = new Map(claudeCodeTools.map((t) => [t.toLowerCase(), t]))

/**
 * What `check` finds in a policy text: the policy when it is valid (null otherwise),
 * the issues that refuse it (every decoding issue, and keys an object repeats), and
 * warnings that do not (tool names no agent uses in that spelling), each with its
 * JSON path.
 *
 * @since 0.1.0
 */
export interface CheckReport {
  readonly policy: Policy | null
  readonly issues: ReadonlyArray<typeof Issue.Type>
  readonly warnings: ReadonlyArray<typeof Issue.Type>
}

// A warning on a tool name, if it deserves one. `exact`: the place takes exact names
// (the lists), where an MCP server's name names no tool and a pattern is a name no
// call has.
const nameWarning = (name: string, exact: boolean): string | undefined => {
  if (exact && /[*()]/.test(name)) {
    return `${JSON.stringify(name)} is compared exactly here (a list of tool names), so no call has it: ` +
      "write it as a pattern in deny, ask or of"
  }
  const server = /^mcp__(.*?)(?:__|$)/.exec(name)?.[1]
  if (server !== undefined && /[^A-Za-z0-9_*-]/.test(server)) {
    return `no agent calls a tool ${JSON.stringify(name)}: an MCP server's name in tool names has only letters, ` +
      "digits, _ and - (Claude Code and the gateway write every other character as _)"
  }
  const known = byLowerCase.get(name.toLowerCase())
  if (known !== undefined && known !== name) {
    return `no agent calls a tool ${JSON.stringify(name)}: Claude Code's is ${JSON.stringify(known)} ` +
      "(names are compared exactly)"
  }
  if (exact && /^mcp__[^*]+$/.test(name) && !name.slice(5).includes("__")) {
    return `${JSON.stringify(name)} names an MCP server, not a tool: its tools are ${JSON.stringify(`${name}__…`)}; ` +
      `write the pattern ${JSON.stringify(`${name}__*`)} (in deny, ask or of) or name the tools`
  }
  return undefined
}

const warningsOf = (root: Policy, prefix: ReadonlyArray<PropertyKey> | null): Array<typeof Issue.Type> => {
  const out: Array<typeof Issue.Type> = []
  const warn = (path: ReadonlyArray<PropertyKey>, name: string, exact: boolean) => {
    const w = nameWarning(name, exact)
    if (w !== undefined) out.push({ path: formatPath(path), message: w })
  }
  const visit = (p: Policy, path: ReadonlyArray<PropertyKey>): void => {
    if ("all" in p || "any" in p) {
      const key = "all" in p ? "all" : "any"
      ;("all" in p ? p.all : p.any).forEach((c, i) => visit(c, path === prefix ? [i] : [...path, key, i]))
      return
    }
    if ("allowList" in p) p.allowList.forEach((n, i) => warn([...path, "allowList", i], n, true))
    if ("denyList" in p) p.denyList.forEach((n, i) => warn([...path, "denyList", i], n, true))
    if ("forbiddenTransitions" in p) {
      p.forbiddenTransitions.forEach((pair, i) =>
        pair.forEach((n, j) => warn([...path, "forbiddenTransitions", i, j], n, true))
      )
    }
    if ("requirePredecessors" in p) {
      for (const [tool, needs] of Object.entries(p.requirePredecessors)) {
        warn([...path, "requirePredecessors", tool], tool, true)
        needs.forEach((n, i) => warn([...path, "requirePredecessors", tool, i], n, true))
      }
    }
    for (const key of ["deny", "ask", "after", "of"] as const) {
      const value = (p as PolicyJson)[key]
      if (value === undefined) continue
      textsOf(value).forEach((t, i) => {
        const r = Pattern.parse(t)
        if (Result.isSuccess(r)) {
          warn(typeof value === "string" ? [...path, key] : [...path, key, i], r.success.tool, false)
        }
      })
    }
  }
  visit(root, prefix ?? [])
  return out
}

/**
 * Checks the text of a policy file for its author: every decoding issue (`decodeText`),
 * a key repeated in one object (`{"maxStreak":1,"maxStreak":100}`, which JSON.parse
 * would take as the last), and warnings on tool names no agent uses in that spelling
 * (`bash` for `Bash`; `mcp__github` in a list of tool names, which names a server).
 * Pure; never throws.
 *
 * @since 0.1.0
 */
export const check = (text: string): CheckReport => {
  const duplicates = duplicateKeys(text).map((d) => ({
    path: formatPath([...d.path, d.key]),
    message: `the key ${JSON.stringify(d.key)} appears more than once in this object (JSON would keep only the last)`
  }))
  const decoded = decodeText(text)
  if (Result.isFailure(decoded)) {
    return { policy: null, issues: [...duplicates, ...decoded.failure.issues], warnings: [] }
  }
  let array = false
  try {
    array = Array.isArray(JSON.parse(text))
  } catch {
    array = false
  }
  const warnings = warningsOf(decoded.success, array ? [] : null)
  return { policy: duplicates.length === 0 ? decoded.success : null, issues: duplicates, warnings }
}

// ---------------------------------------------------------------------------
// What if

/**
 * One step of replaying a stored history against a guard, as `decide` would have
 * evaluated it: a tool entry gets the verdict of `guard` on the state before it;
 * every entry is then folded as stored (a guard cannot change what already
 * happened, and chio counts denied calls like allowed ones, so the counters are
 * the same either way). Other kinds get no verdict.
 *
 * @since 0.1.0
 */
export const whatIf = (
  guard: Guard.Guard,
  state: JournalState.JournalState,
  entry: Entry.Entry
): { readonly verdict: Guard.Verdict | null; readonly state: JournalState.JournalState } => ({
  verdict: Entry.isTool(entry) ? guard(JournalState.snapshot(state), entry) : null,
  state: JournalState.fold(state, entry)
})
