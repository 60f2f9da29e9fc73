/**
 * `record` without the command tree: the entry recognizes only a plain invocation
 * (`internal/recordArgs.ts`) and leaves every other one to the tree, and a
 * recognized one does what the tree's `record` does (the same output, failures
 * and exit codes). Checked on the built command, as installed: the entry's path
 * leaves its code cache behind, the tree's does not.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, assert, describe, it } from "vitest"
import { recordArgs } from "../src/internal/recordArgs.ts"
import { baseEnv, BIN, cleanup, tempDir } from "./Run.ts"

afterAll(cleanup)

const CALL = ["--tool", "read_file", "--server", "srv-1", "--agent", "agent-1"]

describe("recordArgs", () => {
  it("recognizes a plain record, global flags before or after it", () => {
    assert.deepStrictEqual(
      recordArgs(["--dir", "/j", "record", "s-1", ...CALL, "--read=512", "--depth", "2", "--denied", "--json"]),
      {
        id: "s-1",
        tool: "read_file",
        server: "srv-1",
        agent: "agent-1",
        read: 512,
        written: 0,
        depth: 2,
        denied: true,
        waitMillis: undefined,
        dir: "/j",
        postgres: undefined,
        json: true,
        verbose: false
      }
    )
    assert.strictEqual(recordArgs(["record", "s", ...CALL, "--wait", "2s"])?.waitMillis, 2000)
    assert.strictEqual(
      recordArgs(["record", "s", ...CALL, "--verbose", "--postgres", "postgres://h/d"])?.postgres,
      "postgres://h/d"
    )
  })

  it("leaves everything else to the command tree", () => {
    for (
      const argv of [
        ["record", "s", "--tool", "t", "--server", "s"],
        ["record", ...CALL],
        ["record", "s", "t", ...CALL],
        ["append", "s", ...CALL],
        ["record", "s", ...CALL, "--help"],
        ["record", "s", ...CALL, "--read", "0512"],
        ["record", "s", ...CALL, "--read", "-1"],
        ["record", "s", ...CALL, "--read", "1e3"],
        ["record", "s", ...CALL, "--depth"],
        ["record", "s", ...CALL, "--tool", "again"],
        ["record", "s", ...CALL, "--denied=false"],
        ["record", "s", ...CALL, "--json", "--json"],
        ["record", "s", "--tool", "-x", "--server", "s", "--agent", "a"],
        ["record", "s", ...CALL, "--wait", "soon"],
        ["record", "s", ...CALL, "--log-level", "debug"],
        ["record", "s", ...CALL, "-h"],
        ["record", "", ...CALL]
      ]
    ) assert.isNull(recordArgs(argv), argv.join(" "))
  })
})

describe("record started by the entry", () => {
  const runBin = (args: ReadonlyArray<string>, journal: string, cache: string) => {
    const env: NodeJS.ProcessEnv = { ...baseEnv(), XDG_CACHE_HOME: cache }
    // Without the workspace's source condition: the built bundle.
    delete env["NODE_OPTIONS"]
    const ran = spawnSync(process.execPath, [BIN, "--dir", journal, ...args], { env, encoding: "utf8" })
    // What differs between two runs: the time and the hashes.
    const plain = (text: string) =>
      text.replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ/g, "TIME").replace(/"timestamp_secs":\d+/g, "\"timestamp_secs\":0")
        .replace(/[0-9a-f]{12,64}/g, "HASH")
    return { code: ran.status, stdout: plain(ran.stdout), stderr: plain(ran.stderr) }
  }
  const cached = (cache: string) =>
    fs.existsSync(path.join(cache, "session-journal", "code"))
      ? fs.readdirSync(path.join(cache, "session-journal", "code")).filter((f) => f.startsWith("RecordProcess-"))
      : []

  it("does what the command tree's record does", () => {
    const dir = tempDir()
    // A count with a leading zero is the same number to the tree, and not a plain form to the entry.
    const cases: ReadonlyArray<readonly [ReadonlyArray<string>, ReadonlyArray<string>]> = [
      [["record", "s1", ...CALL, "--read", "512"], ["record", "s1", ...CALL, "--read", "0512"]],
      [["--json", "record", "s1", ...CALL, "--written", "7", "--denied"], [
        "--json",
        "record",
        "s1",
        ...CALL,
        "--written",
        "07",
        "--denied"
      ]],
      [["record", "bad!id", ...CALL, "--depth", "1"], ["record", "bad!id", ...CALL, "--depth", "01"]],
      [["record", "s1", ...CALL, "--depth", "1", "--wait", "1s", "--verbose"], [
        "record",
        "s1",
        ...CALL,
        "--depth",
        "01",
        "--wait",
        "1s",
        "--verbose"
      ]]
    ]
    for (const [i, [plainForm, treeForm]] of cases.entries()) {
      const entryCache = path.join(dir, `entry-${i}`)
      const treeCache = path.join(dir, "tree")
      // Each into a journal of its own, so that both write the same sequence numbers.
      const byEntry = runBin(plainForm, path.join(dir, `a-${i}`), entryCache)
      const byTree = runBin(treeForm, path.join(dir, `b-${i}`), treeCache)
      assert.deepStrictEqual(byEntry, byTree, plainForm.join(" "))
      assert.lengthOf(cached(entryCache), 1, "the entry ran record itself")
      assert.deepStrictEqual(cached(treeCache), [], "the tree ran record")
    }
    const stored = runBin(["record", "s1", ...CALL], path.join(dir, "c"), path.join(dir, "c-cache"))
    assert.strictEqual(stored.code, 0, stored.stderr)
    assert.match(stored.stdout, /^#0 TIME tool read_file srv-1\/agent-1 read=0 written=0 depth=0 allowed HASH\n$/)
    const unusable = runBin(["record", "s1", ...CALL], "/dev/null/journal", path.join(dir, "d-cache"))
    assert.strictEqual(unusable.code, 3)
    assert.match(unusable.stderr, /^session-journal: storage .*\.\n$/)
  }, 120_000)
})
