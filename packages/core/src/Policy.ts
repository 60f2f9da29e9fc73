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
 * @since 0.4.0
 */
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as SchemaIssue from "effect/SchemaIssue"
import * as Entry from "./Entry.ts"
import { messageOf } from "./Errors.ts"
import * as Guard from "./Guard.ts"
import { check } from "./internal/jcs.ts"
import { isIdentity, MAX_U53 } from "./internal/validate.ts"
import * as JournalState from "./JournalState.ts"

// ---------------------------------------------------------------------------
// The data

/**
 * A decoded policy: one object with one key, exactly as the file writes it.
 *
 * @since 0.4.0
 */
export type Policy =
  | { readonly all: ReadonlyArray<Policy> }
  | { readonly any: ReadonlyArray<Policy> }
  | { readonly maxBytesRead: number }
  | { readonly maxBytesWritten: number }
  | { readonly maxInvocations: number }
  | { readonly maxDelegationDepth: number }
  | { readonly maxStreak: number }
  | { readonly forbiddenTransitions: ReadonlyArray<readonly [from: string, to: string]> }
  | { readonly requirePredecessors: { readonly [tool: string]: ReadonlyArray<string> } }
  | { readonly allowList: ReadonlyArray<string> }
  | { readonly denyList: ReadonlyArray<string> }

/**
 * A policy object as JSON: every key optional, exactly one present once decoded.
 *
 * @since 0.4.0
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
}

/**
 * The keys of a policy object, one per `Guard` combinator.
 *
 * @since 0.4.0
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
  "denyList"
] as const

/**
 * Deepest nesting of a policy document, in JSON levels (`{"all":[…]}` is two). Far
 * beyond any real policy; it keeps the decoder's and `toGuard`'s recursion bounded.
 *
 * @since 0.4.0
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

const isPolicy = (o: PolicyJson): o is Policy => Object.keys(o).length === 1

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
  denyList: Schema.optionalKey(Names)
}).pipe(
  Schema.refine(isPolicy, { identifier: "a policy object", message: oneKey })
)

/**
 * One policy object. Decode it with `decode` / `decodeText`, which also refuse
 * unknown keys (this schema alone, with Effect's default parse options, drops them).
 *
 * @since 0.4.0
 */
export const Policy: Schema.Codec<Policy, PolicyJson> = Node

/**
 * A policy document: one policy object, or an array of them meaning `all`.
 *
 * @since 0.4.0
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
 * @since 0.4.0
 */
export const Issue = Schema.Struct({
  path: Schema.String,
  message: Schema.String
})

/**
 * A policy document that does not decode; `issues` lists every problem found, each
 * with its JSON path.
 *
 * @since 0.4.0
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
 * @since 0.4.0
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

const unknownKey = `unknown key, expected one of ${keys.join(", ")}`

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

// Says which keys an object with the wrong number of them had, and that a pair
// has an element too many: the hooks see the issue, not where it is.
const explain = (json: unknown, path: ReadonlyArray<PropertyKey>, message: string): string => {
  if (message === unknownKey && typeof path[path.length - 1] === "number") {
    return "unexpected element, expected a pair [from, to] of tool names"
  }
  if (message === oneKey) {
    const v = at(json, path)
    const present = typeof v === "object" && v !== null ? Object.keys(v) : []
    return `${oneKey}, got ${present.length === 0 ? "none" : present.map((k) => JSON.stringify(k)).join(", ")}`
  }
  return message
}

const invalid = (path: string, message: string) => new InvalidPolicy({ issues: [{ path, message }] })

// ---------------------------------------------------------------------------
// Decoding and encoding

/**
 * Decodes a parsed policy document (an object, or an array meaning `all`).
 *
 * @since 0.4.0
 */
export const decode = (json: unknown): Result.Result<Policy, InvalidPolicy> => {
  // Bounded before the recursive decoder sees it; lone surrogates are refused too
  // (a tool name must be well-formed to be journaled).
  const problem = check(json, { maxDepth: MAX_DEPTH, maxSize: Infinity })
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
      const path = (i.path ?? []).map((k) => (typeof k === "object" ? k.key : k))
      return { path: formatPath(path), message: explain(json, path, lower(i.message)) }
    })
    return Result.fail(new InvalidPolicy({ issues }))
  }
  const policy = decoded.success
  return Result.succeed(isArray(policy) ? { all: policy } : policy)
}

const isArray = (p: Policy | ReadonlyArray<Policy>): p is ReadonlyArray<Policy> => Array.isArray(p)

/**
 * Decodes the text of a policy file.
 *
 * @since 0.4.0
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
 * @since 0.4.0
 */
export const encode = (policy: Policy): PolicyJson => Schema.encodeSync(Policy)(policy)

// ---------------------------------------------------------------------------
// Meaning

/**
 * The guard a policy stands for, built from the `Guard` combinator of each key.
 *
 * @since 0.4.0
 */
export const toGuard = (policy: Policy): Guard.Guard => {
  if ("all" in policy) return Guard.all(...policy.all.map(toGuard))
  if ("any" in policy) return Guard.any(...policy.any.map(toGuard))
  if ("maxBytesRead" in policy) return Guard.maxBytesRead(policy.maxBytesRead)
  if ("maxBytesWritten" in policy) return Guard.maxBytesWritten(policy.maxBytesWritten)
  if ("maxInvocations" in policy) return Guard.maxInvocations(policy.maxInvocations)
  if ("maxDelegationDepth" in policy) return Guard.maxDelegationDepth(policy.maxDelegationDepth)
  if ("maxStreak" in policy) return Guard.maxStreak(policy.maxStreak)
  if ("forbiddenTransitions" in policy) return Guard.forbiddenTransitions(policy.forbiddenTransitions)
  if ("requirePredecessors" in policy) return Guard.requirePredecessors(policy.requirePredecessors)
  if ("allowList" in policy) return Guard.allowList(policy.allowList)
  return Guard.denyList(policy.denyList)
}

/**
 * A policy in the notation denials name their guard with:
 * `all(maxStreak(3), denyList(["rm"]))`.
 *
 * @since 0.4.0
 */
export const format = (policy: Policy): string => {
  if ("all" in policy) return `all(${policy.all.map(format).join(", ")})`
  if ("any" in policy) return `any(${policy.any.map(format).join(", ")})`
  const [key, value] = Object.entries(policy)[0]!
  return Guard.label(key, value)
}

/**
 * How many guards a policy combines (its leaves, `all` and `any` not counted).
 *
 * @since 0.4.0
 */
export const size = (policy: Policy): number =>
  "all" in policy
    ? policy.all.reduce((n, p) => n + size(p), 0)
    : "any" in policy
    ? policy.any.reduce((n, p) => n + size(p), 0)
    : 1

// ---------------------------------------------------------------------------
// What if

/**
 * One step of replaying a stored history against a guard, as `decide` would have
 * evaluated it: a tool entry gets the verdict of `guard` on the state before it;
 * every entry is then folded as stored (a guard cannot change what already
 * happened, and chio counts denied calls like allowed ones, so the counters are
 * the same either way). Other kinds get no verdict.
 *
 * @since 0.4.0
 */
export const whatIf = (
  guard: Guard.Guard,
  state: JournalState.JournalState,
  entry: Entry.Entry
): { readonly verdict: Guard.Verdict | null; readonly state: JournalState.JournalState } => ({
  verdict: Entry.isTool(entry) ? guard(JournalState.snapshot(state), entry) : null,
  state: JournalState.fold(state, entry)
})
