/**
 * @session-journal/core: the hash chain, the pure journal state, guards, the
 * SessionJournal service, the Persistence port and its in-memory adapter.
 *
 * @since 0.1.0
 */

/**
 * The hash chain: the eviction fold, the exported head and verification of a retained window.
 *
 * @since 0.1.0
 */
export * as Chain from "./Chain.ts"
/**
 * The checkpoint document: a `JournalState` as JSON, encoded and decoded losslessly.
 *
 * @since 0.1.0
 */
export * as Checkpoint from "./Checkpoint.ts"
/**
 * Journal entries: their JSON schemas, the hash encodings, input validation and constructors.
 *
 * @since 0.1.0
 */
export * as Entry from "./Entry.ts"
/**
 * The message of a thrown value, in a module that imports nothing.
 *
 * @since 0.1.0
 */
export * as ErrorMessage from "./ErrorMessage.ts"
/**
 * The typed errors of the journal, shared by the service and every adapter.
 *
 * @since 0.1.0
 */
export * from "./Errors.ts"
/**
 * Why stored bytes are damaged: the tagged cases of `CorruptJournal`'s `reason`.
 *
 * @since 0.1.0
 */
export * as CorruptReason from "./CorruptReason.ts"
/**
 * Why a field of a record is refused: the tagged cases of `InvalidRecordField`'s `reason`.
 *
 * @since 0.1.0
 */
export * as RecordFieldReason from "./RecordFieldReason.ts"
/**
 * Why storage failed: the tagged cases of `StorageError`'s `reason`.
 *
 * @since 0.1.0
 */
export * as StorageReason from "./StorageReason.ts"
/**
 * The state of one session as plain data and the pure, total `fold` that advances it.
 *
 * @since 0.1.0
 */
export * as JournalState from "./JournalState.ts"
/**
 * Session metadata (title, labels, times, free JSON): not chained, the latest `updated_at` wins.
 *
 * @since 0.1.0
 */
export * as SessionMeta from "./SessionMeta.ts"
/**
 * The SHA-256 of the chain: `@noble/hashes` by default, or a faster byte-identical
 * implementation a platform installs (checked on install).
 *
 * @since 0.1.0
 */
export * as Sha256 from "./Sha256.ts"
/**
 * UTF-8 as the journal counts and reads it: byte lengths without encoding, a value's
 * JSON bytes, the one strict decoding.
 *
 * @since 0.1.0
 */
export * as Utf8 from "./Utf8.ts"

/**
 * SHA-256 and HMAC-SHA-256 of byte arrays on core's own rounds, importing nothing
 * else (for code that must load little, such as the guard's forwarder).
 *
 * @since 0.1.0
 */
export * as Hmac from "./Hmac.ts"
/**
 * The RFC 6962 Merkle tree over a session's entry hashes: compact ranges, inclusion
 * and consistency proofs and their verification.
 *
 * @since 0.1.0
 */
export * as Merkle from "./Merkle.ts"
/**
 * C2SP signed notes with Ed25519: signer and verifier keys in the `sumdb/note` format,
 * signing, and opening a note with the keys it is checked with (cosignatures included).
 *
 * @since 0.1.0
 */
export * as SignedNote from "./transparency/SignedNote.ts"
/**
 * The body of a C2SP `tlog-checkpoint`: origin, tree size and base64 root.
 *
 * @since 0.1.0
 */
export * as TreeHead from "./transparency/TreeHead.ts"
/**
 * A session's Merkle tree from its stored history: signed checkpoints, inclusion and
 * consistency proofs, and the check of the journal against a checkpoint held elsewhere.
 *
 * @since 0.1.0
 */
export * as Transparency from "./transparency/Transparency.ts"
/**
 * A session's tree as C2SP tlog-tiles: tile and entry-bundle paths, the hashes of a
 * tile, bundles of entry preimages or hashes, and a builder fed the leaves in order.
 *
 * @since 0.1.0
 */
export * as Tiles from "./transparency/Tiles.ts"
/**
 * Checking a session published as tlog-tiles from the files and the signer's public
 * key alone: signature, tiles, bundles, chain, and consistency with an earlier checkpoint.
 *
 * @since 0.1.0
 */
export * as TiledLog from "./transparency/TiledLog.ts"
/**
 * The `Persistence` port that adapters implement, and its in-memory adapter.
 *
 * @since 0.1.0
 */
export * as Persistence from "./Persistence.ts"
/**
 * The one recovery of a stored session: checkpoint and stored records in, state and
 * recovery report out; checkpoints checked against the history, strict records.
 *
 * @since 0.1.0
 */
export * as Recovery from "./Recovery.ts"
/**
 * What a follower checks on every record, and how it reconciles what it showed
 * with storage when a record does not continue it.
 *
 * @since 0.1.0
 */
export * as Follow from "./Follow.ts"
/**
 * Pure policy guards over a snapshot and the proposed call, and the built-in ones.
 *
 * @since 0.1.0
 */
export * as Guard from "./Guard.ts"
/**
 * The policy file: a guard written as JSON, one key per `Guard` combinator, decoded
 * with Schema (errors name the JSON path) and turned into a `Guard`.
 *
 * @since 0.1.0
 */
export * as Policy from "./Policy.ts"
/**
 * Patterns in Claude Code's permission-rule syntax (`Bash(git push *)`, `Read(~/.ssh/**)`,
 * `WebFetch(domain:host)`, `mcp__github__*`) and whether a tool call matches one.
 *
 * @since 0.1.0
 */
export * as Pattern from "./Pattern.ts"
/**
 * The `SessionJournal` service: durable group-committed writes, guards, reads and change streams.
 *
 * @since 0.1.0
 */
export * as SessionJournal from "./SessionJournal.ts"
