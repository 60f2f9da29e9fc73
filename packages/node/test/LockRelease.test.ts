/**
 * Two writers of one process on one session directory: a lock being released is
 * still a live lock until its file is gone, so another acquirer of this process
 * never judges it stale, and a release never removes the next holder's lock.
 */
import { SessionLocked } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { assert, describe, it } from "vitest"
import { Lock, NodePersistence } from "../src/index.ts"
import { lockContext as context, tempDir } from "./helpers.ts"

const tick = () => new Promise((resolve) => setImmediate(resolve))

describe("Lock release in one process", () => {
  it("a lock whose release is in progress is not taken over, and the release removes only its own lock", async () => {
    const root = tempDir("lock-release")
    const dir = path.join(root, "s")
    fs.mkdirSync(dir, { mode: 0o700 })
    const lockPath = path.join(dir, Lock.LOCK_FILE)

    // R's release pauses just before it removes its lock file.
    let open!: () => void
    const gate = new Promise<void>((resolve) => {
      open = resolve
    })
    let armed = false
    let paused = false
    const fsR: NodePersistence.Fs = {
      ...NodePersistence.nodeFs,
      unlink: async (p) => {
        if (armed && p === lockPath && !paused) {
          paused = true
          await gate
        }
        return NodePersistence.nodeFs.unlink(p)
      }
    }
    const r = await Effect.runPromise(Lock.acquire(context(root, fsR), dir, "s"))
    armed = true
    const releasing = Effect.runPromise(r.release)
    while (!paused) await tick()

    // While R's lock file is there, it is a live writer's lock.
    const early = await Effect.runPromise(Effect.flip(Lock.acquire(context(root, NodePersistence.nodeFs), dir, "s")))
      .catch((held: unknown) => held)
    open()
    await releasing
    if (!(early instanceof SessionLocked)) {
      // Taken while R was releasing: R's release must not have removed it.
      const held = early as unknown as Lock.Held
      const checked = await Effect.runPromise(Effect.exit(held.check))
      await Effect.runPromise(held.release)
      fs.rmSync(root, { recursive: true, force: true })
      assert.fail(`a lock being released was judged stale and taken over (its check then: ${checked._tag})`)
    }
    assert.isFalse(fs.existsSync(lockPath))

    const next = await Effect.runPromise(Lock.acquire(context(root, NodePersistence.nodeFs), dir, "s"))
    await Effect.runPromise(next.check)
    await Effect.runPromise(next.release)
    fs.rmSync(root, { recursive: true, force: true })
  })

  it("writers of one process taking the lock in turn with a wait never lose it", async () => {
    const root = tempDir("lock-turns")
    const dir = path.join(root, "s")
    fs.mkdirSync(dir, { mode: 0o700 })
    const ctx = context(root, NodePersistence.nodeFs)
    const writer = (): Effect.Effect<void, unknown> =>
      Effect.gen(function*() {
        for (let round = 0; round < 5; round++) {
          let held: Lock.Held | null = null
          while (held === null) {
            held = yield* Lock.acquire(ctx, dir, "s").pipe(
              Effect.catchIf((e) => e instanceof SessionLocked, () =>
                Effect.as(Lock.awaitRelease(dir, 20, Math.random() * 2), null))
            )
          }
          yield* held.check
          yield* Effect.promise(tick)
          yield* held.check
          yield* held.release
        }
      })
    await Effect.runPromise(Effect.all(Array.from({ length: 8 }, writer), { concurrency: "unbounded" }))
    assert.isFalse(fs.existsSync(path.join(dir, Lock.LOCK_FILE)))
    fs.rmSync(root, { recursive: true, force: true })
  })
})
