/**
 * Tool calls of a chat: the guard around a toolkit's handler, and which tool
 * entries a save writes for the messages it stores.
 */
import { Entry, type Guard, JournalState, Utf8 } from "@session-journal/core"
import type { LanguageModel, Prompt, Tool, Toolkit } from "effect/ai"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"

/**
 * Bytes of the UTF-8 JSON text of a value (0 for `undefined`); a string counts with
 * its quotes and escapes, unlike `Utf8.jsonBytes`.
 */
export const jsonBytes = (value: unknown): number => {
  const text = JSON.stringify(value)
  return text === undefined ? 0 : Utf8.utf8Length(text)
}

/** A guard decision not stored yet: the call's id and the tool entry it will become. */
export interface Pending {
  readonly id: string | undefined
  params: Entry.ValidToolParams
}

/** The result a model receives for a call the guard denied. */
export interface Denied {
  readonly type: "execution-denied"
  readonly reason: string
}

type AnyToolkit = Toolkit.WithHandler<Record<string, Tool.Any>>
type Handle = (name: string, params: unknown, toolCallId?: string, parseOptions?: unknown) => Effect.Effect<
  Stream.Stream<{ readonly encodedResult: unknown; readonly preliminary: boolean }, unknown, unknown>,
  unknown,
  unknown
>

/**
 * Wraps the toolkit of a turn so that each call is decided by `guard` before its
 * handler runs. `decide` returns the verdict and the pending entry (kept until a
 * save stores it); once the handler's final result is known its encoded size
 * becomes the entry's `bytes_written`.
 */
export const guardToolkit = (
  input: LanguageModel.ToolkitInput<Record<string, Tool.Any>>,
  decide: (name: string, params: unknown, toolCallId: string | undefined) => Effect.Effect<{
    readonly verdict: Guard.Verdict
    readonly pending: Pending
  }>
): LanguageModel.ToolkitInput<Record<string, Tool.Any>> => {
  const wrap = (toolkit: AnyToolkit): AnyToolkit => ({
    tools: toolkit.tools,
    handle: ((name: string, params: unknown, toolCallId?: string, parseOptions?: unknown) =>
      Effect.gen(function*() {
        const { pending, verdict } = yield* decide(name, params, toolCallId)
        if (verdict._tag === "Deny") {
          const denied: Denied = { type: "execution-denied", reason: verdict.reason }
          return Stream.succeed({
            result: denied,
            encodedResult: denied,
            isFailure: true,
            failureOrigin: "handler" as const,
            preliminary: false
          })
        }
        const stream = yield* (toolkit.handle as unknown as Handle)(name, params, toolCallId, parseOptions)
        return Stream.tap(stream, (result) =>
          Effect.sync(() => {
            if (!result.preliminary) {
              pending.params = { ...pending.params, bytes_written: jsonBytes(result.encodedResult) }
            }
          }))
      })) as unknown as AnyToolkit["handle"]
  })
  return Effect.isEffect(input) ? Effect.map(input, wrap) : wrap(input as AnyToolkit)
}

/** The state a guard decides on: the stored state plus the decisions not stored yet. */
export const withPending = (
  state: JournalState.JournalState,
  pending: ReadonlyArray<Pending>
): JournalState.JournalState => {
  let s = state
  for (const p of pending) s = JournalState.fold(s, JournalState.nextTool(s, 0, p.params))
  return s
}

const resultsOf = (message: Prompt.Message): Array<Prompt.ToolResultPart> => {
  const out: Array<Prompt.ToolResultPart> = []
  if (message.role === "assistant" || message.role === "tool") {
    for (const part of message.content) if (part.type === "tool-result") out.push(part)
  }
  return out
}

/** Everything needed to turn stored tool results into tool entries. */
export interface EntryContext {
  readonly params: (name: string, callParams: unknown, result: unknown, allowed: boolean) => Entry.ToolParams
  /** Result parts that already have their tool entry (by identity). */
  readonly recorded: WeakSet<object>
  readonly pending: ReadonlyArray<Pending>
}

/**
 * The tool entries to write after each of `fresh[i]` (`current.slice(keep)`), one
 * per tool result not recorded before, and the pending decisions they use up. A
 * result belongs to the latest call with its id before it, so providers that reuse
 * call ids (`call_0` every turn) still get one entry per call.
 */
export const toolEntries = (
  current: ReadonlyArray<Prompt.Message>,
  keep: number,
  context: EntryContext
): { readonly after: Array<Array<Entry.ToolParams>>; readonly parts: Array<object>; readonly used: Set<Pending> } => {
  const calls = new Map<string, Prompt.ToolCallPart>()
  const used = new Set<Pending>()
  const parts: Array<object> = []
  const olderCall = (id: string) => {
    for (let i = keep - 1; i >= 0; i--) {
      const m = current[i]!
      if (m.role !== "assistant") continue
      for (let j = m.content.length - 1; j >= 0; j--) {
        const part = m.content[j]!
        if (part.type === "tool-call" && part.id === id) return part
      }
    }
    return undefined
  }
  const after: Array<Array<Entry.ToolParams>> = []
  for (let i = keep; i < current.length; i++) {
    const message = current[i]!
    const out: Array<Entry.ToolParams> = []
    if (message.role === "assistant") {
      for (const part of message.content) if (part.type === "tool-call") calls.set(part.id, part)
    }
    for (const part of resultsOf(message)) {
      if (context.recorded.has(part)) continue
      const call = calls.get(part.id) ?? olderCall(part.id)
      const decision = context.pending.find((p) => p.id === part.id && !used.has(p))
      if (decision !== undefined) used.add(decision)
      const allowed = decision === undefined || decision.params.allowed
      out.push(context.params(part.name, call?.params, allowed ? part.result : undefined, allowed))
      parts.push(part)
    }
    after.push(out)
  }
  return { after, parts, used }
}

/** Whether a tool name meets the journal's field rules. */
export const isToolName = (name: string): boolean => Entry.isIdentity(name)
