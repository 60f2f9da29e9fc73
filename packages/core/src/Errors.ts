/**
 * The typed failures of session-journal. Every expected failure is one of these
 * values in the error channel; anything else is a defect (a bug).
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import * as CorruptReason from "./CorruptReason.ts"
import * as ErrorMessage from "./ErrorMessage.ts"
import * as RecordFieldReason from "./RecordFieldReason.ts"
import * as StorageReason from "./StorageReason.ts"

/**
 * The message of a thrown value, for a typed error's reason: an `Error`'s
 * `message`, anything else as `String` makes it (`JSON.parse`, a callback, a
 * driver may throw a value that is not an `Error`).
 *
 * @since 0.1.0
 */
export const messageOf: (thrown: unknown) => string = ErrorMessage.messageOf

/**
 * A field of a record or payload failed validation before anything was appended.
 * `field` names the first failing field (`tool_name`, `server_id`, `agent_id`,
 * `bytes_read`, `bytes_written`, `delegation_depth`, `timestamp_secs`, `kind`,
 * `payload`, ...); `reason` says what was wrong with it (`RecordFieldReason.Reason`).
 *
 * @since 0.1.0
 */
export class InvalidRecordField extends Schema.TaggedError<InvalidRecordField>()("InvalidRecordField", {
  field: Schema.String,
  reason: RecordFieldReason.Reason
}) {
  override get message(): string {
    return `invalid ${this.field}: ${this.reason.message}`
  }
}

/**
 * A session id does not match `^[A-Za-z0-9_-]{1,128}$`. Checked before any storage call.
 *
 * @since 0.1.0
 */
export class InvalidSessionId extends Schema.TaggedError<InvalidSessionId>()("InvalidSessionId", {
  id: Schema.String
}) {
  override get message(): string {
    const shown = this.id.length > 40 ? `${this.id.slice(0, 40)}…` : this.id
    return `invalid session id ${JSON.stringify(shown)}: must match ^[A-Za-z0-9_-]{1,128}$`
  }
}

/**
 * The hash chain does not verify. `index` is the position in the checked window,
 * `sequence` the entry's sequence number, `expected` / `actual` the hashes compared
 * (`what` says whether the link or the entry's own hash failed).
 *
 * @since 0.1.0
 */
export class IntegrityViolation extends Schema.TaggedError<IntegrityViolation>()("IntegrityViolation", {
  index: Schema.Number,
  sequence: Schema.Number,
  what: Schema.Literals(["prev_hash", "entry_hash"]),
  expected: Schema.String,
  actual: Schema.String
}) {
  override get message(): string {
    return `integrity violation at index ${this.index} (sequence ${this.sequence}): ${this.what} expected ${this.expected}, found ${this.actual}`
  }
}

/**
 * The session does not exist in storage.
 *
 * @since 0.1.0
 */
export class SessionNotFound extends Schema.TaggedError<SessionNotFound>()("SessionNotFound", {
  id: Schema.String
}) {
  override get message(): string {
    return `session ${this.id} not found`
  }
}

/**
 * Another writer holds the session's single-writer lock.
 *
 * @since 0.1.0
 */
export class SessionLocked extends Schema.TaggedError<SessionLocked>()("SessionLocked", {
  id: Schema.String,
  holder: Schema.String
}) {
  override get message(): string {
    return `session ${this.id} is locked by another writer (${this.holder})`
  }
}

/**
 * Stored bytes are damaged in a way that is not a torn tail: `segment` names the
 * file (or table), `offset` the byte offset (or sequence) where the damage starts,
 * `reason` the kind of damage (`CorruptReason.Reason`).
 *
 * @since 0.1.0
 */
export class CorruptJournal extends Schema.TaggedError<CorruptJournal>()("CorruptJournal", {
  segment: Schema.String,
  offset: Schema.Number,
  reason: CorruptReason.Reason
}) {
  override get message(): string {
    return `corrupt journal in ${this.segment} at offset ${this.offset}: ${this.reason.message}`
  }
}

