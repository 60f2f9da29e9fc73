/**
 * The rows the adapter reads, as Schemas. The driver hands a `bigint` (int8) column
 * over as a `bigint`, a `number` or decimal text, depending on the value and the
 * connection's settings; each is decoded here, explicitly, to a safe integer, and a
 * row that does not decode fails with a `StorageError` naming the table and the
 * column, never with a cast that lets `NaN` or a rounded count through.
 */
import { StorageError, StorageReason } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import type * as SchemaIssue from "effect/SchemaIssue"
import * as SchemaTransformation from "effect/SchemaTransformation"

const SafeNat = Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }))

/** An `integer` (int4) column that holds a count. */
export const Int4 = SafeNat

/**
 * A `bigint` (int8) column that holds a count or a time in milliseconds: a
 * non-negative safe integer, as the driver gives it (number, bigint or decimal text).
 */
export const Int8 = Schema.Union([
  SafeNat,
  Schema.String.check(Schema.isPattern(/^(?:0|[1-9][0-9]{0,15})$/)).pipe(
    Schema.decodeTo(SafeNat, SchemaTransformation.transform({ decode: Number, encode: String }))
  ),
  Schema.BigInt.pipe(
    Schema.decodeTo(SafeNat, SchemaTransformation.transform({ decode: Number, encode: BigInt }))
  )
])

/** A session row as a load reads it. */
export const SessionRow = Schema.Struct({
  next_sequence: Int8,
  entry_cap: Int4,
  tool_counts_cap: Int4,
  meta: Schema.NullOr(Schema.String)
})

/** A session row as an append locks it. */
export const LockedRow = Schema.Struct({
  next_sequence: Int8,
  head: Schema.String,
  meta_updated_at: Schema.NullOr(Int8)
})

/** An entry row: its sequence and the exact JSON text that was hashed. */
export const EntryRow = Schema.Struct({
  sequence: Int8,
  entry: Schema.String
})

/** An entry row with the size of its text in bytes (a load's, for the checkpoint policy). */
export const SizedEntryRow = Schema.Struct({
  sequence: Int8,
  entry: Schema.String,
  bytes: Int8
})

/** A checkpoint row: where it ends and its size in bytes. */
export const CheckpointKeyRow = Schema.Struct({
  next_sequence: Int8,
  bytes: Int8
})

/** A checkpoint row: the document's text, where it ends and its size in bytes. */
export const CheckpointRow = Schema.Struct({
  doc: Schema.String,
  next_sequence: Int8,
  bytes: Int8
})

/** A size in bytes, as an append or a checkpoint reports what it stored. */
export const BytesRow = Schema.Struct({
  bytes: Int8
})

/** Where a session and its checkpoint end, when a checkpoint was refused. */
export const EndsRow = Schema.Struct({
  stored: Schema.NullOr(Int8),
  checkpointed: Schema.NullOr(Int8)
})

/** One line of `list`. */
export const ListRow = Schema.Struct({
  session_id: Schema.String,
  next_sequence: Int8,
  head: Schema.String,
  exported_head: Schema.NullOr(Schema.String),
  updated_ms: Schema.NullOr(Int8),
  bytes: Schema.NullOr(Int8)
})

// The column a decoding issue is about: the first key on its path.
const columnOf = (issue: SchemaIssue.Issue): PropertyKey | undefined => {
  switch (issue._tag) {
    case "Pointer":
      return issue.path[0] ?? columnOf(issue.issue)
    case "Composite":
    case "AnyOf":
      return issue.issues[0] === undefined ? undefined : columnOf(issue.issues[0])
    case "Filter":
    case "Encoding":
      return columnOf(issue.issue)
    default:
      return undefined
  }
}

/**
 * Decodes the rows of a query with `schema`. A row that does not decode fails the
 * operation with a `StorageError` whose path is `table.column`.
 */
export const decode = <S extends Schema.Decoder<unknown>>(schema: S, table: string, operation: string) => {
  const decodeRow = Schema.decodeUnknownResult(schema)
  return (rows: ReadonlyArray<unknown>): Effect.Effect<Array<S["Type"]>, StorageError> =>
    Effect.suspend(() => {
      const out: Array<S["Type"]> = []
      for (const row of rows) {
        const decoded = decodeRow(row)
        if (Result.isFailure(decoded)) {
          const column = String(columnOf(decoded.failure.issue) ?? "?")
          return Effect.fail(
            new StorageError({
              operation,
              path: `${table}.${column}`,
              reason: new StorageReason.Undecodable({ table, column, detail: decoded.failure.message }),
              cause: decoded.failure
            })
          )
        }
        out.push(decoded.success)
      }
      return Effect.succeed(out)
    })
}
