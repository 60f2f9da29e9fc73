/**
 * `session-journal policy …`: the policy file (`Policy` of core). `check FILE`
 * validates it (`Policy.check`: every wrong JSON path, keys an object repeats,
 * and warnings on tool names no agent spells so); `explain FILE --event JSON`
 * says, for one PreToolUse hook input, which rule decides and why and every
 * rule's own verdict, writing nothing; `test FILE ID` replays a stored session's
 * tool calls against it, with the calls' inputs where the session recorded them
 * (the decision entries of Claude Code's and Codex's hooks, the driver and the MCP
 * gateway; the transcript lines of custody and of the Agent SDK store, with their
 * tokens), writing nothing, and lists the calls it would have denied, each with its
 * guard, and per rule the calls it could not judge for lack of their inputs or
 * tokens: the what-if a user runs before switching a policy on.
 *
 * @since 0.1.0
 */
import { Hook, Planner, Transcript, Usage } from "@session-journal/claude-code"
import { Entry, type Guard, JournalState, Pattern, Policy, SessionJournal } from "@session-journal/core"
import { Argument, Command, Flag } from "effect/cli"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import type * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { InvalidInput, PolicyWouldDeny } from "../Failure.ts"
import * as Input from "../Input.ts"
import { sessionId, validId, withJournalToRead, withoutJournal } from "../internal/commandKit.ts"
import * as Output from "../Output.ts"
import { check as checkFile, load } from "../PolicyFile.ts"
import * as Denials from "../viewer/Denials.ts"

export {
  /**
   * Reads and decodes a policy file (strict UTF-8, bounded); see `PolicyFile`.
   *
   * @since 0.1.0
   */
  load,
  /**
   * Largest policy file read (1 MiB).
   *
   * @since 0.1.0
   */
  MAX_POLICY_BYTES
} from "../PolicyFile.ts"

const file = Argument.String("file").pipe(Argument.withDescription("Policy file (JSON)"))

const summary = (p: Policy.Policy): string => {
  return `${Output.count(Policy.size(p), "guard")}: ${Policy.format(p)}`
}

const check = Command.make("check", { file }, (a) =>
  withoutJournal(({ json }) =>
    Effect.gen(function*() {
      const { policy, warnings } = yield* checkFile(a.file)
      // Warnings go to stderr: the file is valid, and stdout stays its one line.
      for (const w of warnings) yield* Output.errorLine(`session-journal: warning: ${a.file}: ${w}`)
      if (json) {
        return yield* Output.json({
          file: a.file,
          guards: Policy.size(policy),
          policy: Policy.format(policy),
          ...(warnings.length === 0 ? {} : { warnings })
        })
      }
      yield* Output.write(`${a.file}: ok, ${summary(policy)}\n`)
    })
  )).pipe(Command.withDescription(
    "Validate a policy file; exit 2 naming each JSON path that is wrong (a key an object repeats too) and what was " +
      "expected; warnings (tool names no agent spells so) on stderr, exit 0"
  ))

// ---------------------------------------------------------------------------
// explain

const verdictName = (v: Guard.Verdict): string => v._tag === "Allow" ? "allow" : v._tag === "Ask" ? "ask" : "deny"

const verdictJson = (v: Guard.Verdict) => ({
  verdict: verdictName(v),
  ...(v._tag === "Allow" ? {} : { guard: v.guard, reason: v.reason })
})

const readEvent = (text: string) =>
  text !== "-" ? Effect.succeed(text) : Effect.flatMap(Input.Stdin, (stdin) =>
    Effect.tryPromise({
      try: () => Input.readBounded(stdin(), "--event", Hook.MAX_INPUT_BYTES),
      catch: (e) => new InvalidInput({ field: "--event", reason: String(e) })
    }).pipe(Effect.flatMap(Effect.fromResult)))

const absolute = (p: string | undefined): string | undefined => p !== undefined && p.startsWith("/") ? p : undefined

