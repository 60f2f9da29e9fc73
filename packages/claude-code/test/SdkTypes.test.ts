/**
 * The store's copies of the Agent SDK's types are the SDK's: a small program,
 * written to a temporary directory and type-checked with the workspace's `tsc`,
 * imports the SDK's own `sdk.d.ts` from the cache (`agentSdk.ts`) next to this
 * package's sources and requires `SessionKey`, `SessionStoreEntry` and
 * `SessionSummaryEntry` to be the same types, `SessionStore` and the store `open`
 * gives to be assignable to the SDK's `SessionStore` (and back), the SDK's
 * `foldSessionSummary` to be a `FoldSessionSummary`, and the SDK module to be what
 * the tests' `Sdk` says, and a store whose `load` gives another type to be
 * refused. Skipped, with the reason, when the SDK is not installed.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, assert, describe, it } from "vitest"
import { SDK_SKIP_REASON, sdkDir, sdkPresent } from "./agentSdk.ts"

const repo = path.resolve(import.meta.dirname, "..", "..", "..")
const made: Array<string> = []
afterAll(() => {
  for (const dir of made.splice(0)) fs.rmSync(dir, { recursive: true, force: true })
})

// Type-checks `source` (a module) in a temporary directory; the compiler's output on failure.
const typeCheck = (source: string): string | null => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sj-sdk-types-"))
  made.push(dir)
  fs.writeFileSync(path.join(dir, "package.json"), JSON.stringify({ type: "module" }))
  fs.writeFileSync(path.join(dir, "check.ts"), source)
  fs.writeFileSync(
    path.join(dir, "tsconfig.json"),
    JSON.stringify({
      extends: path.join(repo, "tsconfig.base.json"),
      compilerOptions: {
        noEmit: true,
        composite: false,
        declaration: false,
        declarationMap: false,
        sourceMap: false,
        rewriteRelativeImportExtensions: false,
        types: ["node"],
        typeRoots: [path.join(repo, "node_modules", "@types")]
      },
      files: ["check.ts"]
    })
  )
  try {
    execFileSync(path.join(repo, "node_modules", ".bin", "tsc"), ["-p", dir], { encoding: "utf8", stdio: "pipe" })
    return null
  } catch (e) {
    const failed = e as { stdout?: string; stderr?: string; message: string }
    return `${failed.stdout ?? ""}${failed.stderr ?? ""}` || failed.message
  }
}

const program = (extra: string) => `
import type * as Sdk from ${JSON.stringify(path.join(sdkDir(), "sdk.d.ts"))}
import type { JournalSessionStore } from ${JSON.stringify(path.join(repo, "packages/claude-code/src/index.ts"))}
import type { Sdk as TestSdk } from ${JSON.stringify(path.join(repo, "packages/claude-code/test/agentSdk.ts"))}

type Equals<A, B> = (<T>() => T extends A ? 1 : 2) extends (<T>() => T extends B ? 1 : 2) ? true : false
export const same = <T extends true>(): T | undefined => undefined
same<Equals<JournalSessionStore.SessionKey, Sdk.SessionKey>>()
same<Equals<JournalSessionStore.SessionStoreEntry, Sdk.SessionStoreEntry>>()
same<Equals<JournalSessionStore.SessionSummaryEntry, Sdk.SessionSummaryEntry>>()

declare const ours: JournalSessionStore.SessionStore
declare const theirs: Sdk.SessionStore
declare const opened: JournalSessionStore.Store
declare const service: JournalSessionStore.Operations
declare const sdkModule: typeof Sdk
export const toSdk: Sdk.SessionStore = ours
export const fromSdk: JournalSessionStore.SessionStore = theirs
export const openedIsSdk: Sdk.SessionStore = opened
declare const withSummaries: JournalSessionStore.StoreWithSummaries
declare const withoutSummaries: JournalSessionStore.StoreWithoutSummaries
export const withSummariesIsSdk: Sdk.SessionStore = withSummaries
export const withoutSummariesIsSdk: Sdk.SessionStore = withoutSummaries
export const serviceIsSdk: Sdk.SessionStore = service.sessionStore
export const fold: JournalSessionStore.FoldSessionSummary = sdkModule.foldSessionSummary
export const testSdk: TestSdk = sdkModule
${extra}
`

describe.skipIf(!sdkPresent())("the store's types against the Agent SDK's sdk.d.ts", () => {
  if (!sdkPresent()) it.skip(SDK_SKIP_REASON, () => {})

  it("SessionKey, SessionStoreEntry, SessionSummaryEntry are the SDK's; the store is an SDK SessionStore and back; a wrong one is refused", () => {
    // The last assignment must fail (the check has teeth): were it accepted, the
    // directive above it would be unused, which is an error too.
    const out = typeCheck(program(`
declare const wrong: Omit<JournalSessionStore.SessionStore, "load"> & { load(key: Sdk.SessionKey): Promise<string[] | null> }
// @ts-expect-error: load gives strings, not entries
export const refused: Sdk.SessionStore = wrong
`))
    assert.isNull(out, out ?? "")
  })
})
