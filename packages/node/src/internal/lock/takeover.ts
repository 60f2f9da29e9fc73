/**
 * Taking, checking and releasing the lock: the record linked into place from a
 * temp file, the takeover of a stale lock serialized by a claim, the check that
 * the lock is still this writer's, and the clearing of temp files left by dead
 * acquirers (see the `Lock` module header for the protocol).
 */
import { SessionLocked, StorageError, StorageReason } from "@session-journal/core"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Random from "effect/Random"
import * as Schedule from "effect/Schedule"
import * as os from "node:os"
import * as path from "node:path"
import type { AcquireOptions, Held, LockRecord, TakenOver, Verdict } from "../../Lock.ts"
import * as Base from "../fileOps/base.ts"
import * as Open from "../fileOps/open.ts"
import * as Replace from "../fileOps/replace.ts"
import { ownBoot, ownPidns, ownStart, pidAlive } from "../process.ts"
import { alive, describe, heldTokens, verdictOf } from "./holder.ts"
import { CLAIM_FILE, LOCK_FILE, oddLock, readLockFile, same, type Seen } from "./record.ts"

export const claimBackoff: Schedule.Schedule<number> = Schedule.spaced("5 millis").pipe(
  Schedule.modifyDelay(() => Effect.map(Random.next, (r) => Duration.millis(5 + 10 * r)))
)

// The acquisition runs uninterruptibly (the acquire of `acquireRelease`), and under
// a test clock a sleep of the fiber's Clock would never end: its waits are slept
// on the real clock, whatever clock the fiber has.
const realClock = Clock.Clock.defaultValue()

// Links `from` to `to`: false when `to` exists.
const tryLink = (ctx: Base.Context, from: string, to: string): Effect.Effect<boolean, StorageError> =>
  Base.call("link", to, () => ctx.fs.link(from, to)).pipe(
    Effect.as(true),
    Effect.catchIf((e) => Base.hasCode(e, "EEXIST"), () => Effect.succeed(false))
  )

export const acquire = (
  ctx: Base.Context,
  dir: string,
  id: string,
  options?: AcquireOptions
): Effect.Effect<Held, StorageError | SessionLocked> =>
  // The token names this acquisition: it must differ from every other one, of this
  // process and of any other, and need not be secret (anyone who may read the lock
  // reads it). The clock's milliseconds, this process's id and a draw of the fiber's
  // `Random` make it so whatever that generator is (even a seeded one), without
  // loading `node:crypto` into a hook's process for it.
  Effect.flatMap(Random.nextInt, (draw) => {
    const lockPath = path.join(dir, LOCK_FILE)
    const claimPath = path.join(dir, CLAIM_FILE)
    const record: LockRecord = {
      pid: process.pid,
      host: os.hostname(),
      start: ownStart,
      boot: ownBoot,
      pidns: ownPidns,
      token: `${ctx.clock.currentTimeMillisUnsafe().toString(36)}-${process.pid.toString(36)}-${draw.toString(36)}`,
      acquired_at: ctx.clock.currentTimeMillisUnsafe()
    }
    const text = `${JSON.stringify(record)}\n`
    const tmp = path.join(dir, `${LOCK_FILE}${Replace.TEMP_PREFIX}${process.pid}-${record.token}`)
    heldTokens.add(record.token)
    // The record's file stays open while the lock is held: its inode cannot be freed
    // and reused by another writer's lock, so an lstat alone proves the lock ours.
    let fh: Base.FileHandle | null = null
    let acquired = false
    let tookOver: TakenOver | null = null
    const takeable = (verdict: Verdict) =>
      verdict.state === "gone" || (verdict.state === "unknown" && options?.force === true)
    return Effect.gen(function*() {
      const claimWait = yield* Schedule.toStep(claimBackoff)
      fh = yield* Open.createExclusive(ctx, tmp)
      yield* Open.writeAll(fh, tmp, new TextEncoder().encode(text), 0)
      // Before the link: once linked, nothing may fail before the lock is returned.
      const fst = yield* Base.call("fstat", tmp, () => fh!.stat())
      for (let attempt = 0; attempt < 200; attempt++) {
        if (yield* tryLink(ctx, tmp, lockPath)) {
          acquired = true
          return {
            record,
            release: release(ctx, lockPath, record.token, fh),
            check: check(ctx, id, lockPath, text, fst),
            tookOver
          } satisfies Held
        }
        const seen = yield* readLockFile(ctx, lockPath)
        if (seen._tag === "Missing" || seen._tag === "Changing") continue
        if (seen._tag === "Odd") return yield* oddLock(lockPath, seen)
        const verdict = verdictOf(seen, options?.deep === true)
        if (!takeable(verdict)) {
          return yield* new SessionLocked({ id, holder: seen.record !== null ? describe(seen.record) : "unknown" })
        }
        // Stale: only the holder of the claim may remove it.
        if (yield* tryLink(ctx, tmp, claimPath)) {
          // The claim is removed whatever happened (and its removal failing fails the
          // acquisition, as the lock's does); not interrupted half way.
          yield* Effect.uninterruptible(Effect.gen(function*() {
            const removal = yield* Effect.exit(Effect.flatMap(readLockFile(ctx, lockPath), (again) => {
              if (!same(seen, again)) return Effect.void
              tookOver = { record: seen.record, verdict }
              return Replace.unlinkIfExists(ctx, lockPath)
            }))
            yield* Replace.unlinkIfExists(ctx, claimPath)
            if (Exit.isFailure(removal)) return yield* Effect.failCause(removal.cause)
          }))
          continue
        }
        const claim = yield* readLockFile(ctx, claimPath)
        if (claim._tag === "Missing" || claim._tag === "Changing") continue
        if (claim._tag === "Odd") return yield* oddLock(claimPath, claim)
        if (alive(claim)) {
          // Another process is taking over right now; it finishes within milliseconds.
          const [, delay] = yield* Effect.orElseSucceed(
            claimWait(realClock.currentTimeMillisUnsafe(), undefined),
            () => [0, Duration.millis(5)] as const
          )
          yield* Effect.provideService(Effect.sleep(delay), Clock.Clock, realClock)
          continue
        }
        // A claim left by a process that died mid-takeover: move it aside and check
        // that what moved is the dead one; put back a live one moved by mistake.
        const aside = path.join(dir, `${CLAIM_FILE}${Replace.TEMP_PREFIX}${process.pid}-${record.token}`)
        const moved = yield* Base.call("rename", claimPath, () => ctx.fs.rename(claimPath, aside)).pipe(
          Effect.as(true),
          Effect.catchIf((e) => Base.hasCode(e, "ENOENT"), () => Effect.succeed(false))
        )
        if (!moved) continue
        const movedSeen = yield* readLockFile(ctx, aside)
        if (!same(claim, movedSeen)) yield* tryLink(ctx, aside, claimPath)
        yield* Replace.unlinkIfExists(ctx, aside)
      }
      return yield* new SessionLocked({ id, holder: "contended: the lock changed hands too often" })
    }).pipe(
      Effect.ensuring(Effect.suspend(() => {
        const closing = !acquired && fh !== null ? Replace.close(fh) : Effect.void
        if (!acquired) heldTokens.delete(record.token)
        return Effect.andThen(closing, Effect.ignore(Replace.unlinkIfExists(ctx, tmp)))
      }))
    )
  })

