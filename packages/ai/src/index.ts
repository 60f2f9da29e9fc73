/**
 * @session-journal/ai: `effect/ai` chats persisted in a session journal, with every
 * tool call on the hash chain and optional guards on tool execution.
 *
 * @since 0.1.0
 */

/**
 * `Chat.Persistence` backed by the `SessionJournal`: O(delta) saves, tool entries
 * for every executed tool call, and a guard hook that blocks denied calls.
 *
 * @since 0.1.0
 */
export * as JournalChat from "./JournalChat.ts"

/**
 * Where a chat lives in the journal: chat ids mapped to session ids, and the entry
 * kinds of a store.
 *
 * @since 0.1.0
 */
export * as ChatStore from "./ChatStore.ts"

/**
 * A chat's stored history folded from its store's entries.
 *
 * @since 0.1.0
 */
export * as ChatHistory from "./ChatHistory.ts"
