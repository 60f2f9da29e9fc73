/**
 * Why stored bytes are damaged: the `reason` of a `CorruptJournal`, one tagged
 * case per kind of damage the adapters and the service report, so that a caller
 * tells them apart by `_tag` and fields, never by the text. Every case has a
 * `message` getter; `CorruptJournal`'s message is built from it.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/**
 * Why a recovery stopped before the end of what is stored (`Recovery.StopReason`,
 * where each is described).
 *
 * @since 0.1.0
 */
export const StopReason = Schema.Literals([
  "corruption",
  "gap",
  "missing",
  "checkpoint",
  "unknown_version",
  "integrity"
])

/**
 * Why a recovery stopped before the end of what is stored.
 *
 * @since 0.1.0
 */
export type StopReason = typeof StopReason.Type

/**
 * A load's recovery stopped before the end of what is stored: `reason` is the
 * recovery's `StopReason` (`corruption`, `gap`, `missing`, `checkpoint`,
 * `unknown_version`, `integrity`), `detail` its words; `advice`, when given, says
 * what to do (run repair).
 *
 * @since 0.1.0
 */
export class Stopped extends Schema.TaggedClass<Stopped>()("Stopped", {
  reason: StopReason,
  detail: Schema.String,
  advice: Schema.optionalKey(Schema.String)
}) {
  get message(): string {
    return `${this.reason}: ${this.detail}${this.advice === undefined ? "" : ` (${this.advice})`}`
  }
}

/**
 * A stored line is longer than the line bound (`bound` bytes): no record this
 * program writes is.
 *
 * @since 0.1.0
 */
export class LineTooLong extends Schema.TaggedClass<LineTooLong>()("LineTooLong", {
  bound: Schema.Number
}) {
  get message(): string {
    return `line longer than the bound of ${this.bound} bytes`
  }
}

/**
 * A segment being followed became shorter (`size` bytes) than what was already
 * read from it (`read` bytes): it was cut.
 *
 * @since 0.1.0
 */
export class Cut extends Schema.TaggedClass<Cut>()("Cut", {
  size: Schema.Number,
  read: Schema.Number
}) {
  get message(): string {
    return `the segment is ${this.size} bytes, shorter than the ${this.read} already read from it: it was cut`
  }
}

/**
 * A record holds sequence `found` where sequence `expected` belongs.
 *
 * @since 0.1.0
 */
export class OutOfSequence extends Schema.TaggedClass<OutOfSequence>()("OutOfSequence", {
  expected: Schema.Number,
  found: Schema.Number
}) {
  get message(): string {
    return `record of sequence ${this.found} where sequence ${this.expected} was expected`
  }
}

/**
 * Bytes that are no record (`detail` says what was found) with more stored after
 * them (`followedBy`: "more data", or the next segment), so they are no torn tail.
 *
 * @since 0.1.0
 */
export class Damaged extends Schema.TaggedClass<Damaged>()("Damaged", {
  detail: Schema.String,
  followedBy: Schema.String
}) {
  get message(): string {
    return `${this.detail}, followed by ${this.followedBy}`
  }
}

/**
 * The next segment (`segment`) starts at sequence `base` where `expected` was due.
 *
 * @since 0.1.0
 */
export class SegmentGap extends Schema.TaggedClass<SegmentGap>()("SegmentGap", {
  segment: Schema.String,
  base: Schema.Number,
  expected: Schema.Number
}) {
  get message(): string {
    return `segment ${this.segment} starts at ${this.base}, expected ${this.expected}`
  }
}

/**
 * A stored row is no valid record: `what` names the column ("entry", "meta"),
 * `detail` says why (unparsable JSON, what the schema refuses, another row's
 * sequence).
 *
 * @since 0.1.0
 */
export class InvalidRow extends Schema.TaggedClass<InvalidRow>()("InvalidRow", {
  what: Schema.String,
  detail: Schema.String
}) {
  get message(): string {
    return `invalid ${this.what}: ${this.detail}`
  }
}

/**
 * Entries read from their start do not continue one hash chain.
 *
 * @since 0.1.0
 */
export class BrokenChain extends Schema.TaggedClass<BrokenChain>()("BrokenChain", {}) {
  get message(): string {
    return "stored entries do not continue one chain"
  }
}

/**
 * What storage handed a follower is not what the chain it follows expects:
 * `what` (a hash, a sequence) was `expected` at `sequence`, `actual` came.
 *
 * @since 0.1.0
 */
export class HandedOver extends Schema.TaggedClass<HandedOver>()("HandedOver", {
  what: Schema.String,
  expected: Schema.String,
  sequence: Schema.Number,
  actual: Schema.String
}) {
  get message(): string {
    return `a follower expected ${this.what} ${this.expected} at sequence ${this.sequence}, storage handed over ${this.actual}`
  }
}

/**
 * Every reason a `CorruptJournal` can have.
 *
 * @since 0.1.0
 */
export const Reason = Schema.Union([
  Stopped,
  LineTooLong,
  Cut,
  OutOfSequence,
  Damaged,
  SegmentGap,
  InvalidRow,
  BrokenChain,
  HandedOver
])

/**
 * Every reason a `CorruptJournal` can have.
 *
 * @since 0.1.0
 */
export type Reason = typeof Reason.Type
