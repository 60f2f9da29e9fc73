/**
 * @session-journal/claude-code: custody of Claude Code transcripts. Every
 * transcript under `~/.claude/projects` (main sessions and their sub-agents)
 * archived and followed into its own verified journal session, byte for byte,
 * with each tool call on the hash chain.
 *
 * @since 0.1.0
 */

/**
 * The real delegation depth of a sub-agent, from the meta file Claude Code writes beside its transcript.
 *
 * @since 0.1.0
 */
export * as AgentDepth from "./AgentDepth.ts"
/**
 * Archive and follow a transcripts tree; restore a transcript from its journal.
 *
 * @since 0.1.0
 */
export * as Archive from "./Archive.ts"
/**
 * The typed failure of reading the transcripts' source.
 *
 * @since 0.1.0
 */
export * from "./Errors.ts"
/**
 * The message model of the stream-json protocol: total decoding, `Unknown` kept.
 *
 * @since 0.1.0
 */
export * as Message from "./Message.ts"
/**
 * The forwarder: the command hook that hands each event to the resident guard and denies when it gets no proved answer.
 *
 * @since 0.1.0
 */
export * as Forwarder from "./Forwarder.ts"
/**
 * The resident guard's installed form: the forwarder's hooks (or the plain `http` ones) and the check of the policy a guard runs.
 *
 * @since 0.1.0
 */
export * as GuardInstaller from "./GuardInstaller.ts"
/**
 * The resident guard: a loopback HTTP server for the hooks, the only writer of its journal, deciding through `Hook.handle`.
 *
 * @since 0.1.0
 */
export * as GuardServer from "./GuardServer.ts"
/**
 * Claude Code's hooks journaled and guarded: input schemas, the session of a Claude Code session, `handle`.
 *
 * @since 0.1.0
 */
export * as Hook from "./Hook.ts"
/**
 * The command hook: one event read from stdin, decided through `Hook.handle` within its deadline, answered in its form.
 *
 * @since 0.1.0
 */
export * as HookRunner from "./HookRunner.ts"
/**
 * How many calls our hooks allowed in a Claude Code session, counted from its transcript incrementally.
 *
 * @since 0.1.0
 */
export * as HookRuns from "./HookRuns.ts"
/**
 * The tokens a Claude Code session used, counted from its transcripts' assistant usage incrementally, each message once.
 *
 * @since 0.1.0
 */
export * as Usage from "./Usage.ts"
/**
 * Our hooks in Claude Code's settings: the hook commands, the settings file of a scope, install and uninstall as text edits.
 *
 * @since 0.1.0
 */
export * as Installer from "./Installer.ts"
/**
 * A project's MCP servers (`.mcp.json`) put through the gateway and taken out of it, as text edits.
 *
 * @since 0.1.0
 */
export * as McpInstaller from "./McpInstaller.ts"
/**
 * The incremental plan of one transcript (extend, diverge, nothing) and the entries it writes.
 *
 * @since 0.1.0
 */
export * as Planner from "./Planner.ts"
/**
 * The Claude Agent SDK's `SessionStore` kept in a session journal: every mirrored
 * transcript line on the hash chain, `append` durable and idempotent by `uuid`.
 *
 * @since 0.1.0
 */
export * as JournalSessionStore from "./JournalSessionStore.ts"
/**
 * Claude Code's project-directory encoding of a working directory.
 *
 * @since 0.1.0
 */
export * as ProjectDir from "./ProjectDir.ts"
/**
 * What no guarded call may touch: the journal, the policy file, the settings that hold the hooks, the transcripts.
 *
 * @since 0.1.0
 */
export * as ProtectedPaths from "./ProtectedPaths.ts"
/**
 * How a hook refuses, for every door alike: the deny outputs, a denial's reason, a refusal per event.
 *
 * @since 0.1.0
 */
export * as Refusal from "./Refusal.ts"
/**
 * Reading a secret (the guard's token, a signer key) from a file only its owner may read.
 *
 * @since 0.1.0
 */
export * as SecretFile from "./SecretFile.ts"
/**
 * A Claude Code CLI session driven from Effect: spawn, send, events, state, awaitResultAfter, interrupt, info.
 *
 * @since 0.1.0
 */
export * as Session from "./Session.ts"
/**
 * The typed failures of a driven session: the CLI died, the journal failed, a control request failed.
 *
 * @since 0.1.0
 */
export * from "./SessionErrors.ts"
/**
 * Which journal session holds which transcript file.
 *
 * @since 0.1.0
 */
export * as SessionIds from "./SessionIds.ts"
/**
 * The pure fold of a driven session's messages: ids, counters, usage, cost, alive or dead.
 *
 * @since 0.1.0
 */
export * as SessionState from "./SessionState.ts"
/**
 * One transcript file brought into its journal session.
 *
 * @since 0.1.0
 */
export * as Sync from "./Sync.ts"
/**
 * What a transcript line says: tool calls, their results, sub-agent links; and their pairing.
 *
 * @since 0.1.0
 */
export * as Transcript from "./Transcript.ts"
/**
 * Transcripts read incrementally before a door decides: bytes after what was counted, the scan kept between events.
 *
 * @since 0.1.0
 */
export * as TranscriptScan from "./TranscriptScan.ts"
/**
 * Structured user input of a driven session, with its round-trip law.
 *
 * @since 0.1.0
 */
export * as UserInput from "./UserInput.ts"
