/**
 * Why storage failed: the `reason` of a `StorageError`, one tagged case per kind
 * of failure the adapters report, so that a caller tells them apart by `_tag` and
 * fields, never by the text. Every case has a `message` (a field or a getter);
 * `StorageError`'s message is built from it.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { messageOf } from "./ErrorMessage.ts"

/**
 * An underlying call failed: a filesystem call, a SQL query, a connection.
 * `code` is the error's code when it has one (`ENOENT`, `ENOSPC`, a SQL error's
 * kind), `message` its message.
 *
 * @since 0.1.0
 */
export class Io extends Schema.TaggedClass<Io>()("Io", {
  code: Schema.optionalKey(Schema.String),
  message: Schema.String
}) {}

/**
 * The `Io` case of an underlying error (`cause`): its `code` when it is a string,
 * its message.
 *
 * @since 0.1.0
 */
export const fromCause = (cause: unknown): Io => {
  const code = typeof cause === "object" && cause !== null && "code" in cause && typeof cause.code === "string"
    ? cause.code
    : undefined
  const message = cause === undefined ? "failed" : messageOf(cause)
  return new Io(code === undefined ? { message } : { code, message })
}

/**
 * A path was refused rather than used (a symbolic link, a foreign owner, a mode
 * others may write, replaced while it was opened): `why` says what was found;
 * `path`, when given, is named in the message.
 *
 * @since 0.1.0
 */
export class RefusedPath extends Schema.TaggedClass<RefusedPath>()("RefusedPath", {
  why: Schema.String,
  path: Schema.optionalKey(Schema.String)
}) {
  get message(): string {
    return `refused${this.path === undefined ? "" : ` ${this.path}`}: ${this.why}`
  }
}

/**
 * Something that is not this program's stands where it must write (a lock path
 * that is no lock file); `message` says what and what to do about it.
 *
 * @since 0.1.0
 */
export class Obstructed extends Schema.TaggedClass<Obstructed>()("Obstructed", {
  message: Schema.String
}) {}

/**
 * An option of the adapter is not acceptable: `option` names it (as the options
 * object spells it, e.g. `tablePrefix`), `message` says why.
 *
 * @since 0.1.0
 */
export class InvalidOption extends Schema.TaggedClass<InvalidOption>()("InvalidOption", {
  option: Schema.String,
  message: Schema.String
}) {}

/**
 * A record is larger than the storage holds: `bytes` against `limit`; `bound`
 * names the bound (default "bound", e.g. "line bound").
 *
 * @since 0.1.0
 */
export class RecordTooLarge extends Schema.TaggedClass<RecordTooLarge>()("RecordTooLarge", {
  bytes: Schema.Number,
  limit: Schema.Number,
  bound: Schema.optionalKey(Schema.String)
}) {
  get message(): string {
    return `record of ${this.bytes} bytes exceeds the ${this.bound ?? "bound"} of ${this.limit} bytes`
  }
}

/**
 * A stored file is larger than a read may take: `bytes` against `limit`; `bound`
 * names the bound (default "bound", e.g. "read bound").
 *
 * @since 0.1.0
 */
export class FileTooLarge extends Schema.TaggedClass<FileTooLarge>()("FileTooLarge", {
  bytes: Schema.Number,
  limit: Schema.Number,
  bound: Schema.optionalKey(Schema.String)
}) {
  get message(): string {
    return `file is ${this.bytes} bytes, above the ${this.bound ?? "bound"} of ${this.limit} bytes`
  }
}

/**
 * A read ended before the bytes it was promised: `bytes` read of `expected`.
 *
 * @since 0.1.0
 */
export class Truncated extends Schema.TaggedClass<Truncated>()("Truncated", {
  bytes: Schema.Number,
  expected: Schema.Number
}) {
  get message(): string {
    return `ended at ${this.bytes} bytes, ${this.expected} expected`
  }
}

/**
 * A write was not made durable, and nothing of it was stored: `why` says what
 * ended it.
 *
 * @since 0.1.0
 */
export class NotDurable extends Schema.TaggedClass<NotDurable>()("NotDurable", {
  why: Schema.String
}) {
  get message(): string {
    return `${this.why}; nothing was stored`
  }
}