/**
 * Two writers raced for the same sequence and this one lost. The service reloads
 * and retries; callers only see it when retries are exhausted.
 *
 * @since 0.1.0
 */
export class SequenceConflict extends Schema.TaggedError<SequenceConflict>()("SequenceConflict", {
  id: Schema.String,
  sequence: Schema.Number
}) {
  override get message(): string {
    return `session ${this.id}: another writer already stored sequence ${this.sequence}`
  }
}

/**
 * The typed errors of the port a `StorageError` carries as its `reason` when the
 * operation that met one does not declare it (an invalid session id in a
 * maintenance call, damage met while mirroring): the error itself, so a caller
 * matches on its `_tag` and fields as on any `StorageReason` case, and the
 * `StorageError`'s message ends with the error's own.
 *
 * @since 0.1.0
 */
export const UndeclaredError = Schema.Union([
  InvalidSessionId,
  IntegrityViolation,
  SessionNotFound,
  SessionLocked,
  CorruptJournal,
  SequenceConflict
])

/**
 * A typed error of the port carried as a `StorageError`'s `reason` (see the schema).
 *
 * @since 0.1.0
 */
export type UndeclaredError = typeof UndeclaredError.Type

/**
 * Storage failed. `operation` names the port operation or primitive, `path` the file
 * or table when there is one, `reason` why, as one tagged case of
 * `StorageReason.Reason` (an I/O failure with its code, a refused path, an invalid
 * option, a record too large, a write not made durable, ...) or an `UndeclaredError`
 * the operation met, `cause` the underlying error. After a StorageError on a write, the session's in-memory state
 * is dropped and re-read before the next write.
 *
 * @since 0.1.0
 */
export class StorageError extends Schema.TaggedError<StorageError>()("StorageError", {
  operation: Schema.String,
  path: Schema.optionalKey(Schema.String),
  reason: Schema.Union([StorageReason.Reason, UndeclaredError]),
  cause: Schema.optionalKey(Schema.Defect())
}) {
  override get message(): string {
    const where = this.path === undefined ? "" : ` (${this.path})`
    return `storage ${this.operation} failed${where}: ${this.reason.message}`
  }

  /**
   * The error of a failed underlying call: its reason is `StorageReason.Io`
   * (the cause's code and message), its cause the error itself.
   *
   * @since 0.1.0
   */
  static io(operation: string, cause: unknown, path?: string): StorageError {
    const reason = StorageReason.fromCause(cause)
    return new StorageError(path === undefined ? { operation, reason, cause } : { operation, path, reason, cause })
  }
}

/**
 * A follower was shown history that storage no longer holds: an entry it handed
 * over was edited, cut off, or replaced by another chain (a cut followed by new
 * writes, a fork). `sequence` is the first entry shown (as far as the follower
 * remembers) that storage does not hold as shown; `expected` the hash shown there,
 * `found` the hash storage holds there now (null when storage ends before it);
 * `shownTo` the last sequence shown. The follower stops: nothing it would read next
 * continues what it showed.
 *
 * @since 0.1.0
 */
export class HistoryDiverged extends Schema.TaggedError<HistoryDiverged>()("HistoryDiverged", {
  id: Schema.String,
  sequence: Schema.Number,
  expected: Schema.String,
  found: Schema.NullOr(Schema.String),
  shownTo: Schema.Number
}) {
  override get message(): string {
    const range = this.sequence === this.shownTo
      ? `entry ${this.sequence}`
      : `entries ${this.sequence}..${this.shownTo}`
    const now = this.found === null ? "storage now ends before it" : `storage now holds ${this.found}`
    return `session ${this.id}: the history shown was replaced: ${range} as shown are no longer stored (at ${this.sequence} ${this.expected} was shown, ${now})`
  }
}
