/**
 * The hardened file primitives of the filesystem adapter. Every durable or
 * security-relevant filesystem step of the adapter goes through this module, and
 * each function's comment states the crash guarantee it gives and what the caller
 * must still do (docs/DESIGN.md §6).
 *
 * The functions are Effects over a small `Fs` interface (the calls the adapter
 * makes, with `node:fs/promises` as the default), so tests can inject a failing
 * filesystem that wraps the real one (`layerFs`). Each raw call is wrapped once
 * (`call`): its failure is a `StorageError` naming the operation and the path, with
 * the node error as its cause, in the typed error channel; damage is
 * `CorruptJournal`. Descriptors are resources: opened uninterruptibly and closed
 * on every exit (`withHandle`), so an interruption never leaks one.
 *
 * Confinement: Node has `O_NOFOLLOW` only for the last path component and no
 * `openat`, so every open is preceded by an lstat walk from the journal root (no
 * symlinks, owned by this user, not group/other-writable) and followed by an fstat
 * whose dev/ino must equal the lstat's.
 */
export * from "./fileOps/base.ts"
export * from "./fileOps/lines.ts"
export * from "./fileOps/open.ts"
export * from "./fileOps/replace.ts"
