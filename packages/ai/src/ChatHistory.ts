/**
 * A chat's history as its store holds it on the chain, folded from the store's own
 * entry kinds: `message` entries append, `rewind` entries truncate, `save` entries
 * say the chat exists and when it expires. Entries of any other kind (tool calls,
 * other stores, other writers) are skipped.
 *
 * A message is stored as the JSON `Prompt.Message` encodes it. A message holding a
 * lone surrogate has no UTF-8 form and cannot be hashed as it is; it is stored as
 * its JSON text instead (a string payload, where a message is always an object),
 * in which `JSON.stringify` has escaped every lone surrogate.
 *
 * @since 0.1.0
 */
import type { Entry } from "@session-journal/core"
import type { Prompt } from "effect/ai"
import type * as Schema from "effect/Schema"
import { type Kinds, kindsOf } from "./ChatStore.ts"

/**
 * What a chat knows of its stored history: the session's next sequence when it was
 * read, whether the store has the chat, when it expires, and per stored message its
 * encoded JSON, a canonical text of it (to compare), and the message object it was
 * stored from or decoded to, when known (to compare by identity).
 *
 * @since 0.1.0
 */
export interface View {
  next: number
  exists: boolean
  expiresAt: number | null
  readonly payloads: Array<unknown>
  readonly texts: Array<string>
  readonly objects: Array<Prompt.Message | undefined>
}

/**
 * The view of a session with nothing of the store on it.
 *
 * @since 0.1.0
 */
export const empty = (): View => ({ next: 0, exists: false, expiresAt: null, payloads: [], texts: [], objects: [] })

/**
 * Whether the view's chat has expired at `nowMillis` (as `Chat.layerPersisted`'s
 * stores say: at the expiry instant it is gone).
 *
 * @since 0.1.0
 */
export const isExpired = (view: View, nowMillis: number): boolean =>
  view.expiresAt !== null && view.expiresAt <= nowMillis

/**
 * JSON text with object keys sorted, so equal JSON values have equal texts
 * whatever key order a store returns.
 *
 * @since 0.1.0
 */
export const canonical = (value: unknown): string => {
  if (Array.isArray(value)) return "[" + value.map(canonical).join(",") + "]"
  if (value !== null && typeof value === "object") {
    const o = value as Record<string, unknown>
    return "{" + Object.keys(o).sort().filter((k) =>
      o[k] !== undefined
    ).map((k) => JSON.stringify(k) + ":" + canonical(o[k])).join(",") + "}"
  }
  return JSON.stringify(value) ?? "null"
}

const loneSurrogate = /\p{Cs}/u

const hasLoneSurrogate = (value: unknown): boolean => {
  if (typeof value === "string") return loneSurrogate.test(value)
  if (Array.isArray(value)) return value.some(hasLoneSurrogate)
  if (value !== null && typeof value === "object") {
    return Object.entries(value).some(([k, v]) => loneSurrogate.test(k) || hasLoneSurrogate(v))
  }
  return false
}

/**
 * The payload of a message entry: the encoded message (a JSON object), or its JSON
 * text when it holds a lone surrogate.
 *
 * @since 0.1.0
 */
export const toPayload = (encoded: unknown): Schema.Json =>
  hasLoneSurrogate(encoded) ? JSON.stringify(encoded) : encoded as Schema.Json

/**
 * The encoded message of a message entry's payload (the inverse of `toPayload`).
 *
 * @since 0.1.0
 */
export const fromPayload = (payload: unknown): unknown => typeof payload === "string" ? JSON.parse(payload) : payload

const keepOf = (payload: unknown): number | undefined => {
  const keep = (payload as { readonly keep?: unknown } | null)?.keep
  // Any writer can append these kinds: a keep that is not a whole count is
  // ignored like a missing one.
  return typeof keep === "number" && Number.isSafeInteger(keep) && keep >= 0 ? keep : undefined
}

const expiryOf = (payload: unknown): number | null => {
  const at = (payload as { readonly expires_at?: unknown } | null)?.expires_at
  return typeof at === "number" && Number.isFinite(at) ? at : null
}

/**
 * Truncates the view to its first `keep` messages.
 *
 * @since 0.1.0
 */
export const truncate = (view: View, keep: number): void => {
  if (keep >= view.payloads.length) return
  view.payloads.length = keep
  view.texts.length = keep
  view.objects.length = keep
}

/**
 * Folds entries into the view, in order; entries below `view.next` are skipped.
 *
 * @since 0.1.0
 */
export const apply = (view: View, entries: Iterable<Entry.Entry>, kinds: Kinds): void => {
  for (const entry of entries) {
    if (entry.sequence < view.next) continue
    view.next = entry.sequence + 1
    if (entry.kind === "tool") continue
    const payload = (entry as Entry.OtherEntry).payload
    if (entry.kind === kinds.message) {
      let encoded: unknown
      try {
        encoded = fromPayload(payload)
      } catch {
        // JSON text that does not parse: kept as text, so decoding the history fails
        // as it would for any other payload that is no message.
        encoded = payload
      }
      view.exists = true
      view.payloads.push(encoded)
      view.texts.push(canonical(encoded))
      view.objects.push(undefined)
    } else if (entry.kind === kinds.rewind) {
      view.exists = true
      const keep = keepOf(payload)
      if (keep !== undefined) truncate(view, keep)
    } else if (entry.kind === kinds.save) {
      view.exists = true
      view.expiresAt = expiryOf(payload)
    }
  }
}

/**
 * The encoded messages of a chat folded from its journal entries: the store's
 * `message` entries append, its `rewind` entries truncate, everything else is skipped.
 *
 * @since 0.1.0
 */
export const encodedHistory = (entries: Iterable<Entry.Entry>, kinds: Kinds = kindsOf()): Array<unknown> => {
  const view = empty()
  apply(view, entries, kinds)
  return view.payloads
}