const release = (
  ctx: Base.Context,
  lockPath: string,
  token: string,
  fh: Base.FileHandle
): Effect.Effect<void, StorageError> =>
  // The token stays in `heldTokens` until the lock file is gone: until then the lock
  // is live, also for another acquirer of this process, which would otherwise judge
  // it stale and take it over, and this release would then remove the new holder's
  // lock. Only the holder removes a live lock, so the one read decides the unlink.
  Effect.flatMap(readLockFile(ctx, lockPath), (seen) =>
    seen._tag === "Found" && seen.record?.token === token ? Replace.unlinkIfExists(ctx, lockPath) : Effect.void).pipe(
      Effect.ensuring(Effect.andThen(
        Effect.sync(() =>
          heldTokens.delete(token)
        ),
        Replace.close(fh)
      ))
    )

// The lock is still ours when `lock` is the inode we hold open (no other file can
// have its number while it is open). Its size and modification time are compared
// too; only when they changed is the content read and compared with what we wrote.
const check = (
  ctx: Base.Context,
  id: string,
  lockPath: string,
  text: string,
  identity: { readonly dev: number; readonly ino: number; readonly size: number; readonly mtimeMs: number }
): Effect.Effect<void, StorageError> => {
  let known = { size: identity.size, mtimeMs: identity.mtimeMs }
  const lost = (found: string) => {
    return new StorageError({
      operation: "lock",
      path: lockPath,
      reason: new StorageReason.LockLost({ session: id, found })
    })
  }
  return Effect.gen(function*() {
    const lstatSync = ctx.fs.lstatSync
    const st = yield* (lstatSync !== undefined
      ? Base.callSync("lstat", lockPath, () => lstatSync(lockPath))
      : Base.call("lstat", lockPath, () => ctx.fs.lstat(lockPath))).pipe(
        Effect.catchIf((e) => Base.hasCode(e, "ENOENT"), () => Effect.succeed(null))
      )
    if (st === null) return yield* lost("the lock file was removed")
    if (
      st.isFile() && st.dev === identity.dev && st.ino === identity.ino && st.size === known.size &&
      st.mtimeMs === known.mtimeMs
    ) {
      return
    }
    const seen = yield* Effect.orElseSucceed(readLockFile(ctx, lockPath), (): Seen => ({ _tag: "Changing" }))
    if (seen._tag === "Found" && seen.ino === identity.ino && seen.raw === text) {
      known = { size: st.size, mtimeMs: st.mtimeMs }
      return
    }
    return yield* lost(
      seen._tag === "Found" && seen.ino === identity.ino
        ? "its content was changed"
        : seen._tag === "Found" && seen.record !== null
        ? `replaced by the lock of pid ${seen.record.pid} on ${seen.record.host}`
        : "replaced by another file"
    )
  })
}

export const clearStaleTemps = Effect.fnUntraced(
  function*(ctx: Base.Context, dir: string, names: ReadonlyArray<string>) {
    const pattern = new RegExp(
      `^(?:${LOCK_FILE}|${CLAIM_FILE.replace(".", "\\.")})${Replace.TEMP_PREFIX.replace(".", "\\.")}(\\d+)-`
    )
    for (const n of names) {
      const m = pattern.exec(n)
      if (m === null) continue
      const pid = Number(m[1])
      if (pid === process.pid || pidAlive(pid)) continue
      yield* Replace.unlinkIfExists(ctx, path.join(dir, n))
    }
  }
)
