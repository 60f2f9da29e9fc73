/**
 * Why a field of a record is refused: the `reason` of an `InvalidRecordField`,
 * one tagged case per rule a field breaks, so that a caller tells them apart by
 * `_tag` and fields, never by the text. Every case has a `message` getter, the
 * words after the field's name in `InvalidRecordField`'s message.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/**
 * Not a string.
 *
 * @since 0.1.0
 */
export class NotString extends Schema.TaggedClass<NotString>()("NotString", {}) {
  get message(): string {
    return "must be a string"
  }
}

/**
 * Empty, or only Unicode `White_Space`.
 *
 * @since 0.1.0
 */
export class Blank extends Schema.TaggedClass<Blank>()("Blank", {}) {
  get message(): string {
    return "must not be empty or only whitespace"
  }
}

/**
 * Leading or trailing Unicode `White_Space`.
 *
 * @since 0.1.0
 */
export class Padded extends Schema.TaggedClass<Padded>()("Padded", {}) {
  get message(): string {
    return "must not have leading or trailing whitespace"
  }
}

/**
 * A control character (`Cc`).
 *
 * @since 0.1.0
 */
export class ControlCharacter extends Schema.TaggedClass<ControlCharacter>()("ControlCharacter", {}) {
  get message(): string {
    return "must not contain control characters"
  }
}

/**
 * A lone surrogate: not well-formed Unicode.
 *
 * @since 0.1.0
 */
export class IllFormed extends Schema.TaggedClass<IllFormed>()("IllFormed", {}) {
  get message(): string {
    return "must be well-formed Unicode"
  }
}

/**
 * Not an integer in 0..`max`; `member` names the payload member when the field is
 * a payload (an outcome's `bytes_read`).
 *
 * @since 0.1.0
 */
export class OutOfRange extends Schema.TaggedClass<OutOfRange>()("OutOfRange", {
  max: Schema.Number,
  member: Schema.optionalKey(Schema.String)
}) {
  get message(): string {
    return `${this.member === undefined ? "" : `${this.member} `}must be an integer in 0..${this.max}`
  }
}

/**
 * Not a boolean.
 *
 * @since 0.1.0
 */
export class NotBoolean extends Schema.TaggedClass<NotBoolean>()("NotBoolean", {}) {
  get message(): string {
    return "must be a boolean"
  }
}

/**
 * Not an array of strings.
 *
 * @since 0.1.0
 */
export class NotStringArray extends Schema.TaggedClass<NotStringArray>()("NotStringArray", {}) {
  get message(): string {
    return "must be an array of strings"
  }
}

/**
 * An entry kind that does not match `^[A-Za-z0-9_.:-]{1,64}$`, or is `tool`.
 *
 * @since 0.1.0
 */
export class BadKind extends Schema.TaggedClass<BadKind>()("BadKind", {}) {
  get message(): string {
    return "must match ^[A-Za-z0-9_.:-]{1,64}$ and not be \"tool\""
  }
}

/**
 * Missing.
 *
 * @since 0.1.0
 */
export class Required extends Schema.TaggedClass<Required>()("Required", {}) {
  get message(): string {
    return "is required"
  }
}

/**
 * A value RFC 8785 cannot canonicalize (a non-finite number, a lone surrogate, an
 * object that is not plain data, a cycle) at `path`.
 *
 * @since 0.1.0
 */
export class NotJson extends Schema.TaggedClass<NotJson>()("NotJson", {
  path: Schema.String
}) {
  get message(): string {
    return `not canonical JSON at ${this.path}`
  }
}

/**
 * Nested `depth` deep, above the limit of `limit`.
 *
 * @since 0.1.0
 */
export class TooDeep extends Schema.TaggedClass<TooDeep>()("TooDeep", {
  depth: Schema.Number,
  limit: Schema.Number
}) {
  get message(): string {
    return `nesting depth ${this.depth} exceeds the limit of ${this.limit}`
  }
}

/**
 * Larger than `limit`, counted as one per value plus the length of every string
 * and key.
 *
 * @since 0.1.0
 */
export class TooLarge extends Schema.TaggedClass<TooLarge>()("TooLarge", {
  limit: Schema.Number
}) {
  get message(): string {
    return `larger than the limit of ${this.limit} (one per value plus the length of every string and key)`
  }
}

/**
 * A payload of entry kind `kind` that must be an object and is not.
 *
 * @since 0.1.0
 */
export class NotObject extends Schema.TaggedClass<NotObject>()("NotObject", {
  kind: Schema.String
}) {
  get message(): string {
    return `of kind ${this.kind} must be an object`
  }
}

/**
 * A payload that cannot be copied as plain JSON. Validation no longer gives it:
 * the walk that checks a payload copies it (a proxy over JSON included, read
 * once), so whatever passes the checks is copied; kept so that a value of this
 * union written before still decodes.
 *
 * @since 0.1.0
 */
export class NotCopyable extends Schema.TaggedClass<NotCopyable>()("NotCopyable", {}) {
  get message(): string {
    return "cannot be copied as plain JSON"
  }
}

/**
 * The writer's clock reads `nowMillis` ms since 1970, outside 0..`max`: no entry
 * can be stored with it.
 *
 * @since 0.1.0
 */
export class ClockOutOfRange extends Schema.TaggedClass<ClockOutOfRange>()("ClockOutOfRange", {
  nowMillis: Schema.Number,
  max: Schema.Number
}) {
  get message(): string {
    return `the clock reads ${this.nowMillis} ms since 1970-01-01, outside 0..${this.max}: ` +
      "no entry can be stored with it, nothing was written"
  }
}

/**
 * The field makes a record of `bytes` bytes, above the storage's bound of `max`.
 *
 * @since 0.1.0
 */
export class RecordTooLarge extends Schema.TaggedClass<RecordTooLarge>()("RecordTooLarge", {
  bytes: Schema.Number,
  max: Schema.Number
}) {
  get message(): string {
    return `makes a record of ${this.bytes} bytes, more than the storage's bound of ${this.max} bytes per record`
  }
}

/**
 * A payload of kind `guard.state` that is not a policy's state (`Guard.stateProblem`
 * says what: not an object, or JSON text over `Guard.MAX_STATE_BYTES`).
 *
 * @since 0.1.0
 */
export class NotGuardState extends Schema.TaggedClass<NotGuardState>()("NotGuardState", {
  problem: Schema.String
}) {
  get message(): string {
    return this.problem
  }
}

/**
 * Every reason an `InvalidRecordField` can have.
 *
 * @since 0.1.0
 */
export const Reason = Schema.Union([
  NotString,
  Blank,
  Padded,
  ControlCharacter,
  IllFormed,
  OutOfRange,
  NotBoolean,
  NotStringArray,
  BadKind,
  Required,
  NotJson,
  TooDeep,
  TooLarge,
  NotObject,
  NotCopyable,
  ClockOutOfRange,
  RecordTooLarge,
  NotGuardState
])

/**
 * Every reason an `InvalidRecordField` can have.
 *
 * @since 0.1.0
 */
export type Reason = typeof Reason.Type