/**
 * A checkpoint was refused because it does not describe the stored session
 * (ahead of it, older than the stored one, another chain): `why` says which.
 *
 * @since 0.1.0
 */
export class CheckpointRefused extends Schema.TaggedClass<CheckpointRefused>()("CheckpointRefused", {
  why: Schema.String
}) {
  get message(): string {
    return this.why
  }
}

/**
 * Another writer kept winning the next sequence: `sequence` is the last one
 * lost, after `retries` retries.
 *
 * @since 0.1.0
 */
export class Contended extends Schema.TaggedClass<Contended>()("Contended", {
  sequence: Schema.Number,
  retries: Schema.Number
}) {
  get message(): string {
    return `another writer kept winning sequence ${this.sequence} after ${this.retries} retries`
  }
}

/**
 * No free name could be found for a file to be set aside: the directory kept
 * changing.
 *
 * @since 0.1.0
 */
export class NoFreeName extends Schema.TaggedClass<NoFreeName>()("NoFreeName", {}) {
  get message(): string {
    return "no free name: the directory keeps changing"
  }
}

/**
 * The stored history stops early (damage the writer will not continue past):
 * `problem` says where and why; `repair` makes the session writable.
 *
 * @since 0.1.0
 */
export class NeedsRepair extends Schema.TaggedClass<NeedsRepair>()("NeedsRepair", {
  problem: Schema.String
}) {
  get message(): string {
    return `the stored history stops early (${this.problem}); repair the session first`
  }
}

/**
 * A stored row does not decode: `table`, `column`, and the decoder's `detail`.
 *
 * @since 0.1.0
 */
export class Undecodable extends Schema.TaggedClass<Undecodable>()("Undecodable", {
  table: Schema.String,
  column: Schema.String,
  detail: Schema.String
}) {
  get message(): string {
    return `a row of ${this.table} does not decode (column ${this.column}): ${this.detail}`
  }
}

/**
 * The clock cannot date an entry (before 1970, or past 2^53 − 1 seconds): `millis`
 * is its reading.
 *
 * @since 0.1.0
 */
export class ClockOutOfRange extends Schema.TaggedClass<ClockOutOfRange>()("ClockOutOfRange", {
  millis: Schema.Number
}) {
  get message(): string {
    return `the clock reads ${this.millis} ms since 1970-01-01, which no entry can be dated with`
  }
}

/**
 * Some of the items of a many-item operation failed (each reported before):
 * `failed` counts them, `message` says which and what became of the rest.
 *
 * @since 0.1.0
 */
export class Incomplete extends Schema.TaggedClass<Incomplete>()("Incomplete", {
  failed: Schema.Number,
  message: Schema.String
}) {}

/**
 * The writer's lock is no longer its own (removed, or taken by another writer):
 * the writer stopped before its next write. `found` says what stands there now.
 *
 * @since 0.1.0
 */
export class LockLost extends Schema.TaggedClass<LockLost>()("LockLost", {
  session: Schema.String,
  found: Schema.String
}) {
  get message(): string {
    return `the lock of session ${this.session} is no longer this writer's (${this.found}); ` +
      `the writer stopped before its next write, and everything it acknowledged before is stored`
  }
}

/**
 * Bytes asked for were never stored, only their size and SHA-256 (a
 * transcript line above the line bound): `what` names them.
 *
 * @since 0.1.0
 */
export class NotKept extends Schema.TaggedClass<NotKept>()("NotKept", {
  what: Schema.String
}) {
  get message(): string {
    return `${this.what} was above the line bound when it was journaled: only its size and SHA-256 are kept, so it cannot be given back byte for byte`
  }
}

/**
 * Every reason of storage's own a `StorageError` can have (its `reason` may also be
 * an `UndeclaredError` the failing operation met).
 *
 * @since 0.1.0
 */
export const Reason = Schema.Union([
  Io,
  RefusedPath,
  Obstructed,
  InvalidOption,
  RecordTooLarge,
  FileTooLarge,
  Truncated,
  NotDurable,
  CheckpointRefused,
  Contended,
  NoFreeName,
  NeedsRepair,
  Undecodable,
  ClockOutOfRange,
  Incomplete,
  NotKept,
  LockLost
])

/**
 * Every reason of storage's own a `StorageError` can have.
 *
 * @since 0.1.0
 */
export type Reason = typeof Reason.Type
