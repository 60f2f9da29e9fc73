/**
 * `Watchdog.arm`: a process whose exit hangs (a thread stuck opening a FIFO no one
 * writes, as a hung mount would hold it) is ended by SIGKILL; one that exits is
 * left to its own exit code, and the watchdog kills nothing afterwards.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, assert, describe, it } from "vitest"
import { cleanup, tempDir } from "./Run.ts"

afterAll(cleanup)

const WATCHDOG = fileURLToPath(new URL("../src/internal/watchdog.ts", import.meta.url))

const child = (script: string) =>
  spawnSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8", timeout: 60_000 })

describe.skipIf(!fs.existsSync("/bin/sh"))("the exit watchdog", () => {
  it("ends a process whose exit hangs on a stuck file operation, and leaves one that exits alone", () => {
    const fifo = path.join(tempDir(), "fifo")
    spawnSync("mkfifo", [fifo])
    const hung = child(
      `import * as fs from "node:fs"; import * as W from ${JSON.stringify(WATCHDOG)};` +
        `fs.open(${JSON.stringify(fifo)}, "r", () => {});` +
        `setTimeout(() => { W.arm(1); process.exit(3) }, 100)`
    )
    assert.strictEqual(hung.signal, "SIGKILL", JSON.stringify(hung))
    const clean = child(`import * as W from ${JSON.stringify(WATCHDOG)}; W.arm(1); process.exit(3)`)
    assert.strictEqual(clean.status, 3, JSON.stringify(clean))
  })
})
