/**
 * The single-writer lock inside one process: two acquirers racing for the same
 * stale lock, with the interleaving forced through an injected filesystem (real
 * files; only the timing of one call is held back).
 */
import { SessionLocked } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { assert, describe, it } from "vitest"
import { Lock, NodePersistence } from "../src/index.ts"
import { lockContext as context, tempDir } from "./helpers.ts"

describe("Lock", () => {
  it("a takeover in progress in this process is respected by a second acquirer", async () => {
    const root = tempDir("lock-race")
    const dir = path.join(root, "s")
    fs.mkdirSync(dir, { mode: 0o700 })
    // Stale: names this process, with a token no live acquisition holds.
    const stale = {
      pid: process.pid,
      host: os.hostname(),
      start: Lock.processStat(process.pid)?.start ?? null,
      token: "released-long-ago",
      acquired_at: 0
    }
    fs.writeFileSync(path.join(dir, Lock.LOCK_FILE), `${JSON.stringify(stale)}\n`, { mode: 0o600 })

    // A holds the takeover claim and pauses just before removing the stale lock,
    // until B has settled or has been refused the claim twice.
    let release!: () => void
    const gate = new Promise<void>((resolve) => {
      release = resolve
    })
    let bRefused = 0
    const lockPath = path.join(dir, Lock.LOCK_FILE)
    const claimPath = path.join(dir, Lock.CLAIM_FILE)
    let paused = false
    const fsA: NodePersistence.Fs = {
      ...NodePersistence.nodeFs,
      unlink: async (p) => {
        if (p === lockPath && !paused) {
          paused = true
          await gate
        }
        return NodePersistence.nodeFs.unlink(p)
      }
    }
    const fsB: NodePersistence.Fs = {
      ...NodePersistence.nodeFs,
      link: async (from, to) => {
        try {
          return await NodePersistence.nodeFs.link(from, to)
        } catch (e) {
          if (to === claimPath && ++bRefused >= 2) release()
          throw e
        }
      }
    }
    const a = Effect.runPromise(Lock.acquire(context(root, fsA), dir, "s"))
    while (!paused) await new Promise((resolve) => setImmediate(resolve))
    const b = Effect.runPromise(Lock.acquire(context(root, fsB), dir, "s"))
    const [ra, rb] = await Promise.allSettled([a, b.finally(() => release())])

    const holders = [ra, rb].filter((r) => r.status === "fulfilled")
    assert.strictEqual(holders.length, 1, "exactly one acquirer holds the lock")
    const loser = [ra, rb].find((r) => r.status === "rejected") as PromiseRejectedResult
    assert.instanceOf(loser.reason, SessionLocked)
    const held = (holders[0] as PromiseFulfilledResult<Lock.Held>).value
    const onDisk = JSON.parse(fs.readFileSync(lockPath, "utf8")) as Lock.LockRecord
    assert.strictEqual(onDisk.token, held.record.token)
    await Effect.runPromise(held.release)
    assert.isFalse(fs.existsSync(lockPath))
    fs.rmSync(root, { recursive: true, force: true })
  })
})
