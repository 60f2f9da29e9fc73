/**
 * The hardened file primitives of the filesystem adapter. Every durable or
 * security-relevant filesystem step of the adapter goes through this module, and
 * each function's comment states the crash guarantee it gives and what the caller
 * must still do (DESIGN §6).
 *
 * The functions are plain async code over a small `Fs` interface (the calls the
 * adapter makes, with `node:fs/promises` as the default), so tests can inject a
 * failing filesystem that wraps the real one. Failures surface as the typed errors
 * of core (`StorageError`, `CorruptJournal`); the adapter maps them into the
 * Effect error channel at its edge.
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