const explain = Command.make(
  "explain",
  {
    file,
    event: Flag.String("event").pipe(
      Flag.withMetavar("JSON"),
      Flag.withDescription("A PreToolUse hook input as Claude Code sends it (- reads it from stdin)")
    ),
    session: Flag.String("session").pipe(
      Flag.optional,
      Flag.withMetavar("ID"),
      Flag.withDescription("Decide on this stored session's state (counters, windows, flows); default: an empty one")
    ),
    tokens: Flag.String("tokens").pipe(
      Flag.optional,
      Flag.withMetavar("N"),
      Flag.withDescription("The tokens used so far (default: unknown, which a maxTokens rule denies)")
    )
  },
  (a) =>
    withJournalToRead(({ json }) =>
      Effect.gen(function*() {
        const policy = yield* load(a.file)
        const decoded = Hook.decodeText(yield* readEvent(a.event))
        if (Result.isFailure(decoded)) {
          return yield* new InvalidInput({ field: "--event", reason: decoded.failure.message })
        }
        const event = decoded.success
        if (event.name !== "PreToolUse") {
          return yield* new InvalidInput({
            field: "--event",
            reason: `a PreToolUse hook input is needed, got ${Hook.eventName(event)}`
          })
        }
        const tokensText = Option.getOrUndefined(a.tokens)
        const tokens = tokensText === undefined ? null : /^[0-9]{1,30}$/.test(tokensText) ? BigInt(tokensText) : -1n
        if (tokens === -1n) {
          return yield* new InvalidInput({ field: "--tokens", reason: `expected a whole number, got ${tokensText}` })
        }
        const id = Option.getOrUndefined(a.session)
        let state = JournalState.empty("policy-explain")
        if (id !== undefined) {
          yield* validId(id)
          state = yield* (yield* SessionJournal.SessionJournal).state(id)
        }
        const input = event.input
        const params = Entry.validateToolParams(Hook.toolParams(input))
        if (Result.isFailure(params)) {
          return yield* new InvalidInput({ field: "--event", reason: params.failure.message })
        }
        const projectDir = absolute(process.env["CLAUDE_PROJECT_DIR"]) ?? Hook.keptProjectDir(state.meta) ?? input.cwd
        const compiled = Policy.compile(policy)
        const result = Policy.explain(compiled, JournalState.snapshot(state), params.success, {
          call: { tool_name: input.tool_name, tool_input: input.tool_input, cwd: input.cwd },
          where: {
            cwd: input.cwd,
            projectDir,
            ...(absolute(process.env["HOME"]) === undefined ? {} : { home: process.env["HOME"]! })
          },
          nowMillis: yield* Clock.currentTimeMillis,
          tokens,
          // As the command hook and the resident guard: Claude Code prompts for an ask.
          canAsk: true,
          state: state.guard_state
        })
        if (json) {
          return yield* Output.json({
            tool_name: input.tool_name,
            ...verdictJson(result.verdict),
            decided_by: result.decidedBy,
            project_dir: projectDir,
            tokens: tokens === null ? null : tokens.toString(),
            rules: result.rules.map((r) => ({ rule: r.rule, ...verdictJson(r.verdict) }))
          })
        }
        const v = result.verdict
        yield* Output.lines([
          v._tag === "Allow"
            ? `${input.tool_name}: allow (no rule refuses it)`
            : `${input.tool_name}: ${verdictName(v)} by ${v.guard}: ${v.reason}`,
          ...result.rules.map((r) =>
            `  ${verdictName(r.verdict).padEnd(5)} ${r.rule}${
              r.verdict._tag === "Allow" ? "" : `: ${r.verdict.reason}`
            }`
          )
        ])
      })
    )
).pipe(Command.withDescription(
  "Say which rule of a policy decides one call (a PreToolUse hook input) and why, and every rule's own verdict; " +
    "writes nothing"
))

// ---------------------------------------------------------------------------
// test

// The tools a path pattern of a tool applies to (docs/DESIGN.md §15).
const family: { readonly [tool: string]: ReadonlyArray<string> } = {
  Read: ["Read", "Glob", "Grep", "LS"],
  Edit: ["Edit", "Write", "MultiEdit", "NotebookEdit"]
}

const textsOf = (p: Policy.Patterns | undefined): ReadonlyArray<string> =>
  p === undefined ? [] : typeof p === "string" ? [p] : p

