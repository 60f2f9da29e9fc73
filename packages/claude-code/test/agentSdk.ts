/**
 * The Claude Agent SDK for tests, never a dependency: `scripts/claude-code.sh`
 * installs `@anthropic-ai/claude-agent-sdk@0.3.328` next to the CLI in its cache,
 * and this module imports it from there by absolute path. What the tests use of it
 * is typed here structurally (`Sdk`); `SdkTypes.test.ts` checks these types, and
 * the store's, against the SDK's own `sdk.d.ts`.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import type { JournalSessionStore } from "../src/index.ts"
import { CLAUDE_CODE_VERSION } from "./claudeCli.ts"

/** The SDK version `scripts/claude-code.sh` installs. */
export const SDK_VERSION = "0.3.328"

/** The cache `scripts/claude-code.sh` installs into. */
export const cacheDir = (): string =>
  process.env["SESSION_JOURNAL_CLAUDE_CACHE"] ??
    path.join(
      process.env["XDG_CACHE_HOME"] ?? path.join(os.homedir(), ".cache"),
      "session-journal",
      `claude-code-${CLAUDE_CODE_VERSION}`
    )

/** The SDK's package directory in the cache. */
export const sdkDir = (): string => path.join(cacheDir(), "node_modules", "@anthropic-ai", "claude-agent-sdk")

/** Whether the SDK of the pinned version is in the cache. */
export const sdkPresent = (): boolean => {
  try {
    const pkg = JSON.parse(fs.readFileSync(path.join(sdkDir(), "package.json"), "utf8")) as { version?: unknown }
    return pkg.version === SDK_VERSION
  } catch {
    return false
  }
}

/** Why the SDK tests are skipped when they are. */
export const SDK_SKIP_REASON =
  `@anthropic-ai/claude-agent-sdk@${SDK_VERSION} is not in ${cacheDir()}: run scripts/claude-code.sh; .ci/run does`

/** One message of `query()`'s stream, as far as the tests look at it. */
export interface SdkMessage {
  readonly type: string
  readonly subtype?: string
  readonly session_id?: string
  readonly [k: string]: unknown
}

/** The part of `query()`'s options the tests pass. */
export interface QueryOptions {
  readonly cwd?: string
  readonly env?: Record<string, string | undefined>
  readonly pathToClaudeCodeExecutable?: string
  readonly sessionStore?: JournalSessionStore.SessionStore
  readonly sessionStoreFlush?: "batched" | "eager"
  readonly resume?: string
  readonly tools?: string[]
  readonly allowedTools?: string[]
  readonly settingSources?: Array<"user" | "project" | "local">
  readonly stderr?: (data: string) => void
}

/** What the tests use of the SDK. */
export interface Sdk {
  readonly query: (params: { prompt: string; options?: QueryOptions }) => AsyncIterable<SdkMessage>
  readonly importSessionToStore: (
    sessionId: string,
    store: JournalSessionStore.SessionStore,
    options?: { dir?: string; includeSubagents?: boolean; batchSize?: number }
  ) => Promise<void>
  readonly foldSessionSummary: JournalSessionStore.FoldSessionSummary
  readonly listSessions: (
    options?: { dir?: string; sessionStore?: JournalSessionStore.SessionStore }
  ) => Promise<Array<{ sessionId: string; summary: string; lastModified: number }>>
}

let loaded: Promise<Sdk> | undefined

/** The SDK, imported from the cache (rejects when it is absent: check `sdkPresent` first). */
export const loadSdk = (): Promise<Sdk> => {
  loaded ??= import(pathToFileURL(path.join(sdkDir(), "sdk.mjs")).href) as Promise<Sdk>
  return loaded
}

if (!sdkPresent()) process.stderr.write(`skipping the Agent SDK tests: ${SDK_SKIP_REASON}\n`)
