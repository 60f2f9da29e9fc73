/**
 * Waiting for a lock to go: a watch of the session directory, bounded by a sleep
 * on the fiber's `Clock`.
 */
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import { LOCK_FILE } from "./record.ts"

export const awaitRelease = (dir: string, millis: number, settleMillis = 0): Effect.Effect<void> => {
  // Resumes when the lock file goes; never where the directory cannot be watched.
  const released = Effect.callback<boolean>((resume) => {
    let watcher: fs.FSWatcher | null = null
    try {
      watcher = fs.watch(dir, { persistent: false }, (_event, name) => {
        if (name !== null && name !== LOCK_FILE) return
        if (watcher !== null) watcher.close()
        watcher = null
        resume(Effect.succeed(true))
      })
      watcher.on("error", () => undefined)
    } catch {
      watcher = null
    }
    return Effect.sync(() => {
      if (watcher !== null) watcher.close()
      watcher = null
    })
  })
  return Effect.flatMap(
    Effect.raceFirst(released, Effect.as(Effect.sleep(Math.max(0, millis)), false)),
    (woken) => woken && settleMillis > 0 ? Effect.sleep(settleMillis) : Effect.void
  )
}
