/**
 * `import`: JSON lines from stdin or a file appended to a session as they
 * arrive. One fiber reads, splits (bounded), decodes (strict UTF-8) and checks
 * lines; one writer fiber appends whatever has arrived since its last durable
 * append in one `writeAll`, so a live pipe (`agent | session-journal import S`)
 * is durable line by line, and lines that arrive together share one fsync
 * (group commit). A bad line stops the import after every line before it is
 * committed.
 *
 * @since 0.1.0
 */
import { Entry, type SessionJournal } from "@session-journal/core"
import { messageOf } from "@session-journal/core/ErrorMessage"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as SchemaIssue from "effect/SchemaIssue"
import * as Semaphore from "effect/Semaphore"
import * as Stream from "effect/Stream"
import { ImportStopped, InvalidInput } from "../Failure.ts"
import * as Input from "../Input.ts"

/**
 * Most entries in one durable append.
 *
 * @since 0.1.0
 */
export const MAX_BATCH = 1000

// Lines read but not yet durable, in bytes: reading pauses past this, so memory
// stays bounded whatever the input (two lines of the largest size fit).
const MAX_PENDING_BYTES = 2 * Input.MAX_LINE_BYTES

// ---------------------------------------------------------------------------
// Lines

const rule = <A>(check: (a: A) => boolean, message: string) =>
  Schema.makeFilter((a: A) => (check(a) ? undefined : message))

// chio's identity rule (trimmed, non-empty, no control characters), on top of
// the stored field's schema.
const Identity = Entry.ToolEntry.fields.tool_name.check(
  rule(Entry.isIdentity, "must be non-empty, without leading or trailing whitespace or control characters")
)

// The kinds a new entry may have (stored entries may carry any kind; new ones
// are checked by core's `validatePayload`, whose payload rules — a `tool.outcome`'s
// object, a `guard.state` — are for the line's own payload, checked when it is written).
const NewKind = Entry.OtherEntry.fields.kind.check(
  rule(
    (k: string) => {
      const checked = Entry.validatePayload(k, null)
      return Result.isSuccess(checked) || checked.failure.field !== "kind"
    },
    "must match ^[A-Za-z0-9_.:-]{1,64}$ and not be \"tool\""
  )
)

/**
 * An import line for a tool call: the fields of a stored tool entry, with the
 * counters and `allowed` optional (0, 0, 0, true). Stored fields of exported
 * entries (`sequence`, hashes, `timestamp_secs`) are ignored: entries are
 * chained anew.
 *
 * @since 0.1.0
 */
export const ToolLine = Schema.Struct({
  kind: Schema.optionalKey(Entry.ToolEntry.fields.kind),
  tool_name: Identity,
  server_id: Identity,
  agent_id: Identity,
  bytes_read: Schema.optionalKey(Entry.ToolEntry.fields.bytes_read),
  bytes_written: Schema.optionalKey(Entry.ToolEntry.fields.bytes_written),
  delegation_depth: Schema.optionalKey(Entry.ToolEntry.fields.delegation_depth),
  allowed: Schema.optionalKey(Entry.ToolEntry.fields.allowed)
})

/**
 * An import line of any other kind: `kind` and `payload` as a stored entry has
 * them, with the kind a new entry may have.
 *
 * @since 0.1.0
 */
export const OtherLine = Schema.Struct({
  kind: NewKind,
  payload: Entry.OtherEntry.fields.payload
})

const decodeTool = Schema.decodeUnknownResult(ToolLine)
const decodeOther = Schema.decodeUnknownResult(OtherLine)
const formatIssue = SchemaIssue.makeFormatterStandardSchemaV1()

const invalid = (error: Schema.SchemaError, line: number): InvalidInput => {
  const first = formatIssue(error.issue).issues[0]
  const field = first?.path !== undefined && first.path.length > 0 ? String(first.path[0]) : "JSON"
  return new InvalidInput({ field, line, reason: first?.message ?? error.message })
}

/**
 * Turns one import line into a write item: a tool call (`kind` absent or
 * `"tool"`) or any other kind with its payload, decoded with `ToolLine` /
 * `OtherLine`. A failure names the first bad field and the line.
 *
 * @since 0.1.0
 */
export const importItem = (text: string, line: number): Result.Result<SessionJournal.WriteItem, InvalidInput> => {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (e) {
    return Result.fail(new InvalidInput({ field: "JSON", line, reason: messageOf(e) }))
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return Result.fail(new InvalidInput({ field: "JSON", line, reason: "each line must be a JSON object" }))
  }
  const kind = (value as { readonly kind?: unknown }).kind
  if (kind === undefined || kind === "tool") {
    const tool = decodeTool(value)
    if (Result.isFailure(tool)) return Result.fail(invalid(tool.failure, line))
    const t = tool.success
    return Result.succeed({
      _tag: "Tool",
      params: {
        tool_name: t.tool_name,
        server_id: t.server_id,
        agent_id: t.agent_id,
        bytes_read: t.bytes_read ?? 0,
        bytes_written: t.bytes_written ?? 0,
        delegation_depth: t.delegation_depth ?? 0,
        allowed: t.allowed ?? true
      }
    })
  }
  const other = decodeOther(value)
  if (Result.isFailure(other)) return Result.fail(invalid(other.failure, line))
  return Result.succeed({ _tag: "Other", kind: other.success.kind, payload: other.success.payload })
}

