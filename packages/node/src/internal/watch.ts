/**
 * What wakes an idle follower: one `fs.watch` of the session directory for the
 * life of a follow, collecting the names of the files it reports changed, and a
 * slow safety poll for filesystems whose watches miss events (network
 * filesystems, some bind mounts), or where the directory cannot be watched at all.
 */
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as fs from "node:fs"

/**
 * A watch of one directory. `next` waits for a change, or `interval` (the safety
 * poll), whichever comes first, and says what changed since the last call: the
 * names reported, or null when it cannot say (a safety poll, an event without a
 * name, a watch that failed): then the caller looks at everything.
 */
export interface DirWatch {
  /** Whether the directory is watched; false: `next` only waits out `interval`. */
  readonly watching: () => boolean
  readonly next: (interval: Duration.Input) => Effect.Effect<ReadonlySet<string> | null>
}

/**
 * Watches `dir` until the scope closes. The watch is set up before it returns, so
 * a caller that reads after it misses nothing written after that read.
 */
export const make = (dir: string): Effect.Effect<DirWatch, never, Scope.Scope> =>
  Effect.map(
    Effect.acquireRelease(
      Effect.sync(() => {
        let names = new Set<string>()
        let unknown = false
        let pending = false
        let failed = false
        let wake: (() => void) | null = null
        const changed = (name: string | null) => {
          if (name === null) unknown = true
          else names.add(name)
          pending = true
          const w = wake
          wake = null
          if (w !== null) w()
        }
        let watcher: fs.FSWatcher | null = null
        try {
          watcher = fs.watch(dir, { persistent: false }, (_event, name) => changed(name === null ? null : String(name)))
          // A watch that fails (the directory removed, the watch limit reached) wakes
          // the follower once and leaves it to the safety poll.
          watcher.on("error", () => {
            failed = true
            changed(null)
          })
        } catch {
          failed = true
        }
        const take = (): ReadonlySet<string> | null => {
          const out = pending && !unknown ? names : null
          names = new Set()
          unknown = false
          pending = false
          return out
        }
        const woken = Effect.callback<void>((resume) => {
          if (pending) return resume(Effect.void)
          wake = () => resume(Effect.void)
          return Effect.sync(() => {
            wake = null
          })
        })
        const next = (interval: Duration.Input): Effect.Effect<ReadonlySet<string> | null> =>
          Effect.suspend(() => pending ? Effect.void : Effect.raceFirst(woken, Effect.sleep(interval))).pipe(
            Effect.map(take)
          )
        return {
          watch: { watching: () => !failed, next } satisfies DirWatch,
          close: () => watcher?.close()
        }
      }),
      (made) => Effect.sync(made.close)
    ),
    (made) => made.watch
  )
