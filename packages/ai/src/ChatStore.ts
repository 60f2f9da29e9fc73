/**
 * Where a chat lives in the journal: the session id a chat id maps to, and the
 * entry kinds a store writes and reads.
 *
 * Any string is a chat id. An id that already is a session id stays as it is;
 * any other string (and any id of the reserved mapped form) becomes
 * `_c_` + the base64url SHA-256 of its UTF-16 code units, so the mapping is
 * deterministic, distinct strings never share a session (short of a SHA-256
 * collision), and lone surrogates are told apart.
 *
 * A store's entries carry kinds of their own (`chat.message`, `chat.rewind`,
 * `chat.save`, suffixed with `:` and the store id when one is given): a chat reads
 * only those kinds, so entries of other writers on the same session cannot change
 * it, and two stores keep two separate chats under one chat id.
 *
 * @since 0.1.0
 */
import { sha256 } from "@noble/hashes/sha2.js"
import { Entry } from "@session-journal/core"

/**
 * The start of every mapped session id. A chat id that is a session id of the
 * mapped form is mapped too, so no literal id can take a mapped one's place.
 *
 * @since 0.1.0
 */
export const MAPPED_PREFIX = "_c_"

const mappedForm = /^_c_[A-Za-z0-9_-]{43}$/

const base64url = (bytes: Uint8Array): string => {
  let binary = ""
  for (const b of bytes) binary += String.fromCharCode(b)
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "")
}

/**
 * The session id of a chat id: the id itself when it is a valid session id not of
 * the mapped form, otherwise `_c_` + base64url(SHA-256 of the UTF-16LE code units).
 *
 * @since 0.1.0
 */
export const sessionIdOf = (chatId: string): string => {
  if (Entry.isSessionId(chatId) && !mappedForm.test(chatId)) return chatId
  const units = new Uint8Array(chatId.length * 2)
  for (let i = 0; i < chatId.length; i++) {
    const unit = chatId.charCodeAt(i)
    units[2 * i] = unit & 0xff
    units[2 * i + 1] = unit >>> 8
  }
  return MAPPED_PREFIX + base64url(sha256(units))
}

/**
 * Whether `sessionIdOf` changed the chat id (then the original id is kept in the
 * session's metadata).
 *
 * @since 0.1.0
 */
export const isMapped = (chatId: string): boolean => sessionIdOf(chatId) !== chatId

/**
 * The entry kinds of one store.
 *
 * @since 0.1.0
 */
export interface Kinds {
  /** A prompt message; the payload is the message as `Prompt.Message` encodes it. */
  readonly message: string
  /** `{ keep: n }`: only the first `n` messages before it remain. */
  readonly rewind: string
  /** `{ expires_at: millis | null }`: the chat exists (and when it expires). */
  readonly save: string
}

const plainStore = /^[A-Za-z0-9_.-]{1,40}$/

/**
 * The kinds of a store: `chat.message`, `chat.rewind`, `chat.save` without a store
 * id; with one, each suffixed by `:` and the store id when it is at most 40 of
 * `[A-Za-z0-9_.-]`, otherwise by `::` and the base64url SHA-256 of the store id
 * (a plain store id has no `:`, so the two forms never meet).
 *
 * @since 0.1.0
 */
export const kindsOf = (storeId?: string | undefined): Kinds => {
  const suffix = storeId === undefined
    ? ""
    : plainStore.test(storeId)
    ? `:${storeId}`
    : `::${sessionIdOf(`\u0000${storeId}`).slice(MAPPED_PREFIX.length)}`
  return { message: `chat.message${suffix}`, rewind: `chat.rewind${suffix}`, save: `chat.save${suffix}` }
}