// ---------------------------------------------------------------------------
// The import

interface Pending {
  readonly item: SessionJournal.WriteItem
  readonly bytes: number
}

/**
 * What an import committed.
 *
 * @since 0.1.0
 */
export interface Summary {
  readonly imported: number
  readonly last: Entry.Entry | undefined
}

/**
 * Appends the JSON lines of `source` to session `id` as they arrive, calling
 * `onDurable` with each durable batch (in order; its failure ends the import)
 * and `onRead` with the byte count of each chunk read. Ends at the end of the input; a bad line (not JSON,
 * a bad field, not UTF-8, longer than `Input.MAX_LINE_BYTES`) ends it with
 * `ImportStopped` once every line before it is durable.
 *
 * @since 0.1.0
 */
export const run = <E, R, E2 = never>(options: {
  readonly id: string
  readonly source: Stream.Stream<Uint8Array, InvalidInput>
  readonly writeAll: (items: ReadonlyArray<SessionJournal.WriteItem>) => Effect.Effect<Array<Entry.Entry>, E, R>
  readonly onDurable: (entries: ReadonlyArray<Entry.Entry>) => Effect.Effect<void, E2>
  readonly onRead?: (bytes: number) => void
}): Effect.Effect<Summary, E | E2 | ImportStopped, R> =>
  Effect.scoped(Effect.gen(function*() {
    const queue = yield* Queue.bounded<Pending, InvalidInput | Cause.Done>(4 * MAX_BATCH)
    const budget = yield* Semaphore.make(MAX_PENDING_BYTES)
    const splitter = new Input.LineSplitter(Input.MAX_LINE_BYTES)

    // Offers the items of complete lines in one go (so lines that arrived
    // together are taken together), then fails at the first bad line.
    const offer = (lines: ReadonlyArray<Input.Line>) =>
      Effect.gen(function*() {
        let batch: Array<Pending> = []
        let bytes = 0
        const flush = Effect.suspend(() => {
          const items = batch
          const permits = bytes
          batch = []
          bytes = 0
          return items.length === 0
            ? Effect.void
            : Semaphore.take(budget, permits).pipe(Effect.andThen(Queue.offerAll(queue, items)))
        })
        for (const line of lines) {
          const text = Input.decodeUtf8(line.bytes, { field: "input", line: line.number, inputOffset: line.offset })
          if (Result.isFailure(text)) {
            yield* flush
            return yield* Effect.fail(text.failure)
          }
          if (text.success.trim().length === 0) continue
          const item = importItem(text.success, line.number)
          if (Result.isFailure(item)) {
            yield* flush
            return yield* Effect.fail(item.failure)
          }
          // Each line is within the bound, so one always fits the budget.
          const size = Math.max(1, line.bytes.length)
          if (bytes + size > MAX_PENDING_BYTES) yield* flush
          batch.push({ item: item.success, bytes: size })
          bytes += size
        }
        yield* flush
      })

    const read = options.source.pipe(
      Stream.runForEach((chunk) =>
        Effect.suspend(() => {
          options.onRead?.(chunk.length)
          const lines = splitter.push(chunk)
          return Result.isFailure(lines) ? Effect.fail(lines.failure) : offer(lines.success)
        })
      ),
      Effect.andThen(Effect.suspend(() => {
        const lines = splitter.end()
        return Result.isFailure(lines) ? Effect.fail(lines.failure) : offer(lines.success)
      })),
      Effect.matchEffect({
        onFailure: (error) => Queue.fail(queue, error),
        onSuccess: () => Queue.end(queue)
      })
    )
    yield* Effect.forkScoped(read)

    let imported = 0
    let last: Entry.Entry | undefined
    for (;;) {
      const taken = yield* Effect.result(Queue.takeBetween(queue, 1, MAX_BATCH))
      if (Result.isFailure(taken)) {
        if (Cause.isDone(taken.failure)) return { imported, last }
        return yield* new ImportStopped({ input: taken.failure, imported, lastSequence: last?.sequence ?? null })
      }
      const batch = taken.success
      const written = yield* options.writeAll(batch.map((p) => p.item))
      let bytes = 0
      for (const p of batch) bytes += p.bytes
      yield* Semaphore.release(budget, bytes)
      imported += written.length
      last = written[written.length - 1] ?? last
      yield* options.onDurable(written)
    }
  }))
