/**
 * What a session is, as far as its messages tell: a pure fold over the messages
 * the CLI wrote (and the CLI's exit), kept by the session in a `SubscriptionRef`.
 * The counters only grow, so "a result after the n-th" is a question about one
 * state, and no result can be missed between reading the state and waiting.
 * No effect inside.
 *
 * @since 0.1.0
 */
import type * as Message from "./Message.ts"

/**
 * Token totals over the results seen (each result's `usage`, summed: the CLI
 * reports a turn's own usage there; an interrupted request's tokens are not
 * in it).
 *
 * @since 0.1.0
 */
export interface Usage {
  readonly input_tokens: number
  readonly output_tokens: number
  readonly cache_creation_input_tokens: number
  readonly cache_read_input_tokens: number
}

/**
 * How the CLI ended: its exit code (null when a signal ended it) and signal, and
 * the tail of its stderr.
 *
 * @since 0.1.0
 */
export interface Exit {
  readonly code: number | null
  readonly signal: string | null
  readonly stderr: string
}

/**
 * The state of a session.
 *
 * @since 0.1.0
 */
export interface SessionState {
  /** The CLI's session id, from the first `system/init` (null before it). */
  readonly sessionId: string | null
  /** The model of the latest `system/init`. */
  readonly model: string | null
  /** Messages the CLI wrote, of any type (unknown ones included). */
  readonly messagesSeen: number
  /** `result` messages seen: one per finished turn. */
  readonly resultsSeen: number
  /** `system/notification` and `system/task_notification` messages seen. */
  readonly notificationsSeen: number
  /** Messages of a type the model does not know, or not JSON at all. */
  readonly unknownSeen: number
  readonly usage: Usage
  /**
   * The session's cost so far: the latest result's `total_cost_usd`. The CLI
   * reports a running total of its session there, not the turn's own cost
   * (observed with 2.1.328: two turns, the second of ten times the first's
   * tokens, report 1× and 11×), so the totals are not summed. 0 before a result
   * that carries one.
   */
  readonly costUsd: number
  readonly lastResult: Message.ResultMessage | null
  /** `alive` until the CLI exited. */
  readonly status: { readonly _tag: "Alive" } | { readonly _tag: "Dead"; readonly exit: Exit }
}

/**
 * The state before the first message.
 *
 * @since 0.1.0
 */
export const initial: SessionState = {
  sessionId: null,
  model: null,
  messagesSeen: 0,
  resultsSeen: 0,
  notificationsSeen: 0,
  unknownSeen: 0,
  usage: { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
  costUsd: 0,
  lastResult: null,
  status: { _tag: "Alive" }
}

/**
 * What the state is folded over: a message of the CLI, or its exit.
 *
 * @since 0.1.0
 */
export type Input = Message.Message | { readonly _tag: "Exited"; readonly exit: Exit }

const count = (usage: unknown, key: keyof Usage): number => {
  if (typeof usage !== "object" || usage === null) return 0
  const v = (usage as Record<string, unknown>)[key]
  return typeof v === "number" && Number.isFinite(v) && v >= 0 ? v : 0
}

const addUsage = (a: Usage, usage: unknown): Usage => ({
  input_tokens: a.input_tokens + count(usage, "input_tokens"),
  output_tokens: a.output_tokens + count(usage, "output_tokens"),
  cache_creation_input_tokens: a.cache_creation_input_tokens + count(usage, "cache_creation_input_tokens"),
  cache_read_input_tokens: a.cache_read_input_tokens + count(usage, "cache_read_input_tokens")
})

/**
 * The state after one more input. Total; after `Exited`, messages still count
 * (lines read after the exit was seen) but the session stays dead.
 *
 * @since 0.1.0
 */
export const fold = (state: SessionState, input: Input): SessionState => {
  switch (input._tag) {
    case "Exited":
      return state.status._tag === "Dead" ? state : { ...state, status: { _tag: "Dead", exit: input.exit } }
    case "SystemInit":
      return {
        ...state,
        messagesSeen: state.messagesSeen + 1,
        sessionId: state.sessionId ?? input.session_id,
        model: input.model
      }
    case "System":
      return {
        ...state,
        messagesSeen: state.messagesSeen + 1,
        notificationsSeen: state.notificationsSeen +
          (input.subtype === "notification" || input.subtype === "task_notification" ? 1 : 0)
      }
    case "Result": {
      const cost = input.total_cost_usd
      return {
        ...state,
        messagesSeen: state.messagesSeen + 1,
        resultsSeen: state.resultsSeen + 1,
        usage: addUsage(state.usage, input.usage),
        // A running total, not the turn's cost: the latest replaces it.
        costUsd: cost !== undefined && Number.isFinite(cost) && cost >= 0 ? cost : state.costUsd,
        lastResult: input
      }
    }
    case "Unknown":
    case "Garbled":
      return { ...state, messagesSeen: state.messagesSeen + 1, unknownSeen: state.unknownSeen + 1 }
    default:
      return { ...state, messagesSeen: state.messagesSeen + 1 }
  }
}

/**
 * Whether the CLI has exited.
 *
 * @since 0.1.0
 */
export const isDead = (state: SessionState): boolean => state.status._tag === "Dead"