// Whether a pattern judges a call of `tool` by its input (not by its name alone).
const needsInput = (text: string, tool: string): boolean => {
  const parsed = Pattern.parse(text)
  if (Result.isFailure(parsed)) return true
  const p: Pattern.Pattern = parsed.success
  if (p._tag === "Tool") return false
  return (family[p.tool] ?? [p.tool]).includes(tool)
}

// The leaves of a policy in the order `Policy.explain` lists its rules.
const leavesOf = (p: Policy.Policy, out: Array<Policy.Policy> = []): Array<Policy.Policy> => {
  if ("all" in p) { for (const c of p.all) leavesOf(c, out) }
  else if ("any" in p) { for (const c of p.any) leavesOf(c, out) }
  else out.push(p)
  return out
}

// What a rule needs that a replayed call may lack: the call's input, the tokens.
const lacks = (leaf: Policy.Policy, tool: string, hasInput: boolean, hasTokens: boolean): string | null => {
  if ("maxTokens" in leaf) return hasTokens ? null : "tokens"
  if (hasInput) return null
  const j = leaf as Policy.PolicyJson
  const lists = [j.deny, j.ask, j.after, j.of]
  return lists.some((l) => textsOf(l as Policy.Patterns | undefined).some((t) => needsInput(t, tool)))
    ? "input"
    : null
}

const isObject = (u: unknown): u is { readonly [key: string]: Schema.Json } =>
  typeof u === "object" && u !== null && !Array.isArray(u)

// The call a stored entry beside a tool entry records (a hooked session's, a
// driver's or a gateway's decision: `tool_sequence` and `tool_input`), if any.
const recordedCall = (
  payload: unknown,
  tool: Entry.ToolEntry
): { readonly call: Pattern.Call; readonly tokens: bigint | null } | null => {
  if (!isObject(payload) || payload["tool_sequence"] !== tool.sequence || !isObject(payload["tool_input"])) return null
  const t = payload["tokens"]
  return {
    call: {
      tool_name: typeof payload["tool_name"] === "string" ? payload["tool_name"] : tool.tool_name,
      tool_input: payload["tool_input"],
      ...(typeof payload["cwd"] === "string" ? { cwd: payload["cwd"] } : {})
    },
    tokens: typeof t === "number" && Number.isSafeInteger(t) && t >= 0
      ? BigInt(t)
      : typeof t === "string" && /^[0-9]{1,30}$/.test(t)
      ? BigInt(t)
      : null
  }
}

// Custody's sessions and the Agent SDK store's copies (`JournalSessionStore`) hold a
// transcript's lines, and after the line holding a call's result its tool entry, as
// `Transcript.pair` completes them: the replay pairs the lines the same way
// (`Transcript.pairUses`), so each tool entry gets the `tool_use` it was made from,
// with its input and the line's `cwd`. The tokens are the transcript's (`Usage`)
// through the line of the call, known while the transcript is a main agent's that
// has spawned no sub-agent yet (a sub-agent's tokens are in its own transcript).
const transcriptCalls = () => {
  const pairing = Transcript.emptyPairing()
  const tokensAt = new Map<string, bigint | null>()
  let queue: Array<Transcript.ToolUse> = []
  let usage = Usage.empty
  let spawned = false
  return {
    line: (entry: Entry.Entry): void => {
      const value = Planner.lineOfEntry(entry)
      if (value === undefined) return
      const text = "text" in value ? value.text : ""
      const info = Transcript.parseCalls(text)
      if (text !== "") usage = Usage.extend(usage, encoder.encode(`${text}\n`))
      for (const use of info.toolUses) {
        tokensAt.delete(use.id)
        if (tokensAt.size >= MAX_CALLS) tokensAt.delete(tokensAt.keys().next().value!)
        tokensAt.set(use.id, spawned ? null : Usage.tokensOf(usage))
      }
      if (info.toolUses.some((u) => Transcript.SPAWN_TOOLS.has(u.name))) spawned = true
      queue = Transcript.pairUses(pairing, info)
    },
    call: (entry: Entry.ToolEntry): { readonly call: Pattern.Call; readonly tokens: bigint | null } | null => {
      const use = queue.shift()
      const call = use?.call
      if (use === undefined || call === undefined || Transcript.toolNameOf(use) !== entry.tool_name) return null
      const tokens = tokensAt.get(use.id)
      tokensAt.delete(use.id)
      if (!isObject(call.input)) return null
      return {
        call: { tool_name: use.name, tool_input: call.input, ...(call.cwd === undefined ? {} : { cwd: call.cwd }) },
        tokens: entry.delegation_depth === 0 ? tokens ?? null : null
      }
    }
  }
}

const encoder = new TextEncoder()

interface Pending {
  readonly entry: Entry.ToolEntry
  readonly before: JournalState.JournalState
  found: { readonly call: Pattern.Call; readonly tokens: bigint | null } | null
}

/** Calls kept by `tool_use_id` for their outcomes (the latest; outcomes follow their calls closely). */
const MAX_CALLS = 4096
/** Sequences listed per rule that could not judge. */
const MAX_LISTED = 20

const test = Command.make(
  "test",
  { file, id: sessionId },
  (a) =>
    withJournalToRead(({ json }) =>
      Effect.gen(function*() {
        const policy = yield* load(a.file)
        yield* validId(a.id)
        const compiled = Policy.compile(policy)
        const leaves = leavesOf(policy)
        const journal = yield* SessionJournal.SessionJournal
        // The session's own caps: requirePredecessors reads tool_counts, whose cap it keeps.
        const stored = yield* journal.state(a.id)
        const projectDir = Hook.keptProjectDir(stored.meta)
        const home = absolute(process.env["HOME"])
        let state = JournalState.empty(a.id, { entry_cap: stored.entry_cap, tool_counts_cap: stored.tool_counts_cap })
        // The replayed policy's own state, folded as it decides (not the stored one,
        // which another policy may have written).
        let policyState: Guard.GuardState | null = null
        const calls = new Map<string, Pattern.Call>()
        let count = 0
        let denied = 0
        let asked = 0
        let unjudgedCalls = 0
        const denying = new Set<string>()
        const unjudged = new Map<string, { what: string; calls: number; sequences: Array<number> }>()
        let pending: Pending | null = null
        const custody = transcriptCalls()

        const where = (call: Pattern.Call | null) => {
          const cwd = call !== null && typeof call.cwd === "string" ? call.cwd : projectDir ?? undefined
          return {
            ...(cwd === undefined ? {} : { cwd }),
            ...(projectDir === null ? {} : { projectDir }),
            ...(home === undefined ? {} : { home })
          }
        }

        // Judges a call once what was stored beside it is known.
        const judge = (p: Pending): Array<string> => {
          const entry = p.entry
          count++
          const context: Guard.GuardContext = {
            call: p.found?.call ?? null,
            where: where(p.found?.call ?? null),
            nowMillis: entry.timestamp_secs * 1000,
            tokens: p.found?.tokens ?? null,
            canAsk: true,
            state: policyState
          }
          const result = Policy.explain(compiled, JournalState.snapshot(p.before), entry, context)
          if (result.verdict.state !== undefined) policyState = result.verdict.state
          let judged = false
          let blind = false
          // A rule without what it needs judged the call failing closed: whatever its
          // verdict (a scoped limit that counted it allows it), it could not judge.
          result.rules.forEach((r, i) => {
            const missing = lacks(leaves[i]!, entry.tool_name, p.found !== null, p.found?.tokens != null)
            if (missing === null) {
              if (r.verdict._tag === "Deny") judged = true
              return
            }
            if (r.verdict._tag !== "Allow") blind = true
            const u = unjudged.get(r.rule) ?? { what: missing, calls: 0, sequences: [] }
            u.calls++
            if (u.sequences.length < MAX_LISTED) u.sequences.push(entry.sequence)
            unjudged.set(r.rule, u)
          })
          const v = result.verdict
          if (v._tag === "Allow") return []
          // A verdict only rules without what they need gave is no verdict: reported per rule.
          if (blind && !judged) {
            unjudgedCalls++
            return []
          }
          if (v._tag === "Ask") asked++
          else {
            denied++
            denying.add(v.guard)
          }
          return [
            json
              ? JSON.stringify({
                type: v._tag === "Ask" ? "asked" : "denied",
                sequence: entry.sequence,
                tool_name: entry.tool_name,
                agent_id: entry.agent_id,
                recorded_allowed: entry.allowed,
                guard: v.guard,
                reason: v.reason
              })
              : `#${entry.sequence} ${entry.tool_name} (agent ${entry.agent_id}${
                entry.allowed ? "" : ", recorded denied"
              }): ${v._tag === "Ask" ? "would ask: " : ""}${v.reason} [${v.guard}]`
          ]
        }

        yield* journal.entries(a.id).pipe(
          Stream.runForEachArray((chunk) => {
            const out: Array<string> = []
            for (const entry of chunk) {
              if (Entry.isTool(entry)) {
                if (pending !== null) out.push(...judge(pending))
                pending = { entry, before: state, found: custody.call(entry) }
              } else {
                custody.line(entry)
                const p = pending as Pending | null
                if (p !== null && p.found === null) {
                  const found = recordedCall(entry.payload, p.entry)
                  if (found !== null) {
                    p.found = found
                    const id = Denials.callKey(entry.payload)
                    if (id !== null) {
                      calls.delete(id)
                      if (calls.size >= MAX_CALLS) calls.delete(calls.keys().next().value!)
                      calls.set(id, found.call)
                    }
                  }
                }
                if (entry.kind === Entry.OUTCOME_KIND && isObject(entry.payload)) {
                  // The outcome's bytes reach the replayed policy's scoped byte limits.
                  if (p !== null) out.push(...judge(p))
                  pending = null
                  const id = Denials.callKey(entry.payload)
                  const call = id === null ? undefined : calls.get(id)
                  const read = entry.payload["bytes_read"]
                  const next = Policy.observe(
                    compiled,
                    policyState,
                    call ?? { tool_name: entry.payload["tool_name"] ?? null },
                    { read: typeof read === "number" ? read : 0, written: 0 },
                    { where: where(call ?? null), nowMillis: entry.timestamp_secs * 1000 }
                  )
                  if (next !== null) policyState = next
                }
              }
              state = JournalState.fold(state, entry)
            }
            return Output.lines(out)
          })
        )
        if (pending !== null) yield* Output.lines(judge(pending))
        const blind = Array.from(unjudged, ([rule, u]) => ({ rule, ...u }))
        if (json) {
          for (const u of blind) {
            yield* Output.json({
              type: "unjudged",
              rule: u.rule,
              lacking: u.what,
              calls: u.calls,
              sequences: u.sequences
            })
          }
          yield* Output.json({
            type: "summary",
            session: a.id,
            policy: Policy.format(policy),
            calls: count,
            denied,
            asked,
            unjudged: unjudgedCalls
          })
        } else {
          yield* Output.lines(blind.map((u) =>
            `could not judge ${Output.count(u.calls, "call")} against ${u.rule}: ${
              u.what === "tokens" ? "the tokens used were not recorded" : "their inputs were not recorded"
            } (#${u.sequences.join(", #")}${u.calls > u.sequences.length ? ", …" : ""})`
          ))
          yield* Output.write(
            `${a.id}: ${denied} of ${Output.count(count, "call")} would be denied` +
              (denying.size === 0 ? "" : ` (by ${Array.from(denying).join(", ")})`) +
              (asked === 0 ? "" : `, ${asked} would ask`) +
              (unjudgedCalls === 0 ? "" : `, ${unjudgedCalls} could not be judged`) +
              ` under ${Policy.format(policy)}\n`
          )
        }
        if (denied > 0) {
          return yield* new PolicyWouldDeny({ denied, calls: count })
        }
      })
    )
).pipe(Command.withDescription(
  "Replay a stored session's tool calls against a policy, with their inputs where the session recorded them, writing " +
    "nothing; list the calls it would deny with their guard, and per rule the calls it could not judge for lack of " +
    "their inputs; exit 5 when it would deny any"
))

/**
 * The `policy` command and its subcommands.
 *
 * @since 0.1.0
 */
export const policy = Command.make("policy").pipe(
  Command.withDescription(
    "The policy file: one key per rule (deny, ask, after, maxInvocations, maxTokens, …); check it, explain a call, " +
      "test it on a session"
  ),
  Command.withSubcommands([check, explain, test])
)
